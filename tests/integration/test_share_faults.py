"""A share-group member killed (kill -9) or frozen (SIGSTOP) while it handles records, and
its share sessions seen on the wire through a proxy (epochs, a cut connection).

``kafka_only``: share groups need Apache Kafka 4.2+ (Tansu has none). The member under
test runs in its own process (``share_member_process``); a member in the test's process
takes what comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import struct
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TopicFactory, unique
from tests.helpers import ProxyLink, RoutingProxy, produce, skip_tags, uvarint
from tests.integration.share_support import (
    Collector,
    share_group,
    share_member,
    wait_for_members,
    wait_until,
)

KAFKA = "share groups need Apache Kafka 4.2+ (Tansu has none)"


class Child:
    """A share member process and what it printed."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))

    def of(self, ev: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["ev"] == ev]

    @property
    def stats(self) -> dict[str, Any]:
        return self.of("stats")[-1] if self.of("stats") else {}


@contextlib.asynccontextmanager
async def child_member(
    bootstrap: str, group: str, topic: str, *, delay: float, concurrency: int
) -> AsyncIterator[Child]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.share_member_process",
        bootstrap,
        group,
        topic,
        "--delay",
        str(delay),
        "--concurrency",
        str(concurrency),
        stdout=asyncio.subprocess.PIPE,
        cwd=str(Path(__file__).parents[2]),
    )
    child = Child(proc)
    try:
        yield child
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            await proc.wait()
        child.reader.cancel()


