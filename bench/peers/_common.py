"""What every peer process shares: arguments, the stdout JSON-lines protocol, rusage.

A peer is one consumer implementation run as its own process by the harness
(``bench/__main__.py``). It reads the topic named on its command line as a member
of a fresh consumer group and talks to the harness only through JSON lines on
stdout (one object per line; anything else on stdout is ignored by the harness):

``{"ev": "hello", "t": T}``
    the process is up and its imports are done.
``{"ev": "start", "t": T}``
    about to subscribe / join the group.
``{"ev": "assigned", "t": T, "parts": [...]}`` / ``{"ev": "revoked", ...}``
    rebalance callbacks (stream mode).
``{"ev": "committed", "t": T, "ok": bool}``
    an OffsetCommit answered (stream mode; the consumergroup and confluent-kafka peers).
``{"ev": "consumed", "items": [[partition, t, n, last_offset], ...]}``
    stream mode: ``n`` messages of ``partition`` up to ``last_offset`` were handed to
    user code at ``t`` (flushed every 100 ms).
``{"ev": "result", ...}``
    the final report (throughput mode at the N-th message, stream mode at stop):
    counts, ``t_first``/``t_last`` (first/last message), ``maxrss_kb`` and CPU seconds.

``T`` is ``time.monotonic()``: CLOCK_MONOTONIC is system-wide on Linux, so the
harness compares it with its own clock.

Modes: ``throughput`` reads until ``--expect`` messages were seen, reports and
exits; ``stream`` records per-partition consumption until the harness writes a
line (or closes) on the peer's stdin, then reports and exits; ``latency`` (the
latency section, :mod:`bench.latency`) reads like ``stream`` with the client's
default settings (``--tuned``: the settings its documentation names for latency),
takes each record's send time from its value (:func:`sent_ns`) and, at stop, writes
every record's (send, arrival) pair to ``--out`` (:class:`LatencyLog`), then reports.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import threading
import time
from array import array
from collections.abc import Callable
from typing import Any

FLUSH_INTERVAL = 0.1


#: Experiments only (``python -m bench --gc``): ``freeze`` moves everything allocated at
#: start-up into the permanent generation (``gc.freeze()``), ``off`` disables the cyclic
#: collector; unset or ``default`` leaves the interpreter's defaults.
GC_ENV = "BENCH_GC"


def apply_gc_mode() -> str:
    """Apply ``$BENCH_GC`` once the peer's imports are done; returns the mode."""
    mode = os.environ.get(GC_ENV, "") or "default"
    if mode == "freeze":
        gc.collect()
        gc.freeze()
    elif mode == "off":
        gc.disable()
    return mode


def parse_args(description: str) -> argparse.Namespace:
    """The command line every peer accepts (and applies ``$BENCH_GC``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--mode", choices=("throughput", "stream", "latency"), default="throughput")
    parser.add_argument("--expect", type=int, default=0, help="throughput mode: messages to read")
    parser.add_argument("--session-timeout", type=float, default=6.0)
    parser.add_argument("--heartbeat", type=float, default=1.0)
    parser.add_argument("--rebalance-timeout", type=float, default=30.0)
    parser.add_argument("--out", help="latency mode: where to write the (send, arrival) pairs")
    parser.add_argument(
        "--tuned", action="store_true", help="latency mode: the client's latency settings"
    )
    args = parser.parse_args()
    args.gc_mode = apply_gc_mode()
    return args


def emit(obj: dict[str, Any]) -> None:
    """Write one protocol line to stdout."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def emit_throughput(
    count: int, n_first: int, cpu_first: float, t_first: float, t_last: float, **extra: Any
) -> None:
    """The throughput-mode final report: ``count`` messages, the first ``n_first`` of them
    by ``t_first`` with ``cpu_first`` CPU seconds spent, the last at ``t_last``; ``extra``:
    the rusage fields (:func:`usage`) and any of the peer's own."""
    emit(
        {
            "ev": "result",
            "count": count,
            "n_first": n_first,
            "cpu_first": cpu_first,
            "t_first": t_first,
            "t_last": t_last,
            **extra,
        }
    )


