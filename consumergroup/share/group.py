"""ShareGroup: a member of a share group (KIP-932), the user's entry point.

``async with cg.ShareGroup(addrs, "workers", config) as sg: await sg.run(["jobs"],
Worker(), concurrency=64)``. ``run()`` joins the group and hands records to the handler
until :meth:`ShareGroup.close`; see :mod:`.run` for the tasks of a run and
:mod:`.broker` for the share sessions.

State, written only by ``_set_state``::

    STARTING -> JOINING -> STABLE <-> REBALANCING (fenced: rejoining)
    any -> CLOSING -> CLOSED          an error that ends run() -> FAILED
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Sequence
from dataclasses import field

import anyio

from .._dataclass import dataclass
from .._lifecycle import AsyncResource, single_error
from ..client import Client
from ..config import Config
from ..errors import ClosedError, ConfigurationError
from ..group.logs import GroupLogger
from ..group.state import GroupState
from .handler import ShareGroupHandler
from .inflight import ShareCounters
from .membership import ShareMembership
from .run import ShareRun

__all__ = ["ShareGroup", "ShareGroupStats", "SharePartitionStats"]

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: The share group whose run() runs the current task (handlers, tasks they start).
_INSIDE: contextvars.ContextVar[ShareGroup | None] = contextvars.ContextVar(
    "consumergroup_inside_share_group", default=None
)


@dataclass(frozen=True, slots=True)
class SharePartitionStats:
    """One partition of a share-group member: what happened to its records so far."""

    #: Records held now (acquired, handed to a handler or about to be, undecided).
    in_flight: int
    #: Whether the member fetches it now (False: it only finishes records it holds).
    assigned: bool
    delivered: int = 0
    #: Of ``delivered``, records delivered before (delivery count above 1).
    redelivered: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    gaps: int = 0
    renewed: int = 0
    expired: int = 0
    refused: int = 0


@dataclass(frozen=True, slots=True)
class ShareGroupStats:
    """A snapshot of a share-group member: no I/O, JSON-friendly via ``as_dict()``."""

    group_id: str
    state: GroupState
    member_id: str
    #: The member epoch (0 before it joins).
    member_epoch: int
    #: Handler calls at once (the run's ``concurrency``; 0 before ``run()``).
    concurrency: int = 0
    #: Records held now over every partition.
    in_flight: int = 0
    #: Per partition assigned (or still holding records).
    partitions: dict[TopicPartition, SharePartitionStats] = field(default_factory=dict)
    #: The broker's record lock duration (s), from its last answer.
    lock_timeout: float | None = None
    #: Whether locks of long-running handlers are renewed (off once the broker refused).
    renewing: bool = True
    #: Calls of the handler that raised (their records released, unless decided before).
    handler_errors: int = 0
    #: Handlers abandoned at a close because they ignored their cancellation (they run on,
    #: detached; their records were released). Fails ``/health/live`` in a service.
    runaway_handlers: int = 0
    #: Seconds since the last successful heartbeat (None: none yet).
    last_heartbeat_age: float | None = None
    #: Why the member FAILED (or the last transient error while it retries).
    error: str | None = None
    #: Always ``"share"`` (the group protocol, as ``GroupStats.protocol`` says it).
    protocol: str = "share"

    def _total(self, name: str) -> int:
        total: int = sum(getattr(p, name) for p in self.partitions.values())
        return total

    @property
    def assignment(self) -> dict[str, list[int]]:
        """topic -> sorted partitions the member fetches now."""
        out: dict[str, list[int]] = {}
        for (topic, partition), p in sorted(self.partitions.items()):
            if p.assigned:
                out.setdefault(topic, []).append(partition)
        return out

    @property
    def acknowledged(self) -> dict[str, int]:
        """Records decided, by acknowledge type: ``accept``, ``release``, ``reject``."""
        return {
            "accept": self._total("accepted"),
            "release": self._total("released"),
            "reject": self._total("rejected"),
        }

    @property
    def delivered(self) -> int:
        """Records handed to the handler."""
        return self._total("delivered")

    @property
    def redelivered(self) -> int:
        """Of :attr:`delivered`, records delivered before."""
        return self._total("redelivered")

    @property
    def renewed(self) -> int:
        """Lock renewals (per record)."""
        return self._total("renewed")

    def as_dict(self) -> dict[str, object]:
        """A JSON-serialisable view (health endpoints, ``--json`` output)."""
        return {
            "group_id": self.group_id,
            "state": self.state.value,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "protocol": self.protocol,
            "concurrency": self.concurrency,
            "in_flight": self.in_flight,
            "assignment": self.assignment,
            "delivered": self.delivered,
            "redelivered": self.redelivered,
            "acknowledged": self.acknowledged,
            "renewed": self.renewed,
            "lock_timeout": self.lock_timeout,
            "renewing": self.renewing,
            "handler_errors": self.handler_errors,
            "runaway_handlers": self.runaway_handlers,
            "last_heartbeat_age": self.last_heartbeat_age,
            "error": self.error,
            "partitions": [
                {"topic": topic, "partition": partition, **_partition_dict(p)}
                for (topic, partition), p in sorted(self.partitions.items())
            ],
        }


def _partition_dict(p: SharePartitionStats) -> dict[str, object]:
    return {name: getattr(p, name) for name in SharePartitionStats.__slots__}


def _partition_stats(
    counters: ShareCounters, in_flight: int, assigned: bool
) -> SharePartitionStats:
    return SharePartitionStats(
        in_flight=in_flight,
        assigned=assigned,
        delivered=counters.delivered,
        redelivered=counters.redelivered,
        accepted=counters.accepted,
        released=counters.released,
        rejected=counters.rejected,
        gaps=counters.gaps,
        renewed=counters.renewed,
        expired=counters.expired,
        refused=counters.refused,
    )


class ShareGroup(AsyncResource):
    """A member of share group ``group_id`` (KIP-932; Apache Kafka 4.2+).

    A share group hands *records*, not partitions, to its members: several members (and
    several handler tasks of one member) work on one partition at once; each record is
    acquired under a lock, acknowledged one by one, and handed out again when its lock
    expires or it is released. ``run(topics, handler, concurrency=N)`` runs the handler on
    up to ``N`` records at once until :meth:`close`. Settings: ``config.share``; the
    broker's share-group settings are the group's configs (docs/guides/share-groups.md).
    """

    def __init__(self, addrs: Sequence[str], group_id: str, config: Config | None = None) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError("group_id must be a non-empty string")
        self.config = config or Config()
        self.config.validate()
        self.group_id = group_id
        self._client = Client(addrs, self.config)
        self._membership = ShareMembership(self._client, group_id, self.config)
        self.log = GroupLogger(_log, group_id, lambda: self._membership.member_id)
        # --- event-loop state: run() and close() ---
        self._state = GroupState.STARTING  # written only by _set_state
        self._run: ShareRun | None = None
        self._running = False
        self._closing = False
        self._closed = False
        self._close_deadline = math.inf
        self._idle = anyio.Event()  # set while no run() is in progress
        self._idle.set()
        self._error: str | None = None
        self._started = False
        # Around a run's tasks: close() cancels it when the run overruns its deadline.
        self._scope: anyio.CancelScope | None = None

    @property
    def state(self) -> GroupState:
        """STARTING, JOINING, STABLE, REBALANCING (rejoining after fencing), CLOSING,
        CLOSED or FAILED."""
        return self._state

    def _set_state(self, state: GroupState) -> None:
        if self._state in (GroupState.CLOSED, GroupState.FAILED) or self._state is state:
            return
        if self._state is GroupState.CLOSING and state not in (
            GroupState.CLOSED,
            GroupState.FAILED,
        ):
            return
        self.log.debug("state %s -> %s", self._state.value, state.value)
        self._state = state

    def _report(self, event: str, detail: str | None) -> None:
        """What the run tells its group: joined, fenced (rejoining), retrying."""
        if event == "joined":
            self._set_state(GroupState.STABLE)
        elif event == "fenced":
            self._set_state(GroupState.REBALANCING)
            self._error = detail
        else:
            self._error = detail

    async def start(self) -> None:
        """Connect (``async with`` does it; ``run()`` does it when needed)."""
        if self._closed or self._closing:
            raise ClosedError(f"share group {self.group_id!r} is closed")
        if not self._started:
            await self._client.start()
            self._started = True

    async def run(
        self,
        topics: Sequence[str],
        handler: ShareGroupHandler,
        concurrency: int | None = None,
    ) -> None:
        """Join the group and hand its records to ``handler`` until :meth:`close`.

        ``concurrency``: handler calls at once (default ``config.share.concurrency``).
        Returns once ``close()`` has ended the member; raises the error that ended it
        otherwise (a broker without share groups: at once, naming what it lacks).
        """
        if isinstance(topics, str) or not topics or not all(isinstance(t, str) for t in topics):
            raise ConfigurationError(
                f"topics must be a non-empty list of topic names, got {topics!r}"
            )
        if not isinstance(handler, ShareGroupHandler):
            raise ConfigurationError(
                "handler must be a consumergroup.ShareGroupHandler instance (subclass it "
                f"and define async consume(session, record)), got {handler!r}"
            )
        n = self.config.share.concurrency if concurrency is None else concurrency
        if type(n) is not int or n < 1:
            raise ConfigurationError(f"concurrency must be an int >= 1, got {concurrency!r}")
        if self._running:
            raise ConfigurationError(f"share group {self.group_id!r} is already running")
        await self.start()
        if self._closing:
            raise ClosedError(f"share group {self.group_id!r} is closed")
        self._running = True
        self._idle = anyio.Event()
        run = ShareRun(
            group_id=self.group_id,
            config=self.config,
            client=self._client,
            membership=self._membership,
            log=self.log,
            topics=topics,
            handler=handler,
            concurrency=n,
            report=self._report,
        )
        self._run = run
        self._set_state(GroupState.JOINING)
        token = _INSIDE.set(self)
        try:
            try:
                with anyio.CancelScope() as self._scope:
                    await run.run()
            except BaseExceptionGroup as group:
                raise single_error(group) from None
            finally:
                with anyio.CancelScope(shield=True, deadline=self._close_deadline):
                    await self._membership.leave()
        except Exception as exc:
            self._error = f"{type(exc).__name__}: {exc}"
            self._set_state(GroupState.FAILED)
            raise
        finally:
            _INSIDE.reset(token)
            self._running = False
            self._idle.set()

    def stats(self) -> ShareGroupStats:
        """A snapshot of the member (no broker round trip)."""
        run = self._run
        m = self._membership
        if run is None:
            return ShareGroupStats(
                self.group_id, self._state, m.member_id, m.member_epoch, error=self._error
            )
        partitions = {
            key: _partition_stats(p.counters, len(p.held), key in run.assigned)
            for key, p in run.inflight.partitions.items()
            if p.held or key in run.assigned or p.counters.delivered
        }
        last = run.last_heartbeat
        return ShareGroupStats(
            self.group_id,
            self._state,
            m.member_id,
            m.member_epoch,
            concurrency=run.concurrency,
            in_flight=run.inflight.count,
            partitions=partitions,
            lock_timeout=run.lock_timeout,
            renewing=run.renew,
            handler_errors=run.handler_errors,
            runaway_handlers=run.runaway_handlers,
            last_heartbeat_age=None if last is None else anyio.current_time() - last,
            error=self._error,
        )

    async def close(self, timeout: float | None = None) -> None:
        """Stop handing out records, let running handlers finish, acknowledge what
        finished and release what did not, leave the group, disconnect. Idempotent.

        Returns within ``timeout`` seconds (default ``config.share.close_timeout``): the
        handlers still running when most of it is spent are cancelled (their records
        released); the acknowledgements and the leave share the rest. Called from a
        handler, it starts the close and returns at once (``run()`` finishes it).
        """
        if self._closed:
            return
        bound = self.config.share.close_timeout if timeout is None else max(0.0, timeout)
        now = anyio.current_time()
        deadline = min(self._close_deadline, now + bound)
        self._close_deadline = deadline
        self._closing = True
        self._set_state(GroupState.CLOSING)
        run = self._run
        if run is not None and self._running:
            reserve = min(self.config.net.read_timeout, bound / 4)
            run.stop(deadline - 2 * reserve, deadline - reserve)
        if _INSIDE.get() is self:
            return
        with anyio.CancelScope(deadline=deadline):
            await self._idle.wait()
        if not self._idle.is_set() and self._scope is not None:
            self.log.warning("the run did not end by the close deadline: cancelling it")
            self._scope.cancel()
            with anyio.move_on_after(self.config.net.read_timeout):
                await self._idle.wait()
        self._closed = True
        await self._client.close()
        self._set_state(GroupState.CLOSED)
