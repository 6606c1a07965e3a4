"""The share consumer's pure parts: acknowledgement ranges, the acquired records of a
ShareFetch answer, the in-flight ledger (first decision wins, expiry, renewal), records
and their classes, settings, and the lazy import of the share package."""

from __future__ import annotations

import asyncio
import logging
import math
import subprocess
import sys
import time

import pytest

import consumergroup as cg
from consumergroup._lifecycle import cancel_and_wait
from consumergroup.errors import CorruptMessageError
from consumergroup.net.share import ACCEPT, GAP, REJECT, RELEASE
from consumergroup.share.acks import fold, ranges
from consumergroup.share.acquired import Acquired, acquired_records
from consumergroup.share.broker import fetch_threshold
from consumergroup.share.inflight import ACK_HOLD, InFlight, Lock, Partition
from consumergroup.share.record import AckType, ShareRecord, record_class
from consumergroup.share.run import _AHEAD_FLOOR, _AHEAD_LOOKS, ShareRun
from tests.unit.test_records import control_batch, recs, v2_batch

TOPIC = "jobs"


# ------------------------------------------------------------------------------- acks


def test_offsets_fold_into_ascending_runs_whatever_the_order() -> None:
    assert ranges([]) == []
    assert ranges([7]) == [(7, 7)]
    assert ranges([5, 3, 4, 9, 10, 1]) == [(1, 1), (3, 5), (9, 10)]
    decided = {GAP: [4], ACCEPT: [3, 1, 2, 8], RELEASE: [], REJECT: [5, 6]}
    assert fold(decided) == [
        (1, 3, [ACCEPT]),
        (4, 4, [GAP]),
        (5, 6, [REJECT]),
        (8, 8, [ACCEPT]),
    ]


# --------------------------------------------------------------------------- acquired


def test_only_acquired_records_are_handed_out_with_their_delivery_count() -> None:
    data = v2_batch(recs(0, 10))
    got = acquired_records(TOPIC, 0, data, [(7, 8, 3), (2, 4, 1)])
    assert [(r.offset, r.delivery_count) for r in got.records] == [
        (2, 1),
        (3, 1),
        (4, 1),
        (7, 3),
        (8, 3),
    ]
    assert all(
        isinstance(r, ShareRecord) and isinstance(r, cg.ConsumerMessage) for r in got.records
    )
    assert got.records[0].value == b"value-2" and got.records[0].headers == (("n", b"2"),)
    assert (got.gaps, got.missing, got.redelivered) == ([], [], 2)


def test_acquired_offsets_without_a_record_are_gaps_and_past_the_answer_missing() -> None:
    # 0-4 records, 5 a transaction marker, 6-7 compacted away, 8-9 records; the answer
    # ends with the first bytes of a batch at 10-11 (cut short).
    data = (
        v2_batch(recs(0, 5))
        + control_batch(5, 42, abort=False)
        + v2_batch(recs(8, 2))
        + v2_batch(recs(10, 2))[:30]
    )
    got = acquired_records(TOPIC, 1, data, [(3, 11, 1)])
    assert [r.offset for r in got.records] == [3, 4, 8, 9]
    assert got.gaps == [5, 6, 7]
    assert got.missing == [10, 11]  # released: they exist, this answer did not bring them


def test_compressed_batches_decode_too() -> None:
    data = v2_batch(recs(100, 20), codec=1)  # gzip
    got = acquired_records(TOPIC, 0, data, [(105, 109, 2)])
    assert [r.offset for r in got.records] == [105, 106, 107, 108, 109]
    assert {r.delivery_count for r in got.records} == {2}


