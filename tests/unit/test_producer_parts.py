"""The producer's parts that need no broker: partitioner, Produce codec, batch encoding,
configuration."""

from __future__ import annotations

import asyncio
import gc
import random
import struct
import subprocess
import sys
import weakref
from collections import Counter
from typing import Any

import pytest
from aiokafka.protocol.produce import ProduceRequest as AioProduceRequest
from aiokafka.protocol.produce import ProduceResponse_v5, ProduceResponse_v8
from aiokafka.record.default_records import DefaultRecordBatch

import consumergroup as cg
from consumergroup.errors import CorruptMessageError, DeliveryTimeoutError
from consumergroup.net.produce import ProduceRequest, decode_produce_response
from consumergroup.net.protocol import encode_request, prepare, sized_request
from consumergroup.producer.batch import BATCH_OVERHEAD, CODECS, FastSend, ProducerBatch
from consumergroup.producer.partitioner import StickyPartitioner, murmur2, murmur2_partition


def test_murmur2_matches_javas_own_test_vectors() -> None:
    # org.apache.kafka.common.utils.UtilsTest.testMurmur2 (kafka-clients' test sources).
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, expected in cases.items():
        assert murmur2(key) == expected, key


def test_key_partition_is_javas_and_stable() -> None:
    # BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % partitions.
    for key in (b"key", b"21", b"foobar", b"", b"\xff" * 7):
        expected = (murmur2(key) & 0x7FFFFFFF) % 3
        assert murmur2_partition(key, 3) == expected == murmur2_partition(key, 3)
    assert murmur2_partition(b"21", 2**31) == -973932308 & 0x7FFFFFFF


def test_sticky_partitioner_switch_moves_on_with_a_batch_to_go() -> None:
    sticky = StickyPartitioner(batch_size=1000)
    first = sticky.switch([0, 1, 2, 3], 4, 100)
    assert (sticky.current, sticky.left) == (first, 900)
    assert sticky.switch([0, 1, 2, 3], 4, 100) != first


def test_sticky_partitioner_spreads_evenly_over_partitions_with_a_leader() -> None:
    sticky = StickyPartitioner(batch_size=1)
    picks = Counter(sticky.switch([0, 2, 5], 6, 1) for _ in range(6000))
    assert set(picks) == {0, 2, 5}  # never a leaderless partition
    assert min(picks.values()) > 1700
    assert sticky.switch([], 2, 1) in (0, 1)  # none has a leader: any of them


@pytest.mark.parametrize("version", [3, 5, 7])
def test_produce_request_encodes_as_aiokafkas(version: int) -> None:
    topics = [("t", [(0, b"batch-0"), (3, b"batch-3")]), ("u", [(1, b"x")])]
    ours = prepare(ProduceRequest("txn", -1, 30000, topics), {0: (0, version)}, "b:1")
    theirs = AioProduceRequest("txn", -1, 30000, topics).prepare({0: (0, version)})
    assert encode_request(ours, 7, "cid") == encode_request(theirs, 7, "cid")
    # On the wire: the size prefix joined with the request (one copy of the batches).
    wire = encode_request(theirs, 7, "cid")
    assert sized_request(ours, 7, "cid") == struct.pack(">i", len(wire)) + wire
    assert sized_request(theirs, 7, "cid") == struct.pack(">i", len(wire)) + wire


def test_produce_request_v9_and_up_on_the_wire_is_its_size_and_frame() -> None:
    topics = [("t", [(0, bytearray(b"batch-0")), (3, memoryview(b"batch-3"))])]
    frame = prepare(ProduceRequest(None, -1, 30000, topics), {0: (0, 11)}, "b:1")
    assert frame.API_VERSION == 11
    data = encode_request(frame, 9, "client")
    assert sized_request(frame, 9, "client") == struct.pack(">i", len(data)) + data


def test_produce_request_below_kip890_stays_below_v12() -> None:
    request = ProduceRequest(None, 1, 1000, [("t", [(0, b"b")])], max_version=11)
    assert prepare(request, {0: (3, 12)}, "b:1").API_VERSION == 11


