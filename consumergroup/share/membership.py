"""Membership of a share group (KIP-932): ``ShareGroupHeartbeat``.

The same shape as the consumer protocol's membership (KIP-848,
:mod:`consumergroup.group.consumer_membership`): the member id is a UUID generated here
and kept for the member's life (fencing included); the first heartbeat (epoch 0) names
the subscribed topics; every answer carries the epoch and the interval to heartbeat at,
and, when it changed, the member's assignment by topic id (named through the metadata).

What differs: there is nothing to revoke. A share group hands *records*, not
partitions, to its members, and many members may read one partition at once, so a new
assignment applies at once (the member fetches the partitions it names and stops fetching
the others; the records it still holds are acknowledged as they finish) and needs no
acknowledging heartbeat. Fencing (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the coordinator
dropped the member after its session timeout) means the broker took back every record
the member held; the member joins again with epoch 0.

No tasks here: the member's heartbeat task (:mod:`.run`) calls :meth:`heartbeat`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import (
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    KafkaConnectionError,
    RequestTimedOutError,
    UnsupportedVersionError,
    error_for_code,
)
from ..group.logs import GroupLogger
from ..net.flexible import new_uuid
from ..net.share import JOIN_EPOCH, LEAVE_EPOCH, ShareGroupHeartbeatRequest

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config

__all__ = ["HEARTBEAT_API", "ShareMembership", "unsupported"]

_log = logging.getLogger(__name__)

#: The API key of ShareGroupHeartbeat: a broker that does not list it has no share groups.
HEARTBEAT_API = ShareGroupHeartbeatRequest.API_KEY


def unsupported(group: str, address: str, api: str) -> UnsupportedVersionError:
    """The error for a broker without share groups: what to run or enable instead."""
    return UnsupportedVersionError(
        f"share group {group!r}: broker {address} does not offer {api}: share groups "
        "(KIP-932) need Apache Kafka 4.2+ with the share.version feature enabled "
        "(kafka-features.sh upgrade --feature share.version=1); this broker cannot run "
        "them (use a ConsumerGroup instead)"
    )


class ShareMembership:
    """One member's identity in share group ``group`` and its heartbeat."""

    def __init__(self, client: Client, group: str, config: Config) -> None:
        self._client = client
        self.group = group
        self._config = config
        self.member_id = new_uuid()
        self.member_epoch = JOIN_EPOCH
        # The broker's heartbeat interval (seconds); a guess until it answers.
        self.heartbeat_interval = 1.0
        # The last assignment by topic id; ids the metadata cannot name yet stay here and
        # are named once it can (``unresolved``).
        self._target: list[tuple[str, list[int]]] = []
        self.log = GroupLogger(_log, group, lambda: self.member_id)

    def reset(self) -> None:
        """After fencing: join again with epoch 0 (the member id is kept)."""
        self.member_epoch = JOIN_EPOCH
        self._target = []

    @property
    def joined(self) -> bool:
        """Whether the coordinator counts this member in (an epoch above 0)."""
        return self.member_epoch > JOIN_EPOCH

    async def _send(self, request: ShareGroupHeartbeatRequest) -> Any:
        conn = await self._client.coordinator(self.group)
        if conn.version(HEARTBEAT_API) is None:
            raise unsupported(self.group, conn.address, "ShareGroupHeartbeat")
        try:
            return await conn.send(request, timeout=self._config.net.read_timeout)
        except (KafkaConnectionError, RequestTimedOutError):
            self._client.invalidate_coordinator(self.group)
            raise

    def _raise_for(self, resp: Any) -> None:
        code = resp.error_code
        if not code:
            return
        cls = error_for_code(code)
        detail = f"ShareGroupHeartbeat {self.group!r}: {resp.error_message or 'no detail'}"
        if cls is GroupIdNotFoundError:
            detail += (
                "; the group id is taken by a consumer group (or another kind of group): "
                "a share group needs an id of its own"
            )
        elif cls is GroupMaxSizeReachedError:
            detail += "; the group is full: raise group.share.max.size on the broker"
        raise cls(detail)

    async def heartbeat(self, topics: Sequence[str] | None) -> dict[str, list[int]] | None:
        """One heartbeat; the new assignment by topic name when it changed, else None.

        ``topics``: send the subscription (a join, or after an error), else None.
        Raises the broker's error (fencing: UnknownMemberIdError, FencedMemberEpochError).
        """
        names = None if topics is None else sorted(topics)
        request = ShareGroupHeartbeatRequest(
            self.group, self.member_id, self.member_epoch, subscribed_topic_names=names
        )
        resp = await self._send(request)
        self._raise_for(resp)
        self.member_epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is None:
            return None
        self._target = [(tid, sorted(parts)) for tid, parts, *_ in resp.assignment[0]]
        if self.unresolved:
            await self._client.refresh_metadata()
        return self.assignment()

    def assignment(self) -> dict[str, list[int]]:
        """The last assignment by topic name, as far as the metadata names its ids."""
        named: dict[str, list[int]] = {}
        for topic_id, parts in self._target:
            name = self._client.topic_name(topic_id)
            if name is not None and parts:
                named[name] = parts
        return named

    @property
    def unresolved(self) -> bool:
        """The assignment names a topic id the cached metadata does not know yet."""
        return any(self._client.topic_name(tid) is None for tid, _ in self._target)

    async def leave(self) -> None:
        """Leave the group (epoch -1): the coordinator moves on without waiting for the
        session timeout. A failure is logged, not raised."""
        if not self.joined:
            return
        try:
            resp = await self._send(
                ShareGroupHeartbeatRequest(self.group, self.member_id, LEAVE_EPOCH)
            )
            if resp.error_code:
                self.log.info("leaving answered %s", error_for_code(resp.error_code).__name__)
        except Exception as exc:  # leaving is best effort: the session timeout follows
            self.log.info("leaving the group failed: %s", exc)
        finally:
            self.reset()
