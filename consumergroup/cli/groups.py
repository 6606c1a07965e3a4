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


def _describe_json(desc: GroupDescription) -> dict[str, object]:
    return {
        "group": desc.group_id,
        "state": desc.state,
        "protocol_type": desc.protocol_type,
        "protocol": desc.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": [
                    {"topic": t, "partitions": parts} for t, parts in sorted(m.assignment.items())
                ],
            }
            for m in desc.members
        ],
    }


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
    not report assignments (Tansu) show "-".
    """

    async def run() -> int:
        async with cluster.admin() as admin:
            [desc] = await admin.describe_groups([group])
        if as_json:
            print_json(_describe_json(desc))
            return EXIT_OK
        protocol = f"{desc.protocol_type or '-'}/{desc.protocol or '-'}"
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
                raise CliFailure(f"group {group!r} does not exist") from None
        status(f"deleted group {group!r}")
        return EXIT_OK

    raise SystemExit(run_command(run))
