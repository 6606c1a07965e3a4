"""BrokerConsumer's handling of one Fetch response, fed crafted responses.

Real brokers (Kafka >= 0.10.1, Tansu) return at least one whole batch however
small the partition fetch size, so the fetch-size growth and skip paths, and
the partition error paths a single-node broker never produces, are driven here
with aiokafka's real FetchResponse v11 structs and record batches built by
``tests.helpers.build_batch`` (aiokafka's DefaultRecordBatchBuilder).
No network: ``_handle`` never touches the client.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Any

import pytest
from aiokafka.protocol.fetch import FetchResponse_v11

import consumergroup as cg
from consumergroup.client import Client
from consumergroup.consumer.broker import BrokerConsumer
from consumergroup.consumer.partition import PartitionConsumer
from consumergroup.errors import (
    ConsumerError,
    CorruptMessageError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
    UnknownServerError,
)
from consumergroup.net.fetch import decode_fetch_response
from tests import fetch_v12_wire
from tests.helpers import build_batch

TOPIC = "t"
TS = 1_700_000_000_000


def buffered_offsets(pc: PartitionConsumer) -> list[int]:
    """Offsets of the first record set buffered in ``pc``, decoded."""
    return [m.offset for batch in pc._chunks[0].decode_batches() for m in batch]


def batch(base: int, count: int, size: int = 10) -> bytes:
    """One v2 record batch holding offsets ``base .. base+count-1`` (values of ``size`` bytes)."""
    data = bytearray(build_batch([(None, bytes([48 + i % 10]) * size) for i in range(count)], TS))
    struct.pack_into(">q", data, 0, base)  # the broker assigns the base offset
    return bytes(data)


def response(
    records: bytes, *, code: int = 0, hwm: int = 100, log_start: int = 0, replica: int = -1
) -> Any:
    """A Fetch v11 response for partition 0 of TOPIC (``replica``: preferred_read_replica)."""
    return FetchResponse_v11(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        topics=[(TOPIC, [(0, code, hwm, hwm, log_start, [], replica, records)])],
    )


class Harness:
    """A BrokerConsumer with one subscribed PartitionConsumer, and what it reported."""

    def __init__(self, config: cg.Config, offset: int = 0, node: int = 0) -> None:
        self.config = config
        self.orphans: list[tuple[PartitionConsumer, BaseException]] = []
        self.relocated: list[tuple[PartitionConsumer, int]] = []
        # Never started: _handle does no I/O. Metadata: brokers 0-2, TOPIC/0 led by 0.
        self.client = Client(["127.0.0.1:9"], config)
        self.client._apply_metadata(
            {
                "brokers": [
                    {"node_id": n, "host": "127.0.0.1", "port": 9, "rack": f"r{n}"}
                    for n in range(3)
                ],
                "topics": [
                    {
                        "topic": TOPIC,
                        "error_code": 0,
                        "partitions": [
                            {
                                "partition": 0,
                                "leader": 0,
                                "replicas": [0, 1, 2],
                                "isr": [0, 1, 2],
                                "error_code": 0,
                            }
                        ],
                    }
                ],
            },
            (),
        )
        self.bc = BrokerConsumer(
            node,
            self.client,
            config,
            lambda pc, err: self.orphans.append((pc, err)),
            lambda bc: None,
            relocate=lambda pc, node: self.relocated.append((pc, node)),
        )
        self.pc = PartitionConsumer(
            TOPIC,
            0,
            offset,
            buffer_size=config.channel_buffer_size,
            fetch_size=config.consumer.fetch.default,
            on_close=lambda pc: None,
        )
        self.bc.subscribe(self.pc)
        self.bc._take_new()

    def handle(self, records: bytes, **kw: int) -> None:
        self.bc._handle(response(records, **kw))

    def subscribed(self) -> bool:
        return (TOPIC, 0) in self.bc._subs


def sized_config(default: int = 64, limit: int = 0) -> cg.Config:
    config = cg.Config()
    config.consumer.fetch.default = default
    config.consumer.fetch.max = limit
    return config


async def test_partial_batch_doubles_fetch_size() -> None:
    """A record set holding only part of its first batch doubles the partition's fetch size."""
    h = Harness(sized_config(default=64))
    whole = batch(0, 5, size=1024)
    h.handle(whole[:64])
    assert h.pc._fetch_size == 128
    assert (h.pc.next_offset, h.pc.queued) == (0, 0)
    h.handle(whole[:128])
    assert h.pc._fetch_size == 256
    # The whole batch finally fits: delivered, and the size drops back to the default.
    h.handle(whole)
    assert buffered_offsets(h.pc) == list(range(5))
    assert (h.pc.next_offset, h.pc._fetch_size) == (5, 64)


