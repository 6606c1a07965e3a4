"""What every ``consumergroup`` subcommand shares: exit codes, one-line errors,
signals, stdout handling, the pre-flight check of the cluster, option helpers."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TextIO, TypeVar, cast

import click

from ..client import Client, bootstrap_addresses
from ..config import Config
from ..errors import (
    ConfigurationError,
    ConsumerGroupError,
    CorruptMessageError,
    KafkaConnectionError,
    ListenerMismatchError,
    NoBrokersAvailableError,
    RequestTimedOutError,
    SilentListenerError,
    UnknownTopicOrPartitionError,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: Exit code after a second Ctrl-C forced the stop (128 + SIGINT).
EXIT_INTERRUPTED = 130


class CliError(click.ClickException):
    """A usage problem, reported as one line on stderr with exit code 2.

    A :class:`click.ClickException`, so it prints the same one line wherever it
    is raised: in a command's coroutine or while its options are checked.
    """

    exit_code = EXIT_USAGE


class CliFailure(CliError):
    """A failure while running (exit code 1), reported as one line on stderr."""

    exit_code = EXIT_FAILURE


# ---------------------------------------------------------------------------- helpers

# Control characters would break the one-line-per-message output: show them escaped.
_ESCAPES: dict[int, str] = {c: f"\\x{c:02x}" for c in (*range(32), 127)}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def render_bytes(data: bytes | None, width: int) -> str:
    """``data`` as one line of text: UTF-8 with errors replaced, controls escaped, truncated.

    ``None`` renders as ``null``; text longer than ``width`` characters is cut
    and ends with ``...(N bytes)`` giving the full size.
    """
    if data is None:
        return "null"
    text = data.decode("utf-8", errors="replace").translate(_ESCAPES)
    if len(text) > width:
        return f"{text[:width]}...({len(data)} bytes)"
    return text


def format_claims(claims: dict[str, list[int]]) -> str:
    """``topic/0,1 other/2`` for a session's claims (``no partitions`` when empty)."""
    if not claims:
        return "no partitions"
    return " ".join(f"{t}/{','.join(map(str, parts))}" for t, parts in sorted(claims.items()))


def split_bootstrap(bootstrap: str) -> list[str]:
    """``a:1,b:2`` -> ``['a:1', 'b:2']``; an empty list or an address that is not
    HOST:PORT is a usage error (before any connection is tried)."""
    if not bootstrap.strip(", "):
        raise CliError("--bootstrap is empty: give HOST:PORT of a Kafka broker")
    try:
        return bootstrap_addresses(bootstrap)
    except ConfigurationError as exc:
        raise CliError(f"bad --bootstrap {bootstrap!r}: {exc}") from None


def status(text: str) -> None:
    """A status line on stderr (stdout carries only messages / rates)."""
    click.echo(f"consumergroup: {text}", err=True)


def setup_logging(verbose: int) -> None:
    """Log to stderr: warnings by default, info with ``-v``, debug with ``-vv``."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _verbosity() -> int:
    ctx = click.get_current_context(silent=True)
    return int(ctx.find_root().params.get("verbose") or 0) if ctx is not None else 0


def leaf_error(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run_command(coro_factory: Callable[[], Awaitable[int]]) -> int:
    """Run the command's coroutine and map what ends it to one stderr line and an exit code.

    SIGINT/SIGTERM before the command routes them itself (connecting, checking
    topics) end it at once, exit 0. :class:`CliError` carries its own code; any other
    :class:`~consumergroup.errors.ConsumerGroupError` is a runtime failure (1); anything
    else is reported as an internal error (1). The traceback is printed only with ``-v``.
    """
    verbose = _verbosity()
    stopped: list[str] = []

    async def wrapper() -> int:
        main = asyncio.current_task()
        assert main is not None

        def stop(name: str) -> None:  # nothing started yet (or left): just end, cleanly
            if not stopped:
                stopped.append(name)
                main.cancel()

        with signals(stop):  # until the command routes the signals itself
            return await coro_factory()

    try:
        return asyncio.run(wrapper())
    except (KeyboardInterrupt, asyncio.CancelledError):
        if stopped:
            status(f"{stopped[0]}: stopped")
            return EXIT_OK
        click.echo("consumergroup: interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:
        leaf = leaf_error(exc)
        if verbose:
            traceback.print_exception(exc)
        if isinstance(leaf, CliError):
            leaf.show()
            return leaf.exit_code
        if isinstance(leaf, ConsumerGroupError):
            click.echo(f"Error: {leaf}", err=True)
        else:
            hint = "" if verbose else " (run with -v for the traceback)"
            click.echo(f"Error: internal error: {type(leaf).__name__}: {leaf}{hint}", err=True)
        return EXIT_FAILURE


#: The handlers of the ``signals()`` blocks in force, innermost last.
_HANDLERS: list[Callable[[str], None]] = []


@contextlib.contextmanager
def signals(on_signal: Callable[[str], None]) -> Iterator[None]:
    """Route SIGINT/SIGTERM to ``on_signal(name)`` while the block runs (POSIX loops);
    the enclosing block's handler is back in force after it."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
            pass
    _HANDLERS.append(on_signal)
    try:
        yield
    finally:
        _HANDLERS.pop()
        for sig in installed:
            if _HANDLERS:
                loop.add_signal_handler(sig, _HANDLERS[-1], sig.name)
            else:
                loop.remove_signal_handler(sig)


