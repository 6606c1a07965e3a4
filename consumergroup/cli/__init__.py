"""The ``consumergroup`` command (also ``python -m consumergroup``).

One module per subcommand, sharing ``_common`` (exit codes, one-line errors,
signals, stdout), ``_cluster`` (``--bootstrap``, TLS, SASL, ``--command-config``)
and ``_output`` (rich tables, ``--json``):

* ``consume`` (:mod:`.consume`): join a group, or read partitions, and print
  what arrives (text, JSON lines or rates).
* ``produce`` (:mod:`.produce`): lines from stdin or a file, one record each.
* ``groups``, ``describe``, ``delete`` (:mod:`.groups`): the cluster's groups.
* ``lag``, ``reset-offsets`` (:mod:`.offsets`): a group's committed offsets.
* ``topics`` (:mod:`.topics`): list or create topics.
* ``demo`` (:mod:`.demo`, with its producer in :mod:`.producer`): the live demo
  on an embedded broker, with a rebalance and a loss count.
* ``broker`` (:mod:`.broker`): the embedded broker in the foreground, for trying
  things out.

The admin commands run on :class:`consumergroup.admin.ClusterAdmin`.

Exit codes (README's table, checked against the command by a test): 0 success
(including a clean stop by signal), 1 a failure while running (including no broker
answering at --bootstrap, or a listener there that accepts and stays silent), 2 a
usage problem (bad option, malformed bootstrap address, unknown topic, an answer at
--bootstrap that is certainly not Kafka or a TLS mismatch), 130 a stop forced by a
second Ctrl-C. Errors are one line on stderr; ``-v``
adds the traceback.
"""

from __future__ import annotations

import click

from ._common import CliError, render_bytes, setup_logging
from .broker import broker
from .consume import consume
from .demo import demo
from .groups import delete, describe, groups
from .offsets import lag, reset_offsets
from .produce import produce
from .topics import topics

__all__ = ["CliError", "main", "render_bytes"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="consumergroup", prog_name="consumergroup")
@click.option("-v", "--verbose", count=True, help="Log more (-v: info, -vv: debug) to stderr.")
def main(verbose: int) -> None:
    """consumergroup: an asyncio runtime for Kafka consumer groups.

    `consumergroup consume` joins a group and prints what it reads;
    `groups`, `describe`, `lag`, `reset-offsets`, `delete`, `topics` and
    `produce` operate a cluster; `consumergroup demo` runs a live demo on an
    embedded broker; `consumergroup broker` runs one for you to try things on.
    Exit codes: 0 ok, 1 failure, 2 usage error.
    """
    setup_logging(verbose)


for _command in (
    consume, produce, groups, describe, lag, reset_offsets, delete, topics, demo, broker
):
    main.add_command(_command)
