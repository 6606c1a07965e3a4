"""The session's background work, one small task each: heartbeats, the auto-commit
ticker, the partition watcher and rate sampling.

Each runs in the session's background task group from before any user code until the
session's claims are released. Each gets the session as a small protocol of
:mod:`.roles` (whether it ends, ending it, asking for a rebalance, the one field it
writes) and everything else it uses as arguments. None of them touches the claims:
those belong to the :class:`~.reconciler.Reconciler` (the rate sampler reads them).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from ..errors import (
    ConsumerError,
    ConsumerGroupError,
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from ..retry import FENCED, is_transient
from .ending import EndCause

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config
    from .consumer_membership import Subscription
    from .membership import Membership
    from .roles import Beating, Lifetime, Owned, Rejoining

#: (event name, *args) -> the group's observers.
Notify = Callable[..., None]


async def heartbeat_loop(
    session: Beating,
    membership: Membership,
    client: Client,
    config: Config,
    notify: Notify,
    joining: Callable[[], bool],
) -> None:
    """Heartbeat every ``heartbeat_interval`` until the session's claims are released.

    Writes ``session.last_heartbeat``. REBALANCE_IN_PROGRESS → ``session.rebalance()``;
    UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID → FENCED; no answer for
    a session timeout → LOST. Paused while a cooperative join is in flight (``joining``):
    a join the coordinator answers keeps the membership alive (the rejoin then writes
    ``last_heartbeat``), but one in flight is no answer: joins that keep failing do not
    hold off LOST.
    """
    group = config.consumer.group
    # A join the coordinator holds is answered within the rebalance timeout (and our read
    # timeout); a member it does not hear from is dropped a session timeout later. A join
    # unanswered for longer than both since the last answer: the coordinator let us go.
    join_bound = group.session_timeout + group.rebalance.timeout + config.net.read_timeout
    last_ok = anyio.current_time()
    while True:
        await anyio.sleep(group.heartbeat_interval)
        last_ok = max(last_ok, session.last_heartbeat or last_ok)
        if joining():
            if anyio.current_time() - last_ok > join_bound:
                session.end(EndCause.LOST, f"no answer from the coordinator for {join_bound}s")
                return
            continue
        try:
            await membership.heartbeat()
        except RebalanceInProgressError as exc:
            notify("on_heartbeat", exc)
            last_ok = session.last_heartbeat = anyio.current_time()  # alive, told to rejoin
            session.rebalance("the group is rebalancing")
            continue
        except FencedInstanceIdError as exc:
            notify("on_heartbeat", exc)
            session.end(EndCause.FENCED, "another member took this group_instance_id", exc)
            return
        except (UnknownMemberIdError, IllegalGenerationError) as exc:
            notify("on_heartbeat", exc)
            if isinstance(exc, UnknownMemberIdError):
                membership.reset()
            session.end(EndCause.FENCED, f"{type(exc).__name__}: this generation is over")
            return
        except ConsumerGroupError as exc:
            client.invalidate_coordinator(membership.group)
            if await heartbeat_failed(session, notify, exc, last_ok, config):
                return
            continue
        notify("on_heartbeat", None)
        last_ok = session.last_heartbeat = anyio.current_time()


async def heartbeat_failed(
    session: Lifetime, notify: Notify, exc: ConsumerGroupError, last_ok: float, config: Config
) -> bool:
    """A heartbeat (classic or consumer protocol) failed with an answer that is not about
    membership: True when the session ended (a non-transient error, or no heartbeat got
    through for a session timeout since ``last_ok``: LOST), else after the retry backoff."""
    timeout = config.consumer.group.session_timeout
    notify("on_heartbeat", exc)
    if not is_transient(exc):
        session.end(EndCause.LOST, f"heartbeat failed: {exc}", fatal=exc)
        return True
    if anyio.current_time() - last_ok > timeout:
        session.end(EndCause.LOST, f"no heartbeat got through for {timeout}s")
        return True
    session.log.info("heartbeat failed (%s); retrying", exc)
    await anyio.sleep(config.metadata.retry.backoff)
    return False


async def auto_commit_loop(
    session: Lifetime,
    config: Config,
    commit: Callable[[], Awaitable[bool]],
    rebalancing: Callable[[], bool],
    report: Callable[[ConsumerError], None],
) -> None:
    """Commit the marks every ``auto_commit.interval`` while the session runs.

    A tick that falls while a rebalance is in progress is skipped (as Java's client
    does): the commit would carry a generation that is ending, and coordinator traffic
    sent meanwhile can only delay or break the join. The revocation commits what it
    revokes, and the next tick the rest. The session's end commits the last marks.
    ``commit`` is False when the commit raced a cooperative rejoin (it goes again next
    tick); errors go to ``report``.
    """
    interval = config.consumer.offsets.auto_commit.interval
    while not session.done.is_set():
        with anyio.move_on_after(interval):
            await session.done.wait()
        if session.done.is_set():
            return
        if rebalancing():
            continue
        try:
            await commit()
        except RebalanceInProgressError:
            session.rebalance("a commit found the group rebalancing")
        except FencedInstanceIdError as exc:
            session.end(EndCause.FENCED, "another member took this group_instance_id", exc)
        except FENCED as exc:
            session.end(EndCause.FENCED, f"commit refused: {type(exc).__name__}")
        except ConsumerGroupError as exc:
            report(ConsumerError(f"auto-commit failed: {exc}", cause=exc))


async def watch_partitions(
    session: Rejoining,
    client: Client,
    config: Config,
    counts: dict[str, int],
    subscription: Subscription | None,
) -> None:
    """End the session (PARTITIONS_CHANGED, rejoining fresh) when a subscribed topic's
    partition count changes from ``counts`` (what it was when the session began), or (a
    pattern subscription) the set of matching topics; every member watches, not only the
    leader."""
    interval = config.consumer.group.partition_watch_interval
    pattern = subscription if isinstance(subscription, re.Pattern) else None
    while not session.done.is_set():
        with anyio.move_on_after(interval):
            await session.done.wait()
        if session.done.is_set():
            return
        try:
            if pattern is not None:
                matching = await client.matching_topics(pattern)
            else:
                await client.refresh_metadata(*counts)
        except ConsumerGroupError as exc:
            session.log.info("partition watch could not refresh metadata: %s", exc)
            continue
        if pattern is not None and set(matching) != set(counts):
            session.rejoin_fresh = True
            session.end(
                EndCause.PARTITIONS_CHANGED,
                f"the topics matching {pattern.pattern!r} are now {matching}",
            )
            return
        for topic, count in counts.items():
            now = len(client.cached_partitions(topic) or ())
            if now != count:
                # A coordinator answers a follower that rejoins with unchanged metadata
                # with the old assignment; leaving first forces the rebalance.
                session.rejoin_fresh = True
                session.end(
                    EndCause.PARTITIONS_CHANGED,
                    f"topic {topic!r} now has {now} partitions (was {count})",
                )
                return


async def sample_rates(
    rates: dict[tuple[str, int], float], claims: Owned, config: Config
) -> None:
    """Per-claim messages/s into ``rates`` (the session's, this task its only writer),
    from position deltas once per heartbeat interval (no per-message cost)."""
    previous: dict[tuple[str, int], tuple[float, int]] = {}
    while True:
        await anyio.sleep(config.consumer.group.heartbeat_interval)
        now = anyio.current_time()
        owned = claims.owned
        for tp, pc in owned.items():
            position = pc.position
            last = previous.get(tp)
            if last is not None and now > last[0] and position >= last[1] >= 0:
                rates[tp] = (position - last[1]) / (now - last[0])
            previous[tp] = (now, position)
        for tp in [tp for tp in previous if tp not in owned]:
            del previous[tp]
            rates.pop(tp, None)