def _flexible_response() -> bytes:
    # Produce v10: header tags, one topic with one partition carrying a record error and
    # a current_leader tagged field, throttle, top-level tags.
    out = struct.pack(">i", 9) + b"\x00"
    out += b"\x02" + b"\x02t" + b"\x02" + struct.pack(">ihqqq", 4, 87, -1, -1, 0)
    out += b"\x02" + struct.pack(">i", 2) + b"\x04bad" + b"\x00"  # record_errors
    out += b"\x05oops"  # error_message
    out += b"\x01" + b"\x00" + b"\x08" + struct.pack(">ii", 1, 5)  # tag 0: current_leader
    out += b"\x00"  # topic tags
    out += struct.pack(">i", 0) + b"\x00"
    return out


def test_produce_response_decodes_flexible_versions() -> None:
    topics, throttle = decode_produce_response(10, _flexible_response())
    assert throttle == 0
    assert topics == {"t": [(4, 87, -1, -1, 0, "oops; record 2: bad")]}


@pytest.mark.parametrize("response", [ProduceResponse_v5, ProduceResponse_v8])
def test_produce_response_decodes_as_aiokafkas(response: type) -> None:
    if response is ProduceResponse_v8:
        body = response([("t", [(1, 0, 42, -1, 0, [], None), (2, 6, -1, -1, -1, [], "moved")])], 3)
        expected = [(1, 0, 42, -1, 0, None), (2, 6, -1, -1, -1, "moved")]
    else:
        body = response([("t", [(1, 0, 42, -1, 0), (2, 6, -1, -1, -1)])], 3)
        expected = [(1, 0, 42, -1, 0, None), (2, 6, -1, -1, -1, None)]
    frame = struct.pack(">i", 1) + body.encode()
    assert decode_produce_response(response.API_VERSION, frame) == ({"t": expected}, 3)


def test_produce_response_short_frame_is_corrupt() -> None:
    with pytest.raises(CorruptMessageError, match="malformed Produce v10"):
        decode_produce_response(10, _flexible_response()[:-9])


@pytest.mark.parametrize("codec", sorted(CODECS))
async def test_batch_encodes_and_a_new_epoch_rewrites_the_header(codec: str) -> None:
    loop = asyncio.get_running_loop()
    batch = ProducerBatch("t", 0, loop, 1000)
    for i in range(50):
        batch.append(1000 + i, b"k%d" % i, b"v%d" % i * 20, [("h", b"x")], loop.create_future())
    first = bytes(batch.encode(CODECS[codec], 7, 0, 100, False))
    again = batch.encode(CODECS[codec], 7, 1, 0, False)
    for data, (epoch, sequence) in ((first, (0, 100)), (bytes(again), (1, 0))):
        read = DefaultRecordBatch(data)
        assert read.validate_crc()
        assert (read.producer_id, read.producer_epoch, read.base_sequence) == (7, epoch, sequence)
        records = list(read)
        assert [(r.key, r.value, r.timestamp) for r in records] == [
            (b"k%d" % i, b"v%d" % i * 20, 1000 + i) for i in range(50)
        ]
        assert records[0].headers == [("h", b"x")]


def _config(**settings: object) -> cg.Config:
    config = cg.Config()
    for name, value in settings.items():
        setattr(config.producer, name, value)
    return config


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"acks": 0}, r"producer.acks=0 must be 'all' when producer.idempotent"),
        ({"acks": 2}, r"producer.acks=2 must be one of"),
        ({"max_in_flight": 6}, r"at most 5 when producer.idempotent"),
        ({"compression": "brotli"}, r"producer.compression='brotli' must be one of"),
        (
            {"transactional_id": "t", "idempotent": False, "acks": 1},
            r"idempotent=False must be True",
        ),
        ({"transactional_id": ""}, r"must not be empty"),
        ({"delivery_timeout": 10.0}, r"delivery_timeout=10.0 must be at least"),
        ({"buffer_memory": 0}, r"buffer_memory=0 must be an integer >= 1"),
        ({"linger": -1.0}, r"linger=-1.0"),
    ],
)
def test_producer_config_is_checked(settings: dict[str, object], match: str) -> None:
    with pytest.raises(cg.ConfigurationError, match=match):
        _config(**settings).validate()