async def test_partial_trailing_batch_is_not_growth() -> None:
    """Complete batches followed by a cut-off one: the complete ones are delivered as is."""
    h = Harness(sized_config(default=4096))
    data = batch(0, 3) + batch(3, 3)[:20]
    h.handle(data)
    assert h.pc.queued == 3
    assert (h.pc.next_offset, h.pc._fetch_size) == (3, 4096)


async def test_growth_stops_at_fetch_max_and_fails_the_partition() -> None:
    """At consumer.fetch.max a batch that still does not fit fails its partition, naming
    the batch's size, its offset and the setting; nothing is skipped (issue 8 #9: it used
    to skip one offset per round and only log)."""
    h = Harness(sized_config(default=64, limit=128), offset=7)
    whole = batch(7, 3, size=1024)
    too_big = whole[:64]
    h.handle(too_big)
    assert (h.pc._fetch_size, h.pc.next_offset) == (128, 7)
    h.handle(too_big)
    assert h.pc.next_offset == 7
    assert h.pc.closed and not h.subscribed()
    with pytest.raises(ConsumerError) as info:
        async for _ in h.pc.messages():
            pass
    text = str(info.value)
    assert f"is {len(whole)} bytes" in text
    assert "offset 7" in text
    assert "consumer.fetch.max=128" in text
    assert isinstance(info.value.cause, MessageTooLargeError)
    assert not info.value.retriable


async def test_growth_without_limit_stays_int32() -> None:
    """With no fetch.max the size doubles but never past the int32 the protocol carries."""
    h = Harness(sized_config(default=64))
    h.pc._fetch_size = 3 << 29
    h.handle(batch(0, 2, size=1024)[:64])
    assert h.pc._fetch_size == 2**31 - 1


async def test_records_below_the_fetch_offset_are_skipped() -> None:
    """A batch starting before the fetch offset yields only the records from it on."""
    h = Harness(cg.Config(), offset=4)
    h.handle(batch(0, 10), hwm=10)
    assert buffered_offsets(h.pc) == list(range(4, 10))
    assert h.pc.next_offset == 10
    assert (h.pc.high_water_mark_offset, h.pc.last_stable_offset) == (10, 10)


async def test_not_leader_hands_the_partition_back() -> None:
    """NOT_LEADER_OR_FOLLOWER: the partition leaves this broker, its position intact."""
    h = Harness(cg.Config(), offset=42)
    h.handle(b"", code=NotLeaderOrFollowerError.errno)
    assert not h.subscribed()
    ((pc, err),) = h.orphans
    assert pc is h.pc and isinstance(err, NotLeaderOrFollowerError)
    assert (pc.next_offset, pc.closed) == (42, False)


@pytest.mark.parametrize(("policy", "expected"), [("oldest", 30), ("newest", 90)])
async def test_out_of_range_reset_in_place(policy: str, expected: int) -> None:
    """OFFSET_OUT_OF_RANGE with both log ends known: seek there and keep fetching here."""
    config = cg.Config()
    config.consumer.offsets.reset = policy  # type: ignore[assignment]
    h = Harness(config, offset=5)
    h.handle(b"", code=OffsetOutOfRangeError.errno, hwm=90, log_start=30)
    assert h.pc.next_offset == expected
    assert h.subscribed() and not h.orphans


