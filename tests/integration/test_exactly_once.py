"""Exactly-once owned by the runtime: ``ConsumerGroup(producer=...)`` copiers (input ->
handler -> ``session.send`` -> output), the output read back ``read_committed``: every
input record exactly once, through a second member joining, a member SIGKILLed in the
middle of its transaction, and a handler that raises.

The tests with an abort run on Apache Kafka only: Tansu answers the transaction requests
but keeps no transaction markers, so its ``read_committed`` readers see aborted records
too. The copy without an abort runs on both brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import struct
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.errors import ConfigurationError, ConsumerGroupError
from consumergroup.integrations._service import ServiceHealth
from consumergroup.net.fetch import _uvarint
from consumergroup.retry import is_transient
from tests.conftest import TopicFactory, unique
from tests.helpers import ProxyLink, RoutingProxy, produce, read_committed_values
from tests.integration.copier_process import Copier
from tests.integration.group_support import consumer_protocol_config, group_config, wait_for

pytestmark = pytest.mark.timeout(300)  # the first one starts Kafka: slow at high load

ROOT = str(Path(__file__).parents[2])
OUT_PARTITIONS = 2
KAFKA_ONLY = pytest.mark.kafka_only("Tansu keeps no transaction markers: read_committed sees all")


def eos_config(protocol: str = "classic", **overrides: object) -> cg.Config:
    make = consumer_protocol_config if protocol == "consumer" else group_config
    config = make(**overrides)
    config.producer.transactional_id = unique("tid")
    config.producer.transaction_timeout = 10.0
    return config


@contextlib.asynccontextmanager
async def copier(
    bootstrap: str,
    group: str,
    source: str,
    handler: cg.ConsumerGroupHandler,
    config: cg.Config,
) -> AsyncIterator[cg.ConsumerGroup]:
    """A running exactly-once member with its own transactional producer."""
    async with cg.Producer([bootstrap], config) as producer:
        member = cg.ConsumerGroup([bootstrap], group, config, producer=producer)
        task = asyncio.create_task(member.run([source], handler))
        try:
            yield member
        finally:
            await asyncio.wait_for(member.close(), 30)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)


async def committed_through(bootstrap: str, group: str, count: int) -> None:
    """Wait until the group's committed offsets add up to ``count`` (the whole input: the
    copies of records read again after an abort count more than once in ``copied``)."""
    async with ClusterAdmin([bootstrap]) as admin, asyncio.timeout(120):
        while True:
            try:
                if sum((await admin.list_consumer_group_offsets(group)).values()) >= count:
                    return
            except ConsumerGroupError as exc:  # a coordinator still loading, at high load
                if not is_transient(exc):
                    raise
            await asyncio.sleep(0.2)  # the broker decides: no event tells us


def assert_exactly_once(values: list[bytes], count: int) -> None:
    counts = Counter(values)
    twice = sorted(v for v, n in counts.items() if n > 1)
    missing = sorted({b"%d" % i for i in range(count)} - set(counts))
    assert (twice[:10], missing[:10], len(values)) == ([], [], count)


async def inputs(bootstrap: str, topic: str, count: int) -> None:
    await produce(
        bootstrap, topic, [b"%d" % i for i in range(count)], keys=[b"k%d" % i for i in range(count)]
    )


async def test_a_copier_writes_every_record_once(bootstrap: str, new_topic: TopicFactory) -> None:
    """The plain copy, on both brokers: the output holds each input once, the group's
    committed offsets (from the transactions) are at the end of the input."""
    source, out = await new_topic(partitions=3), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    await inputs(bootstrap, source, 300)
    handler = Copier(out)
    async with copier(bootstrap, group, source, handler, eos_config()) as member:
        await wait_for(lambda: handler.copied >= 300, 60, "300 records copied")
        session = member.session
        assert session is not None and session.transaction is not None
        await session.commit()
        assert session.transaction.commits >= 1
    assert_exactly_once(await read_committed_values(bootstrap, out, OUT_PARTITIONS), 300)
    await committed_through(bootstrap, group, 300)


@KAFKA_ONLY
async def test_a_handler_error_aborts_and_the_claims_are_read_again(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The handler raises after sending record 150's copy: the transaction aborts (that
    copy and every other since the last commit vanish), every claim restarts from the
    last commit, the error reaches errors(); the output still holds each input once."""
    source, out = await new_topic(partitions=3), await new_topic(partitions=OUT_PARTITIONS)
    await inputs(bootstrap, source, 300)
    handler = Copier(out, fail_on=b"150")
    config = eos_config(consumer__return_errors=True)
    group = unique("eos")
    async with copier(bootstrap, group, source, handler, config) as member:
        errors: list[cg.ConsumerError] = []

        async def collect() -> None:
            async for err in member.errors():
                errors.append(err)

        collector = asyncio.create_task(collect())
        await committed_through(bootstrap, group, 300)
        await wait_for(lambda: bool(errors), 30, "the error")
        session = member.session
        assert session is not None and session.transaction is not None
        assert session.transaction.aborts >= 1
        collector.cancel()
    assert "the handler fails once" in str(errors[0].cause)
    assert_exactly_once(await read_committed_values(bootstrap, out, OUT_PARTITIONS), 300)


