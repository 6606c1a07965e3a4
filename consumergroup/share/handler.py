"""The user's side of a share group: :class:`ShareGroupHandler` and the :class:`ShareSession`
its ``consume`` receives."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from .record import AckType, ShareRecord

if TYPE_CHECKING:
    from .run import ShareRun

__all__ = ["ShareGroupHandler", "ShareSession"]


class ShareGroupHandler(abc.ABC):
    """Handles the records a share group hands this member, one call per record.

    ``consume`` runs in up to ``concurrency`` tasks of the member at once (see
    :meth:`ShareGroup.run <consumergroup.ShareGroup.run>`), for records of any partition,
    several of one partition included: there is no order between records. A call that
    returns accepts its record; one that raises releases it (it comes again, to this
    member or another, its ``delivery_count`` one higher, until the group's delivery
    limit archives it). ``session.acknowledge`` decides explicitly, and the first
    decision wins.
    """

    @abc.abstractmethod
    async def consume(self, session: ShareSession, record: ShareRecord) -> None:
        """Handle ``record`` (return: ACCEPT, raise: RELEASE, or decide with
        ``session.acknowledge``)."""


class ShareSession:
    """What a handler sees of its member while it runs: decisions and identity."""

    def __init__(self, run: ShareRun) -> None:
        self._run = run

    @property
    def group_id(self) -> str:
        """The share group's id."""
        return self._run.group_id

    @property
    def member_id(self) -> str:
        """This member's id (a UUID it keeps for its life)."""
        return self._run.member_id

    @property
    def assignment(self) -> dict[str, list[int]]:
        """The partitions the member fetches now: topic -> sorted partitions."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self._run.assigned):
            out.setdefault(topic, []).append(partition)
        return out

    @property
    def closing(self) -> bool:
        """True once the member is closing: no record is handed out any more, and handlers
        still running have until the close timeout to finish."""
        return self._run.closing

    def acknowledge(self, record: ShareRecord, ack: AckType = AckType.ACCEPT) -> bool:
        """Decide how ``record`` ends: :attr:`AckType.ACCEPT` (handled),
        :attr:`~AckType.RELEASE` (deliver it again) or :attr:`~AckType.REJECT` (archive it,
        never deliver it again). The first decision wins: a later one, or the handler's
        return or raise after this, changes nothing.

        Returns True when this call decided the record; False when it was decided
        already, or its lock had expired (the broker hands it out again anyway).
        """
        if not isinstance(ack, AckType):
            raise TypeError(f"ack must be cg.AckType.ACCEPT, RELEASE or REJECT, not {ack!r}")
        return self._run.inflight.decide(record.topic, record.partition, record.offset, int(ack))