class Stopper:
    """First signal: a clean stop (``event`` is set). Second: cancel the main task."""

    def __init__(self, doing: str = "closing (final commit, leaving the group)") -> None:
        self._doing = doing
        self.event = asyncio.Event()
        self.reason = ""
        self._main = asyncio.current_task()

    def stop(self, reason: str) -> None:
        """Ask for a clean stop (the first reason given is kept)."""
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def on_signal(self, name: str) -> None:
        """SIGINT/SIGTERM: a clean stop the first time, a forced one the second."""
        if self.event.is_set() and self.reason.startswith("SIG"):
            status(f"{name} again: stopping now, without waiting for the clean close")
            if self._main is not None:
                self._main.cancel()
            return
        status(f"{name}: {self._doing}; again to force")
        self.stop(name)


def explain_connect_error(exc: BaseException, bootstrap: str) -> CliError | None:
    """A one-line, actionable message for errors reaching the cluster (None: not one).

    A malformed address or a listener that speaks another protocol is a usage error (2):
    an option must change. No broker answering is a failure (1): the options may be right
    and the broker down, so a script that retries must not take it for a typo.
    """
    if isinstance(exc, ConfigurationError):
        return CliError(f"bad --bootstrap {bootstrap!r}: {exc}")
    if isinstance(exc, ListenerMismatchError):  # its text says what was seen and what to change
        return CliError(f"{exc} (here: --tls and --bootstrap, or security.protocol)")
    if isinstance(exc, SilentListenerError):
        # Maybe another service, maybe a stalled broker: a failure, not a usage error.
        return CliFailure(str(exc))
    if isinstance(exc, NoBrokersAvailableError | KafkaConnectionError | RequestTimedOutError):
        return CliFailure(
            f"no Kafka broker answered at {bootstrap}: check --bootstrap (HOST:PORT of a "
            "running broker, comma-separated for several) and that the broker is up"
        )
    if isinstance(exc, CorruptMessageError):
        return CliError(
            f"{bootstrap} did not answer like a Kafka broker: check --bootstrap points at a "
            "Kafka listener (plaintext)"
        )
    return None


async def preflight(addrs: list[str], topics: Sequence[str], config: Config) -> None:
    """Check the bootstrap answers and every topic exists, before joining anything."""
    bootstrap = ",".join(addrs)
    try:
        client = Client(addrs, config)
    except ConfigurationError as exc:
        raise CliError(f"bad --bootstrap {bootstrap!r}: {exc}") from None
    missing: str | None = None
    existing: list[str] = []
    try:
        await client.start()
        for topic in topics:
            try:
                await client.partitions(topic, refresh=True)
            except UnknownTopicOrPartitionError:
                missing = topic
                existing = await client.topics()  # for the hint
                break
    except ConsumerGroupError as exc:
        explained = explain_connect_error(exc, bootstrap)
        if explained is None:
            explained = CliFailure(f"could not read the cluster's metadata from {bootstrap}: {exc}")
        raise explained from None
    finally:
        await client.close()
    if missing is not None:
        visible = [t for t in existing if not t.startswith("__")]
        shown = ", ".join(visible[:8]) + (", ..." if len(visible) > 8 else "")
        hint = f" (existing topics: {shown})" if visible else " (the cluster has no topics)"
        raise CliError(
            f"topic {missing!r} does not exist on {bootstrap}: create it first or check "
            f"--topic{hint}"
        )


# ---------------------------------------------------------------------------- click

_FC = TypeVar("_FC", bound=Callable[..., Any])


def ranged(
    name: str,
    bounds: click.IntRange | click.FloatRange,
    default: float | None,
    help: str,
    *,
    seconds: bool = False,
    short: str | None = None,
) -> Callable[[_FC], _FC]:
    """An option whose ``--help`` shows its range and default (None: unset, nothing shown);
    ``seconds``: a duration; ``short``: its one-letter alias."""
    return click.option(
        *((name, short) if short else (name,)),
        type=bounds,
        default=default,
        show_default=True,
        metavar="SECONDS" if seconds else None,
        help=help,
    )


def group_argument(func: _FC) -> _FC:
    """GROUP as an argument, or as Kafka's tools take it (``--group``/``-g``); the command
    receives it as ``group``. Exactly one group: none, or two different ones, is a usage
    error."""

    @functools.wraps(func)
    def wrapper(*args: Any, group: str | None, group_option: str | None, **kwargs: Any) -> Any:
        if group is not None and group_option is not None and group != group_option:
            raise click.UsageError(f"two groups given: {group!r} and --group {group_option!r}")
        chosen = group if group is not None else group_option
        if not chosen:
            raise click.UsageError("Missing argument 'GROUP' (or --group GROUP)")
        return func(*args, group=chosen, **kwargs)

    with_option = click.option(
        "--group", "-g", "group_option", metavar="GROUP", help="The group (Kafka's tools' form)."
    )(wrapper)
    return cast(_FC, click.argument("group", required=False)(with_option))


def topics_option(help: str, *, required: bool = False) -> Callable[[_FC], _FC]:
    """``--topic``/``-t``, repeatable, passed as the tuple ``topics``."""
    return click.option("--topic", "-t", "topics", multiple=True, required=required, help=help)


class Output:
    """stdout for messages and rate lines; stops the command if the reader goes away."""

    def __init__(self, stream: TextIO, on_broken: Callable[[], None]) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.broken = False
        self._on_broken = on_broken
        with contextlib.suppress(AttributeError, ValueError):
            # A terminal or pipe that cannot take U+FFFD must not crash the command.
            stream.reconfigure(errors="backslashreplace")  # type: ignore[attr-defined]

    def write(self, text: str) -> None:
        """Write ``text`` unless the reader has gone."""
        if self.broken:
            return
        try:
            self.stream.write(text)
        except BrokenPipeError:
            self._broken()

    def flush(self) -> None:
        """Flush unless the reader has gone."""
        if self.broken:
            return
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._broken()

    def _broken(self) -> None:
        # `consumergroup consume ... | head`: stop cleanly, silence stdout for good.
        self.broken = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        self._on_broken()
