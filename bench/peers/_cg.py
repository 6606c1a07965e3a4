"""The consumergroup peers (``cg_batches``, ``cg_messages``): one member of a fresh group.

Default :class:`consumergroup.Config` except what every peer sets alike: read from
the oldest offset, the group timeouts from the command line, auto-commit on (1 s).

Per-message work, the minimum a correct user does with each API:

* ``batches``: none; the last message of each batch is marked (one mark per batch).
* ``messages``: ``session.mark_message(msg)`` for every message (counted by offsets in
  throughput mode: see :meth:`ThroughputHandler.consume_claim`).
* ``batches_keep``: ``batches`` plus keeping every message in one list until the end
  (a handler accumulating a bulk write), which makes the decoded messages survive.

``cooperative``: the member offers only ``cg.CooperativeStickyAssignor()`` (KIP-429
incremental rebalancing) instead of the default eager range assignor. ``consumer``: the
member speaks the consumer group protocol (KIP-848, Apache Kafka 4.x); the broker sets
the session timeout and heartbeat interval, so the command line's are not applied.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any, Literal

import consumergroup as cg

from ._common import (
    LatencyLog,
    Recorder,
    cpu_now,
    emit,
    emit_throughput,
    parse_args,
    sent_ns,
    usage,
    watch_stdin,
)

Api = Literal["batches", "messages", "batches_keep"]


class _State:
    __slots__ = (
        "count",
        "cpu_first",
        "done",
        "expect",
        "kept",
        "n_first",
        "t_first",
        "t_last",
        "usage_at_last",
    )

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.count = 0
        self.n_first = 0
        self.cpu_first = 0.0
        self.t_first = 0.0
        self.t_last = 0.0
        self.usage_at_last: dict[str, float] = {}
        self.done = asyncio.Event()
        self.kept: list[cg.ConsumerMessage] = []

    def tick(self) -> None:
        """Called on the first message and once ``expect`` is reached."""
        now = time.monotonic()
        if not self.t_first:
            self.t_first = now
            self.n_first = self.count
            self.cpu_first = cpu_now()
        if self.count >= self.expect and not self.done.is_set():
            self.t_last = now
            self.usage_at_last = usage()
            self.done.set()


class ThroughputHandler(cg.ConsumerGroupHandler):
    """Counts messages until ``expect``; the loop bodies are what a minimal app runs."""

    def __init__(self, api: Api, state: _State) -> None:
        self.api = api
        self.state = state

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        """Read the claim until the session ends."""
        state = self.state
        expect = state.expect
        if self.api == "batches":
            async for batch in claim.batches():
                session.mark_message(batch[-1])
                n = state.count = state.count + len(batch)
                if n >= expect or not state.t_first:
                    state.tick()
        elif self.api == "batches_keep":
            keep = state.kept.extend
            async for batch in claim.batches():
                keep(batch)
                session.mark_message(batch[-1])
                n = state.count = state.count + len(batch)
                if n >= expect or not state.t_first:
                    state.tick()
        else:
            # Counted by offsets, not per message (a Python counter costs ~50 ns a
            # message, a tenth of what is measured): the loaded topic holds consecutive
            # offsets and nothing is produced meanwhile, so the claim's count is its
            # last offset - first + 1, its last offset the high watermark - 1 (known
            # from the fetch that brought the first message).
            mark = session.mark_message
            stream = claim.messages()
            async for msg in stream:
                mark(msg)
                first = msg.offset
                break
            else:
                return  # the session ended first
            state.count += 1
            state.tick()
            last = claim.high_water_mark_offset - 1
            if first < last:
                async for msg in stream:
                    mark(msg)
                    if msg.offset >= last:
                        break
                else:
                    return  # the session ended first
                state.count += last - first
                if state.count >= expect:
                    state.tick()


class StreamHandler(cg.ConsumerGroupHandler):
    """Records when each partition's messages reach user code (rebalance / scaling runs)."""

    def __init__(self, api: Api, rec: Recorder) -> None:
        self.api = api
        self.rec = rec

    async def on_assigned(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        """Report the partitions gained (all of them when eager, the increment when cooperative)."""
        parts = sorted(p for _t, p in partitions)
        self.rec.event("assigned", parts=parts, generation=session.generation_id)

    async def on_revoked(
        self, session: cg.ConsumerGroupSession, partitions: Sequence[tuple[str, int]]
    ) -> None:
        """Report the partitions given up."""
        parts = sorted(p for _t, p in partitions)
        self.rec.event("revoked", parts=parts, generation=session.generation_id)

    async def on_lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Report the partitions lost (as revoked: the harness only tracks ownership)."""
        self.rec.event("revoked", parts=sorted(p for _t, p in partitions), lost=True)

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        """Read the claim until the session ends, recording each delivery."""
        add = self.rec.add
        p = claim.partition
        if self.api == "batches":
            async for batch in claim.batches():
                session.mark_message(batch[-1])
                add(p, len(batch), batch[-1].offset)
        else:
            async for msg in claim.messages():
                session.mark_message(msg)
                add(p, 1, msg.offset)


class LatencyHandler(StreamHandler):
    """Latency mode: each record's send time and when it reached the loop body (per
    batch with ``batches()``, per message with ``messages()``: what each API hands out)."""

    def __init__(self, api: Api, rec: Recorder, log: LatencyLog) -> None:
        super().__init__(api, rec)
        self.log = log

    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        """Read the claim until the session ends, logging every record."""
        add = self.log.add
        now = time.monotonic_ns
        if self.api == "batches":
            async for batch in claim.batches():
                t = now()
                for msg in batch:
                    add(sent_ns(msg.value or b""), t)
                session.mark_message(batch[-1])
        else:
            async for msg in claim.messages():
                add(sent_ns(msg.value or b""), now())
                session.mark_message(msg)


#: ``KEY=VALUE,...`` overrides of the peers' Config (``python -m bench --cg-set``), e.g.
#: ``channel_buffer_size=20000,consumer.fetch.default=4194304``: for experiments only.
OVERRIDES_ENV = "BENCH_CG_SET"


def apply_overrides(config: cg.Config, spec: str) -> None:
    """Set dotted Config attributes from ``KEY=VALUE,...`` (value typed like the default)."""
    for item in filter(None, (x.strip() for x in spec.split(","))):
        path, _, raw = item.partition("=")
        *parents, leaf = path.strip().split(".")
        obj: Any = config
        for name in parents:
            obj = getattr(obj, name)
        current = getattr(obj, leaf)
        value: Any = raw == "true" if isinstance(current, bool) else type(current)(raw)
        setattr(obj, leaf, value)
    config.validate()


class CommitEvents(cg.GroupObserver):
    """Reports each OffsetCommit answered (the rebalance run times a moved partition's
    hand-over from its previous owner's commit)."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def on_commit(self, group_id: str, latency: float, error: BaseException | None) -> None:
        """One ``committed`` event per commit round trip."""
        self.rec.event("committed", ok=error is None)


async def _flusher(rec: Recorder) -> None:
    while True:
        await asyncio.sleep(0.1)
        rec.flush()


async def amain(api: Api, cooperative: bool = False, consumer: bool = False) -> None:
    """Run one peer process to its end (``cooperative``: cooperative-sticky only;
    ``consumer``: the consumer group protocol)."""
    args = parse_args(f"consumergroup peer using claim.{api}()")
    emit({"ev": "hello", "t": time.monotonic()})
    config = cg.Config(client_id=f"bench-cg-{api}")
    config.consumer.offsets.initial = cg.OFFSET_OLDEST
    if consumer:
        config.consumer.group.protocol = "consumer"
    else:
        config.consumer.group.session_timeout = args.session_timeout
        config.consumer.group.heartbeat_interval = args.heartbeat
    config.consumer.group.rebalance.timeout = args.rebalance_timeout
    if cooperative:
        config.consumer.group.rebalance.strategies = [cg.CooperativeStickyAssignor()]
    apply_overrides(config, os.environ.get(OVERRIDES_ENV, ""))
    loop = asyncio.get_running_loop()
    latency = LatencyLog() if args.mode == "latency" else None
    stream = args.mode in ("stream", "latency")
    rec = Recorder(stream=True)
    state = _State(args.expect)
    handler: cg.ConsumerGroupHandler = (
        LatencyHandler(api, rec, latency)
        if latency is not None
        else StreamHandler(api, rec)
        if stream
        else ThroughputHandler(api, state)
    )
    stop = asyncio.Event()
    watch_stdin(lambda: loop.call_soon_threadsafe(stop.set))
    async with cg.ConsumerGroup([args.bootstrap], args.group, config) as group:
        if stream:
            group.add_observer(CommitEvents(rec))
        emit({"ev": "start", "t": time.monotonic()})
        runner = asyncio.create_task(group.run([args.topic], handler))
        flusher = asyncio.create_task(_flusher(rec)) if stream else None
        ending = asyncio.create_task((stop if stream else state.done).wait())
        await asyncio.wait({runner, ending}, return_when=asyncio.FIRST_COMPLETED)
        if flusher is not None:
            flusher.cancel()
        if runner.done():  # run() ended by itself: an error
            ending.cancel()
            await runner
        if latency is not None:
            rec.result(records=latency.write(args.out))
        elif stream:
            rec.result()
        else:
            emit_throughput(
                state.count,
                state.n_first,
                state.cpu_first,
                state.t_first,
                state.t_last,
                **state.usage_at_last,
            )
        await group.close()
        await runner


def main(api: Api, cooperative: bool = False, consumer: bool = False) -> None:
    """Entry point of the consumergroup peer scripts."""
    asyncio.run(amain(api, cooperative, consumer))
