"""Interop: an aiokafka consumer (range assignor) and one of our members share a group."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.group_support import Recorder, group_config, running_member, wait_for

pytestmark = pytest.mark.slow


async def test_aiokafka_member_and_ours_split_the_partitions(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=4)
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(200)])
    theirs = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        partition_assignment_strategy=(RangePartitionAssignor,),
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await theirs.start()
    their_seen: set[tuple[int, int]] = set()

    async def drain() -> None:
        while True:
            batches = await theirs.getmany(timeout_ms=200)
            for tp, msgs in batches.items():
                their_seen.update((tp.partition, m.offset) for m in msgs)

    reader = asyncio.create_task(drain())
    ours = Recorder("ours")
    try:
        async with running_member(bootstrap, group, [topic], ours, group_config()):
            await wait_for(
                lambda: ours.owned() == 2 and len(theirs.assignment()) == 2,
                60,
                "both members to own two partitions",
            )
            mine = {p for p in ours.claims[topic]}
            their_parts = {tp.partition for tp in theirs.assignment()}
            assert mine | their_parts == {0, 1, 2, 3} and not mine & their_parts
            await wait_for(
                lambda: len(their_seen | {(p, o) for _, p, o in ours.seen}) >= 200,
                30,
                "all 200 messages between them",
            )
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        await theirs.stop()