def test_producer_config_defaults_are_javas_but_batch_size() -> None:
    # batch_size is librdkafka's (see ProducerConfig's docstring and
    # test_a_full_default_batch_fits_one_request_and_the_brokers_limit).
    pc = cg.Config().producer
    assert (pc.acks, pc.idempotent, pc.max_in_flight, pc.batch_size) == ("all", True, 5, 1_000_000)
    assert (pc.linger, pc.buffer_memory, pc.max_block, pc.delivery_timeout) == (
        0.005,
        32 * 1024 * 1024,
        60.0,
        120.0,
    )
    assert _config(acks=0, idempotent=False).producer.required_acks == 0
    assert pc.required_acks == -1


def test_import_consumergroup_does_not_load_the_producer() -> None:
    code = (
        "import sys, consumergroup as cg; "
        "assert 'consumergroup.producer' not in sys.modules; "
        "assert cg.Producer.__module__ == 'consumergroup.producer.producer'; "
        "assert cg.RecordMetadata.__name__ == 'RecordMetadata'; "
        "assert {'Producer', 'RecordMetadata'} <= set(dir(cg)) & set(cg.__all__)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_transaction_requests_encode_at_every_version(version: int) -> None:
    """Each request at every version the broker may offer, capped at what a client sends
    (AddPartitionsToTxn v3, AddOffsetsToTxn v4) and at the transaction protocol's (EndTxn
    and TxnOffsetCommit: v4 for the protocol v1, v5 for KIP-890's v2)."""
    from consumergroup.net.txn import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        EndTxnRequest,
        TxnOffsetCommitRequest,
    )

    offsets = {("a", 0): 10, ("b", 2): 7}
    requests = [
        (AddPartitionsToTxnRequest("t", 5, 1, {"a": [0, 1]}), 3),
        (AddOffsetsToTxnRequest("t", 5, 1, "g"), 4),
        (EndTxnRequest("t", 5, 1, True), 4),
        (EndTxnRequest("t", 5, 1, True, max_version=5), 5),
        (TxnOffsetCommitRequest("t", "g", 5, 1, offsets, 3, "m", "i"), 4),
        (
            TxnOffsetCommitRequest(
                "t", "g", 5, 1, offsets, 3, "m", "i", metadata={("a", 0): "x"}, max_version=5
            ),
            5,
        ),
    ]
    for request, top in requests:
        built = prepare(request, {request.API_KEY: (0, version)}, "b:1")
        decoded = type(built).decode(built.encode())
        assert min(version, top) == decoded.API_VERSION
        assert decoded.producer_id == 5
    assert decoded.topics[0][0] == "a"
    assert decoded.topics[0][1][0][-2 if version >= 3 else -1] == "x"  # metadata
    if version >= 3:
        assert (decoded.generation_id, decoded.member_id, decoded.group_instance_id) == (
            3,
            "m",
            "i",
        )


def test_end_txn_v5_answers_the_next_epoch() -> None:
    """KIP-890: EndTxn v5's answer carries the producer id and the epoch of the next
    transaction (below v5 there is none)."""
    from consumergroup.net.txn import EndTxnRequest

    v5 = prepare(EndTxnRequest("t", 5, 1, True, max_version=5), {26: (0, 5)}, "b:1")
    answer = v5.RESPONSE_TYPE(0, 0, 5, 2, {}).encode()
    decoded = v5.RESPONSE_TYPE.decode(answer)
    assert (decoded.error_code, decoded.producer_id, decoded.producer_epoch) == (0, 5, 2)
    v4 = prepare(EndTxnRequest("t", 5, 1, True), {26: (0, 5)}, "b:1")
    assert not hasattr(v4.RESPONSE_TYPE.decode(v4.RESPONSE_TYPE(0, 0, {}).encode()), "producer_id")


