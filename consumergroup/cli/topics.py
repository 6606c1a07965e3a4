"""``consumergroup topics``: list, describe, create or delete topics (``kafka-topics.sh``)."""

from __future__ import annotations

import click

from ..admin import ClusterAdmin
from ..errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from ._cluster import ClusterOptions, cluster_options
from ._common import EXIT_OK, CliError, CliFailure, ranged, run_command, status, topics_option
from ._output import json_option, print_json, print_table


@click.command()
@click.option("--list", "action", flag_value="list", default=True, help="List topics (default).")
@click.option(
    "--describe", "action", flag_value="describe", help="Partitions, leaders, replicas, ISR."
)
@click.option("--delete", "action", flag_value="delete", help="Delete the --topic topic(s).")
@click.option(
    "--create",
    "create",
    metavar="NAME",
    is_flag=False,
    flag_value="",
    help="Create topic NAME (or, as kafka-topics.sh: --create --topic NAME).",
)
@topics_option("The topic (repeatable) to --describe, --delete or --create.")
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
    action: str,
    create: str | None,
    topics: tuple[str, ...],
    partitions: int,
    replication_factor: int,
    internal: bool,
    cluster: ClusterOptions,
    as_json: bool,
) -> None:
    """List the cluster's topics with their partition counts; or --describe, --create or
    --delete them (the flags of kafka-topics.sh)."""
    if create is not None:
        names = [create] if create else list(topics)
        if len(names) != 1:
            raise click.UsageError("--create: name one topic (--create NAME or --topic NAME)")
        action = "create"
    elif action == "delete" and not topics:
        raise click.UsageError("--delete: name the topic(s) with --topic")

    async def run() -> int:
        async with cluster.admin() as admin:
            if action == "create":
                try:
                    await admin.create_topic(names[0], partitions, replication_factor)
                except TopicAlreadyExistsError:
                    raise CliFailure(f"topic {names[0]!r} already exists") from None
                status(f"created topic {names[0]!r} with {partitions} partition(s)")
                return EXIT_OK
            if action == "delete":
                for name in topics:
                    try:
                        await admin.delete_topic(name)
                    except UnknownTopicOrPartitionError:
                        raise CliError(f"topic {name!r} does not exist: check --topic") from None
                    status(f"deleted topic {name!r}")
                return EXIT_OK
            if action == "describe":
                return await _describe(admin, topics, internal, as_json)
            found = [t for t in await admin.list_topics() if internal or not t.internal]
        if as_json:
            print_json([{"topic": t.name, "partitions": t.partitions} for t in found])
        else:
            print_table(["TOPIC", "PARTITIONS"], [[t.name, t.partitions] for t in found])
        return EXIT_OK

    raise SystemExit(run_command(run))


async def _describe(
    admin: ClusterAdmin, names: tuple[str, ...], internal: bool, as_json: bool
) -> int:
    """Each partition of ``names`` (default: every topic): leader, replicas, in-sync ones."""
    if not names:
        names = tuple(t.name for t in await admin.list_topics() if internal or not t.internal)
    rows: list[tuple[str, int, int, tuple[int, ...], tuple[int, ...]]] = []
    for name in names:
        try:
            parts = await admin.describe_topic(name)
        except UnknownTopicOrPartitionError:
            raise CliError(f"topic {name!r} does not exist: check --topic") from None
        rows += [(name, p.partition, p.leader, p.replicas, p.isr) for p in parts]
    if as_json:
        print_json(
            [
                {"topic": t, "partition": p, "leader": leader, "replicas": list(r), "isr": list(i)}
                for t, p, leader, r, i in rows
            ]
        )
        return EXIT_OK

    def ids(nodes: tuple[int, ...]) -> str:
        return ",".join(map(str, nodes))

    print_table(
        ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
        [[t, p, leader if leader >= 0 else None, ids(r), ids(i)] for t, p, leader, r, i in rows],
    )
    return EXIT_OK
