"""ClusterAdmin and the admin commands (groups, describe, lag, reset-offsets, delete, topics).

Each command runs as a real subprocess against the test broker and a real group:
members are ConsumerGroups running in this process, so the test controls when
the group has members and what they have consumed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import struct
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka.protocol.admin import (
    DescribeGroupsResponse_v0,
    DescribeGroupsResponse_v1,
    DescribeGroupsResponse_v2,
    DescribeGroupsResponse_v3,
)
from aiokafka.protocol.group import SyncGroupRequest_v0, SyncGroupRequest_v3

from consumergroup.admin import ClusterAdmin
from consumergroup.errors import GroupIdNotFoundError, NonEmptyGroupError
from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import KafkaFrameProxy, ProxyLink, produce
from tests.integration.cli_support import FAST, Result, reaped, run_cli, spawn
from tests.integration.group_support import Recorder, group_config, running_member, wait_for

pytestmark = pytest.mark.slow


@asynccontextmanager
async def members(
    bootstrap: str, group: str, topic: str, count: int, partitions: int
) -> AsyncIterator[list[Recorder]]:
    """``count`` members of ``group`` on ``topic``, running until the block ends."""
    handlers = [Recorder(f"m{i}") for i in range(count)]
    async with AsyncExitStack() as stack:
        for handler in handlers:
            await stack.enter_async_context(
                running_member(bootstrap, group, [topic], handler, group_config())
            )
        await wait_for(
            lambda: (
                sum(h.owned() for h in handlers) == partitions
                and all(h.owned() for h in handlers[:partitions])
            ),
            60,
            "every partition claimed",
        )
        yield handlers


async def consumed_group(bootstrap: str, topic: str, partitions: int, wanted: int) -> str:
    """A group that consumed (and committed) ``wanted`` records of ``topic``, then left."""
    group = unique()
    handler = Recorder()
    async with running_member(bootstrap, group, [topic], handler, group_config()):
        await wait_for(lambda: len(handler.seen) >= wanted, 60, f"{wanted} records consumed")
    assert len(handler.seen) == wanted
    return group


async def two_waves(bootstrap: str, topic: str, first: int, second: int) -> datetime:
    """Produce ``first`` records, then ``second`` more; return a time between the two waves."""
    await produce(bootstrap, topic, [b"early-%d" % i for i in range(first)])
    await asyncio.sleep(0.05)
    between = datetime.now(UTC)
    await asyncio.sleep(0.05)
    await produce(bootstrap, topic, [b"late-%d" % i for i in range(second)])
    return between


async def until_listed(admin: ClusterAdmin, group: str) -> None:
    """Wait until ListGroups shows ``group`` (Tansu lists a group once it has committed)."""
    for _ in range(100):
        if group in await admin.list_groups():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"ListGroups never showed {group!r}")


def one_line_error(result: Result) -> str:
    """The single stderr line of a failed command (no traceback)."""
    assert "Traceback" not in result.err, result.err
    [line] = result.err.strip().splitlines()
    assert line.startswith("Error: "), line
    return line


# ------------------------------------------------------------------------- ClusterAdmin


async def test_cluster_admin_reads_groups_offsets_and_commits_only_when_empty(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    between = await two_waves(bootstrap, topic, 6, 4)
    tps = [(topic, 0), (topic, 1)]
    group = unique()
    async with ClusterAdmin([bootstrap]) as admin:
        assert await admin.end_offsets(tps) == {(topic, 0): 5, (topic, 1): 5}
        assert await admin.earliest_offsets(tps) == {(topic, 0): 0, (topic, 1): 0}
        # 3 early records per partition: the late ones start at offset 3.
        assert await admin.offsets_for_time(tps, between) == {(topic, 0): 3, (topic, 1): 3}
        async with members(bootstrap, group, topic, 1, 2) as [handler]:
            await wait_for(lambda: len(handler.seen) == 10, 30, "all consumed")
            await until_listed(admin, group)
            [desc] = await admin.describe_groups([group])
            assert (desc.state, desc.protocol_type, len(desc.members)) == ("Stable", "consumer", 1)
            with pytest.raises(NonEmptyGroupError, match="active member"):
                await admin.commit_offsets(group, {(topic, 0): 1})
            with pytest.raises(NonEmptyGroupError, match="active member"):
                await admin.delete_groups([group])
        assert await admin.list_consumer_group_offsets(group) == {(topic, 0): 5, (topic, 1): 5}
        await admin.commit_offsets(group, {(topic, 0): 1})
        assert await admin.list_consumer_group_offsets(group, tps) == {(topic, 0): 1, (topic, 1): 5}
        await admin.delete_groups([group])
        assert group not in await admin.list_groups()
        assert await admin.list_consumer_group_offsets(group, tps) == {}


# ----------------------------------------------------------------------------- commands


async def test_topics_creates_and_lists(bootstrap: str) -> None:
    name = unique("cli-topic")
    created = await run_cli("topics", "-b", bootstrap, "--create", name, "--partitions", "3")
    assert created.code == 0, created.err
    listed = await run_cli("topics", "-b", bootstrap, "--json")
    assert listed.code == 0, listed.err
    assert {"topic": name, "partitions": 3} in json.loads(listed.out)
    table = await run_cli("topics", "-b", bootstrap)
    assert any(line.split() == [name, "3"] for line in table.out.splitlines()), table.out
    again = await run_cli("topics", "-b", bootstrap, "--create", name, "--partitions", "3")
    assert again.code == 1
    assert "already exists" in one_line_error(again)


async def test_describe_shows_both_members_and_groups_lists_the_group(
    bootstrap: str, new_topic: TopicFactory, on_tansu: bool
) -> None:
    topic = await new_topic(partitions=4)
    group = unique()
    async with members(bootstrap, group, topic, 2, 4), ClusterAdmin([bootstrap]) as admin:
        await until_listed(admin, group)
        listed = await run_cli("groups", "-b", bootstrap, "--json")
        described = await run_cli("describe", group, "-b", bootstrap, "--json")
        table = await run_cli("describe", group, "-b", bootstrap)
    assert listed.code == 0, listed.err
    assert {"group": group, "protocol_type": "consumer"} in json.loads(listed.out)
    assert described.code == 0, described.err
    desc = json.loads(described.out)
    assert desc["group"] == group and desc["state"] == "Stable"
    assert len(desc["members"]) == 2
    if not on_tansu:  # Tansu reports no client id, host or assignment
        assigned = sorted(
            p for m in desc["members"] for a in m["assignment"] for p in a["partitions"]
        )
        assert assigned == [0, 1, 2, 3]
    assert table.code == 0, table.err
    assert "state Stable" in table.out and "2 member(s)" in table.out
    for member in desc["members"]:
        assert member["member_id"] in table.out


class AssignmentFillingProxy(KafkaFrameProxy):
    """In front of Tansu, which answers DescribeGroups without member assignments: records
    the assignments the group leader sends in SyncGroup and puts them into DescribeGroups
    answers, as a Kafka broker would report them."""

    def __init__(self, target_port: int, listen_port: int) -> None:
        super().__init__(target_port, listen_port)
        self.assignments: dict[str, bytes] = {}

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        """Remember the leader's SyncGroup assignments, then forward."""
        key, version, _, id_len = struct.unpack_from(">hhih", frame, 0)
        if key == 14:  # SyncGroup v0-v3: the assignments are the last field
            codec = SyncGroupRequest_v3 if version >= 3 else SyncGroupRequest_v0
            body = codec.decode(frame[10 + max(id_len, 0) :])
            self.assignments.update(dict(body.group_assignment))
        await super().forward_request(link, frame)

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """Fill each described member's assignment."""
        if key != 15:
            return frame
        codec = _DESCRIBE_RESPONSES[version]
        resp = codec.decode(frame[4:])
        resp.groups = [
            (*g[:5], [(*m[:4], self.assignments.get(m[0], m[4])) for m in g[5]], *g[6:])
            for g in resp.groups
        ]
        encoded: bytes = resp.encode()
        return frame[:4] + encoded