async def test_out_of_range_without_log_end_is_rerouted() -> None:
    """Kafka sends -1 watermarks with the error: the reset is left to ListOffsets."""
    config = cg.Config()
    config.consumer.offsets.reset = "newest"
    h = Harness(config, offset=5)
    h.handle(b"", code=OffsetOutOfRangeError.errno, hwm=-1, log_start=-1)
    assert not h.subscribed()
    assert h.pc._reset_to == "newest"
    assert [pc for pc, _ in h.orphans] == [h.pc]


async def test_out_of_range_error_policy_fails_the_partition() -> None:
    """reset = 'error': the iterator raises ConsumerError caused by OffsetOutOfRangeError."""
    config = cg.Config()
    config.consumer.offsets.reset = "error"
    h = Harness(config, offset=5)
    h.handle(b"", code=OffsetOutOfRangeError.errno, hwm=90, log_start=30)
    assert h.pc.closed and not h.subscribed() and not h.orphans
    with pytest.raises(ConsumerError) as info:
        async for _ in h.pc.messages():
            pass
    assert isinstance(info.value.cause, OffsetOutOfRangeError)


async def test_fatal_partition_error_fails_only_that_partition() -> None:
    """A non-retriable error ends the partition with a ConsumerError naming the cause."""
    h = Harness(cg.Config())
    h.handle(b"", code=TopicAuthorizationFailedError.errno)
    assert h.pc.closed and not h.subscribed()
    with pytest.raises(ConsumerError) as info:
        async for _ in h.pc.batches():
            pass
    assert isinstance(info.value.cause, TopicAuthorizationFailedError)
    assert "TopicAuthorizationFailed" in str(info.value)


async def test_corrupt_records_fail_only_their_partition() -> None:
    """Undecodable bytes end that partition with a ConsumerError; its broker-mate is served."""
    h = Harness(cg.Config())
    mate = PartitionConsumer(
        TOPIC, 1, 0, buffer_size=256, fetch_size=1 << 20, on_close=lambda pc: None
    )
    h.bc.subscribe(mate)
    h.bc._take_new()
    garbage = bytearray(batch(0, 3))
    garbage[16] = 9  # magic byte 9: no such message format
    resp = FetchResponse_v11(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        topics=[
            (
                TOPIC,
                [
                    (0, 0, 3, 3, 0, [], -1, bytes(garbage)),
                    (1, 0, 3, 3, 0, [], -1, batch(0, 3)),
                ],
            )
        ],
    )
    assert h.bc._handle(resp)
    assert h.pc.closed and not h.subscribed()
    with pytest.raises(ConsumerError) as info:
        async for _ in h.pc.messages():
            pass
    assert isinstance(info.value.cause, CorruptMessageError)
    assert buffered_offsets(mate) == [0, 1, 2]
    assert (TOPIC, 1) in h.bc._subs


async def test_top_level_error_is_reported() -> None:
    """A whole-request error delivers nothing and tells the loop to back off."""
    h = Harness(cg.Config())
    resp = FetchResponse_v11(
        throttle_time_ms=0, error_code=UnknownServerError.errno, session_id=0, topics=[]
    )
    assert h.bc._handle(resp) is None
    assert h.subscribed() and h.pc.queued == 0


async def test_undecodable_payload_fails_the_partition_when_read() -> None:
    """A batch whose header is sound but whose compressed payload is not is framed by the
    fetch task and fails when the reader decodes it: the records before it are delivered,
    then the iterator raises ConsumerError."""
    h = Harness(cg.Config())
    bad = bytearray(build_batch([(None, b"v" * 50)] * 3, TS, compression_type=3))  # lz4
    struct.pack_into(">q", bad, 0, 3)
    bad[61:] = b"\xff" * (len(bad) - 61)  # 61 = v2 batch header: the lz4 frame is garbage
    records = batch(0, 3) + bytes(bad)
    resp = FetchResponse_v11(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        topics=[(TOPIC, [(0, 0, 6, 6, 0, [], -1, records)])],
    )
    assert h.bc._handle(resp)
    assert h.pc.next_offset == 6
    seen: list[int] = []
    with pytest.raises(ConsumerError) as info:
        async for msg in h.pc.messages():
            seen.append(msg.offset)
    assert seen == [0, 1, 2]
    assert isinstance(info.value.cause, CorruptMessageError)
    assert h.pc.closed


