"""Tables (rich) and JSON on stdout: every command that prints a table has ``--json``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

_F = TypeVar("_F", bound=Callable[..., Any])

#: A cell: text, or a number (right-aligned in its column).
Cell = str | int | None


def json_option(func: _F) -> _F:
    """``--json``: print the result as JSON instead of a table."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        func
    )


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    title: str | None = None,
    footer: Sequence[Cell] | None = None,
) -> None:
    """A table on stdout: columns of numbers right-aligned, ``None`` shown as ``-``.

    On a terminal it fits the window; into a pipe or file it keeps its natural
    width (no wrapping) and no colour, so scripts can read it.
    """
    console = Console(
        file=sys.stdout,
        width=None if sys.stdout.isatty() else 100_000,
        highlight=False,
        soft_wrap=False,
    )
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        show_footer=footer is not None,
    )
    for i, name in enumerate(columns):
        numeric = any(isinstance(row[i], int) for row in rows)
        table.add_column(
            Text(name),
            justify="right" if numeric else "left",
            footer=Text("") if footer is None else _cell(footer[i]),
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(_cell(c) for c in row))
    if title is not None:  # a line of its own: a table title would wrap at the table's width
        console.print(Text(title))
    console.print(table)


def _cell(value: Cell) -> Text:
    # Text, not str: a topic or member id with "[...]" must not be read as rich markup.
    return Text("-" if value is None else str(value))