def test_api_versions_v3_reads_the_finalized_features() -> None:
    """ApiVersions v3's answer: the ranges, and in its tagged fields the features the
    cluster finalized (tag 1: their epoch, tag 2: name, max and min level), as Kafka 4.4
    sends them; its header is v0 (no tagged fields) although the version is flexible."""
    from aiokafka.protocol.types import Int16, Int64, Schema

    from consumergroup.net.api_versions import ApiVersionsRequest, features_of
    from consumergroup.net.flexible import STR
    from consumergroup.net.flexible import struct as compact
    from consumergroup.net.protocol import decode_response

    built = prepare(ApiVersionsRequest(), {18: (0, 5)}, "b:1")
    assert built.API_VERSION == 3
    assert built.to_object()["client_software_name"] == "consumergroup"
    finalized = Schema(("f", compact(("n", STR), ("max", Int16), ("min", Int16))))
    tags = {
        1: Int64.encode(20),
        2: finalized.encode([[("transaction.version", 2, 0, {}), ("group.version", 1, 0, {})]]),
    }
    # The answer's tagged fields as Kafka writes them: count, then tag, size, bytes each.
    tagged = bytes([len(tags)]) + b"".join(
        bytes([tag, len(value)]) + value for tag, value in tags.items()
    )
    body = built.RESPONSE_TYPE(0, [(18, 0, 5, {}), (26, 0, 5, {})], 0, {}).encode()
    body = body[:-1] + tagged  # in place of the empty tagged fields
    frame = struct.pack(">i", 7) + body  # correlation id, then the body: header v0
    resp = decode_response(built, frame)
    assert [tuple(v[:3]) for v in resp.api_versions] == [(18, 0, 5), (26, 0, 5)]
    features = features_of(resp)
    assert features.epoch == 20
    assert features.levels == {"transaction.version": 2, "group.version": 1}
    bare = decode_response(built, struct.pack(">i", 7) + built.RESPONSE_TYPE(0, [], 0, {}).encode())
    assert features_of(bare).epoch == -1  # a broker that finalized nothing


_RECORDS = [
    (0, 0, None, None, ()),
    (1, -5, b"", b"", [("", None)]),
    (2, 300, b"k" * 200, b"v" * 70_000, [("h\u00e9", b"x" * 130), ("n", None)]),
    (127, 1 << 40, None, b"value", (("a", b""),)),
    (128, -(1 << 40), b"key", None, []),
]


def test_c_record_encoder_and_python_twin_agree() -> None:
    from consumergroup.producer.batch import _py_append

    _cproduce = pytest.importorskip("consumergroup.producer._cproduce")

    for offset_delta, ts_delta, key, value, headers in _RECORDS:
        c_buf, py_buf = bytearray(b"head"), bytearray(b"head")
        c_len = _cproduce.append(c_buf, offset_delta, ts_delta, key, value, headers)
        py_len = _py_append(py_buf, offset_delta, ts_delta, key, value, headers)
        assert (c_len, bytes(c_buf)) == (py_len, bytes(py_buf))
        assert c_len == len(c_buf) - 4


def test_c_record_encoder_grows_a_batch_by_half_not_by_an_eighth() -> None:
    # A megabyte batch of 100-byte records: the same bytes as the Python twin, in ~30
    # allocations (bytearray's own growth, an eighth at a time, would take ~80, each a
    # copy of the batch so far).
    from consumergroup.producer.batch import _py_append

    _cproduce = pytest.importorskip("consumergroup.producer._cproduce")
    c_buf, py_buf = bytearray(BATCH_OVERHEAD), bytearray(BATCH_OVERHEAD)
    allocations = set()
    for i in range(9000):
        _cproduce.append(c_buf, i, i, None, b"v" * 100, ())
        _py_append(py_buf, i, i, None, b"v" * 100, ())
        allocations.add(c_buf.__alloc__())
    assert c_buf == py_buf
    assert len(allocations) < 30
    assert c_buf.__alloc__() <= 1.5 * len(c_buf) + 1


