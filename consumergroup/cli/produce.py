"""``consumergroup produce``: write lines from stdin or a file to a topic, one record each."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import TextIO

import click

from ..client import Client
from ..errors import UnknownTopicOrPartitionError
from ._cluster import ClusterOptions, cluster_options
from ._common import EXIT_OK, CliError, run_command, status
from .producer import Header, murmur2_partition, produce_batch

#: Lines sent per Produce request when reading a file or pipe (one at a time from a terminal).
_CHUNK = 1000


def _parse_header(text: str) -> Header:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint="--header")
    return key, value.encode()


class _Router:
    """Keyed records go where Kafka's default partitioner puts them; the rest round robin."""

    def __init__(self, partitions: list[int], fixed: int | None) -> None:
        self._partitions = partitions
        self._fixed = fixed
        self._next = itertools.cycle(partitions)

    def partition(self, key: bytes | None) -> int:
        """Where the record with ``key`` goes."""
        if self._fixed is not None:
            return self._fixed
        if key is not None:
            return self._partitions[murmur2_partition(key, len(self._partitions))]
        return next(self._next)


def _split(line: str, separator: str | None) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line.encode()
    key, sep, value = line.partition(separator)
    if not sep:  # no separator on this line: a record without a key
        return None, line.encode()
    return key.encode(), value.encode()


def _read_chunk(stream: TextIO, size: int) -> list[str]:
    lines: list[str] = []
    while len(lines) < size:
        line = stream.readline()
        if not line:
            break
        lines.append(line.rstrip("\r\n"))
    return lines


@click.command()
@click.option("--topic", "-t", required=True, help="Topic to write to.")
@click.option(
    "--file",
    "-f",
    "path",
    type=click.File("r", encoding="utf-8"),
    default="-",
    help="Read lines from this file (default: stdin).",
)
@click.option(
    "--key-separator",
    "-K",
    metavar="SEP",
    help="Split each line at the first SEP into key and value (a line without SEP: no key).",
)
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="Add this header to every record (repeatable).",
)
@click.option(
    "--partition", "-p", type=click.IntRange(min=0), help="Write every record to this partition."
)
@cluster_options
def produce(
    topic: str,
    path: TextIO,
    key_separator: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    cluster: ClusterOptions,
) -> None:
    """Write each line of stdin (or --file) to TOPIC as one record.

    Keyed records go to the partition Kafka's default partitioner picks
    (murmur2 of the key); records without a key are spread round robin.
    Empty lines are records with an empty value.
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    parsed = [_parse_header(h) for h in headers]

    async def run() -> int:
        async with cluster.admin() as admin:
            try:
                partitions = await admin.partitions(topic)
            except UnknownTopicOrPartitionError:
                raise CliError(
                    f"topic {topic!r} does not exist: create it first or check --topic"
                ) from None
            if partition is not None and partition not in partitions:
                raise CliError(
                    f"topic {topic!r} has no partition {partition} (0..{len(partitions) - 1})"
                )
            router = _Router(partitions, partition)
            sent = await _send_all(admin.client, topic, path, key_separator, parsed, router)
        status(f"produced {sent} records to {topic}")
        return EXIT_OK

    raise SystemExit(run_command(run))


async def _send_all(
    client: Client,
    topic: str,
    stream: TextIO,
    separator: str | None,
    headers: Sequence[Header],
    router: _Router,
) -> int:
    """Read, route and send chunk by chunk; return the number of records written."""
    size = 1 if stream.isatty() else _CHUNK
    sent = 0
    while lines := await asyncio.to_thread(_read_chunk, stream, size):
        plan: dict[int, tuple[list[bytes | None], list[bytes | None]]] = {}
        for line in lines:
            key, value = _split(line, separator)
            keys, values = plan.setdefault(router.partition(key), ([], []))
            keys.append(key)
            values.append(value)
        await asyncio.gather(
            *(produce_batch(client, topic, p, vals, ks, headers) for p, (ks, vals) in plan.items())
        )
        sent += len(lines)
    return sent