_DESCRIBE_RESPONSES = {
    0: DescribeGroupsResponse_v0,
    1: DescribeGroupsResponse_v1,
    2: DescribeGroupsResponse_v2,
    3: DescribeGroupsResponse_v3,
}


async def test_describe_shows_what_each_member_was_assigned() -> None:
    proxy_port = free_port()
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        AssignmentFillingProxy(broker.port, proxy_port) as proxy,
    ):
        topic, group = unique("t"), unique()
        await broker.create_topic(topic, 5)
        async with members(proxy.address, group, topic, 2, 5) as handlers:
            result = await run_cli("describe", group, "-b", proxy.address, "--json")
            table = await run_cli("describe", group, "-b", proxy.address)
            claims = sorted(sorted(h.claims[topic]) for h in handlers)
    assert result.code == 0, result.err
    described = json.loads(result.out)["members"]
    assigned = sorted([a["partitions"] for m in described for a in m["assignment"]])
    assert assigned == claims  # each member's share, as the members themselves see it
    assert sorted(p for share in claims for p in share) == [0, 1, 2, 3, 4]
    for share in claims:
        assert f"{topic}/{','.join(map(str, share))}" in table.out


async def test_lag_is_produced_minus_consumed(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=3)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(30)])
    group = await consumed_group(bootstrap, topic, 3, 30)
    await produce(bootstrap, topic, [b"w%d" % i for i in range(12)])  # produced, not consumed

    result = await run_cli("lag", group, "-b", bootstrap, "--json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    assert [(r["topic"], r["partition"]) for r in rows] == [(topic, p) for p in range(3)]
    for row in rows:
        assert set(row) == {"topic", "partition", "committed", "end", "lag"}
        assert row["lag"] == row["end"] - row["committed"]
    assert sum(r["committed"] for r in rows) == 30
    assert sum(r["lag"] for r in rows) == 12  # produced 42 - consumed 30

    table = await run_cli("lag", group, "-b", bootstrap)
    assert table.code == 0, table.err
    assert "total lag 12" in table.out


async def test_reset_offsets_dry_run_changes_nothing_and_execute_moves_the_group(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(20)])
    group = await consumed_group(bootstrap, topic, 2, 20)
    async with ClusterAdmin([bootstrap]) as admin:
        before = await admin.list_consumer_group_offsets(group)
    assert before == {(topic, 0): 10, (topic, 1): 10}

    dry = await run_cli("reset-offsets", group, "-b", bootstrap, "--topic", topic,
                        "--to-offset", "4", "--json")  # fmt: skip
    assert dry.code == 0, dry.err
    assert json.loads(dry.out) == [
        {"topic": topic, "partition": p, "current": 10, "new": 4} for p in range(2)
    ]
    assert "dry run" in dry.err
    async with ClusterAdmin([bootstrap]) as admin:
        assert await admin.list_consumer_group_offsets(group) == before

    done = await run_cli("reset-offsets", group, "-b", bootstrap, "--topic", f"{topic}:1",
                         "--shift-by", "-7", "--execute")  # fmt: skip
    assert done.code == 0, done.err
    assert "reset the offsets" in done.err
    # The next consumer of the group starts where asked: partition 1 at 3, partition 0 at 10.
    consumed = await run_cli("consume", "-b", bootstrap, "-g", group, "-t", topic,
                             "--format", "json", "-n", "7", "--timeout", "60", *FAST)  # fmt: skip
    assert consumed.code == 0, consumed.err
    got = [json.loads(line) for line in consumed.out.splitlines()]
    assert [(m["partition"], m["offset"]) for m in got] == [(1, o) for o in range(3, 10)]

    earliest = await run_cli("reset-offsets", group, "-b", bootstrap, "-t", topic,
                             "--to-earliest", "--execute")  # fmt: skip
    assert earliest.code == 0, earliest.err
    async with ClusterAdmin([bootstrap]) as admin:
        assert await admin.list_consumer_group_offsets(group) == {(topic, 0): 0, (topic, 1): 0}