@pytest.mark.skipif(FastSend is None, reason="the C extension is not built")
def test_a_batch_gives_back_its_room_once_encoded() -> None:
    # Grown by half, an open batch may hold up to half again its records; once the
    # sender encodes (closes) it, it holds its bytes only: what is queued and in flight
    # is its records, which buffer_memory counts.
    loop = asyncio.new_event_loop()
    batch = ProducerBatch("t", 0, loop, 0)
    for i in range(3000):
        batch.append(i, None, b"v" * 100, (), loop.create_future())
    assert batch.buffer.__alloc__() > len(batch.buffer) + 1000
    payload = batch.encode(CODECS["none"], 1, 0, 0, False)
    loop.close()
    assert payload.__alloc__() == len(payload) + 1
    assert len(list(DefaultRecordBatch(bytes(payload)))) == 3000


def test_c_record_encoder_refuses_what_is_not_bytes() -> None:
    _cproduce = pytest.importorskip("consumergroup.producer._cproduce")
    buf = bytearray()
    with pytest.raises(TypeError, match="value must be bytes"):
        _cproduce.append(buf, 0, 0, None, "text", ())
    with pytest.raises(TypeError, match="header"):
        _cproduce.append(buf, 0, 0, None, b"v", [("h",)])
    with pytest.raises(TypeError, match="header value must be bytes"):
        _cproduce.append(buf, 0, 0, None, b"v", [("h", 1)])
    assert buf == bytearray()  # nothing written by a refused record


