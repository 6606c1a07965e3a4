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

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import _lazy

__all__ = ["CliError", "main", "render_bytes", "run"]

_LAZY: dict[str, tuple[str, str]] = {
    "CliError": (f"{__name__}._common", "CliError"),
    "render_bytes": (f"{__name__}._common", "render_bytes"),
    "main": (f"{__name__}._group", "main"),
}

if TYPE_CHECKING:
    from ._common import CliError as CliError
    from ._common import render_bytes as render_bytes
    from ._group import main as main

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

#: The help text of the ``consumergroup`` group (:data:`consumergroup.cli._group.main`),
#: here so that :func:`run` shows it without importing click.
HELP = """consumergroup: an asyncio runtime for Kafka consumer groups.

    `consumergroup consume` joins a group and prints what it reads;
    `groups`, `describe`, `lag`, `reset-offsets`, `delete`, `topics` and
    `produce` operate a cluster, `share ...` its share groups; `consumergroup
    demo` runs a live demo on an embedded broker; `consumergroup broker` runs
    one for you to try things on.
    Exit codes: 0 ok, 1 failure, 2 usage error.
    """
VERBOSE_HELP = "Log more (-v: info, -vv: debug) to stderr."
#: The group's options as its help lists them: --version and --help say click's words.
_OPTION_ROWS = (
    ("--version", "Show the version and exit."),
    ("-v, --verbose", VERBOSE_HELP),
    ("-h, --help", "Show this message and exit."),
)


def run(args: Sequence[str] | None = None, prog_name: str | None = None) -> None:
    """The ``consumergroup`` console script: :data:`main`, without click where it can.

    The top-level ``--help`` (``-h``), ``--version`` and the bare command (help on
    stderr, exit code 2) are answered here, as click would answer them, from :data:`HELP`
    and :data:`COMMANDS`: click's import costs more than the rest of a ``--help``.
    Every other command line goes to the click group :data:`main`.
    """
    argv = sys.argv[1:] if args is None else list(args)
    if argv in ([], ["-h"], ["--help"]):
        text = _help_text(prog_name or _program_name())
        (sys.stdout if argv else sys.stderr).write(text + "\n")
        sys.exit(0 if argv else 2)
    if argv == ["--version"]:
        from importlib.metadata import version

        sys.stdout.write(f"consumergroup, version {version('consumergroup')}\n")
        sys.exit(0)
    from ._group import main as group

    group(args=args, prog_name=prog_name)


def _program_name() -> str:
    """The command's name as click finds it (``click.utils._detect_program_name``)."""
    path = sys.argv[0]
    package = getattr(sys.modules["__main__"], "__package__", None)
    if not package:
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def _help_text(prog: str) -> str:
    """The group's help as click formats it (``click.HelpFormatter``, at the terminal's
    width capped at 80 columns), with each command's summary shortened as click does."""
    import inspect
    import textwrap

    width = max(min(_terminal_columns(), 80) - 2, 50)

    def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
        wrapper = textwrap.TextWrapper(
            width, initial_indent=first, subsequent_indent=rest, replace_whitespace=False
        )
        return wrapper.wrap(text.expandtabs())

    def paragraphs(text: str, width: int, indent: str = "") -> str:
        """click's ``wrap_text(preserve_paragraphs=True)``: a ``\\b`` block is not rewrapped."""
        out = []
        for block in text.expandtabs().split("\n\n"):
            lines = [line for line in block.splitlines() if line]
            if not lines:
                continue
            extra = " " * (len(lines[0]) - len(lines[0].lstrip()))
            lines[0] = lines[0].lstrip()
            if lines[0].strip() == "\b":
                out.append("\n".join(indent + extra + line for line in lines[1:]))
            else:
                out.append("\n".join(wrap(" ".join(lines), width, indent + extra, indent + extra)))
        return "\n\n".join(out)

    def rows(items: Sequence[tuple[str, str]]) -> list[str]:
        """click's ``HelpFormatter.write_dl`` at an indent of 2."""
        first_col = min(max(len(name) for name, _ in items), 30) + 2
        text_width = max(width - first_col - 2, 10)
        out = []
        for name, text in items:
            lines = paragraphs(text, text_width).splitlines() or [""]
            if len(name) <= first_col - 2:
                out.append(f"  {name}{' ' * (first_col - len(name))}{lines[0]}")
            else:
                out += [f"  {name}", f"{' ' * (first_col + 2)}{lines[0]}"]
            out += [f"{' ' * (first_col + 2)}{line}" for line in lines[1:]]
        return out

    prefix = f"Usage: {prog} "
    if width >= len(prefix) + 20:
        usage = wrap("[OPTIONS] COMMAND [ARGS]...", width, prefix, " " * len(prefix))
    else:
        usage = [prefix, *wrap("[OPTIONS] COMMAND [ARGS]...", width, " " * 11, " " * 11)]
    limit = width - 6 - max(len(name) for name in COMMANDS)
    commands = [(name, _short_help(COMMANDS[name][2], limit)) for name in sorted(COMMANDS)]
    return "\n".join(
        [
            *usage,
            "",
            paragraphs(inspect.cleandoc(HELP).partition("\f")[0], width, "  "),
            "",
            "Options:",
            *rows(_OPTION_ROWS),
            "",
            "Commands:",
            *rows(commands),
        ]
    )


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``, as click reads it, without shutil's imports
    (bz2, lzma: a tenth of the launcher's cost)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _short_help(text: str, limit: int) -> str:
    """A summary shortened to ``limit`` as click shortens a command's help."""
    import textwrap

    words = text.partition("\n\n")[0].split()
    for i, word in enumerate(words):
        if word.endswith(".") and (i == len(words) - 1 or not words[i + 1][0].islower()):
            words = words[: i + 1]
            break
    text = " ".join(words)
    if len(text) <= limit:
        return text
    if limit < 3:
        return "..."
    return textwrap.shorten(text, limit, placeholder="...", break_on_hyphens=False)


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


