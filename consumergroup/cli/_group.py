"""The click group behind ``consumergroup``: :data:`main` and its :class:`KafkaToolGroup`.

Only a command line that runs a command (or shows a command's own help) loads this
module and click: the console script, :func:`consumergroup.cli.run`, answers the top-level
``--help``, ``--version`` and the bare command itself (a test holds its text equal to
this group's).
"""

from __future__ import annotations

import importlib

import click

from . import COMMANDS, HELP, VERBOSE_HELP, kafka_tool_args


class KafkaToolGroup(click.Group):
    """Our command group: loads a command's module on first use (:data:`COMMANDS`), and
    reads Kafka's tools' command lines too (:func:`kafka_tool_args`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            loaded = importlib.import_module(f".{module}", __package__)
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


@click.group(
    cls=KafkaToolGroup, help=HELP, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="consumergroup", prog_name="consumergroup")
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
def main(verbose: int) -> None:
    """The ``consumergroup`` command group (its help text is :data:`HELP`)."""
    from ._common import setup_logging  # a command runs: its module loads _common anyway

    setup_logging(verbose)
