"""A claim's state is fixed before anything can move it: its start offset (and first mark),
its paused flag and its revocation, whatever else the member awaits meanwhile; and a
handler that will not end cannot hold its session, or the loop."""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.testing import KafkaCluster
from tests.conftest import TopicFactory, unique
from tests.helpers import RoutingProxy, produce
from tests.integration.cluster_proxy import FakeCluster
from tests.integration.group_support import (
    consumer_protocol_config,
    group_config,
    running_member,
    wait_for,
)
from tests.integration.test_connection import split
from tests.integration.test_consumer_protocol import new_kafka_topic
from tests.integration.test_examples import committed

pytestmark = pytest.mark.timeout(120)

#: The repository (``tests`` is imported from there by the child process).
ROOT = Path(__file__).resolve().parents[2]


class HandlesTen(cg.ConsumerGroupHandler):
    """Handles (and marks) the first ten records of partition 0, then holds until the
    session ends; records the claims' initial offsets."""

    def __init__(self) -> None:
        self.handled: list[int] = []
        self.initial: dict[int, int] = {}

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        self.initial[claim.partition] = claim.initial_offset
        if claim.partition == 0:
            async for msg in claim.messages():
                self.handled.append(msg.offset)
                session.mark_message(msg)
                if len(self.handled) == 10:
                    break
        await session.done.wait()


def on_fetch_dial(
    cluster: FakeCluster, resolved_by: int, action: Callable[[], Awaitable[None]]
) -> None:
    """Run ``action`` while the member dials its fetch connection, between resolving its
    claims' start offsets (the first answer of api key ``resolved_by``: 1, the probe Fetch of
    committed offsets, or 2, ListOffsets) and routing them: that dial is the next one."""
    resolved = False

    def watch(key: int, version: int, frame: bytes) -> bytes:
        nonlocal resolved
        resolved = resolved or key == resolved_by
        return frame

    async def hold(node: int) -> None:
        nonlocal resolved
        if resolved:
            resolved = False
            await action()

    cluster.rewrite_response = watch
    cluster.on_accept = hold


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_claim_starts_where_it_was_resolved_while_another_waits_for_its_leader(
    bootstrap: str, new_topic: TopicFactory, on_tansu: bool, protocol: str
) -> None:
    """Partition 1 turns leaderless between resolving the start offsets and routing them to
    the fetch tasks (the member learns it from a metadata refresh while it dials its fetch
    connection): routing it waits ~0.75 s for a leader while partition 0, routed first, is
    already fetched. The claim on partition 0 must start, and mark, at 0, where it was
    resolved: before the fix it took the moved fetch position (200), the first commit stored
    it and offsets 10-199 were never handled by anyone. On both protocols (the consumer
    protocol on Apache Kafka only: Tansu has no KIP-848); the partitions a cooperative or
    KIP-848 member is given later are opened by the same ``open_claims``."""
    if protocol == "consumer" and on_tansu:
        pytest.skip("Tansu has no consumer group protocol (KIP-848)")
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [b"%d" % i for i in range(200)], partition=0)
    group = unique()
    patient = cg.Config()
    patient.consumer.offsets.retry.max = 40  # a Kafka just started may still load its groups
    async with ClusterAdmin([bootstrap], patient) as admin:
        # Committed offsets start the partitions in assignment order (0 first) with one probe.
        await admin.commit_offsets(group, {(topic, 0): 0, (topic, 1): 0})
    config = consumer_protocol_config() if protocol == "consumer" else group_config()
    handler = HandlesTen()
    async with FakeCluster(split(bootstrap)[1], nodes=1) as cluster:
        member = cg.ConsumerGroup([cluster.address()], group, config)

        async def lose_leader() -> None:
            cluster.leaders[(topic, 1)] = -1
            await member._client.refresh_metadata(topic)

        on_fetch_dial(cluster, 1, lose_leader)
        task = asyncio.create_task(member.run([topic], handler))
        try:
            await wait_for(lambda: len(handler.handled) == 10, 30, "ten records handled")
            cluster.leaders.pop((topic, 1))
        finally:
            await asyncio.wait_for(member.close(), 30)
            await asyncio.wait_for(task, 10)
    done = (await committed(bootstrap, group, topic, 2))[0]
    assert done == 10, f"committed {done} with only {handler.handled} handled"
    assert set(range(done)) <= set(handler.handled)
    assert handler.initial[0] == 0


