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
* ``share list | describe | lag | reset-offsets | delete`` (:mod:`.share`): share groups
  (KIP-932), as ``kafka-share-groups.sh`` shows them.
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

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from .. import _lazy

__all__ = ["CliError", "main", "render_bytes"]

_LAZY: dict[str, tuple[str, str]] = {
    "CliError": (f"{__name__}._common", "CliError"),
    "render_bytes": (f"{__name__}._common", "render_bytes"),
}

if TYPE_CHECKING:
    from ._common import CliError as CliError
    from ._common import render_bytes as render_bytes

__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)

#: command -> (its module in this package, the click command there, the summary that
#: ``consumergroup --help`` lists). A command's module loads only when that command runs
#: or shows its own help, so ``--help`` and every command pay for no other command's
#: imports (``consume`` would load the whole consumer, ``broker`` the embedded broker's
#: launcher, ...). The summaries are the commands' docstrings' first sentences, which
#: click shortens to the terminal's width; a test holds them equal.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "consume": (
        "consume",
        "consume",
        "Join GROUP and print the messages of TOPIC(s), marking each one; or, with "
        "--partition, read partitions without a group.",
    ),
    "produce": (
        "produce",
        "produce",
        "Write each line of stdin (or --file) to TOPIC as one record.",
    ),
    "groups": ("groups", "groups", "List the cluster's groups (ListGroups on every broker)."),
    "describe": (
        "groups",
        "describe",
        "State, partitions and members of GROUP, as kafka-consumer-groups.sh --describe.",
    ),
    "lag": (
        "offsets",
        "lag",
        "Committed offset, end offset and lag of GROUP on each partition, with totals.",
    ),
    "reset-offsets": (
        "offsets",
        "reset_offsets",
        "Move GROUP's committed offsets on --topic (or --all-topics): a dry run unless "
        "--execute.",
    ),
    "delete": (
        "groups",
        "delete",
        "Delete GROUP and its committed offsets (it must have no members).",
    ),
    "topics": (
        "topics",
        "topics",
        "List the cluster's topics with their partition counts; or --describe, --create or "
        "--delete them (the flags of kafka-topics.sh).",
    ),
    "share": (
        "share",
        "share",
        "Share groups (KIP-932, Apache Kafka 4.2+): list, describe, lag, reset-offsets, delete.",
    ),
    "demo": (
        "demo",
        "demo",
        "Live demo: embedded broker, a producer, N members, a rebalance, a summary.",
    ),
    "broker": (
        "broker",
        "broker",
        "Run the embedded Kafka-compatible broker (Tansu) on 127.0.0.1:PORT until Ctrl-C.",
    ),
}


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
    """Our command group: loads a command's module on first use (:data:`COMMANDS`), and
    reads Kafka's tools' command lines too (:func:`kafka_tool_args`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            loaded = importlib.import_module(f"{__name__}.{module}")
            self.add_command(getattr(loaded, attribute), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the summaries in :data:`COMMANDS`: no module loaded."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            # An unloaded command is shortened as click shortens a loaded one's docstring.
            shown = self.commands.get(name) or click.Command(name, help=COMMANDS[name][2])
            rows.append((name, shown.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, kafka_tool_args(args, self.list_commands(ctx)))


@click.group(cls=KafkaToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="consumergroup", prog_name="consumergroup")
@click.option("-v", "--verbose", count=True, help="Log more (-v: info, -vv: debug) to stderr.")
def main(verbose: int) -> None:
    """consumergroup: an asyncio runtime for Kafka consumer groups.

    `consumergroup consume` joins a group and prints what it reads;
    `groups`, `describe`, `lag`, `reset-offsets`, `delete`, `topics` and
    `produce` operate a cluster, `share ...` its share groups; `consumergroup
    demo` runs a live demo on an embedded broker; `consumergroup broker` runs
    one for you to try things on.
    Exit codes: 0 ok, 1 failure, 2 usage error.
    """
    from ._common import setup_logging  # a command runs: its module loads _common anyway

    setup_logging(verbose)
