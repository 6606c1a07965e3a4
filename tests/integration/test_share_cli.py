"""``consumergroup share ...`` against what Kafka's own ``kafka-share-groups.sh``
(``ShareGroupCommand``, from the Java peer's kafka-tools 4.4.0) reports for the same group.

``kafka_only``: share groups need Apache Kafka 4.2+; on Tansu (none) the commands say so.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.cli_support import run_cli
from tests.integration.share_support import Collector, share_group, share_member, wait_until
from tests.peers import PeerUnavailable, tool_command

KAFKA = "share groups need Apache Kafka 4.2+ (Tansu has none)"


async def kafka_tool(bootstrap: str, *args: str) -> list[list[str]]:
    """``kafka-share-groups.sh --bootstrap-server B ARGS``: the rows of the table it prints
    (its header row first), split on whitespace."""
    try:
        command = await asyncio.to_thread(
            tool_command,
            "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
            "--bootstrap-server",
            bootstrap,
            *args,
            log_level="error",
        )
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()
    return [line.split() for line in stdout.decode().splitlines() if line.strip()]


def ours(result_out: str) -> object:
    return json.loads(result_out)


@pytest.mark.kafka_only(KAFKA)
@pytest.mark.timeout(600)  # a dozen JVM starts of Kafka's tool: 5-30 s each on a loaded machine
async def test_the_share_commands_report_what_kafkas_tool_reports(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    group = unique("share")
    await share_group(bootstrap, group)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(20)])
    handler = Collector()
    async with share_member(bootstrap, group, [topic], handler, concurrency=8):
        await wait_until(lambda: len(handler.seen) == 20, 60, "20 records")
        # A member: list, and describe's members.
        listed = await run_cli("share", "list", "--bootstrap", bootstrap, "--json")
        assert listed.code == 0, listed.err
        assert {"group": group, "state": "Stable"} in ours(listed.out)  # type: ignore[operator]
        assert group in [row[0] for row in await kafka_tool(bootstrap, "--list")]
        described = await run_cli("share", "describe", group, "--bootstrap", bootstrap, "--json")
        assert described.code == 0, described.err
        desc = ours(described.out)
        assert isinstance(desc, dict) and desc["state"] == "Stable"
        [member] = desc["members"]
        rows = await kafka_tool(bootstrap, "--describe", "--group", group, "--members", "--verbose")
        assert rows[0] == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH",
            "ASSIGNMENT",
        ]  # fmt: skip
        [[_, member_id, host, client_id, count, epoch, assignment]] = rows[1:]
        assert (member_id, host, client_id, int(epoch)) == (
            member["member_id"],
            member["host"],
            member["client_id"],
            member["member_epoch"],
        )
        assert assignment == f"{topic}:0,1" and count == "2"
        assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
        # Mid-run reset is refused while a member is there.
        refused = await run_cli(
            "share", "reset-offsets", group, "-t", topic, "--to-earliest", "--execute",
            "--bootstrap", bootstrap,
        )  # fmt: skip
        assert refused.code == 1 and "active member" in refused.err
    await produce(bootstrap, topic, [b"w%d" % i for i in range(10)])  # 5 more per partition

    async def compare_lag() -> list[dict[str, object]]:
        lag = await run_cli("share", "lag", group, "--bootstrap", bootstrap, "--json")
        assert lag.code == 0, lag.err
        rows = ours(lag.out)
        assert isinstance(rows, list)
        header, *kafka = await kafka_tool(bootstrap, "--describe", "--group", group)
        assert header == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
        theirs = sorted((t, int(p), int(s), int(lag)) for _, t, p, s, lag in kafka)
        assert sorted((r["topic"], r["partition"], r["start_offset"], r["lag"]) for r in rows) == (
            theirs
        )
        return rows

    rows = await compare_lag()
    # Every record below 10 was accepted: the lag says so at once; the start offset the
    # broker keeps may trail (it moves when the share-partition state is written).
    assert [r["lag"] for r in rows] == [5, 5]
    starts = [r["start_offset"] for r in rows]
    assert all(isinstance(s, int) and 0 < s <= 10 for s in starts)
    state = await kafka_tool(bootstrap, "--describe", "--group", group, "--state")
    assert state[1][-2:] == ["Empty", "0"], state

    # reset-offsets: a dry run changes nothing; --execute moves the start offsets.
    dry = await run_cli(
        "share", "reset-offsets", group, "-t", topic, "--to-earliest", "--bootstrap", bootstrap,
        "--json",
    )  # fmt: skip
    assert dry.code == 0, dry.err
    planned = ours(dry.out)
    assert isinstance(planned, list)
    assert [(r["partition"], r["current"], r["new"]) for r in planned] == [
        (0, starts[0], 0),
        (1, starts[1], 0),
    ]
    assert [r["start_offset"] for r in await compare_lag()] == starts
    done = await run_cli(
        "share", "reset-offsets", group, "-t", f"{topic}:1", "--to-offset", "3", "--execute",
        "--bootstrap", bootstrap,
    )  # fmt: skip
    assert done.code == 0, done.err
    rows = await compare_lag()
    assert [(r["start_offset"], r["lag"]) for r in rows] == [(starts[0], 5), (3, 12)]

    # delete --topic forgets the state; delete removes the group.
    forget = await run_cli("share", "delete", group, "-t", topic, "--bootstrap", bootstrap)
    assert forget.code == 0, forget.err
    lag = await run_cli("share", "lag", group, "--bootstrap", bootstrap, "--json")
    assert ours(lag.out) == []
    gone = await run_cli("share", "delete", group, "--bootstrap", bootstrap)
    assert gone.code == 0, gone.err
    assert group not in [row[0] for row in await kafka_tool(bootstrap, "--list")]
    missing = await run_cli("share", "describe", group, "--bootstrap", bootstrap)
    assert missing.code == 1 and "does not exist" in missing.err


@pytest.mark.tansu_only("Tansu has no share groups: what the commands say then")
async def test_the_share_commands_on_a_broker_without_share_groups(bootstrap: str) -> None:
    listed = await run_cli("share", "list", "--bootstrap", bootstrap, "--json")
    assert listed.code == 0 and json.loads(listed.out) == []
    described = await run_cli("share", "describe", "g", "--bootstrap", bootstrap)
    assert described.code == 1
    assert "does not offer ShareGroupDescribe" in described.err, described.err