@pytest.mark.kafka_only(KAFKA)
async def test_a_killed_members_records_come_back_after_the_lock(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """kill -9 of a member mid-record: the records it held come to the other member once
    their lock (3 s) expires, long before the dead member's session (60 s) would have
    ended, with delivery count 2; none is lost."""
    topic = await new_topic(partitions=1)  # both members read it (two would be split)
    group = unique("share")
    await share_group(bootstrap, group, lock=3.0, session_timeout=60.0)
    await produce(bootstrap, topic, [b"v%d" % i for i in range(40)], partition=0)
    survivor = Collector("survivor")
    async with child_member(bootstrap, group, topic, delay=600.0, concurrency=10) as child:
        # From the spawn: the child's imports take seconds at CI's load.
        await wait_until(lambda: len(child.of("start")) == 10, 120, "the child to take 10")
        async with share_member(bootstrap, group, [topic], survivor, concurrency=10) as (
            member,
            _,
        ):
            await wait_until(lambda: len(survivor.seen) == 30, 60, "the other 30")
            child.proc.kill()
            await child.proc.wait()
            killed = time.monotonic()
            await wait_until(lambda: len(survivor.seen) == 40, 60, "the killed member's 10")
            # Every record accepted by the broker: none can come to the survivor again.
            await wait_until(
                lambda: member.stats().acknowledged["accept"] == 40, 60, "40 acceptances"
            )
    held = {(e["p"], e["o"]) for e in child.of("start")}
    back = {(s.partition, s.offset): s for s in survivor.seen if (s.partition, s.offset) in held}
    assert len(back) == 10 and all(s.delivery_count == 2 for s in back.values())
    # Back by the lock's expiry (Kafka 4.4 gives them back as soon as the connection
    # drops), not at the end of the killed member's session: that is 60 s, so the bound
    # leaves the survivor's fetch and dispatch 27 s at CI's load and tells the two apart.
    assert min(s.start for s in back.values()) - killed < 3.0 + 27.0
    assert len(survivor.offsets()) == 40 and set(survivor.offsets().values()) == {1}


@pytest.mark.kafka_only(KAFKA)
async def test_a_frozen_member_is_fenced_and_rejoins_without_acknowledging_stale_records(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """SIGSTOP past the session timeout: the member is fenced, its records go to the other
    member; on SIGCONT its handlers finish, but it acknowledges none of those (their
    locks expired: the broker refused nothing because nothing was sent), rejoins and
    handles new records."""
    topic = await new_topic(partitions=1)
    group = unique("share")
    await share_group(bootstrap, group, lock=2.0, session_timeout=3.0, heartbeat=0.5)
    await produce(bootstrap, topic, [b"old-%d" % i for i in range(10)], partition=0)
    other = Collector("other")
    async with child_member(bootstrap, group, topic, delay=3.0, concurrency=5) as child:
        # From the spawn: the child's imports take seconds at CI's load.
        await wait_until(lambda: len(child.of("start")) == 5, 120, "the child to take 5")
        await wait_until(lambda: bool(child.stats.get("member_id")), 30, "the child's id")
        os.kill(child.proc.pid, signal.SIGSTOP)
        frozen = {(e["p"], e["o"]) for e in child.of("start")}
        child_id, frozen_epoch = child.stats["member_id"], child.stats["member_epoch"]
        async with share_member(bootstrap, group, [topic], other, concurrency=10):
            await wait_until(lambda: len(other.offsets()) == 10, 60, "all 10 at the other")
            # Fenced: the coordinator has dropped the frozen member (its 3 s session ended).
            await wait_for_members(
                bootstrap, group, lambda ids: child_id not in ids, 60, "the child to be fenced"
            )
            os.kill(child.proc.pid, signal.SIGCONT)
            await wait_until(
                lambda: len(child.of("done")) >= 5, 60, "the thawed handlers to finish"
            )
            # A new epoch: the stats it printed on thawing still showed the old one, stable.
            await wait_until(
                lambda: (
                    child.stats.get("state") == "stable"
                    and child.stats["member_epoch"] > frozen_epoch
                ),
                60,
                "the child to rejoin",
            )
        # The child alone: the new records are its (the other member, as fast, could take
        # all 20 before the child's first fetch).
        await produce(bootstrap, topic, [b"new-%d" % i for i in range(20)], partition=0)
        await wait_until(
            lambda: len({e["o"] for e in child.of("done") if e["o"] >= 10}) == 20,
            60,
            "the child to handle the 20 new records",
        )
        child.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(child.proc.wait(), 60)
    final = child.stats
    assert final.get("final")
    parts = final["partitions"]
    assert sum(p["refused"] for p in parts) == 0  # no stale acknowledgement was sent
    handled_twice = {(s.partition, s.offset) for s in other.seen} & frozen
    assert handled_twice == frozen
    assert all(s.delivery_count >= 2 for s in other.seen if (s.partition, s.offset) in frozen)


class ShareSessionLog(RoutingProxy):
    """The client's only path to the broker, noting its share sessions: per connection,
    the session epoch of each ShareFetch (78) and ShareAcknowledge (79) in the order
    sent, and the top-level error code of each of their answers."""

    SHARE_APIS = (78, 79)

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self.epochs: dict[ProxyLink, list[int]] = {}
        self.errors: list[int] = []

    async def forward_request(self, link: ProxyLink, frame: bytes) -> None:
        key, _version, _cid, id_len = struct.unpack_from(">hhih", frame, 0)
        if key in self.SHARE_APIS:
            at = skip_tags(frame, 10 + max(id_len, 0))  # header v2 ends with tags
            for _ in range(2):  # group_id, member_id: compact strings
                size, at = uvarint(frame, at)
                at += max(size - 1, 0)
            self.epochs.setdefault(link, []).append(struct.unpack_from(">i", frame, at)[0])
        await super().forward_request(link, frame)

    def rewrite_response(self, key: int, version: int, client_id: str, frame: bytes) -> bytes:
        if key in self.SHARE_APIS:
            at = skip_tags(frame, 4)  # correlation id, header v1's tags; throttle_time_ms
            self.errors.append(struct.unpack_from(">h", frame, at + 4)[0])
        return super().rewrite_response(key, version, client_id, frame)


@pytest.mark.kafka_only(KAFKA)
async def test_share_session_epochs_count_up_and_a_cut_connection_opens_a_new_session(
    bootstrap: str, new_topic: TopicFactory
) -> None:
    """On the wire: each share session opens at epoch 0 and counts up by one per request,
    and the broker never answers a session error (a wrong epoch would be answered
    INVALID_SHARE_SESSION_EPOCH, which the member survives by opening a new session: only
    the wire shows it). Every connection cut between two waves of records: the member
    opens a new session at 0 and handles the second wave; close ends with epoch -1."""
    topic = await new_topic(partitions=2)
    group = unique("share")
    await share_group(bootstrap, group)
    handler = Collector(delay=0.01)
    proxy = ShareSessionLog(int(bootstrap.rsplit(":", 1)[1]))
    async with (
        proxy,
        share_member(proxy.address, group, [topic], handler, concurrency=8) as (member, _),
    ):

        def accepted() -> int:
            return member.stats().acknowledged["accept"]

        await wait_until(lambda: member.stats().assignment != {}, 30, "the assignment")
        await produce(bootstrap, topic, [b"a%d" % i for i in range(60)])
        await wait_until(lambda: accepted() >= 60, 60, "the first wave accepted")
        proxy.cut()
        await produce(bootstrap, topic, [b"b%d" % i for i in range(60)])
        await wait_until(lambda: accepted() >= 120, 60, "the second wave accepted")
    sessions = [epochs for epochs in proxy.epochs.values() if epochs]
    assert len(sessions) == 2, sessions  # one before the cut, one after
    for epochs in sessions:
        counted = epochs[:-1] if epochs[-1] == -1 else epochs
        assert counted == list(range(len(counted))), epochs
    assert sessions[-1][-1] == -1  # close() closed the session
    assert set(proxy.errors) == {0}, proxy.errors
    seen = handler.offsets()
    assert len(seen) == 120 and set(seen.values()) == {1}
