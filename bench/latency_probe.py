"""Where a fetched record's time goes inside one member: ``python -m bench.latency_probe``.

The latency section (:mod:`bench.latency`) measures from a record's send to the loop body;
most of that is the write and the broker. This probe times the member's own part, per API,
with stamps inside the pipeline of a real :class:`consumergroup.ConsumerGroup` (its
classes wrapped in the probe process only, nothing changed for users):

- ``frame``: the Fetch response's last byte was read (``BrokerConnection._on_frame``);
- ``handle``: the fetch task starts delivering it (``BrokerConsumer._handle``: the
  response is decoded);
- ``deliver``: this partition's record set is handed to its ``PartitionConsumer``;
- ``next fetch``: the fetch task wrote its next Fetch (it does so before any handler
  runs: the next round trip overlaps with the handlers);
- ``first`` / ``last``: the handler's loop body reached the record set's first / last
  record (``claim.messages()``: per record; ``claim.batches()``: per list).

Each stage is shown from ``frame`` in wall time (ms) and in the member's CPU time (µs of
``time.thread_time``: the event loop's own work, without the waits for a core that a
loaded machine adds). One member per API, each in a process and a group of its own,
read one stream together (the latency section's producer, ``--rate`` records/s over 8
partitions); ``--reps`` runs alternate which member starts first.

Run from the repository root against a running cluster:
``.venv/bin/python -m bench.latency_probe --bootstrap B --rate 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import statistics
import sys
import time
from typing import Any

from .latency import percentiles, rotated

APIS = ("messages", "batches")
#: Stages, each timed from the frame: (name, index in a record-set row).
STAGES = (("handle", 1), ("deliver", 2), ("next fetch", 3), ("first", 4), ("last", 5))


# ---------------------------------------------------------------------------- member


def _instrument(rows: dict[tuple[int, int], list[int]], writes: list[tuple[int, int]]) -> None:
    """Wrap the pipeline's steps to stamp them: each stage as two ints, wall ns then the
    thread's CPU ns.

    ``rows``: (partition, first offset) -> a row per record set delivered: frame (0, 1),
    handle (2, 3), deliver (4, 5), next fetch (6, 7), first (8, 9) and last record (10,
    11), then its last offset (12) and, once read, its first record's send time (13).
    ``writes``: every Fetch written, in order.
    """
    from consumergroup.consumer import broker, partition
    from consumergroup.net import connection

    wall, cpu = time.monotonic_ns, time.thread_time_ns
    frames: dict[int, tuple[object, int, int]] = {}
    handling = [0, 0]
    on_frame = connection.BrokerConnection._on_frame
    write = connection.BrokerConnection._write
    handle = broker.BrokerConsumer._handle
    deliver = partition.PartitionConsumer._deliver

    def on_frame_(self: Any, frame: Any) -> None:
        frames[id(frame)] = (frame, wall(), cpu())  # the frame is held: its id stays unique
        if len(frames) > 64:
            del frames[next(iter(frames))]
        on_frame(self, frame)

    def write_(self: Any, struct_: Any) -> int:
        if "Fetch" in type(struct_).__name__:
            writes.append((wall(), cpu()))
        return write(self, struct_)

    def handle_(self: Any, resp: Any) -> Any:
        handling[:] = [wall(), cpu()]
        return handle(self, resp)

    def deliver_(self: Any, records: Any) -> None:
        if records.batches:
            got = frames.get(id(records.batches[0][0].obj))  # the frame the view is of
            if got is not None:
                rows[(self.partition, records.start)] = [
                    got[1], got[2], *handling, wall(), cpu(), 0, 0, 0, 0, 0, 0,
                    records.next_offset - 1,
                ]  # fmt: skip
        deliver(self, records)

    connection.BrokerConnection._on_frame = on_frame_  # type: ignore[method-assign]
    connection.BrokerConnection._write = write_  # type: ignore[method-assign]
    broker.BrokerConsumer._handle = handle_  # type: ignore[method-assign]
    partition.PartitionConsumer._deliver = deliver_  # type: ignore[method-assign]


async def member(api: str, bootstrap: str, topic: str, seconds: float) -> dict[str, Any]:
    """One member reading ``topic`` with ``api`` for ``seconds``; its stamped record sets."""
    import consumergroup as cg

    pending: dict[tuple[int, int], list[int]] = {}
    reading: dict[tuple[int, int], list[int]] = {}  # (partition, last offset) -> row
    done: list[list[int]] = []
    writes: list[tuple[int, int]] = []
    _instrument(pending, writes)
    wall, cpu = time.monotonic_ns, time.thread_time_ns

    def first(partition: int, offset: int, value: bytes) -> None:
        row = pending.pop((partition, offset), None)
        if row is not None:
            row[8:10] = [wall(), cpu()]
            row.append(int.from_bytes(value[:8], "big"))  # its send time
            reading[(partition, row[12])] = row

    def last(partition: int, offset: int) -> None:
        row = reading.pop((partition, offset), None)
        if row is not None:
            row[10:12] = [wall(), cpu()]
            done.append(row)

    class Handler(cg.ConsumerGroupHandler):
        async def on_assigned(self, session: Any, partitions: Any) -> None:
            print(json.dumps({"ev": "assigned"}), flush=True)

        async def consume_claim(self, session: Any, claim: Any) -> None:
            p = claim.partition
            if api == "batches":
                async for batch in claim.batches():
                    first(p, batch[0].offset, batch[0].value)
                    last(p, batch[-1].offset)
                    session.mark_message(batch[-1])
            else:
                async for msg in claim.messages():
                    first(p, msg.offset, msg.value)
                    last(p, msg.offset)
                    session.mark_message(msg)

    config = cg.Config(client_id=f"bench-probe-{api}")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    async with cg.ConsumerGroup([bootstrap], f"bench-probe-{api}-{os.getpid()}", config) as group:
        runner = asyncio.create_task(group.run([topic], Handler()))
        await asyncio.sleep(seconds)
        await group.close()
        await runner
    written = [w for w, _ in writes]
    for row in done:  # the first Fetch written after the frame: the next round trip
        at = bisect.bisect_left(written, row[0])
        row[6:8] = writes[at] if at < len(writes) else (0, 0)
    return {"api": api, "rows": done}


# ---------------------------------------------------------------------------- driver


def _stage(rows: list[list[int]], index: int) -> tuple[list[int], list[int]]:
    """A stage's wall and CPU ns from the frame, over ``rows`` (stage ``index``)."""
    ok = [r for r in rows if r[2 * index]]
    return [r[2 * index] - r[0] for r in ok], [r[2 * index + 1] - r[1] for r in ok]


