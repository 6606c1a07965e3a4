"""Membership on the consumer group protocol (KIP-848, Apache Kafka 4.0+).

The classic protocol's :class:`~.membership.Membership` has a counterpart here with the
same surface (``join``, ``leave``, ``reset``, ``member_id``, ``generation_id``), so the
group's rebalance loop and session drive either. What differs:

* The member id is generated here (a UUID, kept for the member's whole life, also across
  fencing) and the member joins by a ``ConsumerGroupHeartbeat`` with epoch 0.
* The coordinator assigns. Every heartbeat answer may carry a new *target assignment*
  (by topic id): partitions the member may take now. The session applies it through the
  group's one reconciler (revoke what the target no longer holds: drain, ``on_revoked``,
  commit; then claim what it adds), and the next heartbeat, sent at once, tells the
  coordinator what the member owns (the acknowledgement that releases revoked partitions
  to their next owners).
* ``generation_id`` is the member epoch; heartbeats go out at the interval the broker
  returns. FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the partitions are lost (no commit),
  and the member joins again with epoch 0.
* Leaving: epoch -1; a static member that may come back sends -2, which keeps its
  assignment for it until the broker's session timeout.

No tasks here: the session's heartbeat task calls :meth:`heartbeat`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import (
    ConsumerGroupError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    KafkaConnectionError,
    NotCoordinatorError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
    error_for_code,
)
from ..net.flexible import new_uuid
from ..net.kip848 import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from .logs import GroupLogger
from .membership import Generation

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config

_log = logging.getLogger(__name__)

#: What a member subscribes to: topic names, or a pattern the broker resolves.
Subscription = Sequence[str] | re.Pattern[str]

#: The API key of ConsumerGroupHeartbeat: a broker that does not list it has no KIP-848.
HEARTBEAT_API = ConsumerGroupHeartbeatRequest.API_KEY

#: Answers that mean the group's coordinator is elsewhere now (look it up again), as
#: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE do for Java's heartbeat manager.
_MOVED = frozenset({NotCoordinatorError.errno, CoordinatorNotAvailableError.errno})


class ConsumerMembership:
    """One member's identity in ``group`` on the consumer protocol, and its heartbeat."""

    protocol = "consumer"

    def __init__(self, client: Client, group: str, config: Config) -> None:
        self._client = client
        self.group = group
        self._config = config
        self.member_id = new_uuid()
        self.member_epoch = JOIN_EPOCH
        self.instance_id = config.consumer.group.instance_id
        # The broker's heartbeat interval (seconds); the configured one until it answers.
        self.heartbeat_interval = config.consumer.group.heartbeat_interval
        # The last target assignment, by name; ids the metadata cannot name yet are kept in
        # _target and named once it can (_partial: some are not named yet, by _named()).
        self.assignment: dict[str, list[int]] = {}
        self._target: TopicPartitions = []
        self._partial = False
        # topic name -> the id it was assigned under: owned partitions are reported under
        # it even when a metadata refresh leaves the topic out (a partition the coordinator
        # waits to see revoked is free for its next owner once an owned list omits it).
        self._ids: dict[str, str] = {}
        self.log = GroupLogger(_log, group, lambda: self.member_id)

    @property
    def generation_id(self) -> int:
        """The member epoch (what commits carry, and what the session shows)."""
        return self.member_epoch

    @property
    def cooperative(self) -> bool:
        """Always: partitions that stay with the member keep their claims."""
        return True

    def reset(self) -> None:
        """After fencing: join again with epoch 0 (the member id is kept, as Java does)."""
        self.member_epoch = JOIN_EPOCH
        self.assignment = {}
        self._target = []
        self._partial = False
        self._ids = {}

    def _request(
        self, epoch: int, subscription: Subscription | None, owned: dict[str, list[int]] | None
    ) -> ConsumerGroupHeartbeatRequest:
        """A heartbeat: with ``subscription``, a full one (every field set; the broker
        takes what changed), else one that only says the member is alive and owns
        ``owned`` (None: unchanged)."""
        group_cfg = self._config.consumer.group
        owned_ids: TopicPartitions | None = None
        if owned is not None:
            owned_ids = []
            for topic, parts in sorted(owned.items()):
                topic_id = self._ids.get(topic) or self._client.topic_id(topic)
                if topic_id is not None and parts:
                    owned_ids.append((topic_id, sorted(parts)))
        if subscription is None:
            return ConsumerGroupHeartbeatRequest(
                self.group, self.member_id, epoch, topic_partitions=owned_ids
            )
        names: list[str] | None = None
        regex: str | None = None
        if isinstance(subscription, re.Pattern):
            regex = subscription.pattern
        else:
            names = sorted(subscription)
        return ConsumerGroupHeartbeatRequest(
            self.group,
            self.member_id,
            epoch,
            instance_id=self.instance_id,
            rack_id=self._config.client_rack or None,  # KIP-881: the broker's rack-aware assignors
            rebalance_timeout_ms=int(group_cfg.rebalance.timeout * 1000),
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=group_cfg.remote_assignor,
            topic_partitions=owned_ids if owned_ids is not None else [],
        )

    async def _send(self, request: ConsumerGroupHeartbeatRequest) -> Any:
        """``request`` to the coordinator: the raw answer, error code included."""
        conn = await self._client.coordinator(self.group)
        if conn.version(HEARTBEAT_API) is None:
            raise UnsupportedVersionError(
                f"group {self.group!r}: consumer.group.protocol='consumer' needs the "
                f"consumer group protocol (KIP-848, Apache Kafka 4.0+), and broker "
                f"{conn.address} does not offer ConsumerGroupHeartbeat: set "
                "consumer.group.protocol = 'classic'"
            )
        timeout = self._config.net.read_timeout
        try:
            resp = await conn.send(request, timeout=timeout)
        except (KafkaConnectionError, RequestTimedOutError):
            self._client.invalidate_coordinator(self.group)
            raise
        if resp.error_code in _MOVED:
            # The coordinator moved (or is moving): the next request looks it up again.
            # A broker that is up but no longer the coordinator answers this for good.
            self._client.invalidate_coordinator(self.group)
        return resp

    def _raise_for(self, resp: Any, what: str) -> None:
        """The broker's error as the exception to raise, with what to do where it helps."""
        code = resp.error_code
        if not code:
            return
        detail = f"{what} {self.group!r}: {resp.error_message or 'no detail'}"
        cls = error_for_code(code)
        if cls is UnknownMemberIdError or cls is FencedMemberEpochError:
            self.reset()  # the partitions are gone: join again as epoch 0
        elif cls is UnsupportedAssignorError:
            detail += (
                f"; consumer.group.remote_assignor={self._config.consumer.group.remote_assignor!r}"
                " is not one the broker offers (group.consumer.assignors): use None, "
                "'uniform' or 'range'"
            )
        elif cls is GroupMaxSizeReachedError:
            detail += "; the group is full: raise group.consumer.max.size on the broker"
        elif cls is InvalidRegularExpressionError:
            detail += "; the broker (RE2/J syntax) refused the subscription pattern"
        elif cls is UnreleasedInstanceIdError:
            detail += (
                f"; consumer.group.instance_id={self.instance_id!r} is still held by a "
                "previous member: retrying until the broker releases it (session timeout)"
            )
        elif cls is FencedInstanceIdError:
            detail += f"; another member uses consumer.group.instance_id={self.instance_id!r}"
        raise cls(detail)

    def _accept(self, resp: Any) -> dict[str, list[int]] | None:
        """Take epoch, interval and the new target from a successful answer; the new
        target by name (None: no new assignment)."""
        if resp.member_id:
            self.member_id = resp.member_id  # v0 brokers may hand out the id
        self.member_epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is not None:
            self._target = [(tid, list(parts)) for tid, parts, *_ in resp.assignment[0]]
            return self._named()
        return None

    def _named(self) -> dict[str, list[int]]:
        """The target by topic name, as far as the metadata names its topic ids."""
        named: dict[str, list[int]] = {}
        self._partial = False
        for topic_id, parts in self._target:
            name = self._client.topic_name(topic_id)
            if name is None:
                self._partial = True
                continue
            named[name] = sorted(parts)
            self._ids[name] = topic_id
        self.assignment = named
        return named

    @property
    def unresolved(self) -> bool:
        """The target names a topic id the cached metadata does not know yet."""
        return any(self._client.topic_name(tid) is None for tid, _ in self._target)

    async def join(self, subscription: Subscription, owned: dict[str, list[int]]) -> Generation:
        """The first heartbeat (epoch 0, every field): this member's epoch and first
        target. Errors raise; the group's rebalance loop retries the transient ones."""
        resp = await self._send(self._request(self.member_epoch, subscription, owned))
        self._raise_for(resp, "ConsumerGroupHeartbeat (join)")
        self._accept(resp)
        if self.unresolved:
            await self._client.refresh_metadata()
            self._named()
        self.log.info(
            "joined with epoch %d (heartbeat every %.1fs)",
            self.member_epoch,
            self.heartbeat_interval,
        )
        return Generation(
            self.member_epoch,
            self.member_id,
            "",
            "consumer",
            dict(self.assignment),
            cooperative=True,
        )

    async def heartbeat(
        self, subscription: Subscription | None, owned: dict[str, list[int]]
    ) -> dict[str, list[int]] | None:
        """One heartbeat reporting ``owned``; the new target by name, or None.

        ``subscription``: send every field (after an error, or when it changed).
        Raises the broker's error; fencing errors have reset the epoch to 0.
        """
        resp = await self._send(self._request(self.member_epoch, subscription, owned))
        self._raise_for(resp, "ConsumerGroupHeartbeat")
        target = self._accept(resp)
        if self._partial:
            # Part of the target named ids the metadata could not name. Once it can (after
            # this refresh, or any other since), the whole target goes out, though this
            # answer carries no assignment (it did not change).
            if self.unresolved:
                await self._client.refresh_metadata()
            target = self._named()
        return target

    async def leave(self, permanent: bool = True) -> None:
        """Leave: epoch -1, or -2 for a static member that will come back (``permanent``
        False), whose assignment the broker then keeps until its session timeout."""
        if self.member_epoch == JOIN_EPOCH and not self.assignment:
            return  # never joined (or fenced): nothing to leave
        epoch = LEAVE_EPOCH if permanent or self.instance_id is None else STATIC_LEAVE_EPOCH
        try:
            resp = await self._send(
                ConsumerGroupHeartbeatRequest(
                    self.group, self.member_id, epoch, instance_id=self.instance_id
                )
            )
        except ConsumerGroupError as exc:
            self.log.info("leaving (epoch %d) failed: %s", epoch, exc)
            return
        finally:
            self.reset()
        if resp.error_code and resp.error_code != UnknownMemberIdError.errno:
            self.log.info("leaving answered %s", error_for_code(resp.error_code).__name__)
