"""A caught-up reader's cost per record set: ``python -m bench.reader_wake``.

At 1,000-10,000 records/s a caught-up partition gets a record set of one to ten records
per Fetch answer, and its reader (the handler's ``messages()`` or ``batches()`` loop) has
nothing buffered between two of them: for each set it is woken, takes and decodes it,
hands it out, and waits again. This counts that cycle in instructions under ``valgrind
--tool=callgrind`` (stable on a shared machine, where timings are not), on the real
classes, no broker: a task standing in for the fetch task frames each set
(``scan_records`` over a v2 batch of ``--records`` records of 100 B), notes its epoch,
hands it to the :class:`PartitionConsumer` and yields; the reader's loop body takes
each message (``batches()``: each list, then each message of it).

Modes: ``none`` (no reader: the stand-in fetch task alone, subtracted from the others),
``messages``, ``batches``. Each runs in its own valgrind process at two round counts; the
difference over the extra rounds is the cost per record set. ``--run MODE N RECORDS`` is
the child: one mode once, uninstrumented.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil

from .hotpath_ir import NO_VALGRIND, callgrind_total

MODES = ("none", "messages", "batches")


def run(mode: str, rounds: int, records: int) -> int:
    """``rounds`` record sets of ``records`` records through ``mode``; messages read."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from consumergroup.consumer.partition import PartitionConsumer
    from consumergroup.consumer.records import scan_records

    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i in range(records):
        builder.append(i, 1_700_000_000_000, bytes(8), bytes(100), [])
    batch = bytearray(builder.build())
    pc = PartitionConsumer("t", 0, 0, buffer_size=256, fetch_size=1 << 20, on_close=_noop)
    gc.disable()  # a collection landing in one run and not the other would skew the count

    async def fetch_task() -> None:
        offset = 0
        for _ in range(rounds):
            batch[0:8] = offset.to_bytes(8, "big")  # the broker assigns the base offset
            scanned = scan_records("t", 0, bytes(batch), offset)
            pc._note_epoch(offset, 0)
            pc._deliver(scanned)
            offset = scanned.next_offset
            if mode == "none":  # nobody reads: drop it
                pc._chunks.clear()
                pc._queued = pc._queued_bytes = 0
            await asyncio.sleep(0)  # the fetch task awaits its next answer
        pc.stop()

    async def reader() -> int:
        got = 0
        if mode == "messages":
            async for _msg in pc.messages():
                got += 1
        elif mode == "batches":
            async for chunk in pc.batches():
                for _msg in chunk:
                    pass
                got += len(chunk)
        else:
            got = rounds * records
        return got

    async def main() -> int:
        read = asyncio.create_task(reader())
        await asyncio.sleep(0)  # the reader waits first, as a caught-up one does
        await fetch_task()
        return await read

    return asyncio.run(main())


def _noop(_pc: object) -> None:
    """The partition's on_close: nothing to tell."""


def main() -> None:
    """Command line."""
    p = argparse.ArgumentParser(prog="python -m bench.reader_wake", description=__doc__)
    p.add_argument("--low", type=int, default=2_000, help="record sets of the short run")
    p.add_argument("--high", type=int, default=12_000, help="record sets of the long run")
    p.add_argument("--records", type=int, default=1, help="records per record set")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--run", nargs=3, metavar=("MODE", "N", "RECORDS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run:
        mode, n, records = args.run[0], int(args.run[1]), int(args.run[2])
        got = run(mode, n, records)
        assert got == n * records, (got, n, records)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit(NO_VALGRIND)
    per: dict[str, float] = {}
    for mode in args.modes.split(","):
        child = ["-m", "bench.reader_wake", "--run", mode]
        low = callgrind_total([*child, str(args.low), str(args.records)])
        high = callgrind_total([*child, str(args.high), str(args.records)])
        per[mode] = (high - low) / (args.high - args.low)
        print(f"{mode}: {per[mode]:,.0f} Ir per record set of {args.records}", flush=True)
    base = per.pop("none", 0.0)
    for mode, ir in per.items():
        print(f"{mode} minus none (the reader's side, wake-up included): {ir - base:,.0f} Ir")


if __name__ == "__main__":
    main()
