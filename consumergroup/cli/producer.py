"""A tiny producer for the demo (beside it in the CLI package), the examples and quick
experiments.

This package is a consumer runtime; it has no producer worth the name. The demo
and the standalone examples still need to write a steady stream of records
without pulling in a second Kafka client, so this module sends plain Produce
requests over the package's own :class:`~consumergroup.client.Client` and
:class:`~consumergroup.net.connection.BrokerConnection`, with aiokafka's
Produce codec (``aiokafka.protocol.produce``) and record-batch builder
(``aiokafka.record``). No batching across calls, no idempotence: one call, one
batch, ``acks=1``. The one retry is of a batch the broker *refused* with a
retriable error (it wrote nothing, so a retry cannot duplicate): Apache Kafka names a
new topic's leader in metadata before that leader serves it, and answers
NOT_LEADER_OR_FOLLOWER meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from aiokafka.protocol.produce import ProduceRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from ..client import Client
from ..errors import KafkaError, raise_for_code
from ..net.protocol import AnyRequest

__all__ = ["build_batch", "murmur2_partition", "produce", "produce_batch"]

#: acks=1: the leader has written the batch (the broker is single-node in the demo).
_ACKS = 1
_PRODUCE_TIMEOUT_MS = 10_000
#: How long a batch the broker refused with a retriable error is offered again.
_REFUSED_RETRY_FOR = 10.0
# Large enough that DefaultRecordBatchBuilder never refuses a record of ours.
_MAX_BATCH_BYTES = 1 << 30

Record = tuple[bytes | None, bytes | None]  # (key, value)


Header = tuple[str, bytes | None]


def build_batch(
    records: Sequence[Record],
    timestamp_ms: int | None = None,
    headers: Sequence[Header] = (),
    compression_type: int = 0,
) -> bytes:
    """Encode ``records`` as one v2 record batch (offset deltas 0..n-1), every record
    carrying ``headers``; ``compression_type`` is the batch attribute's codec (0: none)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression_type,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=_MAX_BATCH_BYTES,
    )
    for delta, (key, value) in enumerate(records):
        builder.append(delta, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


async def produce_batch(
    client: Client,
    topic: str,
    partition: int,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Header] = (),
) -> int:
    """Write ``values`` to ``topic/partition`` as one batch (each record with ``headers``);
    return the batch's base offset.

    The request goes to the partition's leader (``client.leader``). A batch refused
    with a retriable error (e.g. NOT_LEADER_OR_FOLLOWER: the leader moved, or a new
    topic's leader does not serve it yet) goes again to the leader metadata then
    names, for up to 10 s; any other answer raises its
    :class:`~consumergroup.errors.KafkaError`.
    """
    if not values:
        raise ValueError("produce_batch needs at least one value")
    if keys is not None and len(keys) != len(values):
        raise ValueError("keys and values must have the same length")
    records: list[Record] = [
        (keys[i] if keys is not None else None, value) for i, value in enumerate(values)
    ]
    request = ProduceRequest(
        None,
        _ACKS,
        _PRODUCE_TIMEOUT_MS,
        [(topic, [(partition, build_batch(records, headers=headers))])],
    )
    deadline = time.monotonic() + _REFUSED_RETRY_FOR
    backoff = 0.05
    while True:
        try:
            return await _send_batch(client, topic, partition, request)
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() + backoff > deadline:
                raise
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


async def _send_batch(client: Client, topic: str, partition: int, request: AnyRequest) -> int:
    """One Produce to the partition's current leader; raises what the broker answered
    (after refreshing metadata when that is retriable: the leader may have moved)."""
    conn = await client.leader(topic, partition)
    response = await conn.send(request, timeout=_PRODUCE_TIMEOUT_MS / 1000 + 5.0)
    for _topic, partitions in response.topics:
        for answer in partitions:
            # (partition, error_code, base_offset, ...) in every response version.
            error_code, base_offset = answer[1], answer[2]
            if error_code:
                try:
                    raise_for_code(error_code, f"Produce to {topic}/{partition}")
                except KafkaError as exc:
                    if exc.retriable:
                        await client.refresh_metadata(topic)
                    raise
            return int(base_offset)
    raise KafkaError(f"Produce to {topic}/{partition}: the broker answered for no partition")


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner picks for ``key`` (murmur2).

    Same key, same partition as Kafka's own producers, so keyed data written here
    lines up with data written by them.
    """
    m, r = 0x5BD1E995, 24
    length = len(key)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = key[length - length % 4 :]
    if tail:
        for i in reversed(range(len(tail))):
            h ^= tail[i] << (8 * i)
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


async def produce(
    bootstrap: str | Sequence[str],
    topic: str,
    values: Sequence[bytes],
    keys: Sequence[bytes | None] | None = None,
) -> dict[int, int]:
    """Spread ``values`` round robin over ``topic``'s partitions, one batch per partition.

    Opens (and closes) its own client. Returns partition -> number of records
    written there. Convenient for examples and tests; not a production producer.
    """
    async with Client(bootstrap) as client:
        partitions = await client.partitions(topic)
        plan: dict[int, tuple[list[bytes | None], list[bytes | None]]] = {
            p: ([], []) for p in partitions
        }
        for i, value in enumerate(values):
            vals, ks = plan[partitions[i % len(partitions)]]
            vals.append(value)
            ks.append(keys[i] if keys is not None else None)
        written: dict[int, int] = {}
        for p, (vals, ks) in plan.items():
            if vals:
                await produce_batch(client, topic, p, vals, ks)
                written[p] = len(vals)
        return written
