"""Static membership (KIP-345) on the broker: restarts without rebalances, close, fencing.

What Tansu does (measured with raw JoinGroup v5 / Heartbeat v3 / LeaveGroup v3): it derives
a static member's id from its group_instance_id and hands the SAME id back when the instance
rejoins, at the same generation, with its stored assignment and no rebalance of the others.
So it never answers FENCED_INSTANCE_ID (Kafka gives the restarted instance a new id and
fences the old one); the fencing test makes the broker's answer FENCED_INSTANCE_ID with a
loopback proxy instead. Tansu also answers a static member that rejoins a stable group with
its stored assignment even when its subscription changed (Kafka rebalances then), so the
second round of a cooperative rebalance never starts when the member that revoked is static:
these tests use static members with the eager range assignor.
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import consumergroup as cg
from consumergroup.errors import FencedInstanceIdError
from consumergroup.testing import EmbeddedBroker, KafkaCluster, free_port
from tests.conftest import TopicFactory, unique
from tests.helpers import KafkaFrameProxy, ProxyLink, produce
from tests.integration.cli_support import run_cli
from tests.integration.group_support import (
    group_config,
    offsets_by_partition,
    running_member,
    wait_for,
)
from tests.integration.test_cooperative import Tracker

pytestmark = pytest.mark.slow

ROOT = str(Path(__file__).parents[2])


def static_config(instance_id: str, **overrides: object) -> cg.Config:
    """A member with a group_instance_id (and the default, eager, range assignor)."""
    config = group_config(**overrides)
    config.consumer.group.instance_id = instance_id
    return config


class Child:
    """tests.integration.member_process as a static member, reading its JSON lines."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance_id: str) -> None:
        self.args = (bootstrap, group, topic, "--instance-id", instance_id)
        self.topic = topic
        self.claims: list[dict[str, list[int]]] = []
        self.seen: list[tuple[str, int, int]] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def start(self, *, held: bool = False) -> None:
        """Start the process; ``held``: it imports everything, then waits for :meth:`go`
        before it joins (``ready`` is set once it waits)."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.member_process",
            *self.args,
            *(["--held"] if held else []),
            stdin=asyncio.subprocess.PIPE if held else None,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        self._reader = asyncio.create_task(self._read())

    def go(self) -> None:
        """A held child joins now."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            event = json.loads(line)
            if "ready" in event:
                self.ready.set()
            elif "claims" in event:
                self.claims.append(event["claims"])
            elif "p" in event:  # a handled batch (not a revoked or lost event)
                self.seen.extend((self.topic, event["p"], o) for o in event["offsets"])

    def owned(self) -> int:
        return sum(len(p) for p in self.claims[-1].values()) if self.claims else 0

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()