async def drive(bootstrap: str, rate: int, window: float, reps: int) -> dict[str, Any]:
    """``reps`` runs of both members on one fresh stream each; every run's figures."""
    from .harness import ROOT, create_topic, log

    runs: dict[str, list[dict[str, Any]]] = {api: [] for api in APIS}
    for rep in range(reps):
        order = rotated(APIS, rep)
        topic = await create_topic(bootstrap, 8, "probe")
        procs = []
        for api in order:
            argv = ["-m", "bench.latency_probe", "--member", json.dumps([api, bootstrap, topic])]
            argv += ["--window", str(window)]
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, *argv, stdout=asyncio.subprocess.PIPE, cwd=ROOT
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 90)
            if b"assigned" not in line:
                raise RuntimeError(f"a probe member ended before its assignment: {line!r}")
        await asyncio.sleep(1.0)
        producer = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.latency",
            "--produce",
            json.dumps([bootstrap, topic, 8, rate, window + 3, 3, 100, "cg"]),
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        out, _ = await producer.communicate()
        w0, w1 = json.loads(out.decode().splitlines()[-1])["window"]
        for proc in procs:
            out, _ = await proc.communicate()
            found = json.loads(out.decode().splitlines()[-1])
            rows = [r for r in found["rows"] if w0 <= r[13] < w1]
            figures = {}
            for name, index in STAGES:
                walls, cpus = _stage(rows, index)
                figures[name] = {
                    **percentiles(walls),
                    "cpu_p50_us": statistics.median(cpus) / 1e3 if cpus else float("nan"),
                }
            sends = [r[8] - r[13] for r in rows]
            figures["send to first"] = {**percentiles(sends), "cpu_p50_us": float("nan")}
            runs[found["api"]].append({"sets": len(rows), **figures})
            log(
                f"probe {rate:,}/s rep {rep + 1}/{reps} {found['api']}: {len(rows):,} record "
                f"sets, frame to first p50 {figures['first']['p50']:.3f} ms "
                f"({figures['first']['cpu_p50_us']:.0f} us CPU)"
            )
    return {"rate": rate, "window_s": window, "reps": reps, "load": os.getloadavg(), "runs": runs}


def markdown(result: dict[str, Any]) -> str:
    """One table: each API's stages from the frame, medians over the reps."""
    lines = [
        f"Inside the member, {result['rate']:,} records/s, {result['reps']} rep(s) of "
        f"{result['window_s']:.0f} s (medians over reps; wall ms from the response's last "
        "byte, and the member's CPU µs over the same span):",
        "",
        "| API | record sets | stage | p50 ms | p99 ms | CPU p50 µs |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for api, runs in result["runs"].items():
        if not runs:
            continue
        sets = int(statistics.median(r["sets"] for r in runs))
        for stage in (*(name for name, _ in STAGES), "send to first"):
            p50 = statistics.median(r[stage]["p50"] for r in runs)
            p99 = statistics.median(r[stage]["p99"] for r in runs)
            us = statistics.median(r[stage]["cpu_p50_us"] for r in runs)
            lines.append(
                f"| {api} | {sets:,} | {stage} | {p50:.3f} | {p99:.3f} | "
                + ("-" if us != us else f"{us:.0f}")
                + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.latency_probe``: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m bench.latency_probe", description=__doc__)
    p.add_argument("--bootstrap", help="a running cluster (required, except for --member)")
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--member", help=argparse.SUPPRESS)  # [api, bootstrap, topic]: a member
    args = p.parse_args(argv)
    if args.member:
        api, bootstrap, topic = json.loads(args.member)
        print(json.dumps(asyncio.run(member(api, bootstrap, topic, args.window + 12))))
        return
    if not args.bootstrap:
        p.error("--bootstrap is required")
    result = asyncio.run(drive(args.bootstrap, args.rate, args.window, args.reps))
    print(markdown(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
