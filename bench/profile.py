"""Where a consumed message's time goes: ``python -m bench.profile {micro,spy}``.

``micro``
    In-process, no broker: the cost per message of each stage of the consumergroup hot
    path, timed separately on the real classes (best of ``--repeat``): the C record
    reader alone, reading the fields, building the :class:`ConsumerMessage`,
    ``decode_records`` as a whole (GC held off, as it does), the cyclic GC pass that
    follows, the hand-off through a :class:`PartitionConsumer` with ``batches()`` and with
    ``messages()``, ``session.mark_message`` and freeing a consumed message.

``spy``
    End to end: starts the embedded broker, loads ``--n`` records, runs one peer in
    throughput mode once plain (for its steady CPU per message) and once under
    ``py-spy record --native`` (``pip install py-spy``), and splits the steady-state
    samples of the event-loop thread into the same stages. ``ns/msg`` = share of the
    busy samples x the plain run's steady CPU per message.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------------------ micro


def build_record_sets(count: int, batch_bytes: int = 1_000_000) -> list[tuple[bytes, int]]:
    """``count`` records (8-byte keys, random 100-byte values) as ~1 MB v2 batches, one per
    record set: what a Fetch of the loaded benchmark topic carries per partition."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    randbytes = random.Random(0).randbytes
    sets: list[tuple[bytes, int]] = []
    offset = 0
    while offset < count:
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, batch_bytes)
        base = offset
        while offset < count:
            key = offset.to_bytes(8, "big")
            if builder.append(offset - base, 1_700_000_000_000, key, randbytes(100), []) is None:
                break
            offset += 1
        batch = bytearray(builder.build())
        batch[0:8] = base.to_bytes(8, "big")  # the broker assigns the base offset
        sets.append((bytes(batch), base))
    return sets


