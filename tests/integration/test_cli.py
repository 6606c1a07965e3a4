"""The ``consumergroup`` command, run as a real subprocess against the test broker.

What the user sees is the contract here: stdout lines, stderr lines, exit codes,
and what the broker holds afterwards (committed offsets prove the marks and the
final commit of a clean close).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import pty
import re
import signal
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from consumergroup.admin import ClusterAdmin
from consumergroup.cli import render_bytes
from consumergroup.testing import EmbeddedBroker, free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import produce
from tests.integration.cli_support import CLI, FAST, ROOT, cli_env, reaped, run_cli, spawn
from tests.integration.group_support import group_config, silent_leader

#: A silent member with these settings makes Kafka's coordinator hold the next JoinGroup
#: until its session ends (40 s); Tansu holds every JoinGroup half the joiner's session
#: (the silent member's own for 20 s, below its 30 s read timeout; the tests' joiner asks
#: for 60 s: 30 s). Either is far past the stops the join tests time, even at CI's load.
HELD = group_config(consumer__group__session_timeout=40.0)

pytestmark = pytest.mark.slow

LINE = re.compile(
    r"^(?P<topic>\S+)/(?P<partition>\d+)@(?P<offset>\d+) key=(?P<key>.*?) value=(?P<value>.*)$"
)


async def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The broker's committed offsets of ``group`` on ``topic`` (-1: none)."""
    async with ClusterAdmin([bootstrap]) as admin:
        got = await admin.list_consumer_group_offsets(
            group, [(topic, p) for p in range(partitions)]
        )
    return {p: got.get((topic, p), -1) for p in range(partitions)}


def parse_lines(out: str) -> list[re.Match[str]]:
    matches = [LINE.match(line) for line in out.splitlines()]
    assert all(matches), f"unexpected stdout lines:\n{out}"
    return [m for m in matches if m is not None]


def offsets_per_partition(lines: list[re.Match[str]]) -> dict[int, list[int]]:
    got: dict[int, list[int]] = {}
    for m in lines:
        got.setdefault(int(m["partition"]), []).append(int(m["offset"]))
    return got


# ----------------------------------------------------------------------------- rendering


def test_values_render_as_one_line_of_text() -> None:
    assert render_bytes(None, 10) == "null"
    assert render_bytes(b"plain", 10) == "plain"
    assert render_bytes("héllo".encode(), 10) == "héllo"
    assert render_bytes(b"\xff\xfeok", 10) == "\ufffd\ufffdok"
    assert render_bytes(b"a\nb\tc\x00", 20) == "a\\nb\\tc\\x00"
    assert render_bytes(b"y" * 30, 10) == "y" * 10 + "...(30 bytes)"


# ----------------------------------------------------------------------------- help


async def test_help_lists_the_commands_for_both_entry_points() -> None:
    result = await run_cli("--help", timeout=30)
    assert result.code == 0, result.err
    assert "consume" in result.out and "demo" in result.out
    script = Path(sys.executable).parent / "consumergroup"
    if script.exists():  # the console script of the installed package
        proc = await asyncio.create_subprocess_exec(
            str(script), "consume", "--help", stdout=asyncio.subprocess.PIPE, env=cli_env()
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0
        for option in ("--bootstrap", "--group", "--topic", "--from-beginning", "--rate"):
            assert option in out.decode()


# ----------------------------------------------------------------------------- consume


async def test_consume_prints_every_message_marks_and_commits(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    group = unique()
    values = [f"value-{i}".encode() for i in range(20)]
    values += [b"\xff\xfebin", b"line1\nline2", b"x" * 500]
    keys = [f"key-{i}".encode() for i in range(len(values))]
    await produce(bootstrap, topic, values, keys=keys)

    result = await run_cli(
        "consume", "--bootstrap", bootstrap, "--group", group, "--topic", topic,
        "--from-beginning", "--max-messages", str(len(values)), "--timeout", "60",
        "--width", "50", *FAST,
    )  # fmt: skip

    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    lines = parse_lines(result.out)
    assert len(lines) == len(values)
    assert {m["topic"] for m in lines} == {topic}
    shown = {m["key"]: m["value"] for m in lines}
    expected = {f"key-{i}": f"value-{i}" for i in range(20)}
    expected |= {"key-20": "\ufffd\ufffdbin", "key-21": "line1\\nline2"}
    expected["key-22"] = "x" * 50 + "...(500 bytes)"
    assert shown == expected
    # Every partition from offset 0, in order, nothing twice.
    per_partition = offsets_per_partition(lines)
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))
    assert f"consumed {len(values)} messages" in result.err
    # Each printed message was marked, and close() committed them: offset + 1 per partition.
    assert await committed(bootstrap, group, topic, 2) == {
        p: len(per_partition.get(p, [])) or -1 for p in range(2)
    }