async def test_reset_and_delete_are_refused_while_the_group_has_members(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(8)])
    group = unique()
    async with members(bootstrap, group, topic, 1, 2) as [handler]:
        await wait_for(lambda: len(handler.seen) == 8, 30, "all consumed")
        refused = await run_cli("reset-offsets", group, "-b", bootstrap, "-t", topic,
                                "--to-earliest", "--execute")  # fmt: skip
        dry = await run_cli("reset-offsets", group, "-b", bootstrap, "-t", topic, "--to-earliest")
        deleted = await run_cli("delete", group, "-b", bootstrap)
        async with ClusterAdmin([bootstrap]) as admin:
            still = await admin.list_consumer_group_offsets(group)
    for result in (refused, dry):
        assert result.code == 1
        assert "1 active member(s)" in one_line_error(result)
        assert "stop its consumers" in result.err
    assert deleted.code == 1
    assert "still has members" in one_line_error(deleted)
    assert still == {(topic, 0): 4, (topic, 1): 4}  # nothing was reset

    # Without members, delete works and the group is gone.
    gone = await run_cli("delete", group, "-b", bootstrap)
    assert gone.code == 0, gone.err
    listed = await run_cli("groups", "-b", bootstrap, "--json")
    assert group not in {g["group"] for g in json.loads(listed.out)}