def _best(fn: Callable[[], Any], count: int, repeat: int) -> float:
    """Best ns per item of ``fn()`` (which handles ``count`` items)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - start)
    return best / count


def micro(records: int, repeat: int) -> list[tuple[str, float, str]]:
    """Per-message stage costs; rows of (stage, ns/msg, note)."""
    from aiokafka.record.memory_records import MemoryRecords

    from bench.hotpath_ir import session_for
    from consumergroup.config import Config
    from consumergroup.consumer import partition as partition_module
    from consumergroup.consumer.partition import PartitionConsumer
    from consumergroup.consumer.records import decode_records
    from consumergroup.group import offsets as offsets_module
    from consumergroup.message import ConsumerMessage

    sets = build_record_sets(records)
    n = records
    rows: list[tuple[str, float, str]] = []

    def reader_bare() -> None:
        for data, _ in sets:
            mr = MemoryRecords(data)
            while mr.has_next():
                for _r in mr.next_batch():
                    pass

    # Each decoder drops a record set's result before the next, like a consumer that
    # keeps up; retention is priced separately below.
    def reader_fields() -> None:
        for data, _ in sets:
            mr = MemoryRecords(data)
            while mr.has_next():
                out = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in mr.next_batch()]
                del out

    def decode_each() -> None:
        for data, off in sets:
            out = decode_records("t", 0, data, off).messages
            del out

    def decode_all() -> list[list[ConsumerMessage]]:
        return [decode_records("t", 0, data, off).messages for data, off in sets]

    gc.collect()
    with _gc_off():
        bare = _best(reader_bare, n, repeat)
        fields = _best(reader_fields, n, repeat)
        total = _best(decode_each, n, repeat)
        retained = _best(decode_all, n, repeat)
    from consumergroup.consumer import records as records_mod

    if getattr(records_mod, "_decode_v2", None) is None:
        rows.append(("decode: C reader iterating records", bare, "aiokafka DefaultRecordBatch"))
        rows.append(("decode: read offset/key/value/headers/ts", fields - bare, "into a 5-tuple"))
        rows.append(
            ("message object: ConsumerMessage instead of the tuple", total - fields, "8 slots")
        )
        how = "aiokafka reader"
    else:
        # Our C decoder builds the messages itself; aiokafka's reader (the fallback's) is
        # shown for reference only.
        rows.append(("(aiokafka reader + reading the fields)", fields, "the fallback, reference"))
        how = "C decoder"
    rows.append(("= decode_records total", total, f"{how}; GC off inside; result dropped per set"))
    rows.append(
        (
            "extra when all stay alive (fresh memory)",
            retained - total,
            f"{n} messages kept, as an eager decode of a whole Fetch keeps them",
        )
    )
    # What keeping costs is mostly the kernel's: first touches of fresh pages (pymalloc
    # arenas are mmap'ed and given back when empty, so every kept run faults them in).
    gc.collect()
    with _gc_off():
        dropped_sys, dropped_faults = _kernel_cost(decode_each)
        kept_sys, kept_faults = _kernel_cost(decode_all)
    rows.append(
        (
            "  of which kernel time (page faults)",
            (kept_sys - dropped_sys) / n,
            f"minor faults/msg {kept_faults / n:.3f} kept vs {dropped_faults / n:.3f} dropped",
        )
    )

    # The cyclic GC passes the decoded messages cost. decode_records holds GC off while
    # it runs; the first allocation after it re-enables GC then collects a young
    # generation full of messages that are still queued (alive), so they are promoted,
    # and later gen-1/gen-2 passes visit them again. Timed here explicitly: decode with
    # GC off, then one young pass, then one full pass, each with every message alive.
    young: list[int] = []
    full: list[int] = []
    for _ in range(repeat):
        gc.collect()
        with _gc_off():
            alive = decode_all()
            start = time.perf_counter_ns()
            gc.collect(0)
            young.append(time.perf_counter_ns() - start)
            start = time.perf_counter_ns()
            gc.collect(2)
            full.append(time.perf_counter_ns() - start)
            del alive
    rows.append(("GC: young pass, messages alive", min(young) / n, "each message once"))
    rows.append(
        (
            "GC: full pass, messages alive",
            min(full) / n,
            f"whole heap ({len(gc.get_objects())} objects) / messages",
        )
    )

    chunks = decode_all()
    cfg = Config()

    class _End(Exception):
        pass

    # The fetch path is in flux: newer PartitionConsumers take framed, undecoded record
    # sets (scan_records) and decode in the reader; older ones take decoded lists.
    scan = getattr(records_mod, "scan_records", None)
    deliver: Any = PartitionConsumer._deliver

    def fill() -> PartitionConsumer:
        pc = PartitionConsumer(
            "t", 0, 0, buffer_size=cfg.channel_buffer_size, fetch_size=1 << 20, on_close=_noop
        )
        if scan is not None:
            for data, off in sets:
                deliver(pc, scan("t", 0, data, off))
        else:
            for chunk in chunks:
                deliver(pc, list(chunk), chunk[-1].offset + 1)
        pc._fail(_End())
        return pc

    async def via_batches(pc: PartitionConsumer) -> int:
        got = 0
        try:
            async for batch in pc.batches():
                got += len(batch)
        except _End:
            pass
        return got

    async def via_messages(pc: PartitionConsumer, mark: bool) -> int:
        got = 0
        mark_message = session_for("t", [0]).mark_message  # a session needs the loop
        try:
            if mark:
                async for msg in pc.messages():
                    mark_message(msg)
                    got += 1
            else:
                async for _msg in pc.messages():
                    got += 1
        except _End:
            pass
        return got

    def timed(coro_fn: Callable[[PartitionConsumer], Any]) -> float:
        best = float("inf")
        for _ in range(repeat):
            pc = fill()
            with _gc_off():
                start = time.perf_counter_ns()
                got = asyncio.run(coro_fn(pc))
                elapsed = time.perf_counter_ns() - start
            assert got == n, (got, n)
            best = min(best, elapsed)
        return best / n

    loop_overhead = _best(lambda: asyncio.run(asyncio.sleep(0)), 1, repeat) / n
    hand = timed(via_batches) - loop_overhead
    it = timed(lambda pc: via_messages(pc, False)) - loop_overhead
    marked = timed(lambda pc: via_messages(pc, True)) - loop_overhead
    if scan is not None:  # batches() decodes: take decode_records' cost out
        rows.append(("batches() incl. its lazy decode", hand, "reader-side decode"))
        rows.append(("hand-off: batches() minus decode_records", hand - total, ""))
    else:
        rows.append(("hand-off: _deliver + batches()", hand, f"chunks of ~{n // len(chunks)}"))
    stream = "C MessageStream" if partition_module._MessageStream else "async generator"
    rows.append(("iteration: messages() over batches()", it - hand, f"{stream} per message"))
    marks = "C Marks" if offsets_module._Marks is not offsets_module._PyMarks else "Python"
    rows.append(("session.mark_message", marked - it, f"OffsetManager.mark_message ({marks})"))

    def free() -> None:
        chunks_ = decode_all()
        start = time.perf_counter_ns()
        del chunks_[:]
        free_ns.append(time.perf_counter_ns() - start)

    free_ns: list[int] = []
    with _gc_off():
        for _ in range(repeat):
            free()
    rows.append(("free a consumed message", min(free_ns) / n, "ConsumerMessage + key + value"))
    return rows


def _kernel_cost(fn: Callable[[], Any]) -> tuple[float, int]:
    """System CPU ns and minor page faults of one ``fn()`` (its result freed after)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = fn()
    after = resource.getrusage(resource.RUSAGE_SELF)
    del result
    return (after.ru_stime - before.ru_stime) * 1e9, after.ru_minflt - before.ru_minflt


