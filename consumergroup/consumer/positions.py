"""Turning start offsets into real positions, many partitions per request.

OLDEST is ListOffsets(EARLIEST). NEWEST is taken from a Fetch high watermark
(last stable offset under read_committed), probed at ListOffsets(LATEST): on
Apache Kafka that probe returns no records, and it stays right on brokers whose
ListOffsets LATEST answer lags the log end (Tansu answers the last batch's base
offset + 1).

Explicit offsets are checked against the log like sarama's
``chooseStartingOffset``: one short Fetch at the offset tells whether it lies in
the log. An offset outside is *invalid* and follows ``consumer.offsets.reset``
(oldest / newest / error; None follows ``offsets.initial``), with a warning.
Outside means: OFFSET_OUT_OF_RANGE, below the log start, or (on a broker that
answers a fetch past the log end with an empty record set instead of
OFFSET_OUT_OF_RANGE, the ``empty_past_log_end`` quirk: Tansu, where a consumer
would otherwise wait forever) above the high watermark. On Apache Kafka an offset
above the high watermark may well be in the log: the high watermark of a leader
elected a moment ago, or of a follower, lags behind the last leader's.

A replica's answer may be stale: after a leader change the member's metadata may
still name a follower that lags (a restarted one, catching up), and Kafka lets a
follower serve a consumer's Fetch (v11+). So an invalid verdict is only acted on
once the leaders confirm it, asked again after a metadata refresh
(``metadata.retry``): committed offsets are never thrown away on one replica's word
(a partition re-read from the log start after a rolling restart).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..config import OFFSET_NEWEST, OFFSET_OLDEST
from ..errors import (
    ConfigurationError,
    ConsumerError,
    OffsetOutOfRangeError,
    error_for_code,
    raise_for_code,
)
from ..net.protocol import FetchRequest, ListOffsetsRequest
from ..retry import retrying
from .records import decode_records

if TYPE_CHECKING:
    from ..client import Client
    from ..config import Config

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Max wait of a probing Fetch. Not 0: Tansu answers a zero-wait Fetch with no topics.
PROBE_WAIT_MS = 1
#: Attempts at a probe whose answer leaves out some partitions before giving up on them.
PROBE_ATTEMPTS = 3


def _by_topic(items: Mapping[TopicPartition, Any]) -> list[tuple[str, list[Any]]]:
    out: dict[str, list[Any]] = {}
    for (topic, partition), value in items.items():
        out.setdefault(topic, []).append(
            (partition, *value) if isinstance(value, tuple) else (partition, value)
        )
    return list(out.items())


def _by_leader(
    client: Client, items: Mapping[TopicPartition, Any]
) -> dict[int, dict[TopicPartition, Any]]:
    out: dict[int, dict[TopicPartition, Any]] = {}
    for tp, value in items.items():
        out.setdefault(client.leader_id(*tp), {})[tp] = value
    return out


def reset_policy(config: Config) -> str:
    """``consumer.offsets.reset``, with None resolved from ``offsets.initial``."""
    offsets = config.consumer.offsets
    return offsets.reset or ("oldest" if offsets.initial == OFFSET_OLDEST else "newest")


async def list_offsets(
    client: Client, isolation: int, wanted: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """ListOffsets for ``{tp: -2 (earliest) | -1 (latest) | a timestamp in ms}``, one request
    per leader; a timestamp maps to the first offset at or after it (-1: none).

    A retriable answer (NOT_LEADER_OR_FOLLOWER: a leader that moved, or one that Apache
    Kafka names in its metadata just before it serves the partition) refreshes metadata
    and asks again, per ``metadata.retry``."""
    out: dict[TopicPartition, int] = {}

    async def attempt() -> None:
        todo = {tp: ts for tp, ts in wanted.items() if tp not in out}
        for topic, partition in todo:
            await client.leader(topic, partition)  # makes sure the leader is known
        for node, tps in _by_leader(client, todo).items():
            conn = await client.connection(node)
            resp = await conn.send(ListOffsetsRequest(isolation, _by_topic(tps)))
            for topic, partitions in resp.topics:
                for partition, code, *rest in partitions:
                    if not code:
                        out[(topic, partition)] = rest[-1]
                        continue
                    error = error_for_code(code)(f"ListOffsets {topic}/{partition}")
                    if error.retriable:
                        await client.refresh_metadata(*{t for t, _ in todo})
                    raise error

    await retrying("ListOffsets", attempt, client.config.metadata.retry)
    return out


async def _fetch_at(
    client: Client, isolation: int, at: Mapping[TopicPartition, int], max_bytes: int
) -> dict[TopicPartition, tuple[Any, ...]]:
    """One short Fetch per leader at ``at``'s offsets, ``max_bytes`` per partition: the
    answer's partition entries (aiokafka's tuple layout) by partition, retried for the
    partitions an answer leaves out; those no answer carries are missing from the result."""
    for topic, partition in at:
        await client.leader(topic, partition)
    out: dict[TopicPartition, tuple[Any, ...]] = {}
    for _ in range(PROBE_ATTEMPTS):
        todo = {tp: (off, max_bytes) for tp, off in at.items() if tp not in out}
        if not todo:
            break
        for node, tps in _by_leader(client, todo).items():
            conn = await client.connection(node)
            req = FetchRequest(PROBE_WAIT_MS, 1, max_bytes, isolation, _by_topic(tps))
            resp = await conn.send(req)
            for topic, partitions in resp.topics:
                for p in partitions:
                    if (topic, p[0]) in tps:
                        out[(topic, p[0])] = (resp.API_VERSION, *p)
    return out


async def probe(
    client: Client, config: Config, at: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int, int, int]]:
    """One short Fetch per leader at ``at``'s offsets (1 byte per partition).

    Returns ``{tp: (error_code, high_watermark, last_stable_offset,
    log_start_offset)}``; -1 where the broker's Fetch version has no such field.
    Partitions the broker leaves out of every answer are missing from the result.
    """
    isolation = int(config.consumer.isolation_level == "read_committed")
    return {
        tp: (p[1], p[2], p[3], p[4] if version >= 5 else -1)
        for tp, (version, *p) in (await _fetch_at(client, isolation, at, 1)).items()
    }


async def offsets_for_times(
    client: Client, stamps: Mapping[TopicPartition, int], *, read_committed: bool = False
) -> dict[TopicPartition, int | None]:
    """The first offset whose record's timestamp is at or after each ``stamps`` value
    (milliseconds since the epoch); None where no record is that recent.

    ListOffsets by timestamp answers this, but not every broker reliably: Tansu answers
    offset 0 for a time after its last record, where Kafka answers -1. So the answer
    is checked against the log: the record at the returned offset is fetched, and an
    offset at or past the end, or whose record is older than asked, means none.
    """
    isolation = int(read_committed)
    found = await list_offsets(client, isolation, stamps)
    listed = {tp: off for tp, off in found.items() if off >= 0}
    out: dict[TopicPartition, int | None] = {tp: listed.get(tp) for tp in stamps}
    fetch_bytes = client.config.consumer.fetch.default
    for tp, (version, *p) in (await _fetch_at(client, isolation, listed, fetch_bytes)).items():
        raise_for_code(p[1], f"Fetch {tp[0]}/{tp[1]}")
        end = p[3] if read_committed else p[2]
        if end >= 0 and listed[tp] >= end:
            out[tp] = None  # at or past the end: no such record
            continue
        aborted, records = (p[-3] if version >= 11 else p[-2]), p[-1]
        messages = decode_records(
            *tp, records, listed[tp], read_committed=read_committed, aborted_transactions=aborted
        ).messages
        # No message to check (a batch larger than the fetch size, only control records):
        # nothing contradicts the broker.
        if messages and messages[0].timestamp_ms < stamps[tp]:
            out[tp] = None
    return out


async def _newest(
    client: Client, config: Config, wanted: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The log end (HWM, or LSO under read_committed) of each partition in ``wanted``."""
    isolation = int(config.consumer.isolation_level == "read_committed")
    latest = await list_offsets(client, isolation, {tp: -1 for tp in wanted})
    marks = await probe(client, config, latest)
    out: dict[TopicPartition, int] = {}
    for tp, listed in latest.items():
        code, hwm, lso, _ = marks.get(tp, (0, -1, -1, -1))
        raise_for_code(code, f"Fetch {tp[0]}/{tp[1]}")
        mark = lso if isolation else hwm
        out[tp] = mark if mark >= 0 else listed
    return out