@pytest.mark.parametrize("pure", [False, True])
async def test_batch_completes_futures_in_c_and_python(
    pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offsets from the base on (all -1 when unknown), each record's timestamp or the
    broker's append time, a cancelled future left cancelled; the Python twin alike."""
    from consumergroup.producer import batch as batch_module

    if pure:
        monkeypatch.setattr(batch_module, "_complete", batch_module._py_complete)
    loop = asyncio.get_running_loop()
    for base_offset, append_time in ((40, -1), (-1, -1), (7, 99)):
        batch = ProducerBatch("t", 3, loop, 1000)
        futures = [loop.create_future() for _ in range(4)]
        for i, fut in enumerate(futures):
            batch.append(1000 + i, None, b"v", (), fut)
        futures[1].cancel()
        batch.complete(base_offset, append_time)
        assert futures[1].cancelled() and batch.done_future().done()
        got = [f.result() for i, f in enumerate(futures) if i != 1]
        step = 1 if base_offset >= 0 else 0
        assert got == [
            cg.RecordMetadata(
                "t", 3, base_offset + i * step, 1000 + i if append_time < 0 else append_time
            )
            for i in (0, 2, 3)
        ]
        assert type(got[0]) is cg.RecordMetadata and got[0].topic == "t"


def _offline_producer(
    loop: asyncio.AbstractEventLoop,
    *,
    fast: bool,
    transactional_id: str | None = None,
    config: cg.Config | None = None,
) -> cg.Producer:
    """A producer opened on topic "t" of 8 partitions without a broker (what
    bench.produce_ir does): send() queues into batches that nothing sends."""
    from consumergroup.producer.producer import _no_fast, _Topic

    producer = cg.Producer(
        ["127.0.0.1:9"], config or _config(batch_size=2000, transactional_id=transactional_id)
    )
    producer._loop = loop
    producer._open = producer._acc.accepting = True
    producer._topics["t"] = info = _Topic(producer._acc.batch_size)
    info.resize(producer._acc, "t", 8)
    info.recheck_ms = 1 << 62
    producer._fast = producer._fast_path() if fast else _no_fast
    return producer


async def test_a_full_default_batch_fits_one_request_and_the_brokers_limit() -> None:
    # The default batch_size (1,000,000) is a batch's records at most, counted at their
    # worst-case size: encoded with its header, a full batch stays under the default
    # max_request_size and Kafka's default message.max.bytes (1048588), so it is neither
    # split by the sender nor refused by a broker with default settings. Keyless records
    # stay on one partition (the sticky partitioner follows batch_size) until it is full.
    producer = _offline_producer(asyncio.get_running_loop(), fast=True, config=cg.Config())
    value = b"v" * 100
    sent = 0
    while sum(len(q.queue) for q in producer._acc.partitions.values()) < 2:
        await producer.send("t", value)
        sent += 1
    full = next(q.queue[0] for q in producer._acc.partitions.values() if q.queue)
    assert len(full) == sent - 1 > 8000  # all but the last record, which started the next
    assert 16384 < full.size <= 1_000_000 < full.size + 121
    payload = full.encode(CODECS["none"], 1, 0, 0, False)
    assert len(payload) <= min(cg.Config().producer.max_request_size, 1048588) - 100


def _queued(producer: cg.Producer) -> list[tuple[int, bytes, list[int], int]]:
    return [
        (q.partition, bytes(b.buffer), list(b.timestamps), b.size)
        for q in producer._acc.partitions.values()
        for b in q.queue
    ]


@pytest.mark.skipif(FastSend is None, reason="the C extension is not built")
async def test_send_fast_path_queues_what_the_python_path_queues() -> None:
    # The C path (FastSend) and the Python one make the same batches byte for byte, the
    # same partition choices (explicit, murmur2 of the key, sticky: the random partition
    # switches seeded alike) and the same memory count; the Python path only starts
    # batches and switches partitions.
    loop = asyncio.get_running_loop()
    made = []
    for fast in (True, False):
        producer = _offline_producer(loop, fast=fast)
        calls = []
        real = producer._send

        async def counted(*args: Any, real: Any = real, calls: list[int] = calls) -> Any:
            calls.append(1)
            return await real(*args)

        producer._send = counted  # type: ignore[method-assign]
        random.seed(7)
        futures = []
        for i in range(300):
            key = b"key-%d" % (i % 17) if i % 3 == 0 else None
            partition = 5 if i % 7 == 0 else None
            headers = [("h", b"x"), ("\u00e9", None)] if i % 5 == 0 else None
            value = b"v" * (i % 40)
            fut = await producer.send(
                "t", value, key=key, partition=partition, headers=headers, timestamp_ms=1000 + i
            )
            futures.append(fut)
        assert not any(f.done() for f in futures)
        made.append((_queued(producer), producer._acc.used, len(calls)))
    (fast_q, fast_used, fast_calls), (slow_q, slow_used, slow_calls) = made
    assert fast_q == slow_q
    assert all(len(buffer) > BATCH_OVERHEAD for _, buffer, _, _ in fast_q)
    assert fast_used == slow_used
    assert slow_calls == 300 and fast_calls < 60


@pytest.mark.skipif(FastSend is None, reason="the C extension is not built")
async def test_send_fast_path_keeps_queued_futures_from_the_collector() -> None:
    # A future send() queued is out of the garbage collector's lists while queued, and
    # stays out once it holds its RecordMetadata (a str and ints, never tracked) unless
    # it can close a cycle: its owner set attributes on it, cancelled it, or its batch
    # failed (an exception and its traceback). A cycle through such a future is collected.
    loop = asyncio.get_running_loop()
    producer = _offline_producer(loop, fast=True)

    class Holder:
        future: asyncio.Future[cg.RecordMetadata]

    futures = [await producer.send("t", b"v", partition=1) for _ in range(5)]
    assert not any(gc.is_tracked(f) for f in futures)  # the first by the Python path
    futures[3].cancel()
    holder = Holder()
    holder.future = futures[4]
    futures[4].holder = holder  # type: ignore[attr-defined]  # a cycle through the future
    gone = [weakref.ref(holder)]
    (batch,) = producer._acc.partitions["t", 1].queue
    batch.complete(40, -1)
    md = futures[2].result()
    assert (md.topic, md.partition, md.offset) == ("t", 1, 42) and not gc.is_tracked(md)
    assert [gc.is_tracked(f) for f in futures] == [False, False, False, True, True]

    failed = [await producer.send("t", b"v", partition=2) for _ in range(3)]
    holder = Holder()
    holder.future = failed[-1]
    failed[-1].holder = holder  # type: ignore[attr-defined]
    gone.append(weakref.ref(holder))
    (batch,) = producer._acc.partitions["t", 2].queue
    batch.fail(DeliveryTimeoutError("gone"))
    assert all(gc.is_tracked(f) for f in failed)
    assert all(isinstance(f.exception(), DeliveryTimeoutError) for f in failed)
    del holder, failed, futures, batch
    for q in producer._acc.partitions.values():
        q.queue.clear()
    gc.collect()
    assert [ref() for ref in gone] == [None, None]


@pytest.mark.parametrize("fast", [True, False], ids=["c", "python"])
async def test_a_cut_transactions_batches_take_no_record_of_the_next(fast: bool) -> None:
    # After cut_transaction() a record starts a batch of the next transaction (labelled
    # with it, its partition joining that one) rather than join the sealed transaction's
    # open batch, on the C path (FastSend) as on the Python one; the flush waits only for
    # the sealed transaction's batches. Records of one transaction share a batch.
    if fast and FastSend is None:
        pytest.skip("the C extension is not built")
    loop = asyncio.get_running_loop()
    producer = _offline_producer(loop, fast=fast, transactional_id="tid")
    txn = producer._txn
    assert txn is not None
    await producer.begin_transaction()
    for _ in range(3):
        await producer.send("t", b"sealed", partition=1)
    producer.cut_transaction()
    for _ in range(2):
        await producer.send("t", b"next", partition=1)
    acc = producer._acc
    first, second = acc.partitions["t", 1].queue
    assert (first.txn, len(first), second.txn, len(second)) == (0, 3, 1, 2)
    assert (acc.appending, acc.sending) == (1, 0)
    assert list(acc.pending()) == [first]
    assert txn.sealed and txn.joined == {("t", 1)}


async def test_a_batch_left_for_the_next_request_takes_no_sequence_and_stays_open() -> None:
    # The sender fills a request up to max_request_size; a ready batch that does not fit
    # waits for the next one. It used to be encoded (header, CRC) and given its sequence
    # range first: a batch still open to appends (ready by linger) then took more records
    # whose bytes went out after the header's count, outside its sequence range, and the
    # broker's answer gave them offsets of other records.
    loop = asyncio.get_running_loop()
    config = _config(batch_size=2000, max_request_size=2000)
    producer = _offline_producer(loop, fast=True, config=config)
    producer._identity.producer_id, producer._identity.epoch = 7, 0
    sender = producer._sender
    requests: list[Any] = []

    async def no_broker(node: int, request: Any, taken: Any) -> None:
        requests.append(taken)

    sender._request = no_broker  # type: ignore[method-assign]
    for partition, count in ((0, 20), (1, 14)):  # ~1,220 and ~870 bytes encoded
        for _ in range(count):
            await producer.send("t", b"v" * 50, partition=partition)
    acc = producer._acc
    ready = [(q, q.queue[0]) for q in (acc.partitions[("t", 0)], acc.partitions[("t", 1)])]
    ready[0][1].size = ready[1][1].size = 2000  # both full: ready
    sender._send(0, ready)
    await asyncio.sleep(0)
    (taken,) = requests
    assert [q.partition for q, _ in taken] == [0]
    left = ready[1][1]
    assert left.sequence == -1 and left.payload is None and left.attempts == 0
    assert acc.partitions[("t", 1)].next_sequence == 0
    left.size = 0  # room again: the open batch takes more records
    await producer.send("t", b"w" * 50, partition=1)
    assert len(left) == 15
    sender._send(0, [(acc.partitions[("t", 1)], left)])
    await asyncio.sleep(0)
    payload = left.payload
    assert payload is not None
    records = DefaultRecordBatch(bytes(payload))
    assert (records.base_sequence, records.next_offset - records.base_offset) == (0, 15)
    assert len(list(records)) == 15
    assert acc.partitions[("t", 1)].next_sequence == 15


def test_record_metadata_timestamp_is_utc_from_the_epoch() -> None:
    """``RecordMetadata.timestamp``: the record's milliseconds as an aware UTC datetime (the
    epoch comes from ``consumergroup.message``, which imports ``datetime`` on first use)."""
    from datetime import UTC, datetime

    from consumergroup.producer.metadata import RecordMetadata

    assert RecordMetadata("t", 0, 5, 1_700_000_000_123).timestamp == datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC
    )
    assert RecordMetadata("t", 0, -1, -1).timestamp == datetime(1970, 1, 1, tzinfo=UTC)
