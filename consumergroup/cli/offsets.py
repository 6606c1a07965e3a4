"""``consumergroup lag GROUP`` and ``consumergroup reset-offsets GROUP``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import click

from ..admin import ClusterAdmin, TopicPartition
from ..errors import UnknownTopicOrPartitionError
from ._cluster import ClusterOptions, cluster_options
from ._common import (
    EXIT_OK,
    CliError,
    CliFailure,
    group_argument,
    run_command,
    status,
    topics_option,
)
from ._output import json_option, print_json, print_table

_F = TypeVar("_F", bound=Callable[..., Any])


async def topic_partitions(admin: ClusterAdmin, specs: Sequence[str]) -> list[TopicPartition]:
    """``T`` (every partition) or ``T:0,2`` (those) -> partitions, checked against metadata."""
    out: list[TopicPartition] = []
    for spec in specs:
        topic, _, picked = spec.partition(":")
        try:
            existing = await admin.partitions(topic)
        except UnknownTopicOrPartitionError:
            raise CliError(f"topic {topic!r} does not exist: check --topic") from None
        if not picked:
            out += [(topic, p) for p in existing]
            continue
        try:
            wanted = [int(p) for p in picked.split(",")]
        except ValueError:
            raise CliError(f"--topic {spec!r}: write TOPIC or TOPIC:0,1,2") from None
        unknown = sorted(set(wanted) - set(existing))
        if unknown:
            raise CliError(
                f"topic {topic!r} has no partition {unknown[0]}: it has {len(existing)} "
                f"(0..{len(existing) - 1})"
            )
        out += [(topic, p) for p in wanted]
    return sorted(set(out))


# ------------------------------------------------------------------------------- lag


@dataclasses.dataclass
class LagRow:
    """One partition of a group: its committed offset (None: never committed), its end
    (the high watermark) and the lag between them (None without a commit: never a made-up
    number)."""

    topic: str
    partition: int
    committed: int | None
    end: int
    lag: int | None = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.lag = None if self.committed is None else max(0, self.end - self.committed)


def total_lag(rows: Sequence[LagRow]) -> int | None:
    """The sum of the partitions' lags; None when no partition has one (shown ``-``)."""
    lags = [r.lag for r in rows if r.lag is not None]
    return sum(lags) if lags else None


async def existing_group(admin: ClusterAdmin, group: str) -> None:
    """Raise the CLI's "does not exist" failure (exit 1) unless ``group`` exists."""
    [desc] = await admin.describe_groups([group])
    if not await admin.group_exists(group, desc):
        raise CliFailure(f"group {group!r} does not exist (see: consumergroup groups)")


async def lag_rows(
    admin: ClusterAdmin, group: str, partitions: Sequence[TopicPartition] | None = None
) -> list[LagRow]:
    """The lag of ``group`` on ``partitions`` (default: those of every topic it has
    committed offsets on), by topic and partition."""
    if partitions is not None:
        committed = await admin.list_consumer_group_offsets(group, partitions)
    else:
        committed = await admin.list_consumer_group_offsets(group)
        seen = sorted({t for t, _ in committed})
        partitions = await topic_partitions(admin, seen) if seen else []
    ends = await admin.end_offsets(partitions) if partitions else {}
    return [LagRow(t, p, committed.get((t, p)), ends[(t, p)]) for t, p in sorted(partitions)]


@click.command()
@group_argument
@topics_option("Only this topic (repeatable; default: every topic the group has offsets on).")
@cluster_options
@json_option
def lag(group: str, topics: tuple[str, ...], cluster: ClusterOptions, as_json: bool) -> None:
    """Committed offset, end offset and lag of GROUP on each partition, with totals.

    The end offset is the partition's high watermark; lag = end - committed.
    Partitions of a listed topic without a committed offset show "-" (no lag), and so
    does the total when no partition has a lag. A group that does not exist exits 1.
    """

    async def run() -> int:
        async with cluster.admin() as admin:
            picked = await topic_partitions(admin, topics) if topics else None  # usage first
            await existing_group(admin, group)
            rows = await lag_rows(admin, group, picked)
        if as_json:
            print_json([dataclasses.asdict(r) for r in rows])
            return EXIT_OK
        if not rows:
            status(f"group {group!r} has no committed offsets")
            return EXIT_OK
        total = total_lag(rows)
        print_table(
            ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG"],
            [[r.topic, r.partition, r.committed, r.end, r.lag] for r in rows],
            footer=["total", len(rows), None, sum(r.end for r in rows), total],
            title=f"group {group}: total lag {'-' if total is None else total}",
        )
        return EXIT_OK

    raise SystemExit(run_command(run))


# --------------------------------------------------------------------- reset-offsets


def _parse_datetime(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"--to-datetime {text!r} is not an ISO 8601 time: write e.g. 2026-01-31T12:00:00Z"
        ) from None
    return when if when.tzinfo is not None else when.astimezone()  # no zone: local time


