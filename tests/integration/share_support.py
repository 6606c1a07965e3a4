"""Helpers for the share-group tests: a config, the group configs a test group needs, a
recording handler and a member runner."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.share.admin import ShareGroupAdmin


def share_config(**overrides: object) -> cg.Config:
    """A config for tests: short waits and backoffs, a bounded close."""
    config = cg.Config(client_id="share-test")
    config.share.max_wait = 0.2
    config.share.close_timeout = 15.0
    config.consumer.retry.backoff = 0.2
    config.metadata.retry.backoff = 0.1
    for path, value in overrides.items():
        target: object = config
        *parents, leaf = path.split("__")
        for name in parents:
            target = getattr(target, name)
        setattr(target, leaf, value)
    return config


async def share_group(
    bootstrap: str,
    group: str,
    *,
    lock: float | None = None,
    deliveries: int | None = None,
    session_timeout: float | None = None,
    heartbeat: float | None = None,
    **configs: str,
) -> None:
    """Set ``group``'s configs before its first member joins: it starts at the earliest
    offsets; ``lock`` (s): its record lock duration; ``deliveries``: its delivery-count
    limit; ``session_timeout``/``heartbeat`` (s); more as ``name_with_underscores=value``."""
    values: dict[str, str | None] = {"share.auto.offset.reset": "earliest"}
    if lock is not None:
        values["share.record.lock.duration.ms"] = str(int(lock * 1000))
    if deliveries is not None:
        values["share.delivery.count.limit"] = str(deliveries)
    if session_timeout is not None:
        values["share.session.timeout.ms"] = str(int(session_timeout * 1000))
    if heartbeat is not None:
        values["share.heartbeat.interval.ms"] = str(int(heartbeat * 1000))
    values.update({name.replace("_", "."): value for name, value in configs.items()})
    async with ClusterAdmin([bootstrap]) as admin:
        await admin.alter_group_configs(group, values)


@dataclass
class Seen:
    """One call of a handler."""

    member: str
    partition: int
    offset: int
    delivery_count: int
    value: bytes | None
    start: float
    end: float = 0.0


@dataclass
class Collector(cg.ShareGroupHandler):
    """Records every call (with its start and end on the monotonic clock); ``delay`` (s)
    per record; ``behave(record)`` may raise or acknowledge explicitly (given the
    session), its result decides nothing else."""

    name: str = "member"
    delay: float = 0.0
    behave: Callable[[cg.ShareSession, cg.ShareRecord], None] | None = None
    seen: list[Seen] = field(default_factory=list)
    running: int = 0
    most_running: int = 0

    async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
        entry = Seen(
            self.name,
            record.partition,
            record.offset,
            record.delivery_count,
            record.value,
            time.monotonic(),
        )
        self.seen.append(entry)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.behave is not None:
                self.behave(session, record)
        finally:
            self.running -= 1
            entry.end = time.monotonic()

    def offsets(self) -> Counter[tuple[int, int]]:
        """(partition, offset) -> calls."""
        return Counter((s.partition, s.offset) for s in self.seen)


@contextlib.asynccontextmanager
async def share_member(
    bootstrap: str,
    group: str,
    topics: Sequence[str],
    handler: cg.ShareGroupHandler,
    *,
    concurrency: int | None = None,
    config: cg.Config | None = None,
) -> AsyncIterator[tuple[cg.ShareGroup, asyncio.Task[None]]]:
    """A ShareGroup running ``run()`` in a task; closed (bounded) on exit."""
    member = cg.ShareGroup([bootstrap], group, config or share_config())
    task = asyncio.create_task(member.run(topics, handler, concurrency=concurrency))
    try:
        yield member, task
    finally:
        await asyncio.wait_for(member.close(), 30)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def wait_for_members(
    bootstrap: str,
    group: str,
    ready: Callable[[list[str]], bool],
    timeout: float,
    what: str,
) -> None:
    """Until ``ready(member ids)`` holds for share group ``group``, as its coordinator
    describes it; fail after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    async with ShareGroupAdmin([bootstrap]) as admin:
        while True:
            with contextlib.suppress(cg.ConsumerGroupError):
                [desc] = await admin.describe_share_groups([group])
                if ready([m.member_id for m in desc.members]):
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.2)
