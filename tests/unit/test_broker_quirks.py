"""Broker quirks are chosen from the ApiVersions answer, and the orphaned-leader poke's rounds."""

from __future__ import annotations

import logging

import pytest

from consumergroup.net.quirks import (
    NO_QUIRKS,
    ORPHANED_ROUNDS,
    BrokerQuirks,
    OrphanedLeaderPoke,
    detect_quirks,
)

# Tansu 0.6's ApiVersions answer (key: (min, max)), as the embedded broker sends it.
TANSU = {
    0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6),
    11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1),
    18: (0, 4), 19: (0, 7), 20: (0, 6), 21: (0, 2), 22: (0, 5), 24: (0, 5), 25: (0, 4),
    26: (0, 4), 28: (0, 4), 29: (0, 3), 30: (0, 3), 32: (0, 4), 36: (0, 2), 42: (0, 2),
    44: (0, 1), 46: (0, 0), 50: (0, 0), 51: (0, 0), 60: (0, 1), 69: (0, 0), 71: (0, 0),
    75: (0, 0),
}  # fmt: skip
# Apache Kafka 1.0's group and partition APIs, enough to tell it from a re-implementation.
KAFKA_1_0 = {**{k: (0, 1) for k in range(0, 38)}, 23: (0, 0), 37: (0, 0)}


def test_tansu_has_the_quirks_and_apache_kafka_none() -> None:
    assert detect_quirks(TANSU) == BrokerQuirks(
        orphaned_leader=True, replays_held_join=True, empty_past_log_end=True
    )
    assert detect_quirks(KAFKA_1_0) is NO_QUIRKS
    assert str(NO_QUIRKS) == "none"
    assert str(detect_quirks(TANSU)) == "orphaned_leader, replays_held_join, empty_past_log_end"


def test_before_api_versions_nothing_is_assumed() -> None:
    assert detect_quirks({}) is NO_QUIRKS


class _Poker:
    """Records what the poke sends."""

    def __init__(self) -> None:
        self.joined_as: list[str] = []
        self.heartbeats = 0

    async def join_as(self, member_id: str) -> None:
        self.joined_as.append(member_id)

    async def heartbeat(self) -> str:
        self.heartbeats += 1
        return "no error"


async def test_the_poke_follows_stalled_rounds_under_one_absent_leader() -> None:
    log = logging.LoggerAdapter(logging.getLogger("test"), {})
    poke = OrphanedLeaderPoke(log, session_timeout=0.0)  # expired as soon as poked
    poker = _Poker()
    for _ in range(ORPHANED_ROUNDS):
        poke.round_started()
        poke.round_named(3, "gone")
        await poke.after_stalled_sync("me", poker.join_as, poker.heartbeat)
    assert poker.joined_as == ["gone"]
    # The next stalled round under the same leader: a heartbeat triggers the eviction.
    poke.round_named(3, "gone")
    await poke.after_stalled_sync("me", poker.join_as, poker.heartbeat)
    assert (poker.joined_as, poker.heartbeats) == (["gone"], 1)


async def test_the_first_stalled_round_is_explained_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The member waited ~50 s (two rounds at the default session timeout) in silence before
    the first word about an absent leader; the first stalled round says what it waits for."""
    log = logging.LoggerAdapter(logging.getLogger("test.quirk"), {})
    poke = OrphanedLeaderPoke(log, session_timeout=10.0)
    poker = _Poker()
    poke.round_named(3, "gone")
    with caplog.at_level(logging.WARNING, logger="test.quirk"):
        await poke.after_stalled_sync("me", poker.join_as, poker.heartbeat)
    [record] = caplog.records
    assert "named leader gone but no SyncGroup completed" in record.getMessage()
    assert "about 13 s" in record.getMessage() and poker.joined_as == []


async def test_no_poke_when_this_member_leads_or_the_group_forms() -> None:
    log = logging.LoggerAdapter(logging.getLogger("test"), {})
    poke = OrphanedLeaderPoke(log, session_timeout=0.0)
    poker = _Poker()
    for _ in range(ORPHANED_ROUNDS):
        poke.round_named(3, "me")
        await poke.after_stalled_sync("me", poker.join_as, poker.heartbeat)
    poke.round_named(4, "other")
    await poke.after_stalled_sync("me", poker.join_as, poker.heartbeat)
    poke.completed()
    poke.round_named(4, "other")
    await poke.after_stalled_sync("me", poker.join_as, poker.heartbeat)
    assert poker.joined_as == [] and poker.heartbeats == 0
