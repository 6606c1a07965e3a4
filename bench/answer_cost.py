"""A caught-up member's CPU per Fetch answer, this tree against another.

One ``messages()`` member (``mark_message`` per record, 8 partitions, defaults) per tree,
each in a process and a group of its own, read one stream together: the latency
section's producer at ``--rate`` records/s. After a warm-up, for ``--window`` seconds,
each member counts the Fetch answers it handled (``BrokerConsumer._handle`` calls), the
records its handler got, the event loop's passes (``_run_once`` calls) and its process's
user and system CPU; ``perf stat -e instructions:u`` (when ``perf`` is installed) counts
its user-space instructions over the same window. Printed per answer and per record:
instructions are not slowed by a loaded machine the way times are, but how many records
an answer carries depends on how fast the member turns around, so both are shown.

``--baseline DIR``: a directory holding another ``consumergroup`` package (a copy of an
older tree, its C extensions built; e.g. ``cp -r consumergroup /tmp/base/`` before a
change), run side by side with this tree's, the start order alternating over ``--reps``.

Run from the repository root against a running cluster:
``.venv/bin/python -m bench.answer_cost --bootstrap B --baseline /tmp/base --reps 3``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sys
from typing import Any

from .harness import ROOT, create_topic, log
from .latency import rotated

WARM_UP = 8.0


def member(bootstrap: str, topic: str, window: float) -> None:
    """One member of its own group: waits out the warm-up, says ``START <pid>``, then
    prints its window's counts as a JSON line."""
    import asyncio.base_events as base_events

    import consumergroup as cg
    from consumergroup.consumer import broker

    counts = {"answers": 0, "records": 0, "passes": 0}
    handle = broker.BrokerConsumer._handle
    run_once = base_events.BaseEventLoop._run_once

    def counted_handle(self: Any, resp: Any) -> Any:
        counts["answers"] += 1
        return handle(self, resp)

    def counted_run_once(self: Any) -> None:
        counts["passes"] += 1
        run_once(self)

    broker.BrokerConsumer._handle = counted_handle  # type: ignore[method-assign]
    base_events.BaseEventLoop._run_once = counted_run_once  # type: ignore[attr-defined]

    class Handler(cg.ConsumerGroupHandler):
        async def consume_claim(self, session: Any, claim: Any) -> None:
            async for message in claim.messages():
                counts["records"] += 1
                session.mark_message(message)

    async def main() -> None:
        config = cg.Config(client_id="bench-answer-cost")
        config.consumer.offsets.initial = cg.OFFSET_NEWEST
        group_id = f"bench-answer-cost-{os.getpid()}"
        async with cg.ConsumerGroup([bootstrap], group_id, config) as group:
            runner = asyncio.create_task(group.run([topic], Handler()))
            await asyncio.sleep(WARM_UP)
            before, cpu = dict(counts), resource.getrusage(resource.RUSAGE_SELF)
            print("START", os.getpid(), flush=True)
            await asyncio.sleep(window)
            after, cpu_after = dict(counts), resource.getrusage(resource.RUSAGE_SELF)
            got = {k: after[k] - before[k] for k in counts}
            got["user_s"] = cpu_after.ru_utime - cpu.ru_utime
            got["sys_s"] = cpu_after.ru_stime - cpu.ru_stime
            got["package"] = os.path.dirname(cg.__file__)
            print(json.dumps(got), flush=True)
            await group.close()
            await runner

    asyncio.run(main())


async def _rep(
    bootstrap: str, rate: int, window: float, trees: list[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    topic = await create_topic(bootstrap, 8, "answer-cost")
    producer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.latency",
        "--produce",
        json.dumps([bootstrap, topic, 8, rate, WARM_UP + window + 6, 3, 100, "cg"]),
        stdout=asyncio.subprocess.DEVNULL,
        cwd=ROOT,
    )
    procs = {}
    for name, path in trees:
        argv = ["-m", "bench.answer_cost", "--member", json.dumps([bootstrap, topic, window])]
        procs[name] = await asyncio.create_subprocess_exec(
            sys.executable,
            *argv,
            stdout=asyncio.subprocess.PIPE,
            cwd=path,  # its package is the one imported (the first entry of sys.path)
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    perfs = {}
    for name, proc in procs.items():
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 90)).decode()
        if not line.startswith("START"):
            raise RuntimeError(f"member {name} ended before its window: {line!r}")
        if shutil.which("perf"):
            perfs[name] = await asyncio.create_subprocess_exec(
                "perf", "stat", "-x,", "-e", "instructions:u", "-p", line.split()[1],
                "--", "sleep", str(window),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        stdout, _ = await proc.communicate()
        got = json.loads(stdout.decode().strip().splitlines()[-1])
        if name in perfs:
            _, err = await perfs[name].communicate()
            field = err.decode().strip().splitlines()[-1].split(",")[0]
            got["instructions"] = int(field) if field.isdigit() else None
        out[name] = got
    await producer.wait()
    return out


def _row(rep: int, name: str, got: dict[str, Any]) -> str:
    answers, records = max(got["answers"], 1), max(got["records"], 1)
    ins = got.get("instructions")
    per_answer = f"{ins / answers / 1e3:,.0f}" if ins else "-"
    per_record = f"{ins / records / 1e3:,.0f}" if ins else "-"
    return (
        f"| {rep} | {name} | {got['answers']:,} | {got['records']:,} | "
        f"{got['passes'] / answers:.2f} | {got['user_s'] / answers * 1e6:,.0f} | "
        f"{got['sys_s'] / answers * 1e6:,.0f} | {per_answer} | {per_record} |"
    )


async def drive(bootstrap: str, rate: int, window: float, reps: int, baseline: str | None) -> None:
    """``reps`` runs of the members side by side; a table row per member and run."""
    trees = [("this tree", str(ROOT))]
    if baseline is not None:
        trees.append(("baseline", baseline))
    print(
        f"One messages() member per tree, {rate:,} records/s of 100 B over 8 partitions, "
        f"{window:g} s window after {WARM_UP:g} s (load at start {os.getloadavg()[0]:.1f})\n"
    )
    print(
        "| rep | tree | answers | records | loop passes / answer | user us / answer "
        "| sys us / answer | k instructions / answer | k instructions / record |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for rep in range(reps):
        got = await _rep(bootstrap, rate, window, rotated(trees, rep))
        for name, _ in trees:
            print(_row(rep + 1, name, got[name]), flush=True)
        packages = ", ".join(f"{name}: {got[name]['package']}" for name, _ in trees)
        log(f"rep {rep + 1}/{reps} done ({packages}), load {os.getloadavg()[0]:.1f}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap", help="a running cluster (required)")
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--baseline", help="a directory holding another consumergroup package")
    p.add_argument("--member", help=argparse.SUPPRESS)  # [bootstrap, topic, window]
    args = p.parse_args(argv)
    if args.member:
        bootstrap, topic, window = json.loads(args.member)
        member(bootstrap, topic, window)
        return
    if not args.bootstrap:
        p.error("--bootstrap is required")
    asyncio.run(drive(args.bootstrap, args.rate, args.window, args.reps, args.baseline))


if __name__ == "__main__":
    main()
