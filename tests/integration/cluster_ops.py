"""Operations on a real multi-node cluster that tests need and the library does not offer:
moving a group's coordinator to another broker while the old one stays up.

A coordinator moves with the leadership of its ``__consumer_offsets`` partition. A rolling
restart moves it twice: away from the broker going down, and back when the controller
restores preferred leaders; the second move leaves the old coordinator running and
answering NOT_COORDINATOR. :func:`move_coordinator` stages that second kind of move on
demand, by reassigning the partition's replicas without the current leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka.protocol.admin import AlterPartitionReassignmentsRequest

from consumergroup.client import Client
from consumergroup.errors import ConsumerGroupError, error_for_code
from consumergroup.net.protocol import MetadataRequest

OFFSETS_TOPIC = "__consumer_offsets"


def java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group`` (Kafka's ``partitionFor``)."""
    h = java_hash(group)
    return 0 if h == -(1 << 31) else abs(h) % partitions


async def _offsets_topic(client: Client) -> dict[int, dict[str, Any]]:
    conn = await client.any()
    resp = (await conn.send(MetadataRequest([OFFSETS_TOPIC], False))).to_object()
    (topic,) = resp["topics"]
    return {p["partition"]: p for p in topic["partitions"]}


async def reassign(client: Client, partition: int, replicas: list[int]) -> None:
    """AlterPartitionReassignments of one ``__consumer_offsets`` partition to ``replicas``."""
    conn = await client.controller()
    request = AlterPartitionReassignmentsRequest(
        30000, [(OFFSETS_TOPIC, [(partition, replicas, {})], {})], {}
    )
    resp = (await conn.send(request)).to_object()
    if resp["error_code"]:
        raise error_for_code(resp["error_code"])(resp["error_message"] or "reassignment")
    for topic in resp["responses"]:
        for p in topic["partitions"]:
            if p["error_code"]:
                raise error_for_code(p["error_code"])(p["error_message"] or "reassignment")


async def until(probe: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Await ``probe`` (a broker round trip) until it is true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)


async def coordinator_id(client: Client, group: str) -> int:
    """The node id FindCoordinator names for ``group`` now (no cache)."""
    client.invalidate_coordinator(group)
    return (await client.coordinator(group)).node_id


async def move_coordinator(client: Client, group: str) -> tuple[int, int, list[int]]:
    """Move ``group``'s coordinator to another broker; the old one keeps running.

    Returns ``(old node, new node, the partition's replicas before)``: hand the replicas
    to :func:`restore_replicas` when done.
    """
    before = await _offsets_topic(client)
    partition = offsets_partition(group, len(before))
    old = await coordinator_id(client, group)
    replicas = list(before[partition]["replicas"])
    assert before[partition]["leader"] == old, (partition, before[partition], old)
    await reassign(client, partition, [r for r in replicas if r != old])
    new = old

    async def moved() -> bool:
        nonlocal new
        with contextlib.suppress(ConsumerGroupError):  # the lookup fails while it moves
            new = await coordinator_id(client, group)
        return new != old

    await until(moved, 30, f"the coordinator of {group!r} to leave node {old}")
    return old, new, replicas


async def restore_replicas(client: Client, group: str, replicas: list[int]) -> None:
    """Give ``group``'s offsets partition its replicas back (and wait until all are in sync)."""
    partition = offsets_partition(group, len(await _offsets_topic(client)))
    await reassign(client, partition, replicas)

    async def in_sync() -> bool:
        now = (await _offsets_topic(client))[partition]
        return sorted(now["replicas"]) == sorted(now["isr"]) == sorted(replicas)

    await until(in_sync, 60, f"{OFFSETS_TOPIC}-{partition} back on {replicas}, in sync")
