"""Compressed batches against real brokers: memory bounded whatever the compression ratio.

Batches are built as Kafka's producers write them (tests/bombs.py: each codec compressed
as a stream, a few hundred KiB that inflate to hundreds of MiB) and written with a plain
Produce request; both brokers store them as sent. They are read back by a Consumer in
another process that reports how much its resident memory grew, checked against the
bound README states ("Bounded memory"), or by a group whose errors() names the record
that was too large to read.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

import consumergroup as cg
from consumergroup.errors import MessageTooLargeError

from .. import bombs
from ..conftest import TopicFactory, unique
from .group_support import Recorder, group_config, running_member, wait_for

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: MiB of 1 MiB records per codec: each compresses to under 1 MiB (Kafka's default
#: max.message.bytes); snappy cannot inflate more than ~21x; gzip is slow to build and
#: to inflate (~50 MB/s on a loaded test machine, on both sides of the broker).
_BOMBS = {"gzip": 128, "snappy": 16, "lz4": 200, "zstd": 286}
_MIB = 1 << 20


async def _write(bootstrap: str, topic: str, *values_or_batches: list[bytes] | bytes) -> None:
    """Write each item to partition 0: a list of values as one uncompressed batch, bytes
    as the encoded batch they are."""
    for item in values_or_batches:
        if not isinstance(item, bytes):
            item = bombs.batch(0, bombs.records_from(item), len(item))
        await bombs.produce_encoded(bootstrap, topic, 0, item)


def readers_bound(buffer_bytes: int, record: int, fetch: int) -> int:
    """README's bound for one partition being read, beyond its buffered fetched bytes
    (``buffer_bytes``) and one fetch response (``fetch``): ``max(buffer_bytes, record)``
    of decompressed bytes, the messages of one list (here one ``record``), and the
    codec's state (8 MiB at most as producers write it)."""
    return buffer_bytes + fetch + max(buffer_bytes, record) + record + 8 * _MIB


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux /proc needed")
@pytest.mark.parametrize("codec", list(_BOMBS))
async def test_a_decompression_bomb_is_read_within_the_stated_memory_bound(
    bootstrap: str, new_topic: TopicFactory, codec: str
) -> None:
    """128 MiB of records in a 128 KiB gzip batch (lz4 200 MiB in ~850 KiB, zstd 286 MiB
    in 12 KiB; snappy 16 MiB, its ratio's limit): all read, resident memory growing by
    at most README's bound plus 8 MiB for the interpreter's own allocations. Decompressed
    whole, the batches took 2x their records and more (gzip 286 MiB: 578 MiB)."""
    mib = _BOMBS[codec]
    topic = await new_topic()
    batch = bombs.batch(bombs.CODECS[codec], bombs.records_of([_MIB] * mib), mib)
    assert len(batch) < _MIB
    await _write(bootstrap, topic, [b"warm-up"], batch)
    buffer_bytes = 64 << 10
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.bomb_reader",
        bootstrap,
        topic,
        str(mib),
        str(buffer_bytes),
        cwd=_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 150)
    assert proc.returncode == 0, err.decode()
    got = json.loads(out)
    assert (got["records"], got["value_bytes"]) == (mib, mib * _MIB)
    bound = readers_bound(buffer_bytes, _MIB + 16, fetch=_MIB) + 8 * _MIB
    assert got["growth"] < bound, f"grew {got['growth'] / _MIB:.1f} MiB, bound {bound / _MIB:.1f}"


async def test_a_record_over_max_record_bytes_is_skipped_reported_and_the_rest_read(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A group member: the 40 MiB record of a gzip batch (40 KiB on the wire) is skipped
    with an error on errors() naming its offset; its neighbours in the batch and the
    batches after it are handled and committed."""
    topic = await new_topic()
    sizes = [100, 40 * _MIB, 200]
    batch = bombs.batch(bombs.GZIP, bombs.records_of(sizes, b"ab"), len(sizes))
    await _write(bootstrap, topic, batch, [b"after"])
    handler = Recorder()
    group = unique()
    config = group_config(consumer__return_errors=True)
    config.consumer.fetch.max_record_bytes = 8 * _MIB
    async with running_member(bootstrap, group, [topic], handler, config) as (member, task):
        err = await asyncio.wait_for(anext(member.errors()), 90)
        await wait_for(lambda: len(handler.seen) >= 3, 30, "the records after the large one")
        assert [offset for _, _, offset in handler.seen] == [0, 2, 3]
        assert (err.topic, err.partition) == (topic, 0)
        assert isinstance(err.cause, MessageTooLargeError)
        assert "offset 1 " in str(err) and "consumer.fetch.max_record_bytes" in str(err)
        await wait_for(lambda: member.stats().partitions[(topic, 0)].committed == 4, 30, "commit")
        assert not task.done()


async def test_compressible_json_at_20_to_1_is_read_whole(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """A legitimate batch, 10,000 JSON documents compressing ~20:1 (1 MiB -> 20 MiB),
    in every codec, read with the default bounds: nothing refused."""
    topic = await new_topic()
    docs = [
        json.dumps({"id": i, "user": f"user-{i % 50}", "tags": ["a", "b"] * 40}).encode()
        for i in range(10_000)
    ]
    raw = b"".join(bombs.records_from(docs))
    for codec in bombs.CODECS.values():
        batch = bombs.batch(codec, [raw], len(docs))
        assert len(raw) / len(batch) > 10
        await _write(bootstrap, topic, batch)
    config = cg.Config(client_id="test-json")
    config.consumer.max_wait_time = 0.1
    async with cg.Consumer([bootstrap], config) as consumer:
        pc = await consumer.consume_partition(topic, 0, cg.OFFSET_OLDEST)
        got: list[bytes | None] = []
        async with asyncio.timeout(60):
            async for chunk in pc.batches():
                got += [m.value for m in chunk]
                if len(got) >= 4 * len(docs):
                    break
    assert got == docs * 4