async def test_aborts_without_progress_back_off_and_fail_readiness(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A handler raising after its send on every attempt: each abort holds back the
    claims' restart longer (the retry policy's back-off, no spin), from the third in a
    row the group reports it on errors() and /health/ready answers 503 with the reason;
    once the handler is fixed, the next commit ends the streak and it is ready again.
    Both brokers: this is about the aborts, not what read_committed shows."""
    source, out = await new_topic(partitions=1), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    await inputs(bootstrap, source, 30)
    handler = Copier(out)
    handler.broken = True
    base = 0.05
    config = eos_config(consumer__return_errors=True, consumer__retry__backoff=base)
    async with copier(bootstrap, group, source, handler, config) as member:
        health = ServiceHealth([member], metrics=False)
        errors: list[cg.ConsumerError] = []

        async def collect() -> None:
            async for err in member.errors():
                errors.append(err)

        collector = asyncio.create_task(collect())
        await wait_for(lambda: handler.failures >= 1, 60, "the first failure")
        first = asyncio.get_running_loop().time()
        await wait_for(lambda: member.stats().transaction_aborts >= 6, 60, "six aborts")
        # Each abort k held every restart back at least base * 2**(k-1) / 2 (equal jitter).
        elapsed = asyncio.get_running_loop().time() - first
        assert elapsed >= base * (1 + 2 + 4 + 8 + 16) / 2 - 0.05  # less the poll above
        assert handler.failures <= member.stats().transaction_aborts + 1
        status, body = health.ready()
        assert status == 503
        (stats,) = body["groups"]
        assert not stats["ready"] and stats["transaction_aborts"] >= 6
        assert "raised" in stats["error"]
        await wait_for(lambda: any("times in a row" in str(e) for e in errors), 10, "the report")

        handler.broken = False
        await wait_for(lambda: health.ready()[0] == 200, 60, "ready again")
        assert member.stats().transaction_aborts == 0
        collector.cancel()
    await committed_through(bootstrap, group, 30)


@KAFKA_ONLY
@pytest.mark.parametrize("protocol", ["eager", "cooperative", "consumer"])
async def test_a_second_member_joining_moves_partitions_exactly_once(
    bootstrap: str, new_topic: TopicFactory, protocol: str
) -> None:
    """A second copier joins while the first copies: the partitions that move are
    committed in the first member's transaction before they go (or aborted and read
    again by the new owner); the output holds each input once."""
    source, out = await new_topic(partitions=4), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    count = 600
    await inputs(bootstrap, source, count)
    first, second = Copier(out, delay=0.01), Copier(out, delay=0.01)

    def config() -> cg.Config:
        made = eos_config("consumer" if protocol == "consumer" else "classic")
        if protocol == "cooperative":
            made.consumer.group.rebalance.strategies = [cg.CooperativeStickyAssignor()]
        return made

    async with copier(bootstrap, group, source, first, config()):
        await wait_for(lambda: first.copied >= 50, 60, "the first copier under way")
        async with copier(bootstrap, group, source, second, config()):
            await wait_for(lambda: second.copied >= 1, 60, "the second copier under way")
            await committed_through(bootstrap, group, count)
    assert_exactly_once(await read_committed_values(bootstrap, out, OUT_PARTITIONS), count)


@KAFKA_ONLY
@pytest.mark.parametrize("fault", ["sigkill", "zombie"])
async def test_a_member_killed_mid_transaction_loses_nothing_and_doubles_nothing(
    bootstrap: str, new_topic: TopicFactory, fault: str
) -> None:
    """A copier in its own process is SIGKILLed with a transaction open (``sigkill``), or
    frozen with SIGSTOP past its session timeout and thawed once its partitions have moved
    (``zombie``: it wakes inside its transaction, which the coordinator aborted on its
    timeout and whose generation is over: what it sends and commits after the move is
    fenced, never visible). The surviving member takes the partitions once that
    transaction is aborted (KIP-447's stable offset fetch waits for it) and copies on from
    the last commit: the output holds each input once."""
    source, out = await new_topic(partitions=4), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    count = 400
    await inputs(bootstrap, source, count)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.copier_process",
        bootstrap,
        group,
        source,
        out,
        unique("tid"),
        "--delay",
        "0.02",
        "--transaction-timeout",
        "6",
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        async with asyncio.timeout(90):
            while True:
                line = await child.stdout.readline()
                assert line, "the copier process ended early"
                if json.loads(line)["copied"] >= 60:
                    break
        survivor = Copier(out)
        async with copier(bootstrap, group, source, survivor, eos_config()) as member:
            await wait_for(lambda: survivor.copied >= 1, 60, "the survivor under way")
            if fault == "sigkill":
                child.kill()  # its transaction is open: a record of it is being handled
                await child.wait()
            else:
                child.send_signal(signal.SIGSTOP)

                def owns_all() -> bool:
                    session = member.session
                    return session is not None and sum(map(len, session.claims.values())) == 4

                await wait_for(owns_all, 90, "the survivor owning every partition")
                child.send_signal(signal.SIGCONT)
            # What the child copied but did not commit is read again: wait for the end.
            await committed_through(bootstrap, group, count)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert_exactly_once(await read_committed_values(bootstrap, out, OUT_PARTITIONS), count)


class Holder(cg.ConsumerGroupHandler):
    """Copies; on the record ``b"hold"`` it stops between its send and its mark until
    ``release`` is set."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.copied: list[bytes] = []

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        async for msg in claim.messages():
            assert msg.value is not None
            await session.send(self.out, msg.value)
            if msg.value == b"hold":
                self.holding.set()
                await self.release.wait()
            session.mark_message(msg)
            self.copied.append(msg.value)


async def test_a_commit_point_waits_for_a_handler_between_send_and_mark(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A commit point reached while one claim's handler is between its send and its mark
    waits for that mark (a commit between them would make the copy visible with its
    record not committed: read again, copied twice), and meanwhile holds back every other
    claim's next record (the delivery gate)."""
    source, out = await new_topic(partitions=2), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    await produce(bootstrap, source, [b"hold"], partition=0)
    handler = Holder(out)
    config = eos_config(consumer__offsets__auto_commit__enable=False)
    async with copier(bootstrap, group, source, handler, config) as member:
        await asyncio.wait_for(handler.holding.wait(), 60)
        session = member.session
        assert session is not None
        commit = asyncio.create_task(session.commit())
        await produce(bootstrap, source, [b"late"], partition=1)
        # An absence over a window: the commit waits for the holder, the gate holds "late".
        done, _ = await asyncio.wait({commit}, timeout=3.0)
        assert (done, handler.copied) == (set(), [])
        handler.release.set()
        await asyncio.wait_for(commit, 30)
        await wait_for(lambda: handler.copied == [b"hold", b"late"], 30, "both copied")
    assert sorted(await read_committed_values(bootstrap, out, OUT_PARTITIONS)) == [b"hold", b"late"]
    await committed_through(bootstrap, group, 2)


class CommittingCopier(cg.ConsumerGroupHandler):
    """Copies and commits after every ``every`` records of its claim and at its end
    (``session.commit()`` from the handler, every claim doing so)."""

    def __init__(self, out: str, every: int) -> None:
        self.out = out
        self.every = every
        self.copied = 0

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        handled = 0
        async for msg in claim.messages():
            await session.send(self.out, msg.value)
            session.mark_message(msg)
            self.copied += 1
            handled += 1
            await asyncio.sleep(0.001)  # some I/O of the handler's, holding the record
            if handled % self.every == 0 or msg.offset + 1 >= claim.high_water_mark_offset:
                await session.commit()


async def test_handlers_committing_at_once_do_not_wait_for_each_other(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """Each claim's handler calls session.commit() between its records: two commits asked
    at once must not each wait for the other's handler to ask for its next record."""
    source, out = await new_topic(partitions=4), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    await inputs(bootstrap, source, 200)
    handler = CommittingCopier(out, every=5)
    config = eos_config(consumer__offsets__auto_commit__enable=False)
    async with copier(bootstrap, group, source, handler, config):
        await committed_through(bootstrap, group, 200)
    assert sorted(await read_committed_values(bootstrap, out, OUT_PARTITIONS)) == sorted(
        b"%d" % i for i in range(200)
    )


_TXN_OFFSET_COMMIT = 28
_INVALID_COMMIT_OFFSET_SIZE = 28


def _refused(frame: bytes, code: int) -> bytes:
    """A TxnOffsetCommit answer (v3+: flexible) with every partition's error ``code``."""
    buf = bytearray(frame)
    view = memoryview(frame)
    _, pos = _uvarint(view, 4)  # after the correlation id: the header's tagged fields
    topics, pos = _uvarint(view, pos + 4)  # after throttle_time_ms
    for _ in range(topics - 1):
        name, pos = _uvarint(view, pos)
        parts, pos = _uvarint(view, pos + name - 1)
        for _ in range(parts - 1):
            struct.pack_into(">h", buf, pos + 4, code)
            _, pos = _uvarint(view, pos + 6)
        _, pos = _uvarint(view, pos)
    return bytes(buf)


class HeldCommitProxy(RoutingProxy):
    """The member's only path to the broker; once ``armed``, it holds the next
    TxnOffsetCommit answer (``holding`` set) until ``release`` is set, then forwards it,
    every partition refused with ``refuse`` when that is set."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.armed = False
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.refuse: int | None = None
        self._held: bytes | None = None

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        frame = super().rewrite_response(key, version, client_id, frame)
        if key == _TXN_OFFSET_COMMIT and self.armed:
            assert version >= 3, version
            self.armed = False
            self._held = frame[:4]
        return frame

    async def forward_response(self, link: ProxyLink, frame: bytes) -> None:
        if self._held is not None and frame[:4] == self._held:
            self._held = None
            self.holding.set()
            await self.release.wait()
            if self.refuse is not None:
                frame = _refused(frame, self.refuse)
        await super().forward_response(link, frame)


async def test_handlers_go_on_into_the_next_transaction_while_one_commits(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A commit point cuts the transaction once no handler holds a record, then ends it
    while the handlers go on into the next one (their records held in the producer
    until it has ended, their marks left to the next commit): records arriving while
    the commit's TxnOffsetCommit answer is held up are copied meanwhile; the commit
    completes, then the next; the output, read read_committed, holds every input once."""
    await copy_around_a_held_commit(bootstrap, new_topic, refused=False)


@KAFKA_ONLY
async def test_a_commit_refused_while_handlers_go_on_aborts_both_transactions(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """The same, the held TxnOffsetCommit then refused: the transaction aborts with the
    next one's records (sent meanwhile, held in the producer) taken into it, every claim
    is read again from the last commit: nothing of either is lost or written twice."""
    await copy_around_a_held_commit(bootstrap, new_topic, refused=True)


async def copy_around_a_held_commit(
    bootstrap: str, new_topic: TopicFactory, *, refused: bool
) -> None:
    """300 records copied, then a commit whose TxnOffsetCommit answer the proxy holds
    while 100 more arrive and are copied, then let through (refused when ``refused``)."""
    source, out = await new_topic(partitions=3), await new_topic(partitions=OUT_PARTITIONS)
    group = unique("eos")
    await inputs(bootstrap, source, 300)
    handler = Copier(out)
    config = eos_config(consumer__return_errors=True)
    port = int(bootstrap.rsplit(":", 1)[1])
    async with (
        HeldCommitProxy(port) as proxy,
        copier(proxy.address, group, source, handler, config) as member,
    ):
        await wait_for(lambda: handler.copied >= 300, 60, "the first 300 copied")
        proxy.refuse = _INVALID_COMMIT_OFFSET_SIZE if refused else None
        proxy.armed = True
        await asyncio.wait_for(proxy.holding.wait(), 30)
        session = member.session
        assert session is not None and session.transaction is not None
        commits, aborts = session.transaction.commits, session.transaction.aborts
        before = handler.copied
        await produce(
            bootstrap,
            source,
            [b"%d" % i for i in range(300, 400)],
            keys=[b"k%d" % i for i in range(300, 400)],
        )
        # While the commit waits for its answer, the handlers copy the new records.
        await wait_for(lambda: handler.copied >= before + 100, 30, "100 copied meanwhile")
        assert (session.transaction.commits, session.transaction.aborts) == (commits, aborts)
        proxy.release.set()
        if refused:
            await wait_for(lambda: session.transaction.aborts > aborts, 30, "the abort")
        await committed_through(bootstrap, group, 400)
        assert session.transaction.commits > commits
    assert_exactly_once(await read_committed_values(bootstrap, out, OUT_PARTITIONS), 400)


async def test_a_producer_that_is_not_transactional_is_refused(bootstrap: str) -> None:
    """ConsumerGroup(producer=...) needs a transactional producer; session.send() needs
    the producer: each is a clear ConfigurationError."""
    async with cg.Producer([bootstrap], cg.Config()) as producer:
        with pytest.raises(ConfigurationError, match="transactional_id"):
            cg.ConsumerGroup([bootstrap], unique("eos"), cg.Config(), producer=producer)
    with pytest.raises(ConfigurationError, match="a transactional cg"):
        cg.ConsumerGroup([bootstrap], unique("eos"), cg.Config(), producer=object())  # type: ignore[arg-type]
