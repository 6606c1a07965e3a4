"""Micro benchmark of the record decoding hot path.

Builds ~100k random 100-byte records in v2 batches (16 KiB, the producer default; uncompressed
and lz4), cut into ~1 MiB record sets as a Fetch response would carry them, and prints
ns/record for: the bare aiokafka C reader loop (the floor), that loop reading every field
a message needs into a tuple, aiokafka's consumer-side ``PartitionRecords`` (what
``AIOKafkaConsumer`` does per record), ``decode_records`` and, with pyarrow installed,
the Spark source's two ways from record sets to Arrow batches (``spark_messages``: via
ConsumerMessages, the fallback; ``spark_columns``: the C column decoder). Each decoder consumes a
record set, reads every value and drops the set before the next one, like a consumer.

Run from the repository root: ``.venv/bin/python -m bench.decode_micro [--records N]``

Instruction counts (stable on a loaded machine): ``--decoder NAME --passes K`` builds the
record sets, runs one decoder K times untimed and exits; run it under
``valgrind --tool=callgrind`` with K=1 and K=3: the difference in Ir over 2 x records is
the decoder's Ir per record (the build is deterministic and cancels out). Which v2
decoder ``ours`` uses follows ``CONSUMERGROUP_PURE_PYTHON``.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import time
from collections.abc import Callable

from aiokafka.consumer.fetcher import READ_UNCOMMITTED, PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from consumergroup.consumer.records import decode_records, scan_records

_CODECS = {"none": DefaultRecordBatch.CODEC_NONE, "lz4": DefaultRecordBatch.CODEC_LZ4}
_BATCH_BYTES = 16 * 1024
_FETCH_BYTES = 1024 * 1024

# (record set, offset of its first record)
RecordSets = list[tuple[bytes, int]]


def build_record_sets(count: int, codec: int) -> RecordSets:
    """``count`` records with 100-byte values, as ~1 MiB record sets of v2 batches.

    Values are random so that a compressed record set holds about as many records as an
    uncompressed one (a 1 MiB fetch of repeated values would hold 100k+ lz4 records).
    """
    randbytes = random.Random(0).randbytes
    sets: RecordSets = []
    chunks: list[bytes] = []
    set_offset = offset = 0
    while offset < count:
        builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, _BATCH_BYTES)
        base = offset
        while offset < count:
            if (
                builder.append(offset - base, 1_700_000_000_000 + offset, None, randbytes(100), [])
                is None
            ):
                break
            offset += 1
        batch = bytearray(builder.build())
        batch[0:8] = base.to_bytes(8, "big")  # what the broker does on append
        chunks.append(bytes(batch))
        if sum(map(len, chunks)) >= _FETCH_BYTES or offset == count:
            sets.append((b"".join(chunks), set_offset))
            chunks = []
            set_offset = offset
    return sets


def reader_bare(sets: RecordSets) -> int:
    """Iterate aiokafka's C records without touching them: the floor."""
    n = 0
    for data, _ in sets:
        records = MemoryRecords(data)
        while records.has_next():
            for _ in records.next_batch():
                n += 1
    return n


def reader_fields(sets: RecordSets) -> int:
    """The C reader loop reading every field a message carries, into a tuple."""
    n = 0
    for data, _ in sets:
        out: list[tuple[object, ...]] = []
        records = MemoryRecords(data)
        while records.has_next():
            out += [
                (r.offset, r.key, r.value, r.headers, r.timestamp, r.timestamp_type)
                for r in records.next_batch()
            ]
        for fields in out:
            n += fields[2] is not None
    return n


def aiokafka_partition_records(sets: RecordSets) -> int:
    """aiokafka's consumer-side per-record path (one ConsumerRecord per record)."""
    tp = TopicPartition("bench", 0)
    n = 0
    for data, offset in sets:
        records = MemoryRecords(data)
        for record in PartitionRecords(
            tp, records, [], offset, None, None, False, READ_UNCOMMITTED
        ):
            n += record.value is not None
    return n


def ours(sets: RecordSets) -> int:
    """decode_records, one call per record set."""
    n = 0
    for data, offset in sets:
        for message in decode_records("bench", 0, data, offset).messages:
            n += message.value is not None
    return n


def ours_lists(sets: RecordSets) -> int:
    """scan_records + decode_batches(256): what a PartitionConsumer's reader does."""
    n = 0
    for data, offset in sets:
        for chunk in scan_records("bench", 0, data, offset).decode_batches(256):
            for message in chunk:
                n += message.value is not None
    return n


def _spark(sets: RecordSets, columns: bool) -> int:
    """The Spark source's executor work: record sets into Arrow batches (needs pyarrow)."""
    from consumergroup.consumer import records
    from consumergroup.integrations._spark_arrow import BatchBuilder

    saved = records.decode_v2_columns
    if not columns:
        records.decode_v2_columns = None
    try:
        builder = BatchBuilder("bench", 0, False)
        n = 0
        for data, offset in sets:
            for batch, magic, _ in scan_records("bench", 0, data, offset).batches:
                for arrow in builder.add(batch, magic, offset, 2**62):
                    n += arrow.num_rows
        last = builder.flush()
        return n + (last.num_rows if last is not None else 0)
    finally:
        records.decode_v2_columns = saved


def spark_messages(sets: RecordSets) -> int:
    """Spark source, message path: ConsumerMessages, then Arrow columns from them."""
    return _spark(sets, columns=False)


def spark_columns(sets: RecordSets) -> int:
    """Spark source, C column path: Arrow buffers straight from the batches."""
    return _spark(sets, columns=True)


def _time(fn: Callable[[RecordSets], int], sets: RecordSets, count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        got = fn(sets)
        elapsed = time.perf_counter_ns() - start
        assert got == count, (fn.__name__, got, count)
        best = min(best, elapsed)
    return best / count


def main() -> None:
    """Print ns/record (best of ``--repeat``) per codec and decoder."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--decoder", help="run only this decoder, untimed (for callgrind)")
    parser.add_argument("--codec", choices=sorted(_CODECS), default="none")
    parser.add_argument("--passes", type=int, default=1)
    args = parser.parse_args()
    decoders: list[Callable[[RecordSets], int]] = [
        reader_bare,
        reader_fields,
        aiokafka_partition_records,
        ours,
        ours_lists,
    ]
    if importlib.util.find_spec("pyarrow") is not None:  # the [spark] extra
        decoders += [spark_messages, spark_columns]
    if args.decoder:
        (fn,) = [fn for fn in decoders if fn.__name__ == args.decoder]
        sets = build_record_sets(args.records, _CODECS[args.codec])
        for _ in range(args.passes):
            assert fn(sets) == args.records
        return
    for name, codec in _CODECS.items():
        sets = build_record_sets(args.records, codec)
        size = sum(len(data) for data, _ in sets)
        print(f"codec={name}: {args.records} records, {len(sets)} record sets, {size} bytes")
        results = {fn.__name__: _time(fn, sets, args.records, args.repeat) for fn in decoders}
        for fn_name, ns in results.items():
            print(f"  {fn_name:28s} {ns:7.1f} ns/record")
        ratio = results["aiokafka_partition_records"] / results["ours"]
        print(f"  decode_records is {ratio:.2f}x faster than aiokafka's PartitionRecords")


if __name__ == "__main__":
    main()
