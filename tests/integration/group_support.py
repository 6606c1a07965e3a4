"""Helpers for the group integration tests: a recording handler and member runners."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import consumergroup as cg
from consumergroup.balance.protocol import MemberAssignment, MemberSubscription
from consumergroup.client import Client
from consumergroup.net.connection import BrokerConnection
from consumergroup.net.protocol import JoinGroupRequest, SyncGroupRequest

#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
_COORDINATOR_MOVING = (14, 15, 16)


def group_config(**overrides: object) -> cg.Config:
    """A config for tests: small session timeout (Tansu holds JoinGroup ~half of it)."""
    config = cg.Config(client_id="test")
    config.consumer.group.session_timeout = 6.0
    config.consumer.group.heartbeat_interval = 0.5
    config.consumer.group.rebalance.timeout = 10.0
    config.consumer.group.rebalance.retry.backoff = 0.5
    config.consumer.group.partition_watch_interval = 1.0
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    config.consumer.offsets.auto_commit.interval = 0.2
    config.consumer.retry.backoff = 0.2
    config.consumer.max_wait_time = 0.1
    for path, value in overrides.items():
        target: object = config
        *parents, leaf = path.split("__")
        for name in parents:
            target = getattr(target, name)
        setattr(target, leaf, value)
    return config


def consumer_protocol_config(**overrides: object) -> cg.Config:
    """group_config() on the consumer protocol (KIP-848): the broker sets the session
    timeout and heartbeat interval (the Kafka fixture lowers them), so those keep their
    defaults here."""
    config = group_config(**overrides)
    defaults = cg.Config().consumer.group
    config.consumer.group.protocol = "consumer"
    config.consumer.group.session_timeout = defaults.session_timeout
    config.consumer.group.heartbeat_interval = defaults.heartbeat_interval
    return config


class Recorder(cg.ConsumerGroupHandler):
    """Records every message handled, per member, and marks it."""

    def __init__(self, name: str = "member", delay: float = 0.0) -> None:
        self.name = name
        self.delay = delay
        self.seen: list[tuple[str, int, int]] = []
        self.last_seen: dict[tuple[str, int], float] = {}
        self.sessions: list[dict[str, list[int]]] = []
        self.claims: dict[str, list[int]] = {}
        self.cleanups = 0
        self.end_reasons: list[str | None] = []
        self.fail_on: Callable[[cg.ConsumerMessage], bool] | None = None
        self.commit_each = False  # session.commit() after every mark

    async def setup(self, session: cg.ConsumerGroupSession) -> None:
        self.claims = session.claims
        self.sessions.append(session.claims)

    async def cleanup(self, session: cg.ConsumerGroupSession) -> None:
        self.cleanups += 1
        self.end_reasons.append(session.end_reason)
        self.claims = {}

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            if self.fail_on is not None and self.fail_on(msg):
                raise RuntimeError(f"boom at {msg.topic}/{msg.partition}@{msg.offset}")
            self.seen.append((msg.topic, msg.partition, msg.offset))
            self.last_seen[(msg.topic, msg.partition)] = time.monotonic()
            session.mark_message(msg)
            if self.commit_each:
                await session.commit()
            if self.delay:
                await asyncio.sleep(self.delay)

    def owned(self) -> int:
        """How many partitions this member claims right now."""
        return sum(len(p) for p in self.claims.values())


@contextlib.asynccontextmanager
async def running_member(
    bootstrap: str,
    group: str,
    topics: Sequence[str] | re.Pattern[str],
    handler: cg.ConsumerGroupHandler,
    config: cg.Config | None = None,
) -> AsyncIterator[tuple[cg.ConsumerGroup, asyncio.Task[None]]]:
    """A ConsumerGroup running ``run()`` in a task; closed (bounded) on exit."""
    member = cg.ConsumerGroup([bootstrap], group, config or group_config())
    task = asyncio.create_task(member.run(topics, handler))
    try:
        yield member, task
    finally:
        await asyncio.wait_for(member.close(), 30)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)


async def heartbeats(member: cg.ConsumerGroup, count: int, timeout: float) -> None:
    """Wait until ``member``'s session has had ``count`` more heartbeats answered without error.

    A member the coordinator has evicted gets errors instead, and the wait times out.
    """
    answered: list[float] = []

    def counted() -> bool:
        beat = member.session.last_heartbeat if member.session is not None else None
        if beat is not None and (not answered or beat != answered[-1]):
            answered.append(beat)
        return len(answered) > count

    await wait_for(counted, timeout, f"{count} more heartbeats of {member.group_id}")


async def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``predicate`` until true; returns the seconds it took, fails after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


def offsets_by_partition(seen: list[tuple[str, int, int]]) -> dict[tuple[str, int], Counter[int]]:
    """(topic, partition) -> Counter of offsets handled."""
    out: dict[tuple[str, int], Counter[int]] = {}
    for topic, partition, offset in seen:
        out.setdefault((topic, partition), Counter())[offset] += 1
    return out


async def raw_join(
    client: Client, group: str, join: JoinGroupRequest
) -> tuple[BrokerConnection, dict[str, Any]]:
    """Send ``join`` to the coordinator, again while it is loading or moving (Apache Kafka
    right after its first group appears). Returns the connection and the answer."""
    for _ in range(100):
        conn = await client.coordinator(group)
        resp: dict[str, Any] = (await conn.send(join, timeout=30)).to_object()
        if resp["error_code"] not in _COORDINATOR_MOVING:
            break
        client.invalidate_coordinator(group)
        await asyncio.sleep(0.1)
    return conn, resp


async def silent_leader(
    bootstrap: str, group: str, topic: str, config: cg.Config, partitions: int = 2
) -> str:
    """A raw *static* member forms ``group`` alone (it leads and takes every partition),
    then goes silent without LeaveGroup, as a static member's close() does. Until its
    session timeout (``config``'s) the coordinator holds the next member's JoinGroup: Apache
    Kafka waits for the members it knows, Tansu holds every JoinGroup anyway. Returns its id."""
    strategy = config.consumer.group.rebalance.strategies[0].name
    meta = MemberSubscription(topics=[topic], user_data=None, version=3).encode()
    session_ms = int(config.consumer.group.session_timeout * 1000)
    join = JoinGroupRequest(
        group, session_ms, session_ms, "", "vanishing", "consumer", [(strategy, meta)]
    )
    async with Client([bootstrap], cg.Config(client_id="vanishing")) as client:
        conn, resp = await raw_join(client, group, join)
        assert resp["error_code"] == 0, resp
        member_id: str = resp["member_id"]
        assert resp["leader_id"] == member_id, "the first member to join leads"
        plan = MemberAssignment({topic: list(range(partitions))}).encode()
        sync = SyncGroupRequest(
            group, resp["generation_id"], member_id, "vanishing", [(member_id, plan)]
        )
        assert (await conn.send(sync, timeout=30)).to_object()["error_code"] == 0
    return member_id