async def resolve_offsets(
    client: Client, config: Config, wanted: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Map each partition's requested offset to a real one (explicit offsets pass through)."""
    isolation = int(config.consumer.isolation_level == "read_committed")
    out = {tp: off for tp, off in wanted.items() if off >= 0}
    oldest = {tp: -2 for tp, off in wanted.items() if off == OFFSET_OLDEST}
    newest = {tp: -1 for tp, off in wanted.items() if off == OFFSET_NEWEST}
    bad = {
        tp: off
        for tp, off in wanted.items()
        if off < 0 and off not in (OFFSET_OLDEST, OFFSET_NEWEST)
    }
    if bad:
        raise ConfigurationError(
            f"offsets {bad} are neither >= 0 nor OFFSET_OLDEST ({OFFSET_OLDEST}) / "
            f"OFFSET_NEWEST ({OFFSET_NEWEST})"
        )
    if oldest:
        out.update(await list_offsets(client, isolation, oldest))
    if newest:
        out.update(await _newest(client, config, newest))
    return out


async def resolve_start_offsets(
    client: Client,
    config: Config,
    wanted: Mapping[TopicPartition, int],
    validated: Collection[TopicPartition] = (),
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, ConsumerError]]:
    """:func:`resolve_offsets`, plus the range check of explicit offsets (but those of
    ``validated``: their first fetch checks them by leader epoch, and range).

    Returns ``(offsets, failed)``: an invalid explicit offset is replaced by the
    oldest or newest offset per ``consumer.offsets.reset``, or, under the
    ``"error"`` policy, left out of ``offsets`` and reported in ``failed``.
    """
    offsets = await resolve_offsets(client, config, wanted)
    explicit = {tp: off for tp, off in wanted.items() if off >= 0 and tp not in validated}
    if not explicit:
        return offsets, {}
    invalid = await _outside(client, config, explicit)
    retry = config.metadata.retry
    for _ in range(max(retry.max, 1)):
        if not invalid:
            return offsets, {}
        # Confirm with the leaders of now: a stale one (or a follower) may have answered.
        await asyncio.sleep(retry.backoff)
        await client.refresh_metadata(*{topic for topic, _ in invalid})
        invalid = await _outside(client, config, {tp: explicit[tp] for tp in invalid})
    if not invalid:
        return offsets, {}
    policy = reset_policy(config)
    failed: dict[TopicPartition, ConsumerError] = {}
    if policy == "error":
        for tp, why in invalid.items():
            offsets.pop(tp, None)
            failed[tp] = ConsumerError(
                f"{why}; set consumer.offsets.reset to 'oldest' or 'newest' to reset automatically",
                topic=tp[0],
                partition=tp[1],
                cause=OffsetOutOfRangeError(),
            )
        return offsets, failed
    target = OFFSET_OLDEST if policy == "oldest" else OFFSET_NEWEST
    reset = await resolve_offsets(client, config, dict.fromkeys(invalid, target))
    for tp, why in sorted(invalid.items()):
        log.warning(
            "%s/%d: %s; starting at the %s offset %d instead (consumer.offsets.reset)",
            *tp,
            why,
            policy,
            reset[tp],
        )
    offsets.update(reset)
    return offsets, failed


async def _outside(
    client: Client, config: Config, explicit: Mapping[TopicPartition, int]
) -> dict[TopicPartition, str]:
    """The offsets of ``explicit`` that one probe shows outside the log, and why."""
    outside: dict[TopicPartition, str] = {}
    for tp, (code, hwm, _, log_start) in (await probe(client, config, explicit)).items():
        off = explicit[tp]
        if code == OffsetOutOfRangeError.errno:
            outside[tp] = f"offset {off} is out of range"
        elif code == 0 and log_start >= 0 and off < log_start:
            outside[tp] = f"offset {off} is below the log start {log_start}"
        elif code == 0 and hwm >= 0 and off > hwm and await _empty_past_end(client, tp):
            outside[tp] = f"offset {off} is beyond the log end {hwm}"
        # Other errors (leader moving, ...) are the fetch task's to handle.
    return outside


async def _empty_past_end(client: Client, tp: TopicPartition) -> bool:
    """Whether ``tp``'s leader has the ``empty_past_log_end`` quirk (a cached connection)."""
    conn = await client.connection(client.leader_id(*tp))
    return conn.quirks.empty_past_log_end
