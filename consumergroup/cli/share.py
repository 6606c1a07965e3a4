"""``consumergroup share list | describe | lag | reset-offsets | delete``: share groups
(KIP-932), as Kafka's ``kafka-share-groups.sh`` shows and changes them.

A share group has no committed offsets: per partition it has a *start offset* (every
record below it is acknowledged) and a lag (records from there to the end not yet
acknowledged). ``lag`` shows them, ``reset-offsets`` moves the start offsets and
``delete --topic`` forgets a topic's state, both only while the group has no member.
"""

from __future__ import annotations

import click

from ..errors import GroupIdNotFoundError, NonEmptyGroupError
from ..share.admin import ShareGroupAdmin, ShareGroupDescription
from ._cluster import ClusterOptions, cluster_options
from ._common import EXIT_OK, CliFailure, group_argument, run_command, status, topics_option
from ._output import json_option, print_json, print_table
from .offsets import print_reset, reset_options, reset_target, reset_targets, topic_partitions

__all__ = ["share"]


@click.group()
def share() -> None:
    """Share groups (KIP-932, Apache Kafka 4.2+): list, describe, lag, reset-offsets, delete."""


def _no_group(group: str) -> CliFailure:
    return CliFailure(
        f"share group {group!r} does not exist (see: consumergroup share list); a consumer "
        "group of that name is shown by `consumergroup describe`"
    )


async def _described(admin: ShareGroupAdmin, group: str) -> ShareGroupDescription:
    try:
        [desc] = await admin.describe_share_groups([group])
    except GroupIdNotFoundError:
        raise _no_group(group) from None
    return desc


@share.command("list")
@cluster_options
@json_option
def list_groups(cluster: ClusterOptions, as_json: bool) -> None:
    """List the cluster's share groups and their states."""

    async def run() -> int:
        async with cluster.share_admin() as admin:
            found = await admin.list_share_groups()
        if as_json:
            print_json([{"group": g, "state": s} for g, s in found.items()])
        else:
            print_table(["GROUP", "STATE"], [[g, s] for g, s in found.items()])
        return EXIT_OK

    raise SystemExit(run_command(run))


@share.command()
@group_argument
@cluster_options
@json_option
def describe(group: str, cluster: ClusterOptions, as_json: bool) -> None:
    """State, epochs and members of share group GROUP (client id, host, epoch,
    subscribed topics, assigned partitions)."""

    async def run() -> int:
        async with cluster.share_admin() as admin:
            desc = await _described(admin, group)
        if as_json:
            print_json(
                {
                    "group": desc.group_id,
                    "state": desc.state,
                    "group_epoch": desc.group_epoch,
                    "assignment_epoch": desc.assignment_epoch,
                    "assignor": desc.assignor,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "client_id": m.client_id,
                            "host": m.client_host,
                            "member_epoch": m.member_epoch,
                            "rack": m.rack_id,
                            "subscribed_topics": m.subscribed_topics,
                            "assignment": [
                                {"topic": t, "partitions": p}
                                for t, p in sorted(m.assignment.items())
                            ],
                        }
                        for m in desc.members
                    ],
                }
            )
            return EXIT_OK
        print_table(
            ["MEMBER ID", "EPOCH", "CLIENT ID", "HOST", "ASSIGNMENT"],
            [
                [
                    m.member_id,
                    m.member_epoch,
                    m.client_id or None,
                    m.client_host or None,
                    " ".join(
                        f"{t}/{','.join(map(str, p))}" for t, p in sorted(m.assignment.items())
                    )
                    or None,
                ]
                for m in desc.members
            ],
            title=f"share group {desc.group_id}: state {desc.state}, assignor {desc.assignor}, "
            f"group epoch {desc.group_epoch}, assignment epoch {desc.assignment_epoch}, "
            f"{len(desc.members)} member(s)",
        )
        return EXIT_OK

    raise SystemExit(run_command(run))


