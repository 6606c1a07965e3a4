"""``consumergroup groups | describe GROUP | delete GROUP``: the groups of a cluster."""

from __future__ import annotations

import click

from ..admin import GroupDescription, GroupMember
from ..errors import GroupIdNotFoundError, NonEmptyGroupError
from ._cluster import ClusterOptions, cluster_options
from ._common import EXIT_OK, CliFailure, group_argument, run_command, status
from ._output import json_option, print_json, print_table
from .offsets import LagRow, lag_rows


@click.command()
@cluster_options
@json_option
def groups(cluster: ClusterOptions, as_json: bool) -> None:
    """List the cluster's groups (ListGroups on every broker)."""

    async def run() -> int:
        async with cluster.admin() as admin:
            found = await admin.list_groups()
        if as_json:
            print_json([{"group": g, "protocol_type": t} for g, t in found.items()])
        else:
            print_table(["GROUP", "PROTOCOL TYPE"], [[g, t or None] for g, t in found.items()])
        return EXIT_OK

    raise SystemExit(run_command(run))


def _partitions_json(assignment: dict[str, list[int]]) -> list[dict[str, object]]:
    return [{"topic": t, "partitions": parts} for t, parts in sorted(assignment.items())]


def _owners(desc: GroupDescription) -> dict[tuple[str, int], GroupMember]:
    """(topic, partition) -> the member it is assigned to."""
    return {(t, p): m for m in desc.members for t, parts in m.assignment.items() for p in parts}


def _offsets_json(rows: list[LagRow], desc: GroupDescription) -> list[dict[str, object]]:
    owners = _owners(desc)
    return [
        {
            "topic": r.topic,
            "partition": r.partition,
            "current_offset": r.committed,
            "log_end_offset": r.end,
            "lag": r.lag,
            "member_id": owners[(r.topic, r.partition)].member_id
            if (r.topic, r.partition) in owners
            else None,
        }
        for r in rows
    ]


def _describe_json(desc: GroupDescription) -> dict[str, object]:
    out: dict[str, object] = {
        "group": desc.group_id,
        "state": desc.state,
        "protocol_type": desc.protocol_type,
        "protocol": desc.protocol,
        "group_protocol": desc.group_protocol,
    }
    members: list[dict[str, object]] = []
    for m in desc.members:
        member: dict[str, object] = {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "assignment": _partitions_json(m.assignment),
        }
        if desc.group_protocol == "consumer":
            member |= {
                "instance_id": m.instance_id,
                "member_epoch": m.member_epoch,
                "member_protocol": m.member_protocol,
                "target_assignment": _partitions_json(m.target_assignment or {}),
            }
        members.append(member)
    if desc.group_protocol == "consumer":
        out |= {"group_epoch": desc.group_epoch, "assignment_epoch": desc.assignment_epoch}
    out["members"] = members
    return out


def _assigned(assignment: dict[str, list[int]]) -> str | None:
    if not assignment:
        return None
    return " ".join(f"{t}/{','.join(map(str, p))}" for t, p in sorted(assignment.items()))


@click.command()
@group_argument
@click.option(
    "--offsets",
    "show",
    flag_value="offsets",
    help="Only the partitions: CURRENT-OFFSET, LOG-END-OFFSET, LAG and owner.",
)
@click.option("--members", "show", flag_value="members", help="Only the members.")
@click.option("--state", "show", flag_value="state", help="Only the group's state line.")
@cluster_options
@json_option
def describe(group: str, show: str | None, cluster: ClusterOptions, as_json: bool) -> None:
    """State, partitions and members of GROUP, as kafka-consumer-groups.sh --describe.

    The partitions: TOPIC, PARTITION, CURRENT-OFFSET (committed; "-" when never
    committed), LOG-END-OFFSET (the high watermark), LAG ("-" without a commit) and the
    member that owns it. The members: client id, host and assigned partitions, decoded
    from the consumer protocol; brokers that do not report assignments (Tansu) show
    "-". A group on the consumer group protocol (KIP-848) also shows each member's
    epoch and target assignment (where the coordinator is moving it; equal to the
    assignment once it has reconciled). --offsets, --members or --state show one part.
    """

    async def run() -> int:
        async with cluster.admin() as admin:
            [desc] = await admin.describe_groups([group])
            if not await admin.group_exists(group, desc):
                raise CliFailure(f"group {group!r} does not exist (see: consumergroup groups)")
            committed = await admin.list_consumer_group_offsets(group)
            rows = await lag_rows(admin, group, sorted({*committed, *_owners(desc)}))
        if as_json:
            print_json(_describe_json(desc) | {"offsets": _offsets_json(rows, desc)})
            return EXIT_OK
        title = _title(desc)
        if show == "state":
            click.echo(title)
        if show in (None, "offsets"):
            _print_offsets(rows, desc, title)
        if show in (None, "members"):
            _print_members(desc, title if show == "members" else "members")
        return EXIT_OK

    raise SystemExit(run_command(run))


def _title(desc: GroupDescription) -> str:
    if desc.group_protocol == "consumer":
        return (
            f"group {desc.group_id}: state {desc.state}, consumer protocol (KIP-848), assignor "
            f"{desc.protocol or '-'}, group epoch {desc.group_epoch}, assignment epoch "
            f"{desc.assignment_epoch}, {len(desc.members)} member(s)"
        )
    protocol = f"{desc.protocol_type or '-'}/{desc.protocol or '-'}"
    return (
        f"group {desc.group_id}: state {desc.state}, protocol {protocol}, "
        f"{len(desc.members)} member(s)"
    )


def _print_offsets(rows: list[LagRow], desc: GroupDescription, title: str) -> None:
    owners = _owners(desc)

    def owner(r: LagRow) -> list[str | int | None]:
        m = owners.get((r.topic, r.partition))
        return [None, None, None] if m is None else [m.member_id, m.client_host, m.client_id]

    print_table(
        ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
         "CLIENT-ID"],
        [[r.topic, r.partition, r.committed, r.end, r.lag, *owner(r)] for r in rows],
        title=title,
    )  # fmt: skip


def _print_members(desc: GroupDescription, title: str) -> None:
    if desc.group_protocol == "consumer":
        print_table(
            ["MEMBER ID", "EPOCH", "CLIENT ID", "HOST", "ASSIGNMENT", "TARGET"],
            [
                [
                    m.member_id,
                    m.member_epoch,
                    m.client_id or None,
                    m.client_host or None,
                    _assigned(m.assignment),
                    _assigned(m.target_assignment or {}),
                ]
                for m in desc.members
            ],
            title=title,
        )
        return
    print_table(
        ["MEMBER ID", "CLIENT ID", "HOST", "ASSIGNMENT"],
        [
            [m.member_id, m.client_id or None, m.client_host or None, _assigned(m.assignment)]
            for m in desc.members
        ],
        title=title,
    )


@click.command()
@group_argument
@cluster_options
def delete(group: str, cluster: ClusterOptions) -> None:
    """Delete GROUP and its committed offsets (it must have no members)."""

    async def run() -> int:
        async with cluster.admin() as admin:
            try:
                await admin.delete_groups([group])
            except NonEmptyGroupError:
                raise CliFailure(
                    f"group {group!r} still has members: stop them first, then delete it"
                ) from None
            except GroupIdNotFoundError:
                raise CliFailure(
                    f"group {group!r} does not exist (see: consumergroup groups)"
                ) from None
        status(f"deleted group {group!r}")
        return EXIT_OK

    raise SystemExit(run_command(run))
