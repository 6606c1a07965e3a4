"""Consumer-group behaviour on the broker: sharing, rebalances, commits, restarts, errors."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.group.offsets import OffsetManager
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.group_support import (
    Recorder,
    group_config,
    offsets_by_partition,
    running_member,
    wait_for,
)

pytestmark = pytest.mark.slow


async def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, int]:
    """What the broker holds as committed for ``group`` on every partition of ``topic``."""
    async with Client([bootstrap]) as client:
        manager = OffsetManager(client, group, cg.Config())
        got = await manager.fetch_committed([(topic, p) for p in range(partitions)])
    return {p: got[(topic, p)][0] for p in range(partitions)}


async def steady(bootstrap: str, topic: str, start: int, count: int, per_batch: int = 20) -> None:
    """Produce ``count`` values numbered from ``start``, a batch every 50 ms."""
    for i in range(start, start + count, per_batch):
        await produce(
            bootstrap, topic, [str(j).encode() for j in range(i, min(i + per_batch, start + count))]
        )
        await asyncio.sleep(0.05)


async def test_members_share_partitions_and_a_third_joins(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=6)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(600)])
    a, b, c = Recorder("a"), Recorder("b"), Recorder("c")
    async with (
        running_member(bootstrap, group, [topic], a),
        running_member(bootstrap, group, [topic], b),
    ):
        await wait_for(
            lambda: a.owned() + b.owned() == 6 and a.owned() and b.owned(), 30, "a and b to split"
        )
        assert sorted(a.claims[topic] + b.claims[topic]) == list(range(6))
        await wait_for(lambda: len(a.seen) + len(b.seen) >= 600, 30, "the first 600 messages")
        producer = asyncio.create_task(steady(bootstrap, topic, 600, 600))
        async with running_member(bootstrap, group, [topic], c):
            await wait_for(
                lambda: min(a.owned(), b.owned(), c.owned()) >= 1, 40, "all three to own partitions"
            )
            assert a.owned() + b.owned() + c.owned() == 6
            await producer
            await wait_for(
                lambda: len({s for r in (a, b, c) for s in r.seen}) >= 1200, 30, "every message"
            )
    handled = offsets_by_partition(a.seen + b.seen + c.seen)
    distinct = sum(len(c) for c in handled.values())
    assert distinct == 1200, "a message was lost"
    duplicates = len(a.seen) + len(b.seen) + len(c.seen) - distinct
    # Duplicates only in the rebalance window: at most one buffer per partition that moved.
    assert duplicates <= 6 * group_config().channel_buffer_size, duplicates
    ends = {p: max(handled[(topic, p)]) + 1 for p in range(6)}
    assert await committed_offsets(bootstrap, group, topic, 6) == ends


async def test_restart_resumes_from_committed(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=3)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(300)])
    first = Recorder("first")
    async with running_member(bootstrap, group, [topic], first):
        await wait_for(lambda: len(first.seen) >= 300, 30, "the first 300")
    await produce(bootstrap, topic, [str(i).encode() for i in range(300, 450)])
    second = Recorder("second")
    async with running_member(bootstrap, group, [topic], second):
        await wait_for(lambda: len(second.seen) >= 150, 30, "the next 150")
        await asyncio.sleep(0.5)
    assert len(first.seen) == 300
    assert not set(first.seen) & set(second.seen), (
        "the restarted group read committed messages again"
    )
    assert len(second.seen) == 150


async def test_close_makes_the_others_rebalance_quickly(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=4)
    group = unique()
    # Tansu holds each JoinGroup about half the session timeout: 16 s, not more, keeps the
    # test short (it took 32 s with 30 s), and a crash's 16 s stays far from the bound.
    config = group_config(
        consumer__group__session_timeout=16.0, consumer__group__heartbeat_interval=1.0
    )
    a, b = Recorder("a"), Recorder("b")
    async with running_member(bootstrap, group, [topic], a, config):
        async with running_member(bootstrap, group, [topic], b, config):
            await wait_for(lambda: a.owned() == 2 and b.owned() == 2, 60, "a and b to split")
            left = time.monotonic()
        took = await wait_for(lambda: a.owned() == 4, 30, "a to take every partition")
        took = time.monotonic() - left
        # LeaveGroup: sooner than the 16 s session timeout a crash would need.
        assert took < 14, took


async def test_handler_error_is_raised_from_run_and_unmarked_not_committed(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(20)], partition=0)
    await produce(bootstrap, topic, [str(i).encode() for i in range(20)], partition=1)
    handler = Recorder()
    handler.fail_on = lambda m: m.partition == 0 and m.offset == 10
    member = cg.ConsumerGroup([bootstrap], group, group_config())
    try:
        with pytest.raises(cg.ConsumerError) as info:
            await asyncio.wait_for(member.run([topic], handler), 40)
    finally:
        await member.close()
    assert info.value.topic == topic and info.value.partition == 0
    assert isinstance(info.value.cause, RuntimeError)
    committed = await committed_offsets(bootstrap, group, topic, 2)
    assert committed[0] == 10, "only the messages before the failure may be committed"


async def test_handler_error_goes_to_errors_and_others_keep_running(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [b"x"] * 10, partition=0)
    await produce(bootstrap, topic, [b"y"] * 10, partition=1)
    handler = Recorder()
    handler.fail_on = lambda m: m.partition == 0 and m.offset == 3
    config = group_config(consumer__return_errors=True)
    async with running_member(bootstrap, group, [topic], handler, config) as (member, task):
        errors = member.errors()
        err = await asyncio.wait_for(errors.__anext__(), 30)
        assert (err.topic, err.partition) == (topic, 0)
        await produce(bootstrap, topic, [b"z"] * 5, partition=1)
        await wait_for(
            lambda: sum(1 for s in handler.seen if s[1] == 1) >= 15, 20, "partition 1 to go on"
        )
        assert not task.done()


async def test_unknown_topic_is_a_clear_error_with_missing_topic_fail(bootstrap: str) -> None:
    config = group_config(consumer__group__missing_topic="fail")
    async with cg.ConsumerGroup([bootstrap], unique(), config) as member:
        with pytest.raises(cg.KafkaError, match="does not exist"):
            await member.consume(["no-such-topic-" + unique()], Recorder())
        assert member.state is cg.GroupState.FAILED


async def test_close_is_idempotent_and_leaves_no_task(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    before = set(asyncio.all_tasks())
    member = cg.ConsumerGroup([bootstrap], unique(), group_config())
    handler = Recorder()
    task = asyncio.create_task(member.run([topic], handler))
    await wait_for(lambda: handler.owned() == 2, 30, "the claims")
    started = time.monotonic()
    await member.close()
    await member.close()
    await asyncio.wait_for(task, 5)
    assert time.monotonic() - started < 10
    leftover = {t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()}
    assert not leftover, leftover


async def test_pause_is_kept_across_rebalances(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    a = Recorder("a")
    async with running_member(bootstrap, group, [topic], a) as (member, _):
        await wait_for(lambda: a.owned() == 2, 30, "the claims")
        member.pause({topic: [0]})
        b = Recorder("b")
        async with running_member(bootstrap, group, [topic], b):
            await wait_for(lambda: a.owned() == 1 and b.owned() == 1, 40, "the split")
        await wait_for(lambda: a.owned() == 2, 40, "a to own both again")
        await produce(bootstrap, topic, [b"p0"] * 5, partition=0)
        await produce(bootstrap, topic, [b"p1"] * 5, partition=1)
        await wait_for(lambda: any(s[1] == 1 for s in a.seen), 20, "partition 1")
        await asyncio.sleep(1.0)
        assert not any(s[1] == 0 for s in a.seen), "a paused partition was consumed"
        member.resume({topic: [0]})
        await wait_for(lambda: any(s[1] == 0 for s in a.seen), 20, "partition 0 after resume")


async def test_killed_member_partitions_move_to_the_survivor(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """kill -9 of a member process: after the session timeout the survivor takes its
    partitions and resumes from the committed offsets; nothing is lost."""
    topic = await new_topic(partitions=4)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(400)])
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.member_process",
        bootstrap,
        group,
        topic,
        stdout=asyncio.subprocess.PIPE,
        cwd=str(Path(__file__).parents[2]),
    )
    child_seen: list[tuple[str, int, int]] = []
    child_claims: list[dict[str, list[int]]] = []

    async def read_child() -> None:
        assert child.stdout is not None
        async for line in child.stdout:
            event = json.loads(line)
            if "claims" in event:
                child_claims.append(event["claims"])
            elif "p" in event:  # a handled batch (not a revoked or lost event)
                child_seen.extend((topic, event["p"], o) for o in event["offsets"])

    reader = asyncio.create_task(read_child())
    survivor = Recorder("survivor")
    try:
        async with running_member(bootstrap, group, [topic], survivor):
            await wait_for(
                lambda: (
                    survivor.owned() == 2
                    and bool(child_claims)
                    and sum(len(p) for p in child_claims[-1].values()) == 2
                ),
                60,
                "the child and the survivor to split",
            )
            await wait_for(lambda: len(child_seen) + len(survivor.seen) >= 400, 30, "the first 400")
            child.kill()
            await child.wait()
            killed = time.monotonic()
            await produce(bootstrap, topic, [str(i).encode() for i in range(400, 600)])
            await wait_for(lambda: survivor.owned() == 4, 60, "the survivor to take over")
            took = time.monotonic() - killed
            await wait_for(
                lambda: len({s for s in child_seen + survivor.seen}) >= 600, 30, "every message"
            )
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        reader.cancel()
    handled = offsets_by_partition(child_seen + survivor.seen)
    assert sum(len(c) for c in handled.values()) == 600, "a message was lost"
    # The child committed after every batch it printed: the survivor repeats none of them.
    assert not set(child_seen) & set(survivor.seen)
    assert took >= group_config().consumer.group.session_timeout * 0.5, took


class Blocker(Recorder):
    """Blocks the event loop on its first message until the watchdog has reported it."""

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            deadline = time.monotonic() + 30
            while not self.seen and not session.watchdog.stalls and time.monotonic() < deadline:
                time.sleep(0.05)  # noqa: ASYNC251 - blocking on purpose
            self.seen.append((msg.topic, msg.partition, msg.offset))
            session.mark_message(msg)


async def test_a_handler_blocking_the_loop_is_reported_by_name(
    bootstrap: str, new_topic: TopicFactory, caplog: pytest.LogCaptureFixture
) -> None:
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"x"] * 3)
    handler = Blocker()
    caplog.set_level("WARNING", logger="consumergroup.group.watchdog")
    async with running_member(bootstrap, unique(), [topic], handler) as (member, _):
        await wait_for(lambda: len(handler.seen) == 3, 30, "the messages")
        session = member.session
        assert session is not None and session.watchdog.stalls >= 1
    reports = [r.getMessage() for r in caplog.records if "event loop blocked" in r.getMessage()]
    assert reports and f"in consume_claim for {topic}/0" in reports[0], reports