async def test_describe_and_delete_of_a_group_that_does_not_exist_fail_saying_so(
    bootstrap: str,
) -> None:
    # Tansu describes an unknown group as "Empty" and deletes it without a word: the
    # commands said "deleted group" (exit 0) and showed an empty group.
    group = unique("nosuchgroup")
    # lag too (it printed "no committed offsets" and exited 0 while describe exited 1).
    for command in ("describe", "delete", "lag"):
        result = await run_cli(command, group, "-b", bootstrap)
        assert result.code == 1, (command, result.err)
        assert f"group {group!r} does not exist" in one_line_error(result)
    async with ClusterAdmin([bootstrap]) as admin:
        assert not await admin.group_exists(group)
        with pytest.raises(GroupIdNotFoundError):
            await admin.delete_groups([group])


async def test_a_group_named_outside_ascii_is_found_by_its_own_name(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    # Tansu lists it percent-encoded ("h%C3%A9llo w%C3%B6rld"); describe, lag and delete
    # take the name the group was created with.
    topic = await new_topic(partitions=1)
    await produce(bootstrap, topic, [b"a", b"b"])
    group = f"héllo wörld {unique()}"
    async with ClusterAdmin([bootstrap]) as admin:
        await admin.commit_offsets(group, {(topic, 0): 1})
        assert await admin.group_exists(group)
    described = await run_cli("describe", group, "-b", bootstrap, "--json")
    assert described.code == 0, described.err
    assert json.loads(described.out)["group"] == group
    lagging = await run_cli("lag", group, "-b", bootstrap, "--json")
    assert json.loads(lagging.out) == [
        {"topic": topic, "partition": 0, "committed": 1, "end": 2, "lag": 1}
    ]
    deleted = await run_cli("delete", group, "-b", bootstrap)
    assert deleted.code == 0, deleted.err


async def test_reset_to_datetime_finds_the_first_later_record(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    between = await two_waves(bootstrap, topic, 5, 3)
    group = await consumed_group(bootstrap, topic, 1, 8)
    result = await run_cli("reset-offsets", group, "-b", bootstrap, "-t", topic, "--json",
                           "--to-datetime", between.isoformat())  # fmt: skip
    assert result.code == 0, result.err
    assert json.loads(result.out) == [{"topic": topic, "partition": 0, "current": 8, "new": 5}]


async def test_reset_to_a_datetime_after_the_last_record_moves_to_the_end(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    # Tansu answers ListOffsets for a time after its last record with offset 0: trusted,
    # that rewound the group to the start.
    topic = await new_topic(partitions=2)
    group = unique()
    await produce(bootstrap, topic, [b"x-%d" % i for i in range(6)])
    async with ClusterAdmin([bootstrap]) as admin:
        await admin.commit_offsets(group, {(topic, 0): 1, (topic, 1): 2})
    result = await run_cli("reset-offsets", group, "-b", bootstrap, "-t", topic, "--json",
                           "--to-datetime", "2030-01-01T00:00:00Z", "--execute")  # fmt: skip
    assert result.code == 0, result.err
    assert json.loads(result.out) == [
        {"topic": topic, "partition": 0, "current": 1, "new": 3},
        {"topic": topic, "partition": 1, "current": 2, "new": 3},
    ]


async def test_offsets_for_times_says_none_after_the_last_record(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    between = await two_waves(bootstrap, topic, 4, 2)
    after = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000)
    tps = [(topic, 0), (topic, 1)]
    async with ClusterAdmin([bootstrap]) as admin:
        client = admin.client
        mid = int(between.timestamp() * 1000)
        assert await client.offsets_for_times(dict.fromkeys(tps, mid)) == dict.fromkeys(tps, 2)
        assert await client.offsets_for_times(dict.fromkeys(tps, 0)) == dict.fromkeys(tps, 0)
        assert await client.offsets_for_times(dict.fromkeys(tps, after)) == dict.fromkeys(tps)
        assert await admin.offsets_for_time(tps, datetime(2030, 1, 1, tzinfo=UTC)) == (
            dict.fromkeys(tps, 3)
        )


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["reset-offsets", "g", "-t", "t"], 2, "give exactly one of --to-earliest"),
        (["reset-offsets", "g", "-t", "t", "--to-datetime", "soon"], 2, "not an ISO 8601 time"),
        (["lag", "g", "-t", "no-such-topic"], 2, "does not exist"),
        (["delete"], 2, "Missing argument 'GROUP'"),
        (["topics", "--tls"], 2, "is a plaintext Kafka listener"),
    ],
    ids=["no-mode", "bad-datetime", "unknown-topic", "no-group", "tls-to-plaintext"],
)
async def test_admin_usage_errors_exit_2_without_a_traceback(
    bootstrap: str, args: list[str], code: int, says: str
) -> None:
    result = await run_cli(*args, "-b", bootstrap, timeout=30)
    assert result.code == code
    assert "Traceback" not in result.err
    assert says in result.err


