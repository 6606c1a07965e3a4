"""``consumergroup groups | describe GROUP | delete GROUP``: the groups of a cluster."""

from __future__ import annotations

import click

from ..admin import GroupDescription
from ..errors import GroupIdNotFoundError, NonEmptyGroupError
from ._cluster import ClusterOptions, cluster_options
from ._common import EXIT_OK, CliFailure, run_command, status
from ._output import json_option, print_json, print_table


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
@click.argument("group")
@cluster_options
@json_option
def describe(group: str, cluster: ClusterOptions, as_json: bool) -> None:
    """State, protocol and members of GROUP (client id, host, assigned partitions).

    Assigned partitions are decoded from the consumer protocol; brokers that do
    not report assignments (Tansu) show "-". A group on the consumer group protocol
    (KIP-848) also shows each member's epoch and target assignment (where the
    coordinator is moving it; equal to the assignment once it has reconciled).
    """

    async def run() -> int:
        async with cluster.admin() as admin:
            [desc] = await admin.describe_groups([group])
            if not await admin.group_exists(group, desc):
                raise CliFailure(f"group {group!r} does not exist (see: consumergroup groups)")
        if as_json:
            print_json(_describe_json(desc))
            return EXIT_OK
        protocol = f"{desc.protocol_type or '-'}/{desc.protocol or '-'}"
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
                title=f"group {desc.group_id}: state {desc.state}, consumer protocol "
                f"(KIP-848), assignor {desc.protocol or '-'}, group epoch {desc.group_epoch}, "
                f"assignment epoch {desc.assignment_epoch}, {len(desc.members)} member(s)",
            )
            return EXIT_OK
        print_table(
            ["MEMBER ID", "CLIENT ID", "HOST", "ASSIGNMENT"],
            [
                [m.member_id, m.client_id or None, m.client_host or None, _assigned(m.assignment)]
                for m in desc.members
            ],
            title=f"group {desc.group_id}: state {desc.state}, protocol {protocol}, "
            f"{len(desc.members)} member(s)",
        )
        return EXIT_OK

    raise SystemExit(run_command(run))


@click.command()
@click.argument("group")
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
