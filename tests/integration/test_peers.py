"""Real peers in our groups: Go's sarama and franz-go, Java's ``KafkaConsumer``, with ours.

Needs a real cluster: the Java consumer cannot join a group on the embedded Tansu broker,
and the point is the real group coordinator running the peers' and our assignors side by
side. The peers are the programs of :mod:`tests.peers`, built once into ``.cache/peers`` (the
first build, in the first test, takes a minute or two: hence the long timeout).

Each test covers both directions of leadership: a peer joins first and leads the group
(its assignor assigns to our member), leaves, then a peer joins our group, which our
member now leads (on the consumer protocol, KIP-848, the broker assigns: Java's consumer
only). Records are produced the whole time. At the end: every record was
handled by some member, the group's commits equal the log ends, and no partition was
owned by two members at once, so never twice in one generation; every hand-over being
graceful, no record was handled twice either.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Sequence

import pytest
from aiokafka import AIOKafkaProducer

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.testing import KafkaCluster
from tests.conftest import unique
from tests.helpers import produce
from tests.integration.group_support import consumer_protocol_config, group_config, wait_for
from tests.peers import PeerProcess, PeerUnavailable, build

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.timeout(600)]

TP = tuple[str, int]
PARTITIONS = 6


class Ours(cg.ConsumerGroupHandler):
    """Our member: records every message and its ownership intervals (monotonic clock)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int]] = []
        #: partition -> [start, end] of each ownership (end None while owned)
        self.intervals: dict[int, list[list[float | None]]] = {}

    def owned(self) -> set[int]:
        return {p for p, spans in self.intervals.items() if spans and spans[-1][1] is None}

    async def on_assigned(self, session: cg.ConsumerGroupSession, partitions: Sequence[TP]) -> None:
        for _, p in partitions:
            self.intervals.setdefault(p, []).append([time.monotonic(), None])

    async def on_revoked(self, session: cg.ConsumerGroupSession, partitions: Sequence[TP]) -> None:
        self._end(partitions)

    async def on_lost(self, partitions: Sequence[TP]) -> None:
        self._end(partitions)

    def _end(self, partitions: Sequence[TP]) -> None:
        for _, p in partitions:
            self.intervals[p][-1][1] = time.monotonic()

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            self.records.append((msg.partition, msg.offset))
            session.mark_message(msg)


def peer_intervals(peer: PeerProcess, until: float) -> dict[int, list[list[float | None]]]:
    """A peer's ownership intervals from its assigned/revoked/lost events."""
    spans: dict[int, list[list[float | None]]] = {}
    for e in peer.events:
        if e["ev"] == "assigned":
            for p in e["parts"]:
                spans.setdefault(p, []).append([e["t"], None])
        elif e["ev"] in ("revoked", "lost"):
            for p in e["parts"]:
                spans[p][-1][1] = e["t"]
    for owned in spans.values():  # a peer killed while owning: until the end
        if owned and owned[-1][1] is None:
            owned[-1][1] = until
    return spans