async def test_unreachable_bootstrap_is_one_line_for_every_admin_command() -> None:
    address = f"127.0.0.1:{free_port()}"
    for args in (["groups"], ["describe", "g"], ["lag", "g"], ["topics"], ["delete", "g"]):
        result = await run_cli(*args, "-b", address, "--connect-timeout", "2", timeout=30)
        assert result.code == 1, (args, result.err)  # a failure, not a usage error
        assert "no Kafka broker answered" in one_line_error(result)


async def test_verbose_adds_the_traceback_to_the_one_line_error() -> None:
    address = f"127.0.0.1:{free_port()}"
    quiet = await run_cli("lag", "g", "-b", address, "--connect-timeout", "2", timeout=30)
    loud = await run_cli("-v", "lag", "g", "-b", address, "--connect-timeout", "2", timeout=30)
    assert quiet.code == loud.code == 1
    assert "Traceback" not in quiet.err
    assert "Traceback" in loud.err
    assert loud.err.strip().splitlines()[-1] == one_line_error(quiet)


async def test_command_config_file_and_env_give_the_connection(
    bootstrap: str, tmp_path: Path
) -> None:
    from_env = await run_cli("topics", "--json", env={"CONSUMERGROUP_BOOTSTRAP": bootstrap})
    assert from_env.code == 0, from_env.err
    props = tmp_path / "client.properties"
    props.write_text(f"# like Kafka's tools\nbootstrap.servers={bootstrap}\ngroup.id=ignored\n")
    result = await run_cli("topics", "--command-config", str(props), "--json", timeout=30)
    assert result.code == 0, result.err
    assert isinstance(json.loads(result.out), list)
    assert "ignoring 'group.id'" in result.err
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SMOKE\n")
    refused = await run_cli("topics", "--command-config", str(bad), timeout=30)
    assert refused.code == 2
    assert "security.protocol 'SASL_SMOKE' is not one of" in one_line_error(refused)