async def test_static_member_killed_and_restarted_causes_no_rebalance(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    await killed_and_restarted(bootstrap, await new_topic(partitions=4))


@pytest.mark.kafka
async def test_static_member_killed_and_restarted_causes_no_rebalance_on_kafka(
    kafka_cluster: KafkaCluster,
) -> None:
    """Needs a real cluster: Kafka gives the restarted instance a new member id and fences
    the old one (Tansu hands the same id back), and must still move no partition."""
    topic = unique("static")
    await kafka_cluster.create_topic(topic, 4)
    await killed_and_restarted(kafka_cluster.bootstrap, topic, describe=True)


async def describe_json(bootstrap: str, group: str) -> dict[str, Any]:
    """``consumergroup describe GROUP --json`` (a subprocess, as users run it)."""
    result = await run_cli("describe", group, "--bootstrap", bootstrap, "--json", timeout=60)
    assert result.code == 0, result.err
    described: dict[str, Any] = json.loads(result.out)
    return described


async def killed_and_restarted(bootstrap: str, topic: str, *, describe: bool = False) -> None:
    """A static child process (4 partitions, 2 of them) SIGKILLed and restarted within the
    session timeout: our other member sees no rebalance; with ``describe``, the CLI's
    ``describe --json`` shows both members' client id, host and assignment meanwhile."""
    group = unique()
    await produce(bootstrap, topic, [str(i).encode() for i in range(400)])
    first = Child(bootstrap, group, topic, "static-child")
    survivor = Tracker("survivor")
    # Held at its imports (seconds at CI's load), so the bound below times the join only.
    await first.start(held=True)
    second: Child | None = None
    try:
        async with asyncio.timeout(120):
            await first.ready.wait()
        first.go()
        await wait_for(lambda: first.owned() == 4, 60, "the child to own everything")
        async with running_member(
            bootstrap, group, [topic], survivor, static_config("static-survivor")
        ) as (member, _):
            await wait_for(
                lambda: len(survivor.owned_now()) == 2 and first.owned() == 2, 60, "a 2/2 split"
            )
            await wait_for(lambda: len({*first.seen, *survivor.seen}) >= 400, 60, "the first 400")
            before = member.stats()
            session, owned = survivor.session, survivor.owned_now()
            # The restart must come within the child's 6 s session: a new interpreter and
            # its imports took 3-7 s of that at a load of 20-34 (the session expired, the
            # broker rebalanced, the test failed), so the second child is started first and
            # held at its imports; what the session then times is our member's rejoin.
            second = Child(bootstrap, group, topic, "static-child")
            await second.start(held=True)
            async with asyncio.timeout(60):
                await second.ready.wait()
            # Let the generation settle: a static rejoin within about a second of the
            # SyncGroup made Tansu start a rebalance in our runs (Kafka does not).
            await asyncio.sleep(2.0)
            await first.kill()
            second.go()
            await produce(bootstrap, topic, [str(i).encode() for i in range(400, 600)])
            await wait_for(lambda: bool(second.claims), 60, "the restarted child's claims")
            await wait_for(
                lambda: len({*first.seen, *second.seen, *survivor.seen}) >= 600, 60, "all 600"
            )
            if describe:
                described = await describe_json(bootstrap, group)
                assert described["state"] == "Stable" and len(described["members"]) == 2
                shown = {(m["client_id"], m["host"].lstrip("/")) for m in described["members"]}
                assert shown == {("test", "127.0.0.1")}, described
                assignments = sorted(
                    p
                    for m in described["members"]
                    for a in m["assignment"]
                    for p in a["partitions"]
                )
                assert assignments == [0, 1, 2, 3], described
            after = member.stats()
            # The others saw nothing: same session, generation, claims; no rebalance.
            assert survivor.session is session and survivor.owned_now() == owned
            assert (after.generation_id, after.rebalances) == (
                before.generation_id,
                before.rebalances,
            )
            assert not survivor.revoked and not survivor.lost and len(survivor.sessions) == 1
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
    # The restarted instance got its old partitions back and resumed from its commits: the
    # child commits before printing, so nothing printed by the first run is handled again.
    child_partitions = {(topic, p) for p in range(4)} - owned
    assert {(t, p) for t, parts in second.claims[-1].items() for p in parts} == child_partitions
    assert not set(first.seen) & set(second.seen)
    handled = offsets_by_partition(first.seen + second.seen + survivor.seen)
    assert sum(len(c) for c in handled.values()) == 600, "a message was lost"


@pytest.mark.parametrize("leave_group", [None, True])
async def test_static_member_close_sends_leave_group_only_when_asked(
    bootstrap: str, new_topic: TopicFactory, leave_group: bool | None
) -> None:
    topic = await new_topic(partitions=4)
    group = unique()
    a, b = Tracker("a"), Tracker("b")
    async with running_member(bootstrap, group, [topic], b, static_config("b")) as (member_b, _):
        member_a = cg.ConsumerGroup([bootstrap], group, static_config("a"))
        task = asyncio.create_task(member_a.run([topic], a))
        try:
            await wait_for(
                lambda: len(a.owned_now()) == 2 and len(b.owned_now()) == 2, 60, "a 2/2 split"
            )
            generation = member_b.stats().generation_id
            # When b's join won the race with a's, b had a generation alone and gave a its
            # share back (eager: all four revoked, two assigned): only what follows counts.
            revoked = len(b.revoked)
            await member_a.close(leave_group=leave_group)
            await asyncio.wait_for(task, 10)
        finally:
            await member_a.close()
        closed = time.monotonic()
        if leave_group:
            # LeaveGroup: the coordinator rebalances at once.
            await wait_for(
                lambda: (
                    member_b.stats().generation_id != generation
                    or member_b.state is not cg.GroupState.STABLE
                ),
                5,
                "b to see the rebalance",
            )
        else:
            # No LeaveGroup: b sees nothing until the session timeout evicts a.
            await asyncio.sleep(3.0)
            assert member_b.stats().generation_id == generation
            assert len(b.owned_now()) == 2 and not b.revoked[revoked:]
        await wait_for(lambda: len(b.owned_now()) == 4, 60, "b to take everything")
        if not leave_group:
            assert time.monotonic() - closed >= 3.0


class RequestCounter(KafkaFrameProxy):
    """Counts the requests of each (client id, api key) on their way to the broker."""

    def __init__(self, target_port: int, listen_port: int) -> None:
        super().__init__(target_port, listen_port)
        self.seen: Counter[tuple[str, int]] = Counter()

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        key, _, _, id_len = struct.unpack_from(">hhih", frame, 0)
        self.seen[(frame[10 : 10 + max(id_len, 0)].decode(), key)] += 1
        await super().forward_request(link, frame)


@pytest.mark.parametrize("leave_group", [None, True])
async def test_a_static_member_closed_mid_join_leaves_only_when_asked(
    leave_group: bool | None,
) -> None:
    """close() during a held rejoin is quick either way, and a static member's LeaveGroup
    (posted behind the abandoned JoinGroup and sent on a fresh connection) goes out only
    with close(leave_group=True) (KIP-345)."""
    leave_group_key = 13
    proxy_port = free_port()
    topic = unique("static-join")
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        RequestCounter(broker.port, proxy_port) as proxy,
    ):
        await broker.create_topic(topic, 2)
        group = unique()
        config = static_config("closing")
        config.client_id = "closing"
        member = cg.ConsumerGroup([proxy.address], group, config)
        handler = Tracker("closing")
        run = asyncio.create_task(member.run([topic], handler))
        try:
            await wait_for(lambda: len(handler.owned_now()) == 2, 60, "the first generation")
            async with running_member(
                proxy.address, group, [topic], Tracker("other"), static_config("other")
            ):
                # The newcomer's join makes the first member rejoin; Tansu holds that join.
                await wait_for(lambda: member.state is cg.GroupState.JOINING, 30, "the held rejoin")
                await asyncio.sleep(0.5)
                started = time.monotonic()
                await asyncio.wait_for(member.close(leave_group=leave_group), 15)
                took = time.monotonic() - started
                await asyncio.wait_for(run, 2)
        finally:
            await member.close()
    assert took < 3.0, f"close() took {took:.1f}s"
    # With leave_group: posted behind the abandoned JoinGroup, and on a fresh connection.
    sent = proxy.seen[("closing", leave_group_key)]
    assert sent == (2 if leave_group else 0), proxy.seen