def assert_never_owned_twice(members: dict[str, dict[int, list[list[float | None]]]]) -> None:
    """No partition in two members' ownership intervals at the same time."""
    for p in range(PARTITIONS):
        spans = sorted(
            (start, end, name)
            for name, by_p in members.items()
            for start, end in by_p.get(p, [])
            if start is not None and end is not None
        )
        for (s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(spans):
            assert e1 <= s2, (
                f"partition {p} owned by {n1} ({s1:.3f}-{e1:.3f}) and {n2} from {s2:.3f}"
            )


class Feeder:
    """Produces numbered records round robin over the partitions until stopped (acks=all)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            i = 0
            while not self._stop.is_set():
                futures = [
                    await producer.send(
                        self.topic, str(i + n).encode(), partition=(i + n) % PARTITIONS
                    )
                    for n in range(30)
                ]
                await asyncio.gather(*futures)
                i += 30
                self.acked = i
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 0.05)
        finally:
            await producer.stop()

    def stop(self) -> None:
        self._stop.set()


@contextlib.asynccontextmanager
async def feeding(bootstrap: str, topic: str) -> AsyncIterator[Feeder]:
    feeder = Feeder(bootstrap, topic)
    task = asyncio.create_task(feeder.run())
    try:
        yield feeder
    finally:
        feeder.stop()
        await asyncio.wait_for(task, 30)


def peer_args(bootstrap: str, topic: str, group: str, assignor: str) -> list[str]:
    """The peer's command line: ``assignor`` "consumer" is the KIP-848 protocol (Java only)."""
    args = [
        "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--records",
        "--session-timeout", "6", "--heartbeat", "0.5", "--rebalance-timeout", "10",
    ]  # fmt: skip
    if assignor == "consumer":
        return [*args, "--protocol", "consumer"]
    return [*args, "--assignor", assignor]


def our_config(assignor: str) -> cg.Config:
    """Our member's config for the same strategy (or protocol) as the peer's."""
    if assignor == "consumer":
        return consumer_protocol_config()
    strategy = cg.RangeAssignor() if assignor == "range" else cg.CooperativeStickyAssignor()
    return group_config(consumer__group__rebalance__strategies=[strategy])


@pytest.fixture
def peer_kind(request: pytest.FixtureRequest) -> str:
    """Each peer, built once (skipped with the reason when its toolchain is missing)."""
    kind: str = request.param
    try:
        build(kind)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    return kind


@pytest.mark.parametrize(
    ("peer_kind", "assignor"),
    [
        ("sarama", "range"),
        ("sarama", "cooperative-sticky"),
        ("franz", "range"),
        ("franz", "cooperative-sticky"),
        ("java", "range"),
        ("java", "cooperative-sticky"),
        ("java", "consumer"),  # KIP-848: the broker assigns; no member leads
    ],
    indirect=["peer_kind"],
)
async def test_a_peer_joins_and_leaves_our_group_in_both_directions_of_leadership(
    kafka_cluster: KafkaCluster, peer_kind: str, assignor: str
) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = unique("peers")
    group = unique("g-peers")
    await kafka_cluster.create_topic(topic, PARTITIONS)
    config = our_config(assignor)
    ours = Ours()
    args = peer_args(bootstrap, topic, group, assignor)
    first = await PeerProcess(peer_kind, args).start()
    second = PeerProcess(peer_kind, args)
    member = cg.ConsumerGroup([bootstrap], group, config)
    run: asyncio.Task[None] | None = None
    try:
        async with feeding(bootstrap, topic) as feeder:
            # 1. The peer is alone: it leads and owns everything.
            await wait_for(
                lambda: first.owned() == set(range(PARTITIONS)), 60, "the peer to own all"
            )
            # 2. Ours joins the peer's group: the peer's assignor splits the partitions.
            run = asyncio.create_task(member.run([topic], ours))
            await wait_for(
                lambda: ours.owned() and first.owned()
                and ours.owned() | first.owned() == set(range(PARTITIONS)),
                60,
                "the peer (leading) to share the partitions with ours",
            )  # fmt: skip
            # 3. The peer leaves; ours takes everything and now leads.
            assert await first.stop() == 0, first.stderr.decode()[-3000:]
            await wait_for(lambda: ours.owned() == set(range(PARTITIONS)), 60, "ours to own all")
            # 4. A peer joins the group ours leads; our assignor gives it a share.
            await second.start()
            await wait_for(
                lambda: ours.owned() and second.owned()
                and ours.owned() | second.owned() == set(range(PARTITIONS)),
                60,
                "ours (leading) to share the partitions with the peer",
            )  # fmt: skip
            mark = len(second.records)
            await wait_for(lambda: len(second.records) > mark, 30, "the peer to consume")
            assert await second.stop() == 0, second.stderr.decode()[-3000:]
            await wait_for(lambda: ours.owned() == set(range(PARTITIONS)), 60, "ours to own all")
        acked = feeder.acked
        async with ClusterAdmin([bootstrap]) as admin:
            ends = await admin.end_offsets([(topic, p) for p in range(PARTITIONS)])
            assert sum(ends.values()) == acked
            seen = lambda: set(ours.records) | set(first.records) | set(second.records)  # noqa: E731
            await wait_for(
                lambda: len(seen()) == acked, 60, "every record to be handled by some member"
            )
            await asyncio.wait_for(member.close(), 30)
            committed = await admin.list_consumer_group_offsets(group)
        assert committed == ends
        assert seen() == {(p, o) for (_, p), end in ends.items() for o in range(end)}
        # Every hand-over was graceful (commit, then rejoin): nothing was handled twice.
        assert len(ours.records) + len(first.records) + len(second.records) == acked
        until = time.monotonic()
        assert_never_owned_twice(
            {
                "ours": ours.intervals,
                "first peer": peer_intervals(first, until),
                "second peer": peer_intervals(second, until),
            }
        )
        for peer in (first, second):
            assert peer.has("closed"), peer.events[-3:]
    finally:
        for peer in (first, second):
            if peer.running:
                await peer.stop()
        await asyncio.wait_for(member.close(), 30)
        if run is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(run, 10)


@pytest.mark.parametrize("peer_kind", ["sarama", "franz", "java"], indirect=True)
async def test_a_peer_in_throughput_mode_reads_to_expect_and_reports_its_rate(
    kafka_cluster: KafkaCluster, peer_kind: str
) -> None:
    """The benchmarks' use of the peers: count to --expect, report, exit on its own."""
    topic = unique("peers-tp")
    await kafka_cluster.create_topic(topic, 3)
    await produce(kafka_cluster.bootstrap, topic, [b"x" * 100] * 3000)
    peer = PeerProcess(peer_kind, [
        "--bootstrap", kafka_cluster.bootstrap, "--topic", topic, "--group", unique(),
        "--mode", "throughput", "--expect", "3000",
    ])  # fmt: skip
    await peer.start()
    try:
        await wait_for(lambda: peer.has("closed"), 60, "the peer to report and close")
    finally:
        code = await peer.stop()
    assert code == 0, peer.stderr.decode()[-3000:]
    [result] = [e for e in peer.events if e["ev"] == "result"]
    assert result["count"] >= 3000 and result["t_last"] >= result["t_first"] > 0
    assert result["cpu_user"] + result["cpu_sys"] > 0 and result["maxrss_kb"] > 0