class _gc_off:
    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


def _noop(_pc: object) -> None:
    pass


# -------------------------------------------------------------------------------- spy

_MESSAGES_FRAMES = tuple(
    f"PartitionConsumer.{name}" for name in ("messages", "_messages", "_refill")
)
#: (stage, predicate on one frame string), matched from the leaf towards the root.
_STAGES: list[tuple[str, Callable[[str], bool]]] = [
    (
        "GC (cyclic collector)",
        lambda f: "gc_collect" in f or f.startswith("collect "),
    ),
    ("idle (waiting on the socket)", lambda f: f.startswith(("epoll_wait", "select "))),
    ("build ConsumerMessage", lambda f: "consumergroup/message.py" in f),
    (
        "decode (C reader, field reads, list)",
        lambda f: "default_records.c" in f or "cutil.c" in f or "consumer/records.py" in f,
    ),
    ("mark_message", lambda f: "offsets.py" in f or "mark_message" in f),
    (
        # The C stream runs in the caller's frame; _refill once per list.
        "iteration: messages()",
        lambda f: f.startswith(_MESSAGES_FRAMES),
    ),
    ("hand-off: _deliver / batches()", lambda f: "consumer/partition.py" in f),
    ("user loop + freeing consumed messages", lambda f: "bench/peers" in f),
    (
        "network (recv, framing, response parse)",
        lambda f: (
            "consumergroup/net/" in f
            or "aiokafka/protocol" in f
            or f.startswith(("recv ", "__recv"))
        ),
    ),
    ("fetch loop (requests, bookkeeping)", lambda f: "consumer/broker.py" in f),
    ("event loop, tasks (asyncio, anyio)", lambda f: "asyncio/" in f or "anyio/" in f),
]
# the Python-side peers of the other clients, for completeness
_STAGES.insert(7, ("aiokafka fetcher / records", lambda f: "aiokafka/consumer" in f))


def classify(stack: list[str]) -> str:
    """The stage of one sample (innermost frame that names one)."""
    for frame in reversed(stack):
        for stage, match in _STAGES:
            if match(frame):
                return stage
    return "other"


