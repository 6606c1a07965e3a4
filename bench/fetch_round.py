"""CPU of one Fetch round's per-partition work, per stage, at ``--partitions`` (no broker).

Without fetch sessions (Tansu keeps none) every round names its partitions in full,
so what a round costs per named partition is paid for each of them: this times the
stages of a round on the real classes, a round naming every partition and answered
with every partition empty (what most of an answer is at 1,000 partitions):

- ``ready``: the fetch loop's scan for fetchable partitions;
- ``plan``: :meth:`FetchSession.plan` with last fetched epochs (Fetch v12);
- ``encode``: :class:`FetchRequest` built and framed at ``--version``;
- ``decode``: :func:`decode_fetch_response` of the answer;
- ``handle``: :meth:`BrokerConsumer._handle` of it (watermarks, nothing to deliver).

Run from the repository root: ``.venv/bin/python -m bench.fetch_round --partitions 1000``
(v12 answers are built with the test tree's independent encoder, tests/fetch_v12_wire.py).

``--caught-up`` times the round of a caught-up member instead (Fetch v12, one every few
milliseconds at a steady rate): an open fetch session over ``--partitions``, of which one
moved since the last request, answered with that partition's one new 100-byte record:

- ``plan``: the incremental :meth:`FetchSession.plan`;
- ``encode``: the request as the connection writes it (``prepare`` + ``sized_request``);
- ``decode``: :func:`decode_response` of the answer;
- ``handle``: :meth:`BrokerConsumer._handle` of it (scan, epochs, delivery);
- ``read``: ``handle``, then the reader taking the record set (``_next_chunk`` until it is
  empty).

``--only STAGE --rounds N`` runs one stage N times and prints nothing: under
``valgrind --tool=callgrind`` two round counts give its instructions per round.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import time
from collections.abc import Callable
from typing import Any

TOPIC = "bench-round"


def per_round(fn: Callable[[], object], rounds: int) -> float:
    """Median-free, GC-on CPU microseconds per call of ``fn`` over ``rounds`` calls."""
    fn()
    start = time.process_time()
    for _ in range(rounds):
        fn()
    return (time.process_time() - start) / rounds * 1e6


def answer(version: int, partitions: int) -> bytes:
    """A Fetch response frame naming every partition, each empty, at ``version``."""
    if version >= 12:
        from tests import fetch_v12_wire

        parts = [(p, 0, 1000, 1000, 0, [], -1, None, None, None, b"") for p in range(partitions)]
        return fetch_v12_wire.encode_response(1, 0, 0, 0, [(TOPIC, parts)])
    from aiokafka.protocol import fetch

    empty = [(p, 0, 1000, 1000, 0, [], -1, b"") for p in range(partitions)]
    body: bytes = fetch.FetchResponse_v11(0, 0, 0, [(TOPIC, empty)]).encode()
    return struct.pack(">i", 1) + body


def subscribed(partitions: int) -> tuple[Any, list[Any]]:
    """A fetch task (never started) with ``partitions`` partitions subscribed at offset 500."""
    import consumergroup as cg
    from consumergroup.client import Client
    from consumergroup.consumer.broker import BrokerConsumer
    from consumergroup.consumer.partition import PartitionConsumer

    config = cg.Config()
    bc = BrokerConsumer(
        0, Client(["127.0.0.1:9"], config), config, lambda *_: None, print, relocate=print
    )
    pcs = []
    for p in range(partitions):
        pc = PartitionConsumer(TOPIC, p, 500, buffer_size=256, fetch_size=1 << 20, on_close=print)
        bc.subscribe(pc)
        pcs.append(pc)
    bc._take_new()
    return bc, pcs


async def main(partitions: int, version: int, rounds: int) -> None:
    """Time each stage and print a table."""
    from consumergroup.consumer.fetch_session import FetchSession
    from consumergroup.net.fetch import FetchRequest, decode_fetch_response

    bc, pcs = subscribed(partitions)
    epochs = {pc: (500, 0) for pc in pcs} if version >= 12 else None
    session = FetchSession()
    plan = session.plan(pcs, epochs)
    frame = answer(version, partitions)
    resp: Any = decode_fetch_response(version, frame)
    stages: dict[str, Callable[[], object]] = {
        "ready": lambda: [pc for pc in pcs if pc.fetchable()],
        "plan": lambda: session.plan(pcs, epochs),
        "encode": lambda: (
            FetchRequest(500, 1, 1 << 20, 0, plan.topics).build(version).frame(1, "bench")
        ),
        "decode": lambda: decode_fetch_response(version, frame),
        "handle": lambda: bc._handle(resp),
    }
    print(f"Fetch v{version}, {partitions:,} partitions named and answered (empty) per round")
    print("| stage | us/round | ns/partition |\n|---|---:|---:|")
    total = 0.0
    for name, fn in stages.items():
        us = per_round(fn, rounds)
        total += us
        print(f"| {name} | {us:,.0f} | {us * 1000 / partitions:,.0f} |")
    print(f"| total | {total:,.0f} | {total * 1000 / partitions:,.0f} |")


def caught_up_stages(partitions: int) -> dict[str, Callable[[], object]]:
    """The stages of a caught-up member's round (see the module docstring)."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from consumergroup.consumer.fetch_session import FetchSession
    from consumergroup.net import protocol
    from consumergroup.net.fetch import FetchRequest
    from tests import fetch_v12_wire

    bc, pcs = subscribed(partitions)
    moved = pcs[0]
    epochs = {pc: (500, 0) for pc in pcs}
    session = FetchSession()
    for full in (True, False):  # open the session, then one incremental round
        session.plan(pcs, epochs)
        session.on_response(77, 0, full)
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    builder.append(0, 1_700_000_000_000, bytes(8), bytes(100), [])
    batch = bytearray(builder.build())
    batch[0:8] = (500).to_bytes(8, "big")  # the broker assigns the base offset
    part = (0, 0, 501, 501, 0, [], -1, None, None, None, bytes(batch))
    frame = fetch_v12_wire.encode_response(1, 0, 0, 77, [(TOPIC, [part])])
    versions = {FetchRequest.API_KEY: (4, 12)}

    def plan() -> object:
        moved._offset += 1
        return session.plan(pcs, epochs)

    planned = plan()
    request = FetchRequest(500, 1, 1 << 20, 0, planned.topics, session_id=77, epoch=2)
    written = protocol.prepare(request, versions, "bench")
    resp: Any = protocol.decode_response(written, frame)

    def handle() -> object:
        moved._offset = 500
        moved._chunks.clear()
        moved._queued = moved._queued_bytes = 0
        return bc._handle(resp)

    def read() -> object:
        handle()
        while moved._next_chunk() is not None:
            pass
        return None

    return {
        "plan": plan,
        "encode": lambda: protocol.sized_request(
            protocol.prepare(request, versions, "bench"), 1, "bench"
        ),
        "decode": lambda: protocol.decode_response(written, frame),
        "handle": handle,
        "read": read,
    }


async def caught_up(partitions: int, rounds: int, only: str | None) -> None:
    """Time (or, with ``only``, just run) the stages of a caught-up round."""
    stages = caught_up_stages(partitions)
    if only is not None:
        for _ in range(rounds):
            stages[only]()
        return
    print(f"Fetch v12, caught up: {partitions:,} partitions in the session, one moved and fed")
    print("| stage | us/round |\n|---|---:|")
    for name, fn in stages.items():
        print(f"| {name} | {per_round(fn, rounds):,.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--version", type=int, default=12, choices=range(1, 13))
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--caught-up", action="store_true")
    parser.add_argument("--only", choices=("plan", "encode", "decode", "handle", "read"))
    args = parser.parse_args()
    if args.caught_up:
        asyncio.run(caught_up(args.partitions, args.rounds, args.only))
    else:
        asyncio.run(main(args.partitions, args.version, args.rounds))