@share.command()
@group_argument
@topics_option("Only this topic (repeatable; default: every topic the group has state for).")
@cluster_options
@json_option
def lag(group: str, topics: tuple[str, ...], cluster: ClusterOptions, as_json: bool) -> None:
    """Start offset and lag of share group GROUP on each partition, with the total.

    The start offset: every record below it is acknowledged. The lag: records from the
    start offset to the end not yet acknowledged (in flight included). A partition the
    group never read shows neither.
    """

    async def run() -> int:
        async with cluster.share_admin() as admin:
            await _described(admin, group)
            offsets = await admin.share_group_offsets(group, topics or None)
        rows = [
            {"topic": t, "partition": p, "start_offset": o.start_offset, "lag": o.lag}
            for (t, p), o in offsets.items()
        ]
        if as_json:
            print_json(rows)
            return EXIT_OK
        if not rows:
            status(f"share group {group!r} has no state on any partition yet")
            return EXIT_OK
        total = sum(o.lag or 0 for o in offsets.values())
        print_table(
            ["TOPIC", "PARTITION", "START OFFSET", "LAG"],
            [[t, p, o.start_offset, o.lag] for (t, p), o in offsets.items()],
            footer=["total", len(rows), None, total],
            title=f"share group {group}: total lag {total}",
        )
        return EXIT_OK

    raise SystemExit(run_command(run))


@share.command("reset-offsets")
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
    """Move share group GROUP's start offsets on --topic (or --all-topics: every topic it
    has state for): a dry run unless --execute.

    Records below the new start offset count as acknowledged; from it on they are handed
    out again. Refused while the group has members: stop them first. A time without a
    zone in --to-datetime is local time.
    """
    target = reset_target(
        topics, all_topics, to_earliest, to_latest, to_offset, to_datetime, shift_by, execute,
        dry_run,
    )  # fmt: skip

    async def run() -> int:
        async with cluster.share_admin() as admin:
            desc = await _described(admin, group)
            if not desc.is_empty:
                raise CliFailure(
                    f"share group {group!r} has {len(desc.members)} active member(s) (state "
                    f"{desc.state}): its start offsets can only be reset while it has none; "
                    "stop its members and try again"
                )
            if all_topics:
                held = sorted({t for t, _ in await admin.share_group_offsets(group)})
                if not held:
                    raise CliFailure(
                        f"share group {group!r} has no state on any topic: --all-topics names "
                        "no topic; give --topic TOPIC"
                    )
                partitions = await topic_partitions(admin, held)
            else:
                partitions = await topic_partitions(admin, topics)
            known = await admin.share_group_offsets(group, sorted({t for t, _ in partitions}))
            current = {tp: o.start_offset for tp, o in known.items() if o.start_offset is not None}
            new = await reset_targets(admin, partitions, current, target)
            if execute:
                await admin.alter_share_group_offsets(group, new)
        rows = [(t, p, current.get((t, p)), new[(t, p)]) for t, p in partitions]
        print_reset(group, rows, execute, as_json, what="start offsets")
        return EXIT_OK

    raise SystemExit(run_command(run))


@share.command()
@group_argument
@topics_option("Only forget the group's state on this topic (repeatable); keep the group.")
@cluster_options
def delete(group: str, topics: tuple[str, ...], cluster: ClusterOptions) -> None:
    """Delete share group GROUP and its state, or with --topic only its state on those
    topics (the group must have no members)."""

    async def run() -> int:
        async with cluster.share_admin() as admin:
            await _described(admin, group)
            try:
                if topics:
                    await admin.delete_share_group_offsets(group, topics)
                else:
                    await admin.delete_share_groups([group])
            except NonEmptyGroupError:
                raise CliFailure(
                    f"share group {group!r} still has members: stop them first, then delete"
                ) from None
        if topics:
            status(f"deleted the state of share group {group!r} on {', '.join(topics)}")
        else:
            status(f"deleted share group {group!r}")
        return EXIT_OK

    raise SystemExit(run_command(run))