async def test_command_config_is_read_as_java_reads_properties(
    bootstrap: str, tmp_path: Path
) -> None:
    # `key value` and `key:value` lines were refused, a non-UTF-8 file was a traceback.
    host, port = bootstrap.rsplit(":", 1)
    props = tmp_path / "java.properties"
    props.write_bytes(
        b"! a Java comment\n"
        b"   # an indented one, ending in a backslash \\\n"
        b"bootstrap.servers: " + host.encode() + b":\\\n"
        b"        " + port.encode() + b"\n"
        b"client.id  caf\xe9-tool\n"  # ISO-8859-1, as Java writes and reads it
        b"group\\.name=ignored\n"
    )
    result = await run_cli("topics", "--command-config", str(props), "--json", timeout=30)
    assert result.code == 0, result.err
    assert isinstance(json.loads(result.out), list)
    assert "ignoring 'group.name'" in result.err  # the escaped '.' read as Java reads it
    assert "ignoring 'bootstrap" not in result.err

    bad_escape = tmp_path / "escape.properties"
    bad_escape.write_text("bootstrap.servers=x:1\nsasl.password=\\u12\n")
    refused = await run_cli("topics", "--command-config", str(bad_escape), timeout=30)
    assert refused.code == 2
    assert f"{bad_escape}:line 2: malformed \\uXXXX escape" in one_line_error(refused)


async def test_command_config_errors_name_the_files_own_keys(
    bootstrap: str, tmp_path: Path
) -> None:
    # "net.sasl.user ... set net.sasl.enable = False": the Python config's words.
    props = tmp_path / "client.properties"
    props.write_text(f"bootstrap.servers={bootstrap}\nsasl.mechanism=SCRAM-SHA-512\n")
    result = await run_cli("topics", "--command-config", str(props), timeout=30)
    assert result.code == 2
    line = one_line_error(result)
    assert f"SASL SCRAM-SHA-512 (sasl.mechanism in {props}) needs a user" in line, line
    assert "sasl.username" in line and "net.sasl" not in line, line
    props.write_text(f"bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_SSL\n")
    result = await run_cli("topics", "--command-config", str(props), timeout=30)
    assert result.code == 2
    assert f"(security.protocol=SASL_SSL in {props})" in one_line_error(result)


async def test_a_signal_while_connecting_stops_at_once_with_exit_0() -> None:
    # A listener that accepts and never answers: the command waits in its first request.
    connected = asyncio.Event()

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        await reader.read()  # until the command goes away
        writer.close()

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        proc = await spawn("groups", "-b", f"127.0.0.1:{port}", "--connect-timeout", "60")
        async with reaped(proc):
            async with asyncio.timeout(30):
                await connected.wait()
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(5):
                _, err = await proc.communicate()
    finally:
        server.close()
    assert proc.returncode == 0, err.decode()
    assert err.decode().strip() == "consumergroup: SIGTERM: stopped"


# ----------------------------------------------------------- Kafka's tools' command lines


async def test_kafka_consumer_groups_flags_work_as_aliases(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """An operator types kafka-consumer-groups.sh's flags: each was rejected as unknown."""
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(10)])
    group = await consumed_group(bootstrap, topic, 2, 10)
    await produce(bootstrap, topic, [b"w%d" % i for i in range(4)])
    server = ("--bootstrap-server", bootstrap)

    listed = await run_cli(*server, "--list")
    assert listed.code == 0 and group in listed.out.split(), (listed.out, listed.err)

    described = await run_cli(*server, "--describe", "--group", group)
    assert described.code == 0, described.err
    header = next(line for line in described.out.splitlines() if "CURRENT-OFFSET" in line)
    assert header.split()[:5] == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    rows = [line.split() for line in described.out.splitlines() if line.split()[:1] == [topic]]
    assert len(rows) == 2
    assert sum(int(r[2]) for r in rows) == 10 and sum(int(r[4]) for r in rows) == 4
    assert all(int(r[3]) - int(r[2]) == int(r[4]) for r in rows), rows
    as_json = await run_cli("describe", "-g", group, "-b", bootstrap, "--json")
    offsets = json.loads(as_json.out)["offsets"]
    assert sum(o["lag"] for o in offsets) == 4 and {o["topic"] for o in offsets} == {topic}

    dry = await run_cli(
        *server, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--dry-run"
    )
    assert dry.code == 0, dry.err
    assert "dry run" in dry.err
    executed = await run_cli(
        *server, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
        "--execute",
    )  # fmt: skip
    assert executed.code == 0, executed.err
    lag = json.loads((await run_cli("lag", "--group", group, *server, "--json")).out)
    assert [r["committed"] for r in lag] == [0, 0]

    deleted = await run_cli(*server, "--delete", "--group", group)
    assert deleted.code == 0, deleted.err
    gone = await run_cli(*server, "--describe", "--group", group)
    assert gone.code == 1


