"""Fetch v12 (flexible versions, KIP-320 diverging epochs) end to end.

On the embedded Tansu broker (it offers Fetch v0-v17): a group consumes exactly once
at the negotiated version (v12) and at forced lower maxima (v11, v4). Against the
scripted session broker: last_fetched_epoch is sent, and a log truncated below the
position (``diverging_epoch`` in the answer) moves the partition back to the
truncation point with a warning, or fails it under ``consumer.offsets.reset='error'``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import pytest

import consumergroup as cg
from consumergroup.errors import ConsumerError
from consumergroup.net import protocol
from consumergroup.net.protocol import codec_versions
from tests.conftest import TopicFactory
from tests.helpers import produce
from tests.integration.group_support import Recorder, running_member, wait_for
from tests.integration.session_broker import SessionBroker
from tests.integration.test_fetch_sessions import TOPIC, consume_all, read_exactly

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def fetch_versions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every Fetch response version decoded in this test, in order."""
    seen: list[int] = []
    decode = protocol.decode_fetch_response

    def spy(version: int, payload: bytes) -> Any:
        seen.append(version)
        return decode(version, payload)

    monkeypatch.setattr(protocol, "decode_fetch_response", spy)
    return seen


@pytest.mark.parametrize("max_version", [12, 11, 4])
async def test_group_consumes_exactly_once_at_each_fetch_version(
    bootstrap: str,
    new_topic: TopicFactory,
    monkeypatch: pytest.MonkeyPatch,
    fetch_versions: list[int],
    max_version: int,
) -> None:
    # The test hook: this client's Fetch range, as the connection negotiates with it.
    monkeypatch.setitem(codec_versions(), 1, (1, max_version))
    topic = await new_topic(partitions=3)
    count = 300
    await produce(bootstrap, topic, [f"v{i}".encode() for i in range(count)])
    handler = Recorder()
    async with running_member(bootstrap, f"g-v12-{max_version}", [topic], handler):
        await wait_for(lambda: len(handler.seen) >= count, 45, f"{count} messages")
        await asyncio.sleep(0.3)  # nothing more may come
    offsets = Counter((p, o) for _, p, o in handler.seen)
    assert len(offsets) == count and set(offsets.values()) == {1}
    assert fetch_versions and set(fetch_versions) == {max_version}


async def test_last_fetched_epoch_is_sent_and_a_truncated_log_is_followed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = SessionBroker(TOPIC, 2, 60, fetch_versions=(5, 12))
    config = cg.Config(client_id="test-v12")
    config.consumer.max_wait_time = 0.05
    async with broker, cg.Consumer([broker.address], config) as consumer:
        pcs = await consume_all(consumer, {0: 60, 1: 60})
        after = len(broker.fetches)
        await broker.wait_fetches(after + 1)
        # Once records of epoch 1 were read, v12 requests name that epoch.
        assert all(f.epochs.get((TOPIC, 0)) in (None, 1) for f in broker.fetches[after:])
        assert any(f.epochs.get((TOPIC, 0)) == 1 for f in broker.fetches)
        # A new leader cut partition 0 at 40 and wrote 30 records of epoch 2.
        with caplog.at_level(logging.WARNING, logger="consumergroup.consumer.broker"):
            broker.truncate(0, 40, 30)
            async with asyncio.timeout(20):
                got = [m async for m in _take(pcs[0], 30)]
        assert [m.offset for m in got] == list(range(40, 70))
        assert all(m.value == f"0:{m.offset}:e2".encode() for m in got)
        warning = " ".join(r.getMessage() for r in caplog.records)
        assert "log truncated" in warning and "offsets 40..59 were already delivered" in warning
        # Partition 1 was not touched: it still reads what is produced.
        broker.produce(1, 5)
        async with asyncio.timeout(20):
            assert await read_exactly(pcs[1], 65) == list(range(60, 65))


async def test_a_truncated_log_fails_the_partition_when_reset_is_error() -> None:
    broker = SessionBroker(TOPIC, 1, 20, fetch_versions=(5, 12))
    config = cg.Config(client_id="test-v12")
    config.consumer.max_wait_time = 0.05
    config.consumer.offsets.reset = "error"
    async with broker, cg.Consumer([broker.address], config) as consumer:
        pcs = await consume_all(consumer, {0: 20})
        broker.truncate(0, 10, 5)
        with pytest.raises(ConsumerError, match=r"log truncated.*offset 10"):
            async with asyncio.timeout(20):
                async for _ in pcs[0].messages():
                    raise AssertionError("no record may come from the truncated log")


async def _take(pc: cg.PartitionConsumer, n: int) -> Any:
    """The next ``n`` messages of ``pc``."""
    taken = 0
    async for msg in pc.messages():
        yield msg
        taken += 1
        if taken == n:
            return


async def test_a_diverging_epoch_at_the_position_is_sent_and_fetching_resumes() -> None:
    """The leader's epoch ends at our position but is older than our last fetched one:
    only the epoch to send changes, and the session request must carry it."""
    broker = SessionBroker(TOPIC, 1, 60, fetch_versions=(7, 12))
    config = cg.Config(client_id="test-v12")
    config.consumer.max_wait_time = 0.05
    async with broker, cg.Consumer([broker.address], config) as consumer:
        pcs = await consume_all(consumer, {0: 60})
        broker.epochs[0].append((2, 60))  # records 60..69 come in epoch 2
        broker.produce(0, 10)
        async with asyncio.timeout(20):
            assert [m.offset async for m in _take(pcs[0], 10)] == list(range(60, 70))
        # A new leader that never had epoch 2: its epoch 1 runs to 70, epoch 3 follows.
        broker.epochs[0] = [(1, 0), (3, 70)]
        broker.produce(0, 5)
        async with asyncio.timeout(20):
            assert [m.offset async for m in _take(pcs[0], 5)] == list(range(70, 75))
        assert any(f.epochs.get((TOPIC, 0)) == 1 and not f.full for f in broker.fetches)


async def test_an_epoch_given_with_a_start_offset_goes_with_the_first_fetch() -> None:
    """KIP-320 on resume (a committed offset and its epoch): the first fetch names the
    epoch; the log was truncated below the offset meanwhile, past the new log's end too,
    so the partition resumes at the divergence point (not at a range reset)."""
    broker = SessionBroker(TOPIC, 1, 20, fetch_versions=(5, 12))
    broker.truncate(0, 10, 5)  # epoch 1 ends at 10; epoch 2 wrote 10..14
    config = cg.Config(client_id="test-v12")
    config.consumer.max_wait_time = 0.05
    async with broker, cg.Consumer([broker.address], config) as consumer:
        pcs = await consumer.consume_partitions({(TOPIC, 0): 18}, epochs={(TOPIC, 0): 1})
        async with asyncio.timeout(20):
            got = [m async for m in _take(pcs[(TOPIC, 0)], 5)]
    assert [m.offset for m in got] == list(range(10, 15))
    assert all(m.value == f"0:{m.offset}:e2".encode() for m in got)
    first = next(f for f in broker.fetches if (TOPIC, 0) in f.epochs)
    assert first.epochs[(TOPIC, 0)] == 1