def subscribed(
    n: int, backlogged: int, config: cg.Config | None = None
) -> tuple[Harness, list[PartitionConsumer]]:
    """A harness with ``n`` partitions at offset 0: the first ``backlogged`` have 50
    records to fetch, the others are caught up."""
    h = Harness(config or cg.Config())
    pcs = [h.pc]
    for p in range(1, n):
        pc = PartitionConsumer(
            TOPIC, p, 0, buffer_size=256, fetch_size=1 << 20, on_close=lambda pc: None
        )
        h.bc.subscribe(pc)
        pcs.append(pc)
    h.bc._take_new()
    for i, pc in enumerate(pcs):
        pc.high_water_mark_offset = 50 if i < backlogged else 0
    return h, pcs


def test_backlogged_partitions_are_asked_for_in_rotating_rounds_sized_to_what_is_served() -> None:
    """With many backlogged partitions, a round names only as many as the broker served
    last time (x2, at least 16), rotating so every partition gets its turn; caught-up
    partitions are always named (they long-poll)."""
    h, pcs = subscribed(100, backlogged=90)
    chosen, asked = h.bc._select(pcs)
    assert asked == 90 and len(chosen) == 100  # first round: everything
    h.bc._adapt(asked, served=10)  # the broker filled its response with 10 of them
    chosen, asked = h.bc._select(pcs)
    assert asked == 20
    assert [pc.partition for pc in chosen[:20]] == list(range(10, 30))  # after the served ones
    assert {pc.partition for pc in chosen[20:]} == set(range(90, 100))
    h.bc._adapt(asked, served=20)  # all served: ask for more next time
    chosen, asked = h.bc._select(pcs)
    assert asked == 40 and chosen[0].partition == 30
    h.bc._adapt(asked, served=0)
    _, asked = h.bc._select(pcs)
    assert asked == 16


def test_many_caught_up_partitions_are_named_in_rotation_while_the_backlog_window_is_on() -> None:
    """Caught-up partitions beyond the window: about a quarter of them per round, each
    named within a few rounds; without a window (little backlog) all of them."""
    h, pcs = subscribed(400, backlogged=100)  # 300 caught up
    h.bc._adapt(100, served=10)  # window of 20 backlogged partitions
    named: set[int] = set()
    for _ in range(4):
        chosen, asked = h.bc._select(pcs)
        assert asked == 20
        idle = [pc.partition for pc in chosen[asked:]]
        assert len(idle) == 75  # 300 / 4 rounds
        named.update(idle)
        h.bc._adapt(asked, served=10)
    assert named == set(range(100, 400))  # every caught-up partition within 4 rounds
    for pc in pcs[16:100]:
        pc.high_water_mark_offset = 0  # the backlog fits the window: no rotation at all
    chosen, asked = h.bc._select(pcs)
    assert asked == 16 and len(chosen) == 400


def test_read_committed_partitions_at_the_last_stable_offset_are_caught_up() -> None:
    """An open transaction leaves the high watermark past the last stable offset, where a
    read_committed reader stops: such partitions are caught up (they long-poll), not a
    backlog that turns on the rotating window and delays every partition's new data."""
    config = cg.Config()
    config.consumer.isolation_level = "read_committed"
    h, pcs = subscribed(100, backlogged=10, config=config)
    for pc in pcs[10:]:  # 90 partitions: read to their LSO, an open transaction above it
        pc.high_water_mark_offset, pc.last_stable_offset = 5, 0
    for pc in pcs[:10]:
        pc.last_stable_offset = 50
    h.bc._adapt(100, served=4)  # a small window, were the 90 counted as backlog
    chosen, asked = h.bc._select(pcs)
    assert asked == 10 and len(chosen) == 100