async def test_reset_offsets_usage_with_kafka_flags_is_checked_before_any_broker() -> None:
    for args, says in [
        (["--reset-offsets", "--group", "g", "--to-earliest"], "--topic TOPIC"),
        (["--reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest"],
         "--all-topics"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--execute",
          "--dry-run"], "--dry-run"),
        (["describe", "g1", "--group", "g2"], "two groups"),
        (["describe"], "Missing argument 'GROUP'"),
    ]:  # fmt: skip
        result = await run_cli("--bootstrap-server", "127.0.0.1:1", *args)
        assert result.code == 2, (args, result.err)
        assert says in result.err and "Traceback" not in result.err, result.err


async def test_lag_shows_dash_never_a_made_up_zero(bootstrap: str, new_topic: TopicFactory) -> None:
    """A partition never committed shows "-" as COMMITTED and LAG, and so does the total
    when no partition has a lag (it printed "total lag 0")."""
    read, other = await new_topic(partitions=1), await new_topic(partitions=2)
    await produce(bootstrap, read, [b"x"])
    await produce(bootstrap, other, [b"y"] * 3)
    group = await consumed_group(bootstrap, read, 1, 1)
    result = await run_cli("lag", group, "-b", bootstrap, "--topic", other)
    assert result.code == 0, result.err
    assert "total lag -" in result.out, result.out
    rows = [line.split() for line in result.out.splitlines() if line.split()[:1] == [other]]
    assert [r[2] for r in rows] == ["-", "-"] and [r[4] for r in rows] == ["-", "-"], rows
    assert "0" not in [r[2] for r in rows]


@pytest.mark.kafka_only("Tansu reports no member assignments, so no owned partitions")
async def test_describe_shows_each_owned_partition_with_its_owner_and_commit(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    async with members(bootstrap, group, topic, 1, 2), ClusterAdmin([bootstrap]) as admin:
        [desc] = await admin.describe_groups([group])
        result = await run_cli("describe", group, "-b", bootstrap, "--offsets")
        committed = await admin.list_consumer_group_offsets(group)
    assert result.code == 0, result.err
    rows = [line.split() for line in result.out.splitlines() if line.split()[:1] == [topic]]
    assert [r[1] for r in rows] == ["0", "1"], result.out
    [member] = desc.members
    for r in rows:
        assert r[5] == member.member_id  # CONSUMER-ID
        # CURRENT-OFFSET is the group's commit (the member commits its start position, as
        # Java's auto-commit does), "-" only where there is none.
        assert r[2] == str(committed.get((topic, int(r[1])), "-")), (rows, committed)


async def test_kafka_topics_flags_describe_create_and_delete(bootstrap: str) -> None:
    name = unique("kt")
    created = await run_cli(
        "topics", "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", "2"
    )
    assert created.code == 0, created.err
    # kafka-topics.sh's shape, no subcommand: --describe with --topic and no --group.
    described = await run_cli("--bootstrap-server", bootstrap, "--describe", "--topic", name)
    assert described.code == 0, described.err
    rows = [line.split() for line in described.out.splitlines() if line.split()[:1] == [name]]
    assert [r[1] for r in rows] == ["0", "1"], described.out
    assert all(r[2].isdigit() for r in rows), rows  # a leader
    as_json = json.loads((await run_cli("topics", "-b", bootstrap, "--describe", "-t", name,
                                        "--json")).out)  # fmt: skip
    assert [p["partition"] for p in as_json] == [0, 1] and all(p["isr"] for p in as_json)

    deleted = await run_cli("topics", "-b", bootstrap, "--delete", "--topic", name)
    assert deleted.code == 0, deleted.err
    async with ClusterAdmin([bootstrap]) as admin:
        for _ in range(100):
            if name not in {t.name for t in await admin.list_topics()}:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"{name} still listed after --delete")
    again = await run_cli("topics", "-b", bootstrap, "--delete", "--topic", name)
    assert again.code == 2 and "does not exist" in one_line_error(again)