class ReturnsOnce(cg.ConsumerGroupHandler):
    """Handles (and marks) every record; its first consume_claim returns after five, so the
    claim restarts, and calls ``returning`` first."""

    def __init__(self, returning: Callable[[], None] = lambda: None) -> None:
        self.returning = returning
        self.handled: list[int] = []
        self.runs = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        self.runs += 1
        async for msg in claim.messages():
            self.handled.append(msg.offset)
            session.mark_message(msg)
            if self.runs == 1 and len(self.handled) == 5:
                self.returning()
                return


class _Restarting(logging.Handler):
    """Calls ``then`` when the reconciler logs that it restarts a claim (right before it
    starts the claim's new partition consumer)."""

    def __init__(self, then: Callable[[], None]) -> None:
        super().__init__()
        self.then = then

    def emit(self, record: logging.LogRecord) -> None:
        if "restarting it after" in record.getMessage():
            self.then()


@pytest.mark.parametrize("call", ["resume", "pause"])
async def test_a_pause_or_resume_while_a_claim_restarts_reaches_its_new_claim(
    bootstrap: str, new_topic: TopicFactory, call: str
) -> None:
    """The user resumes (or pauses) the partition while its claim restarts: at the restart's
    first suspension, which is the probe Fetch that range-checks the restart offset when the
    old claim knew no leader epoch for it, and otherwise (KIP-320: the new claim's first
    fetch validates the offset, nothing goes on the wire first) the routing of the new
    claim or its start. Before the fix the restart had read the old claim's paused flag
    before its awaits, and resume() reached only the old (stopped) claim: the partition
    stayed paused for good while ``paused()`` was empty (or was fetched while paused)."""
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"%d" % i for i in range(10)], partition=0)
    partitions = {topic: [0]}
    config = group_config()
    config.consumer.retry.backoff = 1.0  # the stopped claim's last fetch is over by then
    called = False
    async with FakeCluster(split(bootstrap)[1], nodes=1) as cluster:
        member = cg.ConsumerGroup([cluster.address()], unique(), config)

        def user_call() -> None:
            nonlocal called
            called = True
            member.resume(partitions) if call == "resume" else member.pause(partitions)

        def soon() -> None:
            # Logged by the restarting task right before it starts the new claim: the
            # user's call runs as soon as that task first suspends.
            asyncio.get_running_loop().call_soon(user_call)

        restarting = _Restarting(soon)
        handler = ReturnsOnce(lambda: member.pause(partitions) if call == "resume" else None)
        logging.getLogger("consumergroup.group").addHandler(restarting)
        task = asyncio.create_task(member.run([topic], handler))
        try:
            await wait_for(lambda: handler.runs == 2, 30, "the claim restarted")
            assert called
            state = member.stats().partitions[(topic, 0)]
            assert state.paused == (call == "pause"), (state, member.paused())
            if call == "pause":
                member.resume(partitions)
            await wait_for(lambda: len(handler.handled) == 10, 15, "the rest handled")
        finally:
            logging.getLogger("consumergroup.group").removeHandler(restarting)
            await asyncio.wait_for(member.close(), 30)
            await asyncio.wait_for(task, 10)
    assert handler.handled == list(range(10))
    assert member.paused() == set()