async def test_several_topics_in_one_group(bootstrap: str, new_topic: TopicFactory) -> None:
    first, second = await new_topic(partitions=1), await new_topic(partitions=2)
    await produce(bootstrap, first, [b"a0", b"a1", b"a2"])
    await produce(bootstrap, second, [b"b0", b"b1", b"b2"])
    result = await run_cli(
        "consume", "-b", bootstrap, "-g", unique(), "-t", first, "--topic", second,
        "--from-beginning", "-n", "6", "--timeout", "60", *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    got = {(m["topic"], m["value"]) for m in parse_lines(result.out)}
    assert got == {(first, f"a{i}") for i in range(3)} | {(second, f"b{i}") for i in range(3)}
    assert f"{first}/0" in result.err and f"{second}/0,1" in result.err  # the claims line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_closes_cleanly_with_a_final_commit(
    bootstrap: str, new_topic: TopicFactory, sig: signal.Signals
) -> None:
    topic = await new_topic(partitions=3)
    group = unique()
    await produce(bootstrap, topic, [f"m{i}".encode() for i in range(12)])
    proc = await spawn(
        "consume", "-b", bootstrap, "-g", group, "-t", topic, "--from-beginning",
        "--timeout", "120", *FAST,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    async with reaped(proc):
        async with asyncio.timeout(60):
            while len(seen) < 12:
                line = await proc.stdout.readline()
                if not line:
                    break
                seen.append(line.decode())
        assert len(seen) == 12, seen
        proc.send_signal(sig)
        async with asyncio.timeout(15):  # a clean close is quick: commit + LeaveGroup
            rest, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert rest == b""
    stderr = err.decode()
    assert f"{sig.name}: closing" in stderr
    assert "consumed 12 messages" in stderr and "left group" in stderr
    assert "Traceback" not in stderr
    offsets = await committed(bootstrap, group, topic, 3)
    assert sum(offsets.values()) == 12


async def test_rate_mode_prints_rates_not_messages(bootstrap: str, new_topic: TopicFactory) -> None:
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [b"r"] * 200)
    # A line a second: the run lasts until --timeout, whether the join and the 200
    # messages take a second (Apache Kafka) or several (Tansu holds the JoinGroup).
    result = await run_cli(
        "consume", "-b", bootstrap, "-g", unique(), "-t", topic, "--from-beginning",
        "--rate", "--timeout", "6", *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    rate_lines = result.out.splitlines()
    assert rate_lines, "no rate line"
    assert all(re.search(r"\d msg/s +total +[\d,]+", line) for line in rate_lines), result.out
    assert "@" not in result.out  # no per-message lines
    assert "consumed 200 messages" in result.err


async def test_a_missing_topic_is_one_helpful_line_and_exit_2(bootstrap: str) -> None:
    missing = unique("no-such-topic")
    result = await run_cli("consume", "-b", bootstrap, "-g", unique(), "-t", missing, *FAST)
    assert result.code == 2
    assert result.out == ""
    [line] = result.err.strip().splitlines()
    assert line.startswith(f"Error: topic '{missing}' does not exist")
    assert "create it first or check --topic" in line


async def test_a_malformed_bootstrap_is_one_helpful_line_and_exit_2() -> None:
    result = await run_cli("consume", "-b", "not-an-address", "-g", "g", "-t", "t")
    assert result.code == 2
    [line] = result.err.strip().splitlines()
    assert line.startswith("Error: ") and "bad --bootstrap 'not-an-address'" in line


@pytest.mark.parametrize(
    "command",
    [
        ["consume", "-g", "g", "-t", "t"],
        ["consume", "-t", "t", "-p", "0"],
        ["produce", "-t", "t"],
        ["groups"],
        ["describe", "g"],
        ["lag", "g"],
        ["reset-offsets", "g", "--topic", "t", "--to-earliest"],
        ["delete", "g"],
        ["topics"],
    ],
    ids=[
        "consume-group",
        "consume-partition",
        "produce",
        "groups",
        "describe",
        "lag",
        "reset-offsets",
        "delete",
        "topics",
    ],
)
async def test_an_unreachable_bootstrap_is_one_helpful_line_and_exit_1(
    command: list[str],
) -> None:
    """Exit 2 is for usage errors: a broker that does not answer is a failure (1), with a
    line saying what to check, within a bounded time."""
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = asyncio.get_running_loop().time()
    result = await run_cli(
        command[0], "-b", address, "--connect-timeout", "3", *command[1:], timeout=30
    )
    assert result.code == 1, result.err
    assert asyncio.get_running_loop().time() - started < 20
    assert result.out == ""
    [line] = result.err.strip().splitlines()
    assert line.startswith(f"Error: no Kafka broker answered at {address}"), line
    assert "check --bootstrap" in line and "the broker is up" in line


# ------------------------------------------------------------------- README's exit codes


def readme_exit_codes() -> dict[int, str]:
    """README's exit-code table: code -> its row's meaning."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| exit code | meaning |") :].split("\n\n", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    return {int(code): meaning.strip() for code, meaning in rows}


@contextlib.asynccontextmanager
async def listener(answer: bytes | None) -> AsyncIterator[str]:
    """A loopback port that accepts and then answers ``answer`` to the first bytes it
    reads, or stays silent (None): another service on the port."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        if answer is not None:
            writer.write(answer)
        await reader.read()  # until the command goes away
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def test_the_readme_exit_code_table_is_what_the_command_does(bootstrap: str) -> None:
    """Each case: what README's row for the code says (a phrase of it), the command."""
    table = readme_exit_codes()
    dead = f"127.0.0.1:{free_port()}"
    http = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<html></html>"
    async with listener(None) as silent, listener(http) as web:
        cases: list[tuple[int, str, list[str]]] = [
            (0, "done", ["topics", "-b", bootstrap]),
            (1, "a group that does not exist", ["describe", unique(), "-b", bootstrap]),
            (1, "no Kafka broker answered", ["topics", "-b", dead]),
            (1, "accepted the connection but did not answer", ["topics", "-b", silent]),
            (2, "a bad option", ["topics", "--no-such-option"]),
            (2, "malformed bootstrap address", ["topics", "-b", "127.0.0.1"]),
            (2, "malformed bootstrap address", ["topics", "-b", "127.0.0.1:abc"]),
            (2, "an unknown topic", ["lag", "g", "-t", unique("no-such"), "-b", bootstrap]),
            (2, "another protocol answered", ["topics", "-b", web]),
            (2, "TLS/plaintext mismatch", ["topics", "--tls", "-b", bootstrap]),
        ]
        results = await asyncio.gather(
            *(run_cli(*args, "--connect-timeout", "3", timeout=30) for _, _, args in cases)
        )
    for (code, says, args), result in zip(cases, results, strict=True):
        assert says in table[code], f"README's row for {code} does not say {says!r}"
        assert result.code == code, (args, result.err)
        if code:
            assert "Traceback" not in result.err, result.err
            assert result.err.strip().splitlines()[-1].startswith("Error: "), result.err
    silent_err = results[3].err
    assert re.search(
        r"127\.0\.0\.1:\d+ accepted the connection but did not answer the Kafka ApiVersions "
        r"request within 3 s: is this a Kafka listener\?",
        silent_err,
    ), silent_err
    # 130 (a second Ctrl-C) is checked where signals are; every other code is above.
    assert set(table) == {0, 1, 2, 130}


# ----------------------------------------------------------------------------- broker


async def test_the_broker_command_serves_until_ctrl_c() -> None:
    port = free_port()
    proc = await spawn("broker", "--port", str(port))
    async with reaped(proc):
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.decode().strip() == f"127.0.0.1:{port}"
        address = f"127.0.0.1:{port}"
        created = await run_cli("topics", "-b", address, "--create", "quick", "--partitions", "2")
        assert created.code == 0, created.err
        listed = await run_cli("topics", "-b", address, "--json")
        assert {"topic": "quick", "partitions": 2} in json.loads(listed.out), listed.out
        taken = await run_cli("broker", "--port", str(port))  # the port is in use now
        assert taken.code == 1
        assert f"127.0.0.1:{port} is in use" in taken.err and "--port" in taken.err
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert err.decode().strip().splitlines()[-1] == "consumergroup: broker stopped"
    gone = await run_cli("topics", "-b", address, "--connect-timeout", "2")
    assert gone.code == 1  # nothing listens there any more


async def test_the_broker_command_restarts_on_its_port_at_once() -> None:
    """``make broker``, Ctrl-C, ``make broker``: the closed connections of the first one
    (TIME_WAIT on its port) made the free-port check refuse the port for about 60 s
    ("127.0.0.1:9092 is in use"), though the broker itself could bind it."""
    port = free_port()
    for run in range(2):
        proc = await spawn("broker", "--port", str(port))
        async with reaped(proc):
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line.decode().strip() == f"127.0.0.1:{port}", (run, line)
            # A client connected while the broker stops: the broker's side closes first
            # and its port keeps the connection in TIME_WAIT.
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            proc.send_signal(signal.SIGINT)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            writer.close()
        assert proc.returncode == 0, (run, err.decode())


# ----------------------------------------------------------------------------- demo


async def test_the_demo_rebalances_and_loses_nothing() -> None:
    # Its own embedded broker; three members; member-2 leaves a third of the way in.
    result = await run_cli("demo", "--duration", "10", "--members", "3", "--rate", "1000",
                           timeout=120)  # fmt: skip
    assert result.code == 0, result.out + result.err
    out = result.out
    assert re.search(r"member-2 left; partitions [\d,]+ moving\.\.\.", out), out
    assert re.search(r"rebalanced in \d+\.\ds \(member-1: [\d,]+; member-3: [\d,]+\)", out), out
    produced = re.search(r"produced: +([\d,]+) messages", out)
    consumed = re.search(r"consumed: +([\d,]+) deliveries, ([\d,]+) distinct", out)
    assert produced and consumed, out
    n_produced = int(produced[1].replace(",", ""))
    assert n_produced > 0
    assert int(consumed[2].replace(",", "")) == n_produced  # every message, at least once
    assert re.search(r"^ +lost: +0$", out, re.MULTILINE), out
    # Why it took seconds: Tansu holds every JoinGroup for half the session timeout.
    assert "holds each JoinGroup for about half the session timeout, 3 s here" in out, out
    assert "tasks still running" not in result.err
    assert "Traceback" not in result.err


async def test_the_demo_on_a_terminal_ends_without_its_live_footer() -> None:
    # The last frame kept "Ctrl-C stops early (clean close)." after the demo had ended.
    controller, terminal = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *CLI, "demo", "--duration", "3", "--members", "1", "--rate", "200",
            stdin=asyncio.subprocess.DEVNULL, stdout=terminal, stderr=asyncio.subprocess.PIPE,
            env=cli_env(), cwd=ROOT, start_new_session=True,
        )  # fmt: skip
        os.close(terminal)
        terminal = -1
        screen = bytearray()
        async with reaped(proc):
            loop = asyncio.get_running_loop()
            while True:
                try:
                    chunk = await asyncio.wait_for(
                        loop.run_in_executor(None, os.read, controller, 65536), 90
                    )
                except OSError:  # EIO: the demo closed the terminal (it exited)
                    break
                if not chunk:
                    break
                screen += chunk
            await asyncio.wait_for(proc.wait(), 30)
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert proc.returncode == 0
    text = screen.decode(errors="replace")
    assert "Ctrl-C stops early" in text  # the live frames had it
    last = text.rsplit("\x1b[2J", 1)[-1]  # the final frame and the summary
    assert "summary" in last and "Ctrl-C stops early" not in last, last


