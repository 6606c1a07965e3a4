"""``consumergroup topics``: list topics, or create one."""

from __future__ import annotations

import click

from ..errors import TopicAlreadyExistsError
from ._cluster import ClusterOptions, cluster_options
from ._common import EXIT_OK, CliFailure, ranged, run_command, status
from ._output import json_option, print_json, print_table


@click.command()
@click.option("--create", "create", metavar="NAME", help="Create topic NAME instead of listing.")
@ranged("--partitions", click.IntRange(min=1), 1, "Partitions of the topic to --create.")
@ranged(
    "--replication-factor",
    click.IntRange(min=1),
    1,
    "Replicas of each partition of the topic to --create.",
)
@click.option("--internal", is_flag=True, help="List internal topics (__consumer_offsets) too.")
@cluster_options
@json_option
def topics(
    create: str | None,
    partitions: int,
    replication_factor: int,
    internal: bool,
    cluster: ClusterOptions,
    as_json: bool,
) -> None:
    """List the cluster's topics with their partition counts, or --create one."""

    async def run() -> int:
        async with cluster.admin() as admin:
            if create is not None:
                try:
                    await admin.create_topic(create, partitions, replication_factor)
                except TopicAlreadyExistsError:
                    raise CliFailure(f"topic {create!r} already exists") from None
                status(f"created topic {create!r} with {partitions} partition(s)")
                return EXIT_OK
            found = [t for t in await admin.list_topics() if internal or not t.internal]
        if as_json:
            print_json([{"topic": t.name, "partitions": t.partitions} for t in found])
        else:
            print_table(["TOPIC", "PARTITIONS"], [[t.name, t.partitions] for t in found])
        return EXIT_OK

    raise SystemExit(run_command(run))
