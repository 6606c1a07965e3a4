"""The ``consumergroup`` command (also ``python -m consumergroup``).

One module per subcommand, sharing ``_common`` (exit codes, one-line errors,
signals, stdout), ``_cluster`` (``--bootstrap``, TLS, SASL, ``--command-config``)
and ``_output`` (rich tables, ``--json``):

* ``consume`` (:mod:`.consume`): join a group, or read partitions, and print
  what arrives (text, JSON lines or rates).
* ``produce`` (:mod:`.produce`): lines from stdin or a file, one record each.
* ``groups``, ``describe``, ``delete`` (:mod:`.groups`): the cluster's groups.
* ``lag``, ``reset-offsets`` (:mod:`.offsets`): a group's committed offsets.
* ``topics`` (:mod:`.topics`): list, describe, create or delete topics.
* ``demo`` (:mod:`.demo`, with its producer in :mod:`.producer`): the live demo
  on an embedded broker, with a rebalance and a loss count.
* ``broker`` (:mod:`.broker`): the embedded broker in the foreground, for trying
  things out.

The admin commands run on :class:`consumergroup.admin.ClusterAdmin`.

Kafka's own tools' flags are aliases (:class:`KafkaToolGroup`): ``--bootstrap-server``,
``--group``, and, with no subcommand, the actions of ``kafka-consumer-groups.sh``
(``--list``, ``--describe``, ``--reset-offsets``, ``--delete``) and of ``kafka-topics.sh``
(with ``--topic`` and no ``--group``, or ``--create``).

Exit codes (README's table, checked against the command by a test): 0 success
(including a clean stop by signal), 1 a failure while running (including no broker
answering at --bootstrap, or a listener there that accepts and stays silent), 2 a
usage problem (bad option, malformed bootstrap address, unknown topic, an answer at
--bootstrap that is certainly not Kafka or a TLS mismatch), 130 a stop forced by a
second Ctrl-C. Errors are one line on stderr; ``-v``
adds the traceback.
"""

from __future__ import annotations

from collections.abc import Sequence

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


#: kafka-consumer-groups.sh's action flag -> our command.
_GROUP_ACTIONS = {
    "--list": "groups",
    "--describe": "describe",
    "--reset-offsets": "reset-offsets",
    "--delete": "delete",
}
_TOPIC_ACTIONS = ("--list", "--describe", "--delete", "--create")
_GLOBAL = ("-v", "-vv", "-vvv", "--verbose")


def kafka_tool_args(args: Sequence[str], commands: Sequence[str]) -> list[str]:
    """The command line of ``kafka-consumer-groups.sh`` or ``kafka-topics.sh``, as ours.

    ``--bootstrap-server B --describe --group G`` -> ``describe --bootstrap-server B
    --group G``; with ``--topic`` and no ``--group`` (or with ``--create``) the actions are
    kafka-topics.sh's: ``topics --describe --topic T ...``. A command line that names one
    of our commands first, or no action, is left as it is; one that names our command after
    options (``--bootstrap-server B lag G``) gets the command first.
    """
    args = list(args)
    leading = [a for a in args if a in _GLOBAL]
    rest = [a for a in args if a not in _GLOBAL]
    if not rest or rest[0] in commands or rest[0] in ("-h", "--help", "--version"):
        return args
    topic_tool = "--create" in rest or (
        not {"--group", "-g"} & set(rest) and {"--topic", "-t"} & set(rest)
    )
    if topic_tool and set(_TOPIC_ACTIONS) & set(rest):
        return [*leading, "topics", *rest]
    actions = [a for a in rest if a in _GROUP_ACTIONS]
    named = [a for a in rest if a in commands]
    if not actions and named:  # options first, then our command: --bootstrap-server B lag G
        rest.remove(named[0])
        return [*leading, named[0], *rest]
    if len(actions) != 1:
        return args  # none, or two: click's own usage error names the problem
    rest.remove(actions[0])
    return [*leading, _GROUP_ACTIONS[actions[0]], *rest]


class KafkaToolGroup(click.Group):
    """Our command group, also reading Kafka's tools' command lines (:func:`kafka_tool_args`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, kafka_tool_args(args, list(self.commands)))


@click.group(cls=KafkaToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
