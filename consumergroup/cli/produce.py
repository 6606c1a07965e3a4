"""``consumergroup produce``: write lines from stdin or a file to a topic, one record each.

Input is read as bytes without blocking the event loop (a pipe, FIFO or terminal
through an asyncio pipe transport, a regular file in chunks), so Ctrl-C and SIGTERM
stop the command at once, between two Produce requests or while it waits for input.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO

import click

from .._lifecycle import cancel_and_wait
from ..errors import UnknownTopicOrPartitionError
from ..message import RecordHeader
from ._cluster import ClusterOptions, cluster_options

if TYPE_CHECKING:
    from ..producer import Producer
from ._common import EXIT_OK, CliError, Stopper, run_command, signals, status

#: Most lines sent at once; they are counted when all were acknowledged.
_CHUNK = 1000
#: Bytes taken from a pipe or terminal per read: whatever complete lines they hold go out.
_READ_SIZE = 1 << 16


def _parse_header(text: str) -> RecordHeader:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint="--header")
    return key, value.encode()


def _split(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator)
    if not sep:  # no separator on this line: a record without a key
        return None, line
    return key, value


async def _line_chunks(source: BinaryIO) -> AsyncIterator[list[bytes]]:
    """Lists of at most ``_CHUNK`` lines (without their line ends) until the input ends.

    From a pipe or terminal, each read hands on the complete lines it holds at once:
    what is typed or piped goes out without waiting for a full chunk.
    """
    if stat.S_ISREG(os.fstat(source.fileno()).st_mode):
        while lines := [line.rstrip(b"\r\n") for line in itertools.islice(source, _CHUNK)]:
            yield lines
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), source
    )
    try:
        tail = b""
        while data := await reader.read(_READ_SIZE):
            *lines, tail = (tail + data).split(b"\n")
            for start in range(0, len(lines), _CHUNK):
                yield [line.rstrip(b"\r") for line in lines[start : start + _CHUNK]]
        if tail:
            yield [tail.rstrip(b"\r")]
    finally:
        transport.close()


@click.command()
@click.option("--topic", "-t", required=True, help="Topic to write to.")
@click.option(
    "--file",
    "-f",
    "path",
    type=click.Path(dir_okay=False, allow_dash=True),
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
    path: str,
    key_separator: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    cluster: ClusterOptions,
) -> None:
    """Write each line of stdin (or --file) to TOPIC as one record.

    Keyed records go to the partition Kafka's default partitioner picks
    (murmur2 of the key); records without a key are spread by the uniform
    sticky partitioner, as Kafka's own producer does. The producer is
    idempotent: a retried batch is written once. Empty lines are records with
    an empty value. Ctrl-C or SIGTERM stops between two chunks of lines (exit
    0); what was acknowledged is reported.
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    parsed = [_parse_header(h) for h in headers]

    async def run() -> int:
        async with cluster.producer(linger=0.01) as producer:
            try:
                partitions = await producer.partitions(topic)
            except UnknownTopicOrPartitionError:
                raise CliError(
                    f"topic {topic!r} does not exist: create it first or check --topic"
                ) from None
            if partition is not None and partition not in partitions:
                raise CliError(
                    f"topic {topic!r} has no partition {partition} (0..{len(partitions) - 1})"
                )
            separator = None if key_separator is None else key_separator.encode()
            with _opened(path) as source:
                sent, why = await _send_until_stopped(
                    _Sender(producer, topic, separator, parsed, partition), source
                )
        status(f"produced {sent} records to {topic}{why}")
        return EXIT_OK

    raise SystemExit(run_command(run))


@contextlib.contextmanager
def _opened(path: str) -> Iterator[BinaryIO]:
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        source = open(path, "rb")  # noqa: SIM115 (closed below, after the pipe transport)
    except OSError as exc:
        raise CliError(f"cannot read --file {path!r}: {exc.strerror}") from None
    with source:
        yield source


class _Sender:
    """Sends lines as records through the producer; counts them once acknowledged."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        separator: bytes | None,
        headers: Sequence[RecordHeader],
        partition: int | None,
    ) -> None:
        self._producer = producer
        self._topic = topic
        self._separator = separator
        self._headers = headers
        self._partition = partition
        self.sent = 0

    async def send(self, lines: list[bytes]) -> None:
        """Write ``lines`` as records; count them once every one is acknowledged."""
        futures = []
        for line in lines:
            key, value = _split(line, self._separator)
            futures.append(
                await self._producer.send(
                    self._topic, value, key=key, partition=self._partition, headers=self._headers
                )
            )
        await self._producer.flush()
        for fut in futures:
            fut.result()  # raises the first delivery error
        self.sent += len(lines)


async def _send_until_stopped(sender: _Sender, source: BinaryIO) -> tuple[int, str]:
    """Send every chunk of ``source``; a signal stops it. Returns (records sent, why stopped)."""
    stopper = Stopper("stopping (what was acknowledged stays written)")

    async def pump() -> None:
        async for lines in _line_chunks(source):
            sending = asyncio.ensure_future(sender.send(lines))
            try:
                await asyncio.shield(sending)
            except asyncio.CancelledError:
                # Stopped between two requests, not inside one: records the broker may
                # already have written are waited for and counted.
                await sending
                raise

    with signals(stopper.on_signal):
        work = asyncio.create_task(pump(), name="produce")
        stop = asyncio.create_task(stopper.event.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not work.done():
            await cancel_and_wait(work)
            return sender.sent, f" (stopped by {stopper.reason})"
        await work  # raises what ended it
    return sender.sent, ""
