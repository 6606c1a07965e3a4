"""The ``consumergroup`` command (also ``python -m consumergroup``).

One module per subcommand:

``consume`` (:mod:`.consume`)
    Join a group and print what it consumes, one line per message
    (``topic/partition@offset key=... value=...``), or a messages/s line per
    second with ``--rate``. Every message is marked; Ctrl-C / SIGTERM close the
    group cleanly (final commit, LeaveGroup) and exit 0. ``--max-messages`` and
    ``--timeout`` end it the same way.

``demo`` (:mod:`.demo`, with its producer in :mod:`.producer`)
    The live demo: an embedded broker (Tansu), a topic, a steady producer, N
    group members in this process and a live view of who owns what, at which
    rate and how far behind; one member leaves a third of the way through to
    show a rebalance, and a summary at the end counts produced, consumed,
    duplicated and lost messages.

Exit codes: 0 success (including a clean stop by signal), 1 a failure while
running, 2 a usage problem (bad option, unreachable bootstrap, unknown topic)
reported as one line on stderr, without a traceback.
"""

from __future__ import annotations

import click

from ._common import CliError, render_bytes, setup_logging
from .consume import consume
from .demo import demo

__all__ = ["CliError", "main", "render_bytes"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="consumergroup", prog_name="consumergroup")
@click.option("-v", "--verbose", count=True, help="Log more (-v: info, -vv: debug) to stderr.")
def main(verbose: int) -> None:
    """consumergroup: an asyncio runtime for Kafka consumer groups.

    `consumergroup consume` joins a group and prints what it reads;
    `consumergroup demo` runs a live demo on an embedded broker.
    """
    setup_logging(verbose)


main.add_command(consume)
main.add_command(demo)