async def test_a_resume_while_the_first_claims_start_reaches_them(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The partition was paused before run(); the user resumes it while the member routes its
    first claims (its fetch connection being dialed). Before the fix resume() found no session
    to apply to and the session factory only re-applied pauses: the partition was never
    fetched."""
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"%d" % i for i in range(10)], partition=0)
    partitions = {topic: [0]}
    handler = ReturnsOnce()
    handler.runs = 1  # never returns early
    async with FakeCluster(split(bootstrap)[1], nodes=1) as cluster:
        member = cg.ConsumerGroup([cluster.address()], unique(), group_config())
        member.pause(partitions)

        async def resume() -> None:
            member.resume(partitions)

        on_fetch_dial(cluster, 2, resume)
        task = asyncio.create_task(member.run([topic], handler))
        try:
            await wait_for(lambda: len(handler.handled) == 10, 20, "every record handled")
        finally:
            await asyncio.wait_for(member.close(), 30)
            await asyncio.wait_for(task, 10)
    assert handler.handled == list(range(10))


class FencingProxy(RoutingProxy):
    """A member's only path to its broker; once ``fence`` is set, it answers the member's
    next ConsumerGroupHeartbeat with FENCED_MEMBER_EPOCH (the coordinator moved it on)."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.fence = False

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """Fence the next heartbeat when told; route the rest."""
        if key == 68 and self.fence:  # correlation id, header tags, throttle, error code
            self.fence = False
            return frame[:9] + struct.pack(">h", 110) + frame[11:]
        return super().rewrite_response(key, version, client_id, frame)


class SlowToLetGo(cg.ConsumerGroupHandler):
    """Records the order of its calls. A claim revoked while the session goes on winds down
    slowly: its handler returns a second after the session has ended."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            session.mark_message(msg)
        if not session.done.is_set():  # revoked while the session runs
            self.events.append(("revoking", claim.partition))
            await session.done.wait()
            await asyncio.sleep(1.0)
        self.events.append(("returned", claim.partition))

    async def on_revoked(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        self.events.append(("on_revoked", sorted(p for _, p in partitions)))

    async def on_lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        self.events.append(("on_lost", sorted(p for _, p in partitions)))

    async def cleanup(self, session: cg.ConsumerGroupSession) -> None:
        self.events.append(("cleanup", None))


async def test_a_member_fenced_during_a_revocation_loses_that_partition_after_its_handler(
    kafka_cluster: KafkaCluster,
) -> None:
    """A consumer-protocol member is fenced while it revokes a partition whose handler is
    still winding down. Before the fix the heartbeat's end cancelled the revocation, which
    released the partition with neither on_revoked nor on_lost, and on_lost and cleanup ran
    while that handler still ran. Now the revocation becomes a loss: on_lost names it, after
    its handler returned, and cleanup comes last. Apache Kafka only: Tansu has no consumer
    group protocol (KIP-848)."""
    bootstrap = kafka_cluster.bootstrap
    topic = await new_kafka_topic(bootstrap, 2)
    group = unique()
    handler = SlowToLetGo()
    config = consumer_protocol_config()
    async with (
        FencingProxy(split(bootstrap)[1]) as proxy,
        running_member(proxy.address, group, [topic], handler, config) as (member, _),
    ):
        await wait_for(lambda: len(member.stats().partitions) == 2, 60, "both partitions")
        async with running_member(bootstrap, group, [topic], SlowToLetGo(), config):
            await wait_for(
                lambda: any(e == "revoking" for e, _ in handler.events), 60, "a revocation"
            )
            proxy.fence = True
            await wait_for(
                lambda: ("cleanup", None) in handler.events, 30, "the fenced session's end"
            )
            revoked = next(p for e, p in handler.events if e == "revoking")
            await wait_for(
                lambda: ("returned", revoked) in handler.events, 30, "the handler's return"
            )
    first = handler.events[: handler.events.index(("cleanup", None)) + 1]
    hooks = [(e, p) for e, p in first if e in ("on_revoked", "on_lost")]
    assert ("on_lost", [0, 1]) in hooks, first  # the revoking partition is lost, not dropped
    returned = [i for i, (e, _) in enumerate(first) if e == "returned"]
    assert len(returned) == 2 and max(returned) < first.index(hooks[-1]), first


async def test_a_handler_that_swallows_its_cancellation_is_abandoned_and_nothing_spins(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A consume_claim that catches CancelledError and keeps waiting (a user's bug). Before
    the fix close() gave up at its deadline but run() never returned, and anyio re-delivered
    the cancellation at every await of the handler: the process spun at 100 % CPU. Now the
    drain cancels the handler once, abandons it when its budget is spent (it runs on,
    detached: asyncio cannot kill a task), and says so once: an error on errors(),
    stats().runaway_handlers and /health/live answering 503."""
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"x"], partition=0)
    close_timeout = 4.0
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.runaway_member",
        bootstrap,
        topic,
        str(close_timeout),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["close_seconds"] < close_timeout + 1.0, result
    assert result["run_returned"] and result["run_error"] is None, result
    # A busy loop burns about one CPU second per second; waiting costs next to nothing.
    assert result["cpu_seconds"] < 0.1 * result["wall_seconds"], result
    assert result["swallowed"] == 1, result  # cancelled once, not again and again
    runaway = [e for e in result["errors"] if "ignored its cancellation" in e]
    assert len(runaway) == 1 and f"{topic}/0" in runaway[0], result["errors"]
    assert result["runaway_handlers"] == 1
    code, body = result["live"]
    assert code == 503 and body["status"] == "runaway", body