class FencingProxy(KafkaFrameProxy):
    """Answers the Heartbeats of ``client_id`` with FENCED_INSTANCE_ID once ``fence`` is set."""

    def __init__(self, target_port: int, listen_port: int, client_id: str) -> None:
        super().__init__(target_port, listen_port)
        self.client_id = client_id
        self.fence = False

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        """Heartbeat v1+ response: correlation id, throttle_time_ms (int32), error_code."""
        if key == 12 and version >= 1 and client_id == self.client_id and self.fence:
            return frame[:8] + struct.pack(">h", FencedInstanceIdError.errno) + frame[10:]
        return frame


async def test_fenced_instance_id_ends_the_member_with_a_clear_error() -> None:
    proxy_port = free_port()
    topic = unique("fence")
    async with (
        EmbeddedBroker(advertised_port=proxy_port) as broker,
        FencingProxy(broker.port, proxy_port, client_id="victim") as proxy,
    ):
        await broker.create_topic(topic, 2)
        config = static_config("shared-id")
        config.client_id = "victim"
        victim = Tracker("victim")
        member = cg.ConsumerGroup([f"127.0.0.1:{proxy_port}"], unique(), config)
        task = asyncio.create_task(member.run([topic], victim))
        try:
            await wait_for(lambda: len(victim.owned_now()) == 2, 60, "the victim's claims")
            proxy.fence = True
            with pytest.raises(FencedInstanceIdError) as info:
                await asyncio.wait_for(task, 30)
        finally:
            await member.close()
    message = str(info.value)
    assert "shared-id" in message and "consumer.group.instance_id" in message
    assert member.stats().state in (cg.GroupState.FAILED, cg.GroupState.CLOSED)
    assert member.stats().error is not None and "shared-id" in member.stats().error
    # Fenced: the partitions are someone else's now, so on_lost, not on_revoked.
    assert victim.lost and not victim.revoked