def summarize(raw: Path) -> tuple[collections.Counter[str], int]:
    """Stage -> samples over the event-loop samples of a ``py-spy --format raw`` file."""
    stages: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        if "run_forever" not in stack_text or "importlib" in stack_text:
            continue  # start-up imports and other threads
        frames = stack_text.split(";")
        frames = frames[next(i for i, f in enumerate(frames) if "run_forever" in f) :]
        stages[classify(frames)] += int(count)
        total += int(count)
    return stages, total


async def spy(peer: str, n: int, partitions: int, rate: int, out: Path) -> dict[str, Any]:
    """Run ``peer`` plain and under py-spy; returns the stage breakdown."""
    from bench import harness

    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(pyspy, os.X_OK):
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    async with harness.broker(None) as (bootstrap, _):
        topic = await harness.create_topic(bootstrap, partitions, "spy")
        loaded = await harness.load(bootstrap, topic, partitions, n, 100, 8, "none", 1_000_000)
        async with harness.procs(bootstrap, 6.0, 1.0) as ps:
            plain = await harness.run_throughput_once(ps, peer, loaded, 300)
        cmd = [
            pyspy,
            "record",
            "--native",
            "--format",
            "raw",
            "-r",
            str(rate),
            "-o",
            str(out),
            "--",
            sys.executable,
            "-m",
            f"bench.peers.{peer}",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            f"spy-{uuid.uuid4().hex[:8]}",
            "--expect",
            str(n),
        ]
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=harness.ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await asyncio.wait_for(proc.wait(), 300)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    stages, total = summarize(out)
    busy = total - stages.get("idle (waiting on the socket)", 0)
    per_msg_ns = (plain.get("steady_cpu_us_per_msg") or 0) * 1000
    return {
        "peer": peer,
        "plain": plain,
        "stages": stages,
        "total": total,
        "busy": busy,
        "ns_per_msg": per_msg_ns,
    }


def main() -> None:
    """Command line."""
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("micro", help="per-stage cost on the real classes, no broker")
    m.add_argument("--records", type=int, default=80_000, help="~ one Fetch round of 8 x 1 MB")
    m.add_argument("--repeat", type=int, default=5)
    s = sub.add_parser("spy", help="py-spy --native on one peer, end to end")
    s.add_argument("--peer", default="cg_batches")
    s.add_argument("--n", type=int, default=1_000_000)
    s.add_argument("--partitions", type=int, default=8)
    s.add_argument("--rate", type=int, default=250, help="py-spy samples/s")
    s.add_argument("--out", type=Path, help="keep the raw py-spy output here")
    args = p.parse_args()
    if args.cmd == "micro":
        rows = micro(args.records, args.repeat)
        print("| stage | ns/msg | note |\n|---|---:|---|")
        for stage, ns, note in rows:
            print(f"| {stage} | {ns:.0f} | {note} |")
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="spy-")) / f"{args.peer}.txt"
    res = asyncio.run(spy(args.peer, args.n, args.partitions, args.rate, out))
    plain = res["plain"]
    print(
        f"{args.peer}: {plain['msgs_per_s']:,.0f} msgs/s, steady CPU "
        f"{res['ns_per_msg']:.0f} ns/msg, CPU share {plain['steady_cpu_share']:.2f}; "
        f"{res['total']} event-loop samples, {res['busy']} busy (raw: {out})"
    )
    print("| stage | share of busy | ns/msg |\n|---|---:|---:|")
    for stage, count in res["stages"].most_common():
        if stage.startswith("idle"):
            continue
        share = count / res["busy"] if res["busy"] else 0.0
        print(f"| {stage} | {share * 100:.1f}% | {share * res['ns_per_msg']:.0f} |")
    idle = res["stages"].get("idle (waiting on the socket)", 0)
    print(f"(idle samples, not in the shares: {idle})")


if __name__ == "__main__":
    main()