def cpu_now() -> float:
    """User + system CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_kb() -> int:
    """Peak resident set size of this process in KiB.

    ``VmHWM`` from ``/proc/self/status`` where it exists: Linux carries ``ru_maxrss``
    across ``fork``/``exec``, so a child's ``ru_maxrss`` is at least the RSS its parent
    (the harness) had when it spawned the child, whereas ``VmHWM`` belongs to the
    process's own address space. Elsewhere ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def usage() -> dict[str, float]:
    """Peak RSS (KiB; ``maxrss_kb`` from :func:`peak_rss_kb`, ``ru_maxrss_kb`` as reported
    by getrusage) and CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "maxrss_kb": peak_rss_kb(),
        "ru_maxrss_kb": ru.ru_maxrss,
        "cpu_user": ru.ru_utime,
        "cpu_sys": ru.ru_stime,
    }


class Recorder:
    """Counts messages; in stream mode also logs per-partition consumption times."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.count = 0
        self.t_first = 0.0
        self.t_last = 0.0
        self.usage_at_last: dict[str, float] = {}
        self._items: list[list[float]] = []
        self._last_flush = time.monotonic()

    def add(self, partition: int, n: int, last_offset: int) -> None:
        """``n`` messages of ``partition`` (ending at ``last_offset``) reached user code."""
        now = time.monotonic()
        if not self.count:
            self.t_first = now
        self.count += n
        self.t_last = now
        self._items.append([partition, now, n, last_offset])
        if now - self._last_flush >= FLUSH_INTERVAL:
            self.flush()

    def maybe_flush(self) -> None:
        """Flush if the last flush is :data:`FLUSH_INTERVAL` old (for polling loops)."""
        if time.monotonic() - self._last_flush >= FLUSH_INTERVAL:
            self.flush()

    def flush(self) -> None:
        """Send the buffered consumption records (stream mode)."""
        self._last_flush = time.monotonic()
        if self._items:
            items, self._items = self._items, []
            emit({"ev": "consumed", "items": items})

    def event(self, ev: str, **fields: Any) -> None:
        """A timestamped lifecycle event (start, assigned, revoked)."""
        self.flush()
        emit({"ev": ev, "t": time.monotonic(), **fields})

    def result(self, **extra: Any) -> None:
        """The final report."""
        self.flush()
        usage_now = self.usage_at_last or usage()
        emit(
            {
                "ev": "result",
                "count": self.count,
                "t_first": self.t_first,
                "t_last": self.t_last,
                **usage_now,
                **extra,
            }
        )


def watch_stdin(on_stop: Callable[[], object]) -> None:
    """Call ``on_stop`` (from a daemon thread) when the harness writes a line or closes stdin."""

    def run() -> None:
        sys.stdin.readline()
        on_stop()

    threading.Thread(target=run, name="stdin-watch", daemon=True).start()


def sent_ns(value: bytes) -> int:
    """The send time a latency-mode record carries: its value's first 8 bytes, big-endian
    ``CLOCK_MONOTONIC`` nanoseconds (written by :mod:`bench.latency`'s producer)."""
    return int.from_bytes(value[:8], "big")


class LatencyLog:
    """Every record's (send, arrival) pair, ``CLOCK_MONOTONIC`` ns, kept until the end.

    Arrival is when the record reached user code: read once per delivery (a poll's
    answer, a batch), or per message where the API hands out one at a time. The pairs go
    to a file at stop as big-endian int64s (``send, arrival, send, arrival, ...``), the
    format every peer writes; the harness takes its measurement window from them.
    """

    def __init__(self) -> None:
        self.pairs = array("q")

    def add(self, sent: int, arrived: int) -> None:
        """One record."""
        self.pairs.append(sent)
        self.pairs.append(arrived)

    def write(self, path: str) -> int:
        """Write the pairs to ``path``; returns how many records."""
        pairs = array("q", self.pairs)
        if sys.byteorder == "little":
            pairs.byteswap()
        with open(path, "wb") as f:
            pairs.tofile(f)
        return len(self.pairs) // 2