async def reset_targets(
    admin: ClusterAdmin,
    partitions: list[TopicPartition],
    current: dict[TopicPartition, int],
    how: tuple[str, str | int],
) -> dict[TopicPartition, int]:
    """The new offset of each partition, clamped to the log like Kafka's tool does."""
    kind, arg = how
    earliest = await admin.earliest_offsets(partitions)
    end = await admin.end_offsets(partitions)
    if kind == "earliest":
        wanted = earliest
    elif kind == "latest":
        wanted = end
    elif kind == "datetime":
        wanted = await admin.offsets_for_time(partitions, _parse_datetime(str(arg)))
    elif kind == "offset":
        wanted = dict.fromkeys(partitions, int(arg))
    else:  # shift
        missing = [f"{t}/{p}" for t, p in partitions if (t, p) not in current]
        if missing:
            raise CliFailure(
                f"--shift-by needs a committed offset, and {', '.join(missing)} has none: use "
                "--to-earliest, --to-latest or --to-offset for those"
            )
        wanted = {tp: current[tp] + int(arg) for tp in partitions}
    return {tp: min(max(wanted[tp], earliest[tp]), end[tp]) for tp in partitions}


def reset_options(func: _F) -> _F:
    """The options of a reset: ``--topic`` or ``--all-topics``, one target
    (``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime ISO``,
    ``--shift-by N``), ``--execute`` or ``--dry-run``; check them with :func:`reset_target`."""
    options = [
        topics_option("TOPIC (every partition) or TOPIC:0,1 (repeatable)."),
        click.option("--all-topics", is_flag=True, help="Every topic the group has offsets on."),
        click.option("--to-earliest", is_flag=True, help="The first offset."),
        click.option("--to-latest", is_flag=True, help="The end offset."),
        click.option(
            "--to-offset", type=click.IntRange(min=0), help="This offset (clamped to the log)."
        ),
        click.option("--to-datetime", metavar="ISO", help="First offset at/after this time."),
        click.option("--shift-by", type=int, help="Move the current offset by N (negative: back)."),
        click.option("--execute", is_flag=True, help="Apply the change (default: a dry run)."),
        click.option("--dry-run", is_flag=True, help="Only show the change (the default)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def reset_target(
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    execute: bool,
    dry_run: bool,
) -> tuple[str, str | int]:
    """The one target :func:`reset_options` name; a usage error for anything else."""
    given: list[tuple[str, str | int | None]] = [
        ("earliest", "" if to_earliest else None),
        ("latest", "" if to_latest else None),
        ("offset", to_offset),
        ("datetime", to_datetime),
        ("shift", shift_by),
    ]
    chosen: list[tuple[str, str | int]] = [(k, arg) for k, arg in given if arg is not None]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime ISO, "
            "--shift-by N"
        )
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic TOPIC (repeatable) or --all-topics")
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run: give one of them")
    if chosen[0][0] == "datetime":
        _parse_datetime(str(chosen[0][1]))  # a usage error before any broker contact
    return chosen[0]


def print_reset(
    group: str,
    rows: Sequence[tuple[str, int, int | None, int]],
    execute: bool,
    as_json: bool,
    what: str = "offsets",
) -> None:
    """Each partition's current and new offset, and what was done (stderr)."""
    if as_json:
        print_json([{"topic": t, "partition": p, "current": c, "new": n}
                    for t, p, c, n in rows])  # fmt: skip
    else:
        print_table(
            ["TOPIC", "PARTITION", "CURRENT", "NEW"],
            [list(r) for r in rows],
            title=f"group {group}: {'reset' if execute else 'dry run, nothing changed'}",
        )
    if execute:
        status(f"reset the {what} of group {group!r} on {len(rows)} partition(s)")
    else:
        status("dry run: nothing changed; add --execute to apply")


@click.command("reset-offsets")
@group_argument
@reset_options
@cluster_options
@json_option
def reset_offsets(
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    execute: bool,
    dry_run: bool,
    cluster: ClusterOptions,
    as_json: bool,
) -> None:
    """Move GROUP's committed offsets on --topic (or --all-topics): a dry run unless --execute.

    Prints each partition's current and new offset. Refused while the group
    has members (their commits would overwrite the reset): stop them first.
    A time without a zone in --to-datetime is local time.
    """
    target = reset_target(
        topics, all_topics, to_earliest, to_latest, to_offset, to_datetime, shift_by, execute,
        dry_run,
    )  # fmt: skip

    async def run() -> int:
        async with cluster.admin() as admin:
            [desc] = await admin.describe_groups([group])
            if not desc.is_empty:
                raise CliFailure(
                    f"group {group!r} has {len(desc.members)} active member(s) (state "
                    f"{desc.state}): offsets can only be reset while it has none; stop its "
                    "consumers (or wait for their session to time out) and try again"
                )
            if all_topics:
                seen = sorted({t for t, _ in await admin.list_consumer_group_offsets(group)})
                if not seen:
                    raise CliFailure(
                        f"group {group!r} has no committed offsets: --all-topics names no "
                        "topic; give --topic TOPIC"
                    )
                partitions = await topic_partitions(admin, seen)
            else:
                partitions = await topic_partitions(admin, topics)
            current = await admin.list_consumer_group_offsets(group, partitions)
            new = await reset_targets(admin, partitions, current, target)
            if execute:
                await admin.commit_offsets(group, new)
        rows = [(t, p, current.get((t, p)), new[(t, p)]) for t, p in partitions]
        print_reset(group, rows, execute, as_json)
        return EXIT_OK

    raise SystemExit(run_command(run))
