"""Transactions (KIP-98, KIP-447): Java's ``TransactionManager`` for this producer.

A transactional producer (``producer.transactional_id`` set) gets its producer id and
epoch from its transaction coordinator (InitProducerId with the transactional id, which
also fences any older producer with the same id and aborts its open transaction). In a
transaction:

* each partition a record goes to joins it before its first batch is sent
  (AddPartitionsToTxn, by the sender's drain task: :meth:`TransactionManager.add_pending`);
* ``send_offsets_to_transaction`` adds the group (AddOffsetsToTxn) and commits the offsets
  to the group's coordinator as part of the transaction (TxnOffsetCommit v3+ with the
  member's id, generation (the member epoch on the consumer protocol) and instance id, so
  a zombie member is fenced);
* commit or abort flushes the records, then ends the transaction (EndTxn).

This is the classic transaction protocol, which every Kafka broker with transactions
speaks (Kafka 4.x brokers running KIP-890's ``transaction.version=2`` accept it from
clients).

Who touches what: the producer's API calls (:meth:`begin`, :meth:`end`, offsets) run on
the event loop one at a time (the user's task); ``pending``/``partitions`` are filled by
``send()`` and drained by the sender; ``error`` is set by the sender when a batch of the
transaction failed (the transaction can then only abort).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..client import Client
from ..config import ProducerConfig
from ..errors import (
    ConcurrentTransactionsError,
    ConsumerGroupError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidTxnStateError,
    KafkaConnectionError,
    NotCoordinatorError,
    RequestTimedOutError,
    UnsupportedVersionError,
    raise_for_code,
)
from ..net.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from ..retry import Backoff
from .idempotence import ProducerIdentity

log = logging.getLogger(__name__)

__all__ = ["GroupMetadata", "TransactionManager"]

T = TypeVar("T")

# Answers after which the transaction coordinator is looked up again.
_MOVED = (NotCoordinatorError, CoordinatorNotAvailableError, KafkaConnectionError)
# Answers that only mean "try again shortly".
_AGAIN = (ConcurrentTransactionsError, CoordinatorLoadInProgressError, RequestTimedOutError)
# How long a coordinator request is retried before the error goes to the caller.
_ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """A consumer group member as a transaction commits its offsets (Java's
    ``ConsumerGroupMetadata``): ``session.group_metadata()`` gives the current one."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    """The transactional state of one producer."""

    def __init__(self, client: Client, config: ProducerConfig, identity: ProducerIdentity) -> None:
        assert config.transactional_id is not None
        self.transactional_id: str = config.transactional_id
        self._client = client
        self._config = config
        self._identity = identity
        self.in_transaction = False
        # Partitions in the open transaction, and those still to be added (by the sender).
        self.partitions: set[tuple[str, int]] = set()
        self.pending: set[tuple[str, int]] = set()
        # The first error of a batch of this transaction: it can then only abort.
        self.error: BaseException | None = None
        # A group's offsets were added (AddOffsetsToTxn): the transaction is not empty.
        self.offsets_added = False

    async def init(self) -> None:
        """InitProducerId with the transactional id (fences an older producer with it)."""

        async def attempt(conn: Any) -> None:
            request = InitProducerIdRequest(
                self.transactional_id, int(self._config.transaction_timeout * 1000)
            )
            resp = await conn.send(request)
            raise_for_code(resp.error_code, f"InitProducerId for {self.transactional_id!r}")
            self._identity.producer_id, self._identity.epoch = (
                resp.producer_id,
                resp.producer_epoch,
            )

        await self._at_coordinator("InitProducerId", attempt)

    def begin(self) -> None:
        """Open a transaction (records sent from now on belong to it)."""
        if self.in_transaction:
            raise InvalidTxnStateError(
                "a transaction is already open: commit or abort it before beginning another"
            )
        self.in_transaction = True
        self.error = None

    def require_open(self, what: str) -> None:
        """Raise unless a transaction is open."""
        if not self.in_transaction:
            raise InvalidTxnStateError(
                f"{what} needs an open transaction: use async with producer.transaction()"
            )

    def join(self, topic: str, partition: int) -> None:
        """A record goes to ``topic/partition``: add it to the transaction (the sender
        sends AddPartitionsToTxn before the partition's first batch)."""
        key = (topic, partition)
        if key not in self.partitions:
            self.pending.add(key)

    async def add_pending(self) -> None:
        """AddPartitionsToTxn for the partitions records went to since the last call."""
        adding = set(self.pending)
        if not adding:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(adding):
            by_topic.setdefault(topic, []).append(partition)

        async def attempt(conn: Any) -> None:
            ident = self._identity
            request = AddPartitionsToTxnRequest(
                self.transactional_id, ident.producer_id, ident.epoch, by_topic
            )
            resp = await conn.send(request)
            for entry in resp.results:  # (name, results[, tags])
                topic = entry[0]
                for partition, code in (r[:2] for r in entry[1]):
                    raise_for_code(code, f"AddPartitionsToTxn {topic}/{partition}")

        await self._at_coordinator("AddPartitionsToTxn", attempt)
        self.partitions |= adding
        self.pending -= adding

    async def send_offsets(
        self, offsets: Mapping[tuple[str, int], int], group: GroupMetadata
    ) -> None:
        """Commit ``offsets`` (the next offset to read, per partition) to ``group`` as
        part of the transaction."""
        self.require_open("send_offsets_to_transaction")
        ident = self._identity

        async def add(conn: Any) -> None:
            request = AddOffsetsToTxnRequest(
                self.transactional_id, ident.producer_id, ident.epoch, group.group_id
            )
            resp = await conn.send(request)
            raise_for_code(resp.error_code, f"AddOffsetsToTxn for group {group.group_id!r}")

        await self._at_coordinator("AddOffsetsToTxn", add)
        self.offsets_added = True
        request = TxnOffsetCommitRequest(
            self.transactional_id,
            group.group_id,
            ident.producer_id,
            ident.epoch,
            dict(offsets),
            group.generation_id,
            group.member_id,
            group.group_instance_id,
        )

        async def commit() -> None:
            conn = await self._client.coordinator(group.group_id, "offsets")
            if (conn.version(TxnOffsetCommitRequest.API_KEY) or 0) < 3 and group.member_id:
                raise UnsupportedVersionError(
                    f"broker {conn.address} speaks TxnOffsetCommit below v3, which cannot "
                    "carry the member's generation: a zombie member would not be fenced; "
                    "upgrade the brokers to Kafka 2.5 or later"
                )
            try:
                resp = await conn.send(request)
            except _MOVED:
                self._client.invalidate_coordinator(group.group_id)
                raise
            for entry in resp.topics:  # (name, partitions[, tags])
                topic = entry[0]
                for partition, code in (p[:2] for p in entry[1]):
                    if code:
                        if _is_code(code, _MOVED):
                            self._client.invalidate_coordinator(group.group_id)
                        raise_for_code(code, f"TxnOffsetCommit {topic}/{partition}")

        await self._retry("TxnOffsetCommit", commit)

    async def end(self, commit: bool) -> None:
        """EndTxn (the records were flushed); the transaction is closed either way."""
        self.require_open("commit" if commit else "abort")
        if commit and self.error is not None:
            raise InvalidTxnStateError(
                f"a record of this transaction failed ({self.error}): the transaction can "
                "only be aborted"
            ) from self.error
        try:
            # A transaction nothing was added to has nothing to end (EndTxn would be
            # refused as INVALID_TXN_STATE); one with only offsets does.
            if self.partitions or self.offsets_added:
                ident = self._identity

                async def attempt(conn: Any) -> None:
                    request = EndTxnRequest(
                        self.transactional_id, ident.producer_id, ident.epoch, commit
                    )
                    resp = await conn.send(request)
                    raise_for_code(resp.error_code, f"EndTxn ({'commit' if commit else 'abort'})")

                await self._at_coordinator("EndTxn", attempt)
        finally:
            if not commit or self.error is None:
                self.in_transaction = self.offsets_added = False
                self.partitions.clear()
                self.pending.clear()

    # ----------------------------------------------------------------------- helpers

    async def _at_coordinator(self, what: str, attempt: Callable[[Any], Awaitable[None]]) -> None:
        """``attempt(conn)`` at the transaction coordinator, again after the answers that
        mean "later" or "elsewhere"."""

        async def once() -> None:
            conn = await self._client.coordinator(self.transactional_id, "txn", transaction=True)
            try:
                await attempt(conn)
            except _MOVED:
                self._client.invalidate_coordinator(self.transactional_id, transaction=True)
                raise

        await self._retry(what, once)

    async def _retry(self, what: str, once: Callable[[], Awaitable[T]]) -> T:
        backoff = Backoff(self._config.retry_backoff, self._config.retry_backoff_max)
        for n in range(_ATTEMPTS):
            try:
                return await once()
            except (*_MOVED, *_AGAIN) as exc:
                if n == _ATTEMPTS - 1:
                    raise
                log.debug("%s for %r: %s; again", what, self.transactional_id, exc)
            await asyncio.sleep(backoff.next())
        raise AssertionError("unreachable")


def _is_code(code: int, classes: tuple[type[ConsumerGroupError], ...]) -> bool:
    """Whether the error code ``code`` is one of ``classes``."""
    return any(getattr(cls, "errno", None) == code for cls in classes)