@pytest.mark.parametrize("check_crcs", [True, False])
async def test_check_crcs_reaches_the_decoder(check_crcs: bool) -> None:
    """consumer.fetch.check_crcs: a batch whose bytes changed after the producer's CRC
    fails its partition when set (issue 8 #14: the option never reached the decoder)."""
    config = cg.Config()
    config.consumer.fetch.check_crcs = check_crcs
    h = Harness(config)
    flipped = bytearray(batch(0, 3))
    flipped[-2] ^= 0xFF  # inside the last record's value
    h.handle(bytes(flipped))
    if check_crcs:
        assert h.pc.closed and not h.subscribed()
        with pytest.raises(ConsumerError, match="CRC") as info:
            async for _ in h.pc.messages():
                pass
        assert isinstance(info.value.cause, CorruptMessageError)
    else:
        assert buffered_offsets(h.pc) == [0, 1, 2]


def v12_response(diverging: tuple[int, int] | None, *, hwm: int = 100, log_start: int = 0) -> Any:
    """A Fetch v12 answer for partition 0 of TOPIC carrying ``diverging_epoch`` (no records)."""
    fields = (0, 0, hwm, hwm, log_start, [], -1, diverging, None, None, b"")
    frame = fetch_v12_wire.encode_response(1, 0, 0, 0, [(TOPIC, [fields])])
    return decode_fetch_response(12, frame)


def test_a_diverging_epoch_at_or_past_the_position_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """KIP-320: the leader's epoch ends at or after our fetch position: no truncation."""
    h = Harness(cg.Config(), offset=40)
    with caplog.at_level(logging.WARNING):
        h.bc._handle(v12_response((3, 40)))
    assert h.pc.next_offset == 40 and not caplog.records
    assert h.bc._epochs[h.pc] == (40, 3)  # named as last_fetched_epoch next time