def test_only_the_acquired_span_of_a_batch_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A strict-mode answer brings whole batches (a producer's batch may hold thousands of
    records) for an ask of a few: building every record of them cost more than handling
    the acquired ones. Records below the span are skipped unbuilt, those past it not
    decoded at all, the batch after it not even looked at."""
    from consumergroup.consumer import records as records_module

    built: list[int] = []
    decode = records_module._v2_decoder()

    def counting(*args: object) -> tuple[list[cg.ConsumerMessage], int, int]:
        messages, pos, index = decode(*args)
        built.append(len(messages))
        return messages, pos, index

    monkeypatch.setattr(records_module, "_decode_v2", counting)
    data = v2_batch(recs(0, 1000)) + v2_batch(recs(1000, 1000))
    got = acquired_records(TOPIC, 0, data, [(100, 129, 1), (140, 149, 2)])
    assert [r.offset for r in got.records] == [*range(100, 130), *range(140, 150)]
    assert (got.gaps, got.missing, got.redelivered) == ([], [], 10)
    assert sum(built) == 50  # 100..149: not 900 (the rest of the batch) nor 1,900


def test_an_undecodable_answer_raises_and_nothing_is_handed_out() -> None:
    with pytest.raises(CorruptMessageError):
        acquired_records(TOPIC, 0, b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x07" * 5, [(0, 0, 1)])
    assert acquired_records(TOPIC, 0, b"", []) == ([], [], [], 0)


# --------------------------------------------------------------------------- records


def test_a_record_keeps_its_fields_and_gains_a_delivery_count() -> None:
    [message] = [cg.ConsumerMessage(TOPIC, 2, 41, b"k", b"v", (), 1_700_000_000_000, 0)]
    original = repr(message)
    message.__class__ = record_class(4)
    assert isinstance(message, ShareRecord) and message.delivery_count == 4
    assert message.offset == 41 and message.value == b"v"
    assert "delivery_count=4" in repr(message) and original.startswith("ConsumerMessage(")
    assert record_class(4) is record_class(4) and record_class(4) is not record_class(5)
    assert [int(a) for a in AckType] == [ACCEPT, RELEASE, REJECT]


# --------------------------------------------------------------------------- inflight


def ledger() -> tuple[InFlight, Partition, list[Partition]]:
    woken: list[Partition] = []
    inflight = InFlight(woken.append)
    part = inflight.partition(TOPIC, 0)
    return inflight, part, woken


def test_the_first_decision_wins_and_the_room_comes_back() -> None:
    inflight, part, woken = ledger()
    lock = Lock(time.monotonic(), 30.0, [1, 2, 3])
    inflight.deliver(part, [1, 2, 3], [4], lock, 0)
    assert inflight.count == 3 and part.counters.delivered == 3 and part.counters.gaps == 1
    assert inflight.decide(TOPIC, 0, 2, REJECT)
    assert not inflight.decide(TOPIC, 0, 2, ACCEPT)  # decided already
    assert not inflight.decide(TOPIC, 9, 2, ACCEPT)  # a partition never seen
    assert inflight.decide(TOPIC, 0, 1, ACCEPT) and inflight.decide(TOPIC, 0, 3, ACCEPT)
    assert inflight.count == 0 and woken == [part, part, part]
    assert part.take_acks() == [(1, 1, [ACCEPT]), (2, 2, [REJECT]), (3, 3, [ACCEPT]), (4, 4, [GAP])]
    assert not part.has_acks()


def test_a_decision_after_the_lock_expired_is_not_acknowledged() -> None:
    inflight, part, _ = ledger()
    inflight.deliver(part, [5], [], Lock(time.monotonic() - 60, 30.0, [5]), 0)
    assert not inflight.decide(TOPIC, 0, 5, ACCEPT)
    assert part.counters.expired == 1 and not part.has_acks() and inflight.count == 0


def test_dropping_a_partition_forgets_what_it_held_and_decided() -> None:
    inflight, part, _ = ledger()
    inflight.deliver(part, [1, 2], [], Lock(time.monotonic(), 30.0, [1, 2]), 0)
    inflight.decide(TOPIC, 0, 1, ACCEPT)
    assert inflight.drop(part) == 1
    assert inflight.count == 0 and not part.has_acks() and not part.locks
    assert not inflight.decide(TOPIC, 0, 2, ACCEPT)  # a handler finishing late: nothing


def test_acks_that_did_not_reach_the_broker_are_queued_again_and_counted_once_taken() -> None:
    _, part, _ = ledger()
    part.decided[ACCEPT] += [1, 2, 3]
    part.decided[REJECT].append(4)
    sent = part.take_acks()
    part.requeue([*sent, (9, 10, [ACCEPT, RELEASE])])
    assert part.take_acks() == [
        (1, 3, [ACCEPT]),
        (4, 4, [REJECT]),
        (9, 9, [ACCEPT]),
        (10, 10, [RELEASE]),
    ]
    part.acknowledged([(1, 3, [ACCEPT]), (4, 4, [REJECT]), (9, 10, [ACCEPT, RELEASE])])
    c = part.counters
    assert (c.accepted, c.released, c.rejected) == (4, 1, 1)


def test_renewal_falls_due_at_half_the_lock_and_moves_records_to_a_new_lock() -> None:
    inflight, part, _ = ledger()
    start = time.monotonic()
    first = Lock(start, 10.0, [1, 2, 3])
    inflight.deliver(part, [1, 2, 3], [], first, 0)
    later = Lock(start + 1, 10.0, [7])
    inflight.deliver(part, [7], [], later, 0)
    assert inflight.next_renewal([part]) == pytest.approx(start + 5)
    assert inflight.renewals_due([part], start + 4) == {}
    inflight.decide(TOPIC, 0, 2, ACCEPT)
    due = inflight.renewals_due([part], start + 5.5)
    assert due == {part: [1, 3]}
    assert inflight.renewals_due([part], start + 5.6) == {}  # tried once: not again
    renewed = Lock(start + 5.5, 10.0, [])
    inflight.renewed(part, [1, 3], renewed)
    assert part.held[1] is renewed and part.held[7] is later and part.counters.renewed == 2
    assert inflight.next_renewal([part]) == pytest.approx(start + 6)  # ``later`` is next
    inflight.decide(TOPIC, 0, 7, ACCEPT)
    assert inflight.next_renewal([part]) == pytest.approx(start + 10.5)


def test_a_record_handed_out_again_under_a_new_lock_is_one_entry() -> None:
    inflight, part, _ = ledger()
    now = time.monotonic()
    inflight.deliver(part, [1], [], Lock(now - 40, 30.0, [1]), 0)  # expired, still held
    inflight.deliver(part, [1], [], Lock(now, 30.0, [1]), 1)
    assert inflight.count == 1 and part.counters.redelivered == 1
    assert inflight.decide(TOPIC, 0, 1, ACCEPT)  # the newer lock decides
    assert inflight.count == 0


def test_decisions_wait_for_the_rest_of_their_acquisition() -> None:
    """The broker keeps an acquired batch as one entry; acknowledging part of it splits
    the entry per record (several times the broker's CPU per record, measured): so the
    decisions of one acquisition go out together, once all of it is decided."""
    inflight, part, woken = ledger()
    now = time.monotonic()
    first, second = Lock(now, 30.0, [1, 2, 3]), Lock(now, 30.0, [4, 5])
    inflight.deliver(part, [1, 2, 3], [], first, 0)
    inflight.deliver(part, [4, 5], [], second, 0)
    assert inflight.decide(TOPIC, 0, 1, ACCEPT) and inflight.decide(TOPIC, 0, 2, ACCEPT)
    assert inflight.decide(TOPIC, 0, 4, RELEASE)
    assert not part.has_acks() and inflight.count == 2 and len(woken) == 3  # room is back
    assert part.ripen(now) == pytest.approx(now + ACK_HOLD, abs=0.5)  # ``second`` waits
    assert inflight.decide(TOPIC, 0, 3, REJECT)  # ``first`` is all decided: it goes
    assert part.take_acks() == [(1, 2, [ACCEPT]), (3, 3, [REJECT])]
    assert part.ripen(second.ripe_by) == math.inf  # waited long enough: goes on its own
    assert part.ack_by == second.deadline and part.take_acks() == [(4, 4, [RELEASE])]
    assert not part.unripe


def test_held_back_decisions_go_when_the_rest_is_renewed_dropped_or_the_member_closes() -> None:
    inflight, part, _ = ledger()
    now = time.monotonic()
    lock = Lock(now, 30.0, [1, 2])
    inflight.deliver(part, [1, 2], [], lock, 0)
    inflight.decide(TOPIC, 0, 1, ACCEPT)
    inflight.renewed(part, [2], Lock(now + 15, 30.0, []))  # 2 moves: ``lock`` is all decided
    assert part.take_acks() == [(1, 1, [ACCEPT])]
    inflight.deliver(part, [3, 4], [], Lock(now, 30.0, [3, 4]), 0)
    inflight.decide(TOPIC, 0, 3, ACCEPT)
    assert part.ripen(math.inf) == math.inf and part.take_acks() == [(3, 3, [ACCEPT])]  # close
    inflight.deliver(part, [5, 6], [], Lock(now, 30.0, [5, 6]), 0)
    inflight.decide(TOPIC, 0, 5, ACCEPT)
    inflight.drop(part)  # fenced: the broker takes every record back
    assert part.ripen(math.inf) == math.inf and not part.has_acks() and not part.unripe


async def test_a_handler_that_never_awaits_lets_the_broker_session_run_meanwhile() -> None:
    """A worker lets the event loop run every few records, so a fetch can be in flight
    while handlers work through the records ahead (else none goes until all are handled)."""
    run = share_run(concurrency=1, max_poll_records=1000)
    handled: list[int] = []
    done = asyncio.Event()

    class Sync(cg.ShareGroupHandler):
        async def consume(self, session: cg.ShareSession, record: cg.ShareRecord) -> None:
            handled.append(record.offset)
            if len(handled) == 500:
                done.set()

    run.handler = Sync()
    part = run.inflight.partition(TOPIC, 0)
    offsets = list(range(500))
    records = [record_class(1)(TOPIC, 0, o, None, b"v", [], 0, 0) for o in offsets]
    run.hand_out(part, Acquired(records, [], [], 0), Lock(time.monotonic(), 30.0, offsets))
    seen: list[int] = []

    async def session() -> None:
        seen.append(len(handled))

    worker = asyncio.create_task(run._worker())
    looked = asyncio.create_task(session())
    await looked
    await asyncio.wait_for(done.wait(), 10)
    await cancel_and_wait(worker)
    assert seen and seen[0] < 100 and run.inflight.count == 0


def share_run(concurrency: int, max_poll_records: int) -> ShareRun:
    """A member's run state without its tasks (no broker: the pacing and the ledger)."""
    config = cg.Config()
    config.share.max_poll_records = max_poll_records
    return ShareRun(
        group_id="g",
        config=config,
        client=None,  # type: ignore[arg-type]
        membership=None,  # type: ignore[arg-type]
        log=logging.getLogger("test"),  # type: ignore[arg-type]
        topics=[TOPIC],
        handler=None,  # type: ignore[arg-type]
        concurrency=concurrency,
        report=lambda what, why: None,
    )


def test_records_ahead_follow_the_handlers_pace_within_max_poll_records() -> None:
    run = share_run(concurrency=10, max_poll_records=500)
    assert run.ahead == 0 and run.room() == 10  # a new member asks for its handlers' share
    run._paced_at = time.monotonic() - 1.0
    run.inflight.finished = 100  # 100 records/s
    run.paced(0.05)  # four round trips of 50 ms: 20 records
    assert run.ahead == 20 and run.limit == 30 and run.room() == 30
    run._paced_at = time.monotonic() - 1.0
    run.inflight.finished += 100_000  # fast handlers: capped
    run.paced(0.05)
    assert run.ahead == 500 and run.room() == 510
    run.reserve(400)  # a fetch in flight may bring 400
    assert run.room() == 110
    run.reserve(-400)
    run._paced_at = time.monotonic() - 1.0
    run.paced(0.05)  # stalled handlers: nothing ahead any more
    assert run.ahead == 0 and run.limit == 10
    run.inflight.finished += 1000
    run.paced(0.05)  # looked at 50 ms ago at most: too soon to judge
    assert run.ahead == 0


def test_one_quick_round_trip_does_not_shrink_the_records_ahead() -> None:
    """A window sized on the last round trip alone shrank after a quick one, and the next,
    slower one (record-limit fetches cost the broker per record; a loaded machine) ran the
    handlers dry: 10 ms handlers idle 7-8 % of the time for want of records."""
    run = share_run(concurrency=100, max_poll_records=5000)
    run._paced_at = time.monotonic() - 1.0
    run.inflight.finished = 9000  # 9,000 records/s
    run.paced(0.1)  # four round trips of 100 ms
    assert run.ahead == 3600
    run._paced_at = time.monotonic() - 1.0
    run.inflight.finished += 9000
    run.paced(0.01)  # one quick round trip: the slow ones may come again
    assert run.ahead == 3600 and run.limit == 3700
    for _ in range(_AHEAD_LOOKS - 1):  # shorter ones only, for a while: the window shrinks
        run._paced_at = time.monotonic() - 1.0
        run.inflight.finished += 9000
        run.paced(0.08)
    assert run.ahead == 2880
    run._paced_at = time.monotonic() - 1.0
    run.inflight.finished += 100  # the handlers slowed down: at once
    run.paced(0.08)
    assert run.ahead == 32


def test_records_ahead_cover_a_round_trip_far_slower_than_the_recent_ones() -> None:
    """After a run of 12 ms round trips, one of 84-215 ms (a loaded machine, a broker's
    pause) ran 10 ms handlers dry: what is ahead covers _AHEAD_FLOOR of their work."""
    run = share_run(concurrency=100, max_poll_records=5000)
    run._paced_at = time.monotonic() - 1.0
    run.inflight.finished = 9000  # 9,000 records/s
    run.paced(0.012)  # four round trips of 12 ms would be 432 records
    assert run.ahead == math.ceil(9000 * _AHEAD_FLOOR) == 1800


def test_without_renewal_waiting_records_go_back_at_half_their_lock() -> None:
    run = share_run(concurrency=1, max_poll_records=10)
    part = run.inflight.partition(TOPIC, 0)
    now = time.monotonic()
    records = [record_class(1)(TOPIC, 0, o, None, b"v", [], 0, 0) for o in range(4)]
    old, new = Lock(now - 20, 30.0, [0, 1]), Lock(now, 30.0, [2, 3])
    run.hand_out(part, Acquired(records[:2], [], [], 0), old)
    run.hand_out(part, Acquired(records[2:], [], [], 0), new)
    assert run.release_stale(now) == new.renew_at  # half of ``old`` is spent, not ``new``
    assert [r.offset for r in run._ready] == [2, 3]
    assert sorted(part.decided[RELEASE]) == [0, 1] and run.inflight.count == 2
    run.inflight.decide(TOPIC, 0, 2, ACCEPT)  # decided meanwhile: no longer held
    assert run.release_stale(now) == new.renew_at
    assert run.release_stale(new.renew_at) is None and not run._ready
    assert sorted(part.decided[RELEASE]) == [0, 1, 3]


def test_the_fetch_threshold() -> None:
    assert [fetch_threshold(n) for n in (1, 5, 10, 100, 1000)] == [1, 1, 2, 25, 250]


# --------------------------------------------------------------------------- settings


def test_share_settings_are_checked() -> None:
    config = cg.Config()
    assert config.share.concurrency == 100 and config.share.renew
    config.share.max_wait = 0
    with pytest.raises(cg.ConfigurationError, match=r"share\.max_wait"):
        config.validate()
    assert config.share.max_poll_records == 5000
    for bad in (-1, 1.5, True):
        config = cg.Config()
        config.share.max_poll_records = bad  # type: ignore[assignment]
        with pytest.raises(cg.ConfigurationError, match=r"share\.max_poll_records"):
            config.validate()
    config = cg.Config()
    config.share.max_poll_records = 0  # acquire only what handlers can start at once
    config.share.acquire_mode = "batch_optimized"
    config.validate()
    config.share.acquire_mode = "BATCH"
    with pytest.raises(cg.ConfigurationError, match=r"share\.acquire_mode.*record_limit"):
        config.validate()
    config = cg.Config()
    with pytest.raises(cg.ConfigurationError, match="did you mean 'concurrency'"):
        config.share.concurency = 5  # type: ignore[attr-defined]


def test_import_consumergroup_does_not_load_the_share_package() -> None:
    code = (
        "import sys, consumergroup as cg\n"
        "assert 'consumergroup.share' not in sys.modules\n"
        "assert 'ShareGroup' in dir(cg)\n"
        "assert cg.AckType.REJECT == 3\n"
        "assert cg.ShareGroup.__module__ == 'consumergroup.share.group'\n"
        "assert 'consumergroup.share' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