# ----------------------------------------------------------------------------- produce, json


async def test_produce_then_consume_json_round_trips_keys_headers_and_bytes(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=3)
    lines = "k1|first\nno separator: null key\n|empty key\nk1|second\nk2|héllo\n"
    produced = await run_cli(
        "produce", "-b", bootstrap, "-t", topic, "--key-separator", "|",
        "--header", "source=cli", "--header", "trace=a=b", stdin=lines.encode(),
    )  # fmt: skip
    assert produced.code == 0, produced.err
    assert f"produced 5 records to {topic}" in produced.err
    await produce(bootstrap, topic, [b"\xff\xfe\x00bin"], keys=[b"\x80"], partition=0)

    result = await run_cli(
        "consume", "-b", bootstrap, "-g", unique(), "-t", topic, "--from-beginning",
        "--format", "json", "-n", "6", "--timeout", "60", *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    got = [json.loads(line) for line in result.out.splitlines()]
    assert len(got) == 6
    for msg in got:
        assert set(msg) == {"topic", "partition", "offset", "timestamp", "key", "key_encoding",
                            "value", "value_encoding", "headers"}  # fmt: skip
        assert msg["topic"] == topic
        assert datetime.fromisoformat(msg["timestamp"]).tzinfo is not None

    def decoded(text: str | None, encoding: str | None) -> bytes | None:
        if text is None:
            return None
        return base64.b64decode(text) if encoding == "base64" else text.encode()

    records = {
        (decoded(m["key"], m["key_encoding"]), decoded(m["value"], m["value_encoding"])): m
        for m in got
    }
    assert set(records) == {
        (b"k1", b"first"), (None, b"no separator: null key"), (b"", b"empty key"),
        (b"k1", b"second"), (b"k2", "héllo".encode()), (b"\x80", b"\xff\xfe\x00bin"),
    }  # fmt: skip
    assert records[(None, b"no separator: null key")]["key_encoding"] is None
    assert records[(b"\x80", b"\xff\xfe\x00bin")]["value_encoding"] == "base64"
    headers = [{"key": "source", "value": "cli", "value_encoding": "text"},
               {"key": "trace", "value": "a=b", "value_encoding": "text"}]  # fmt: skip
    assert records[(b"k1", b"first")]["headers"] == headers
    # The same key lands on the same partition, in order.
    k1 = [records[(b"k1", v)] for v in (b"first", b"second")]
    assert k1[0]["partition"] == k1[1]["partition"]
    assert k1[0]["offset"] < k1[1]["offset"]


async def test_produce_sends_lines_as_they_come_and_stops_on_sigterm(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=1)
    proc = await spawn("produce", "-b", bootstrap, "-t", topic, stdin=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    async with reaped(proc):
        proc.stdin.write(b"one\ntwo\n")  # the pipe stays open: more input could follow
        await proc.stdin.drain()
        async with ClusterAdmin([bootstrap]) as admin:
            for _ in range(300):
                if (await admin.end_offsets([(topic, 0)]))[(topic, 0)] == 2:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the two lines were not produced while stdin stayed open")
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert f"produced 2 records to {topic} (stopped by SIGTERM)" in err.decode()


async def test_consume_a_partition_from_an_offset_without_a_group(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    topic = await new_topic(partitions=2)
    await produce(bootstrap, topic, [f"p1-{i}".encode() for i in range(6)], partition=1)
    result = await run_cli(
        "consume", "-b", bootstrap, "-t", topic, "--partition", "1", "--offset", "2",
        "-n", "3", "--format", "json", "--timeout", "30",
    )  # fmt: skip
    assert result.code == 0, result.err
    got = [json.loads(line) for line in result.out.splitlines()]
    assert [(m["partition"], m["offset"], m["value"]) for m in got] == [
        (1, o, f"p1-{o}") for o in (2, 3, 4)
    ]
    assert "left group" not in result.err  # no group was joined


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-g", "", "-t", "t"], "the group id must not be empty"),
        (["-g", "  ", "-t", "t"], "the group id must not be empty"),
        (["-t", "t"], "give either --group GROUP or --partition N"),
        (["-g", "g", "-t", "t", "-p", "0"], "give either --group GROUP or --partition N"),
        (["-t", "a", "-t", "b", "-p", "0"], "give exactly one --topic"),
        (["-t", "t", "-p", "0", "--offset", "soon"], "is not an offset"),
    ],
    ids=["empty-group", "blank-group", "neither", "both", "two-topics", "bad-offset"],
)
async def test_consume_usage_errors_come_before_any_broker_contact(
    args: list[str], says: str
) -> None:
    # Nothing listens on this port: a broker contact would say "no Kafka broker answered".
    started = asyncio.get_running_loop().time()
    result = await run_cli("consume", "-b", f"127.0.0.1:{free_port()}", *args, timeout=30)
    assert result.code == 2
    assert says in result.err
    assert "no Kafka broker answered" not in result.err and "Traceback" not in result.err
    assert asyncio.get_running_loop().time() - started < 20  # no dial timeout was waited


@contextlib.asynccontextmanager
async def joining_behind_a_silent_member(
    bootstrap: str, new_topic: TopicFactory, timeout: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``consume --timeout TIMEOUT`` whose JoinGroup the coordinator holds 30 s or more (a
    silent member, HELD; the command asks for a 60 s session, of which Tansu holds half),
    from its "joining group" line on: its signal handlers and its --timeout start there,
    the imports before it take seconds at CI's load. Killed if it still runs at the end."""
    topic, group = await new_topic(partitions=1), unique()
    await silent_leader(bootstrap, group, topic, HELD, partitions=1)
    proc = await spawn("consume", "-b", bootstrap, "-g", group, "-t", topic,
                       "--session-timeout", "60", "--timeout", timeout)  # fmt: skip
    assert proc.stderr is not None
    async with reaped(proc):
        async with asyncio.timeout(60):
            assert b"joining group" in await proc.stderr.readline()
        yield proc


async def ended(proc: asyncio.subprocess.Process) -> tuple[float, str]:
    """Seconds until ``proc`` exits (at most 60), and its stderr."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with asyncio.timeout(60):
        _, err = await proc.communicate()
    return loop.time() - started, err.decode()


async def test_sigterm_during_the_join_ends_the_command_at_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    async with joining_behind_a_silent_member(bootstrap, new_topic, "120") as proc:
        await asyncio.sleep(1.0)  # inside the held JoinGroup (held 30 s at least)
        assert proc.returncode is None
        proc.send_signal(signal.SIGTERM)
        took, stderr = await ended(proc)
    assert proc.returncode == 0, stderr
    # Not the rest of the held join (30 s or more): the close and the interpreter's exit,
    # seconds of wall time at CI's load.
    assert took < 20.0, f"the stop took {took:.1f}s:\n{stderr}"
    assert "SIGTERM: closing" in stderr and "Traceback" not in stderr
    assert "stopped while joining" in stderr


async def test_timeout_during_the_join_ends_the_command_at_once(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    async with joining_behind_a_silent_member(bootstrap, new_topic, "2") as proc:
        took, stderr = await ended(proc)
    assert proc.returncode == 0, stderr
    assert "--timeout 2s reached" in stderr and "stopped while joining" in stderr
    # The 2 s, the close and the exit; not the rest of the held join (30 s or more).
    assert took < 20.0, f"took {took:.1f}s (a 2 s timeout, the join held 30 s or more)"


async def test_a_broker_lost_mid_run_ends_in_one_line_never_a_traceback() -> None:
    # Its own broker, killed once the member has joined. Whether run() gives up (exit 1,
    # one line) or keeps retrying until --timeout (exit 0), stderr has no traceback.
    async with EmbeddedBroker() as broker:
        await broker.create_topic("lost", 1)
        proc = await spawn("consume", "-b", broker.bootstrap, "-g", unique(), "-t", "lost",
                           "--timeout", "20", "--connect-timeout", "2", *FAST)  # fmt: skip
        assert proc.stderr is not None
        async with reaped(proc):
            async with asyncio.timeout(60):
                assert b"joining group" in await proc.stderr.readline()
                joined = await proc.stderr.readline()
                assert b"joined group" in joined, joined
                await broker.close()
                _, rest = await proc.communicate()
    stderr = rest.decode()
    assert "Traceback" not in stderr and "ExceptionGroup" not in stderr, stderr
    if proc.returncode == 1:
        [line] = stderr.strip().splitlines()
        assert line.startswith("Error: consuming failed: ")
    else:
        assert proc.returncode == 0, stderr


async def test_consume_n_stops_without_an_early_return_warning(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """-n 5 over three partitions: the handlers return because the limit was reached and
    a close is on its way, which is not an early return (no restart warning)."""
    topic = await new_topic(partitions=3)
    await produce(bootstrap, topic, [f"w{i}".encode() for i in range(30)])
    result = await run_cli(
        "consume", "-b", bootstrap, "-g", unique(), "-t", topic, "--from-beginning",
        "-n", "5", "--timeout", "60", *FAST,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert len(result.out.splitlines()) == 5, result.out
    assert "returned while the session runs" not in result.err, result.err