@pytest.mark.parametrize(("reset", "expected"), [("oldest", 5), ("newest", 100)])
def test_an_unknown_diverging_end_offset_applies_the_reset_policy(
    reset: str, expected: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The leader does not know our epoch (end offset -1): as OFFSET_OUT_OF_RANGE."""
    config = cg.Config()
    config.consumer.offsets.reset = reset
    h = Harness(config, offset=40)
    with caplog.at_level(logging.WARNING):
        h.bc._handle(v12_response((-1, -1), log_start=5))
    assert h.pc.next_offset == expected
    assert "diverged at an unknown point" in caplog.text


def test_a_truncation_below_buffered_records_keeps_the_ones_below_it() -> None:
    """Records buffered but not handed out below the truncation point are refetched,
    not lost: the partition moves back to the reader's position, not past it."""
    h = Harness(cg.Config(), offset=0)
    h.handle(batch(0, 10))  # offsets 0..9 buffered, none handed out
    assert h.pc.next_offset == 10
    h.bc._handle(v12_response((2, 6)))  # the leader's log ends epoch 2 at offset 6
    assert h.pc.next_offset == 0 and h.pc.position == 0
    assert h.pc not in h.bc._epochs  # the epoch at offset 0 is not known


def test_the_preferred_read_replica_takes_the_partition_at_its_position() -> None:
    """KIP-392: the leader names replica 2 (and sends no records): the partition moves to
    node 2's fetch task at once, same position, for a lease of metadata.refresh_frequency;
    the request carried the client's rack."""
    config = cg.Config(client_rack="r2")
    config.metadata.refresh_frequency = 30.0
    h = Harness(config, offset=42)
    assert h.bc._request(h.bc._session.plan([h.pc]), 500).rack_id == "r2"
    h.handle(b"", replica=2)
    assert h.relocated == [(h.pc, 2)] and not h.orphans and not h.subscribed()
    assert (h.pc.next_offset, h.pc._read_replica) == (42, 2)
    assert 29 < h.pc._read_replica_until - time.monotonic() <= 30


def test_a_preferred_replica_missing_from_the_metadata_waits_for_a_refresh() -> None:
    """A replica id the metadata does not list is not dialed: the partition is orphaned
    (the re-routing task refreshes the metadata, the leader names it again)."""
    h = Harness(cg.Config(client_rack="r7"), offset=42)
    h.handle(b"", replica=7)
    assert not h.relocated and [pc for pc, _ in h.orphans] == [h.pc]
    assert h.pc._read_replica == -1


def test_the_leader_naming_itself_keeps_the_partition() -> None:
    """preferred_read_replica = this broker: read here (some brokers answer so)."""
    h = Harness(cg.Config(), offset=0)
    h.handle(batch(0, 3), replica=0)
    assert h.subscribed() and not h.relocated and buffered_offsets(h.pc) == [0, 1, 2]


def on_replica(node: int = 2, *, lease: float = 600.0, **config: Any) -> Harness:
    """A harness whose fetch task is node ``node``, reading TOPIC/0 as its preferred replica."""
    h = Harness(cg.Config(**config), offset=42, node=node)
    h.bc._drop(h.pc, None)
    h.pc._read_replica, h.pc._read_replica_until = node, time.monotonic() + lease
    h.bc.subscribe(h.pc)
    h.bc._take_new()
    return h


@pytest.mark.parametrize("policy", ["oldest", "newest", "error"])
def test_out_of_range_on_the_replica_goes_back_to_the_leader_without_a_reset(policy: str) -> None:
    """A replica answering OFFSET_OUT_OF_RANGE does not hold our position (it lags):
    back to the leader (node 0), position kept, whatever the reset policy (Java)."""
    h = on_replica()
    h.config.consumer.offsets.reset = policy  # type: ignore[assignment]
    h.handle(b"", code=OffsetOutOfRangeError.errno, hwm=40, log_start=0)
    assert h.relocated == [(h.pc, 0)] and not h.orphans
    assert (h.pc.next_offset, h.pc._read_replica, h.pc.closed) == (42, -1, False)


def test_an_error_on_the_replica_reroutes_through_the_leader() -> None:
    """NOT_LEADER_OR_FOLLOWER from the replica (it left the replica set): orphaned, and
    the re-routing task sends it to the leader (Consumer._route clears the replica)."""
    h = on_replica()
    h.handle(b"", code=NotLeaderOrFollowerError.errno)
    assert [pc for pc, _ in h.orphans] == [h.pc] and not h.relocated
    assert h.pc.next_offset == 42


async def test_the_lease_ends_back_at_the_leader() -> None:
    """Once the lease ends, the next round sends the partition back to its leader, which
    then decides again (Java: the preferred replica expires with metadata.max.age.ms)."""
    h = on_replica(lease=0.05)
    await asyncio.sleep(0.06)
    h.bc._end_leases()
    assert h.relocated == [(h.pc, 0)] and not h.subscribed()
    assert h.pc._read_replica == -1


def test_a_replica_lease_still_running_is_kept() -> None:
    h = on_replica(lease=60.0)
    h.bc._end_leases()
    assert h.subscribed() and not h.relocated
    assert h.bc._lease_end == h.pc._read_replica_until


def epoch_batch(base: int, count: int, epoch: int) -> bytes:
    """:func:`batch` written by a leader of ``epoch`` (the header's partition leader epoch,
    outside the CRC)."""
    data = bytearray(batch(base, count))
    struct.pack_into(">i", data, 12, epoch)
    return bytes(data)


async def test_leader_epochs_are_noted_for_commits_and_go_with_the_partition() -> None:
    """KIP-320: each record's leader epoch is known for a commit; the (position, epoch)
    pair stays on the partition, so the fetch task of its next leader names it (the new
    leader validates the position); a seek back forgets what lies past it."""
    h = Harness(cg.Config())
    h.handle(epoch_batch(0, 5, 3) + epoch_batch(5, 5, 3) + epoch_batch(10, 5, 4))
    assert [h.pc.leader_epoch_of(o) for o in (0, 9, 10, 14)] == [3, 3, 4, 4]
    assert h.pc.fetched_epoch == (15, 4) and h.bc._epochs[h.pc] == (15, 4)
    h.bc._drop(h.pc, None)  # a leader change: the partition leaves this broker
    other = BrokerConsumer(
        1, h.client, h.config, lambda pc, err: None, lambda bc: None, relocate=lambda pc, n: None
    )
    other.subscribe(h.pc)
    other._take_new()
    assert other._epochs[h.pc] == (15, 4)
    h.pc.seek(10)
    assert h.pc._epoch_changes == [(0, 3)] and h.pc.leader_epoch_of(9) == 3
