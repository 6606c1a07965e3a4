"""Transactions (KIP-98, KIP-447, KIP-890): Java's ``TransactionManager`` for this producer.

A transactional producer (``producer.transactional_id`` set) gets its producer id and
epoch from its transaction coordinator (InitProducerId with the transactional id, which
also fences any older producer with the same id and aborts its open transaction). In a
transaction:

* each partition a record goes to joins it before its first batch is written;
* ``send_offsets_to_transaction`` commits the offsets to the group's coordinator as part
  of the transaction (TxnOffsetCommit v3+ with the member's id, generation (the member
  epoch on the consumer protocol) and instance id, so a zombie member is fenced);
* commit or abort flushes the records, then ends the transaction (EndTxn).

**Two transaction protocols**, chosen at each :meth:`begin` from the cluster's finalized
``transaction.version`` feature (ApiVersions v3+, :meth:`Client.feature_level`):

* **v1** (the classic protocol, every broker with transactions): AddPartitionsToTxn before
  a partition's first batch (sent by the sender's drain task: :meth:`add_pending`),
  AddOffsetsToTxn before TxnOffsetCommit, Produce up to v11, EndTxn up to v4; the epoch
  stays the same from one transaction to the next.
* **v2** (KIP-890, ``transaction.version`` >= 2, Kafka 4.0+'s default): the partition's
  leader adds it to the transaction when the first Produce v12 of the transaction
  arrives, and TxnOffsetCommit v5 adds the group (no AddPartitionsToTxn, no
  AddOffsetsToTxn); EndTxn v5 answers with the epoch of the next transaction, bumped every
  time, so a late request of an ended transaction can never join the next one. Every
  partition's sequence numbers start again at 0 with the new epoch (``on_epoch``).

**Failures.** A record of the transaction that failed leaves it only an abort. The answers
that say the coordinator ended the epoch (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED,
TRANSACTION_ABORTABLE, INVALID_TXN_STATE: the transaction timed out and the coordinator
aborted it, or another producer took the id over) make the abort re-initialise the
producer (:meth:`recover`): InitProducerId with the current id and epoch, which bumps the
epoch of a producer whose transaction was aborted and is refused (PRODUCER_FENCED) to one
another producer replaced: that stays an error. A broker of the protocol v1 refuses that
bump after a timeout as it refuses a fenced producer; there the producer takes a new
epoch with a plain InitProducerId (as a restarted producer does) and says so.

**A cut** (:meth:`TransactionManager.cut`, the group's exactly-once commit): the open
transaction is sealed where it stands and ended while records go on being sent into the
next one, which opens at once. Their batches wait in the accumulator (the sender takes
none of them, nor adds their partitions) until the sealed transaction has ended; the
protocol v2's new epoch then applies to them, as their sequences had not been given
out. A sealed transaction that fails to end (or its offsets are refused) takes the next
one's records back (:meth:`_unseal`): one transaction again, which the caller commits
again or aborts, as if there had been no cut.

Who touches what: the producer's API calls (:meth:`begin`, :meth:`end`, offsets) run on
the event loop one at a time (the user's task, or the group's transaction); ``joined``,
``pending``, ``partitions`` are filled by ``send()`` (:meth:`join`) and drained by the
sender; ``sealed`` is set by :meth:`cut` and cleared when that transaction ends; ``error``
and ``ended_by_coordinator`` are set by the sender when a batch of the transaction failed
(:meth:`fail`) and by the requests here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .._dataclass import dataclass
from ..client import Client
from ..config import ProducerConfig
from ..errors import (
    ConcurrentTransactionsError,
    ConsumerGroupError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaConnectionError,
    NotCoordinatorError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
    error_for_code,
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
from .accumulator import Accumulator
from .idempotence import ProducerIdentity

log = logging.getLogger(__name__)

__all__ = ["GroupMetadata", "TransactionManager"]

T = TypeVar("T")

# Answers after which the transaction coordinator is looked up again.
_MOVED = (NotCoordinatorError, CoordinatorNotAvailableError, KafkaConnectionError)
# Answers that only mean "try again shortly".
_AGAIN = (ConcurrentTransactionsError, CoordinatorLoadInProgressError, RequestTimedOutError)
# Answers that say the coordinator ended this producer's epoch: the transaction timed
# out and was aborted, or another producer took the transactional id over.
ENDED = (
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionAbortableError,
    InvalidTxnStateError,
)
# How long a coordinator request is retried before the error goes to the caller.
_ATTEMPTS = 20
# The highest versions of the protocol v1 (KIP-890's v2 is the next one of each).
_V1_END_TXN, _V1_TXN_OFFSET_COMMIT = 4, 4


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

    def __init__(
        self,
        client: Client,
        config: ProducerConfig,
        identity: ProducerIdentity,
        acc: Accumulator,
    ) -> None:
        assert config.transactional_id is not None
        self.transactional_id: str = config.transactional_id
        self._client = client
        self._config = config
        self._identity = identity
        # Its batches are labelled with the transaction they belong to (a cut).
        self._acc = acc
        # Called when the producer epoch changed (every partition's sequences restart).
        self._on_epoch = acc.restart_sequences
        self.in_transaction = False
        # cut() sealed the open transaction: records sent since belong to the next one.
        self.sealed = False
        # Partitions records went to in the transaction send() appends to (the next one
        # while sealed); outside a seal, ``partitions`` and ``pending`` together.
        self.joined: set[tuple[str, int]] = set()
        # commit/abort in progress: records and offsets are refused meanwhile.
        self.completing = False
        # The open transaction runs the protocol v2 (KIP-890), fixed at begin().
        self.v2 = False
        # Partitions in the open transaction, and those still to be added (protocol v1:
        # by the sender, before their first batch).
        self.partitions: set[tuple[str, int]] = set()
        self.pending: set[tuple[str, int]] = set()
        # The first error of a batch of this transaction: it can then only abort.
        self.error: BaseException | None = None
        # The coordinator ended this producer's epoch (timeout or fencing): the abort
        # re-initialises the producer.
        self.ended_by_coordinator = False
        # A group's offsets were added: the transaction is not empty.
        self.offsets_added = False

    async def init(self) -> None:
        """InitProducerId with the transactional id (fences an older producer with it)."""
        await self._init_producer_id(-1, -1)

    def begin(self) -> None:
        """Open a transaction (records sent from now on belong to it)."""
        if self.in_transaction:
            raise InvalidTxnStateError(
                "a transaction is already open: commit or abort it before beginning another"
            )
        self.v2 = self._client.feature_level("transaction.version") >= 2
        self.in_transaction = True
        self.error = None
        self.joined.clear()

    def require_open(self, what: str) -> None:
        """Raise unless a transaction is open (and not being committed or aborted)."""
        if not self.in_transaction:
            raise InvalidTxnStateError(
                f"{what} needs an open transaction: use async with producer.transaction()"
            )
        if self.completing:
            raise InvalidTxnStateError(
                f"{what} during commit_transaction()/abort_transaction(): wait for it to "
                "return and begin the next transaction"
            )

    def join(self, topic: str, partition: int) -> None:
        """A record goes to ``topic/partition``, new to the transaction: it joins it
        (protocol v1: the sender sends AddPartitionsToTxn before the partition's first
        batch; v2: the partition's leader adds it when the first Produce of the
        transaction arrives). While sealed, the next transaction's: added once the sealed
        one has ended."""
        key = (topic, partition)
        self.joined.add(key)
        if not self.sealed:
            self._add(key)

    def _add(self, key: tuple[str, int]) -> None:
        if self.v2:
            self.partitions.add(key)
        elif key not in self.partitions:
            self.pending.add(key)

    def cut(self) -> None:
        """Seal the open transaction here: records sent from now on open the next one and
        wait in the accumulator until this one has ended (:meth:`end` commits only what
        was sent before; :meth:`send_offsets` adds to this one)."""
        self.require_open("cutting a transaction")
        if self.sealed:
            raise InvalidTxnStateError("the transaction is already cut")
        self.sealed = True
        self.joined = set()
        self._acc.appending += 1

    def _unseal(self) -> None:
        """The sealed transaction did not end: the next one's records join it (one open
        transaction again, committed or aborted as a whole)."""
        if not self.sealed:
            return
        self.sealed = False
        for key in self.joined:
            self._add(key)
        self.joined = self.partitions | self.pending
        self._acc.release_held()

    def _sealed_ended(self) -> None:
        """The sealed transaction ended: the next one is the open one (if anything was sent
        to it), its partitions join it and its batches may go."""
        self.sealed = False
        self.in_transaction = bool(self.joined)
        self.v2 = self._client.feature_level("transaction.version") >= 2
        for key in self.joined:
            self._add(key)
        self._acc.release_held()

    def fail(self, error: BaseException) -> None:
        """A batch of the transaction failed (the sender): the transaction can only abort."""
        if self.error is None:
            self.error = error
        if isinstance(error, ENDED):
            self.ended_by_coordinator = True

    @property
    def produce_version(self) -> int:
        """The highest Produce version of the open transaction's protocol."""
        return 12 if self.v2 else 11

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
                    self._check(code, f"AddPartitionsToTxn {topic}/{partition}")

        await self._at_coordinator("AddPartitionsToTxn", attempt)
        self.partitions |= adding
        self.pending -= adding

    async def send_offsets(
        self,
        offsets: Mapping[tuple[str, int], int],
        group: GroupMetadata,
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> None:
        """Commit ``offsets`` (the next offset to read, per partition; ``metadata`` their
        metadata) to ``group`` as part of the transaction. A group's refusal (the member
        was fenced or its generation moved on) raises and leaves the transaction open."""
        self.require_open("send_offsets_to_transaction")
        try:
            await self._send_offsets(offsets, group, metadata)
        except BaseException:
            self._unseal()
            raise

    async def _send_offsets(
        self,
        offsets: Mapping[tuple[str, int], int],
        group: GroupMetadata,
        metadata: Mapping[tuple[str, int], str] | None,
    ) -> None:
        ident = self._identity
        v2 = self.v2
        if not v2:

            async def add(conn: Any) -> None:
                request = AddOffsetsToTxnRequest(
                    self.transactional_id, ident.producer_id, ident.epoch, group.group_id
                )
                resp = await conn.send(request)
                self._check(resp.error_code, f"AddOffsetsToTxn for group {group.group_id!r}")

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
            metadata=metadata,
            max_version=_V1_TXN_OFFSET_COMMIT + int(v2),
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
                        self._check(code, f"TxnOffsetCommit {topic}/{partition}")

        await self._retry("TxnOffsetCommit", commit)

    async def end(self, commit: bool, flush: Callable[[], Awaitable[None]]) -> None:
        """``flush()`` the records, then EndTxn. Records are refused from the start (they
        would belong to no transaction). After a commit or an abort the transaction is
        closed; a commit that fails leaves it open, to be aborted. An abort after the
        coordinator ended the epoch re-initialises the producer (:meth:`recover`)."""
        self.require_open("commit_transaction()" if commit else "abort_transaction()")
        if not commit:
            self._unseal()  # an abort takes the next transaction's records with it
        sealed = self.sealed
        # While a sealed transaction ends, send() goes on into the next one; else it is
        # refused, and FastSend must not append to this transaction's batches either.
        self.completing = not sealed
        if not sealed:
            self._acc.appending += 1
            self._acc.sending = self._acc.appending
        try:
            await flush()
            if commit and self.error is not None:
                raise InvalidTxnStateError(
                    f"a record of this transaction failed ({self.error}): the transaction "
                    "can only be aborted"
                ) from self.error
            if commit and self.ended_by_coordinator:
                raise InvalidTxnStateError(
                    "the transaction coordinator ended this transaction (it ran past "
                    "producer.transaction_timeout, or the producer was fenced): abort it"
                )
            # A transaction nothing was added to has nothing to end (EndTxn would be
            # refused as INVALID_TXN_STATE); one with only offsets does.
            if (self.partitions or self.offsets_added) and not self.ended_by_coordinator:
                try:
                    await self._end_txn(commit)
                except ENDED:
                    if commit:
                        raise
                    self.ended_by_coordinator = True  # aborted already: recover below
            if not commit and self.ended_by_coordinator:
                await self.recover()
        except BaseException:
            self._unseal()
            raise
        finally:
            self.completing = False
        self.offsets_added = False
        self.partitions.clear()
        self.pending.clear()
        self.error = None
        if sealed:
            self._sealed_ended()
        else:
            self.in_transaction = False
            self.joined.clear()

    async def recover(self) -> None:
        """A new epoch after the coordinator ended this one (the transaction timed out):
        InitProducerId with the current id and epoch (KIP-360/KIP-890). A producer another
        one replaced is refused (PRODUCER_FENCED), which raises."""
        ident = self._identity
        try:
            await self._init_producer_id(ident.producer_id, ident.epoch)
        except ProducerFencedError:
            if self.v2:
                raise
            # The protocol v1 cannot bump an epoch its coordinator ended on a timeout: the
            # id is taken again, as by a restarted producer.
            log.warning(
                "transactional id %r: the coordinator refused to bump the epoch it ended "
                "(a transaction that timed out, on the transaction protocol v1, reads as "
                "fenced); initialising it again: make sure no other producer uses this id",
                self.transactional_id,
            )
            await self._init_producer_id(-1, -1)
        self.ended_by_coordinator = False
        log.info(
            "transactional id %r: producer id %d epoch %d after the coordinator ended the last one",
            self.transactional_id,
            ident.producer_id,
            ident.epoch,
        )

    # ----------------------------------------------------------------------- helpers

    async def _end_txn(self, commit: bool) -> None:
        ident = self._identity
        what = f"EndTxn ({'commit' if commit else 'abort'})"

        async def attempt(conn: Any) -> None:
            request = EndTxnRequest(
                self.transactional_id,
                ident.producer_id,
                ident.epoch,
                commit,
                max_version=_V1_END_TXN + int(self.v2),
            )
            resp = await conn.send(request)
            self._check(resp.error_code, what)
            if getattr(resp, "producer_id", -1) >= 0:  # v5: the next transaction's epoch
                ident.producer_id, ident.epoch = resp.producer_id, resp.producer_epoch
                self._on_epoch()

        await self._at_coordinator("EndTxn", attempt)

    async def _init_producer_id(self, producer_id: int, epoch: int) -> None:
        async def attempt(conn: Any) -> None:
            if conn.version(InitProducerIdRequest.API_KEY) is None:
                raise UnsupportedVersionError(
                    f"broker {conn.address} offers no transactions (no InitProducerId): "
                    "unset producer.transactional_id, or use a broker with transactions "
                    "(Apache Kafka 0.11 or later)"
                )
            request = InitProducerIdRequest(
                self.transactional_id,
                int(self._config.transaction_timeout * 1000),
                producer_id,
                epoch,
            )
            resp = await conn.send(request)
            self._check(resp.error_code, f"InitProducerId for {self.transactional_id!r}")
            self._identity.producer_id, self._identity.epoch = (
                resp.producer_id,
                resp.producer_epoch,
            )
            self._on_epoch()

        await self._at_coordinator("InitProducerId", attempt)

    def _check(self, code: int, context: str) -> None:
        """Raise the error for ``code``; one that ends the epoch is marked, and a fenced
        producer is told what to do."""
        if not code:
            return
        error = error_for_code(code)
        if issubclass(error, ENDED):
            self.ended_by_coordinator = True
        if error is ProducerFencedError:
            context += (
                f": another producer with transactional id {self.transactional_id!r} took "
                "over (each producer instance needs a transactional_id of its own), or this "
                "producer's transaction timed out and it was re-initialised elsewhere"
            )
        elif error is TransactionalIdAuthorizationFailedError:
            context += (
                ": the broker's authorizer refuses this transactional id to this client: "
                f"grant its principal WRITE on the TransactionalId {self.transactional_id!r}, "
                "or unset producer.transactional_id"
            )
        elif error is UnsupportedVersionError:
            context += (
                ": the broker offers no transactions at this version: unset "
                "producer.transactional_id, or use a broker with transactions (Apache "
                "Kafka 0.11 or later)"
            )
        raise_for_code(code, context)

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
