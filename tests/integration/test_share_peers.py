"""Our share-group member in one group with the Java ``KafkaShareConsumer`` (kafka-clients
4.4.0) and with franz-go's share consumer: every record accepted once in all.

``kafka_only``: share groups need Apache Kafka 4.2+ (Tansu has none).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.share_support import (
    Collector,
    share_group,
    share_member,
    wait_for_members,
    wait_until,
)
from tests.peers import PeerProcess, PeerUnavailable, build

KAFKA = "share groups need Apache Kafka 4.2+ (Tansu has none)"
RECORDS = 600


@pytest.mark.kafka_only(KAFKA)
@pytest.mark.parametrize("kind", ["java", "franz"])
async def test_a_peer_and_our_member_share_a_group(
    bootstrap: str, new_topic: TopicFactory, kind: str
) -> None:
    try:
        build(kind)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    topic = await new_topic(partitions=1)  # one partition: both read it at once
    group = unique("share-peers")
    await share_group(bootstrap, group)
    share_flag = ["--protocol", "share"] if kind == "java" else ["-share"]
    args = ["--bootstrap", bootstrap, "--topic", topic, "--group", group, "--records"]
    if kind == "java":
        args += ["--max-poll-records", "10", "--delay-ms", "5"]
    else:
        args = [a.replace("--", "-", 1) for a in args] + ["-max-records", "10", "-delay-ms", "5"]
    peer = await PeerProcess(kind, [*args, *share_flag]).start()
    ours = Collector("ours", delay=0.05)
    try:
        await wait_until(lambda: peer.has("start"), 60, f"the {kind} peer to start")
        async with share_member(bootstrap, group, [topic], ours, concurrency=5) as (member, _):
            await wait_until(lambda: member.stats().assignment != {}, 30, "our member to join")
            # Both members fetch before the records come (the peer joined while ours did).
            await wait_for_members(bootstrap, group, lambda ids: len(ids) >= 2, 30, "2 members")
            # In batches of 10: the Java consumer acquires whole batches (Kafka's default
            # batch-optimized mode, whatever max.poll.records asks for), and took all 600
            # records of one batch with its first fetch when its fetch was answered first.
            values = [b"v%d" % i for i in range(RECORDS)]
            await produce(bootstrap, topic, values, partition=0, batch=10)
            await wait_until(
                lambda: len(ours.seen) + len(peer.records) >= RECORDS, 120, "every record"
            )
    finally:
        code = await peer.stop()
    assert code == 0, peer.stderr.decode(errors="replace")[-2000:]
    handled = Counter(ours.offsets()) + Counter(peer.records)
    assert len(handled) == RECORDS, "a record was never handled"
    assert set(handled.values()) == {1}, [k for k, n in handled.items() if n > 1][:10]
    assert ours.seen and peer.records, (len(ours.seen), len(peer.records))
