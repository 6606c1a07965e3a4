"""PartitionConsumer.messages() and .batches(): the C streams (``_cstream.MessageStream``,
``_cstream.BatchStream``) and the Python async generators they replace behave alike:
order, chunk boundaries, break and resume, stop() mid-chunk and while waiting,
cancellation, errors, tracing, references.

In-process: the partition is fed framed record sets (``scan_records`` over real v2
batches), as its fetch task would; nothing here needs a broker.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from types import FrameType
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from consumergroup.consumer import partition as partition_module
from consumergroup.consumer.partition import PartitionConsumer
from consumergroup.consumer.records import scan_records
from consumergroup.errors import ConsumerError
from consumergroup.message import ConsumerMessage

CHUNK = 4  # buffer_size: decoded lists of at most 4 messages, so chunks end often


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run each test with the C stream and with the Python fallback."""
    if request.param == "python":
        monkeypatch.setattr(partition_module, "_MessageStream", None)
        monkeypatch.setattr(partition_module, "_BatchStream", None)
    elif partition_module._MessageStream is None:
        pytest.skip("the C extension _cstream is not built (or CONSUMERGROUP_PURE_PYTHON)")
    yield request.param


def _pc() -> PartitionConsumer:
    return PartitionConsumer(
        "t", 0, 0, buffer_size=CHUNK, fetch_size=1 << 20, on_close=lambda pc: None
    )


def _feed(pc: PartitionConsumer, first: int, count: int) -> None:
    """Deliver records ``first`` .. ``first + count - 1`` as one record set."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i in range(count):
        builder.append(i, 1_700_000_000_000, None, str(first + i).encode(), [])
    batch = bytearray(builder.build())
    batch[0:8] = first.to_bytes(8, "big")
    pc._deliver(scan_records("t", 0, bytes(batch), first))


async def _take(stream: AsyncIterator[ConsumerMessage], n: int) -> list[int]:
    """Offsets of the next ``n`` messages of ``stream`` (then leave the loop)."""
    out: list[int] = []
    if n:
        async for msg in stream:
            out.append(msg.offset)
            if len(out) == n:
                break
    return out


async def _waiting(
    pc: PartitionConsumer, got: list[int], last: int, api: str = "messages"
) -> tuple[asyncio.Task[None], AsyncIterator[Any]]:
    """A task reading ``pc.messages()`` (or ``pc.batches()``) into ``got``, returned once
    it has read ``last`` and is waiting for the next record set; and the stream it reads
    (kept alive by the caller, so what happens to it is not the work of its
    deallocation)."""
    reached = asyncio.Event()
    stream: AsyncIterator[Any] = pc.batches() if api == "batches" else pc.messages()

    async def consume() -> None:
        async for item in stream:
            msgs = item if api == "batches" else [item]
            got.extend(m.offset for m in msgs)
            if msgs[-1].offset == last:
                reached.set()

    task = asyncio.create_task(consume())
    await reached.wait()
    assert pc._waiter is not None  # it went on to wait in the same step
    return task, stream


async def test_every_message_in_order_across_chunks_then_the_end(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, 10)
    _feed(pc, 10, 3)
    pc._fail(ConsumerError("done"))
    got: list[int] = []
    with pytest.raises(ConsumerError, match="done"):
        async for msg in pc.messages():
            got.append(msg.offset)
            assert msg.value == str(msg.offset).encode()
    assert got == list(range(13))
    assert [m.offset async for m in pc.messages()] == []  # closed and drained


async def test_break_then_resume_loses_nothing(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, 10)
    assert await _take(pc.messages(), 3) == [0, 1, 2]  # mid-chunk
    assert pc.position == 3 and pc.queued == 1  # left in its chunk (the set is started)
    assert await _take(pc.messages(), 1) == [3]  # the chunk's last message
    assert await _take(pc.messages(), 2) == [4, 5]
    batches = pc.batches()
    assert [m.offset for m in await batches.__anext__()] == [6, 7]  # the rest of its chunk
    assert await _take(pc.messages(), 2) == [8, 9]


async def test_an_anext_never_awaited_takes_no_message(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, 3)
    stream = pc.messages()
    assert (await stream.__anext__()).offset == 0
    pending = stream.__anext__()
    if impl == "python":
        await pending  # type: ignore[misc]  # an async generator step has to run
        expected = [2]
    else:
        del pending  # the C stream takes the message only when awaited
        expected = [1, 2]
    assert await _take(pc.messages(), len(expected)) == expected


async def test_stop_in_the_loop_ends_it_between_two_messages(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, 10)
    got: list[int] = []
    async for msg in pc.messages():
        got.append(msg.offset)
        if msg.offset == 1:
            pc.stop()
    assert got == [0, 1]


async def test_stop_while_waiting_ends_the_loop(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, 2)
    got: list[int] = []
    task, _stream = await _waiting(pc, got, 1)
    pc.stop()
    await asyncio.wait_for(task, 5)
    assert got == [0, 1]


@pytest.mark.parametrize("api", ["messages", "batches"])
async def test_cancelled_while_waiting_then_resumed(impl: str, api: str) -> None:
    pc = _pc()
    _feed(pc, 0, 2)
    got: list[int] = []
    task, _stream = await _waiting(pc, got, 1, api)
    waiter = pc._waiter
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The cancellation went through the wait itself (the stream forwards it): its future
    # was cancelled, the partition goes on (the done future left behind wakes nobody).
    assert waiter is not None and waiter.cancelled() and not pc.closed
    _feed(pc, 2, 3)
    assert await _take(pc.messages(), 3) == [2, 3, 4]


@pytest.mark.parametrize("api", ["messages", "batches"])
async def test_an_error_while_waiting_is_raised_from_the_loop(impl: str, api: str) -> None:
    pc = _pc()
    _feed(pc, 0, 1)
    got: list[int] = []
    task, _stream = await _waiting(pc, got, 0, api)
    pc._fail(ConsumerError("broken"))
    with pytest.raises(ConsumerError, match="broken"):
        await asyncio.wait_for(task, 5)
    assert got == [0]


async def test_the_same_under_a_tracer(impl: str) -> None:
    """With a trace function the interpreter drives awaitables through their iterator
    and send protocol instead (coverage, debuggers)."""
    pc = _pc()
    _feed(pc, 0, 6)

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return tracer

    async def consume() -> list[int]:
        got: list[int] = []
        sys.settrace(tracer)
        try:
            async for msg in pc.messages():
                got.append(msg.offset)
                if msg.offset == 5:
                    break
        finally:
            sys.settrace(None)
        return got

    assert await asyncio.wait_for(asyncio.create_task(consume()), 5) == list(range(6))


async def test_no_reference_is_leaked_or_lost(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, CHUNK)
    stream = pc.messages()
    msg = await stream.__anext__()
    # The chunk's list, `msg` and getrefcount's argument (and the suspended generator's
    # local, in Python): nothing else holds it.
    held = 1 if impl == "python" else 0
    assert sys.getrefcount(msg) == 3 + held
    chunk = pc._chunk
    del msg
    refs = [sys.getrefcount(m) for m in chunk]  # list, loop variable, argument
    assert refs == [3 + held] + [3] * (CHUNK - 1)


async def test_a_chunk_handed_out_whole_is_not_kept_while_waiting(impl: str) -> None:
    """With thousands of idle partitions, each one keeping its last list alive adds up."""
    pc = _pc()
    _feed(pc, 0, CHUNK)
    got: list[int] = []
    task, _stream = await _waiting(pc, got, CHUNK - 1)
    kept = [name for name, value in vars(pc).items() if isinstance(value, list) and value]
    pc.stop()
    await asyncio.wait_for(task, 5)
    assert got == list(range(CHUNK))
    assert kept == []


# --- batches(): the same for lists --------------------------------------------------------


async def test_batches_in_order_across_record_sets_then_the_error_then_the_end(
    impl: str,
) -> None:
    pc = _pc()
    _feed(pc, 0, 10)
    _feed(pc, 10, 1)
    pc._fail(ConsumerError("done"))
    lists: list[list[int]] = []
    with pytest.raises(ConsumerError, match="done"):
        async for batch in pc.batches():
            lists.append([m.offset for m in batch])
    assert lists == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10]]  # at most CHUNK a list
    assert [b async for b in pc.batches()] == []  # closed and drained


async def test_batches_waits_for_each_record_set_then_stop_ends_it(impl: str) -> None:
    pc = _pc()
    _feed(pc, 0, 1)
    got: list[int] = []
    task, _stream = await _waiting(pc, got, 0, "batches")
    for offset in range(1, 4):  # one record set at a time, as a caught-up partition gets
        _feed(pc, offset, 1)
        for _ in range(20):
            if offset in got:
                break
            await asyncio.sleep(0)
        assert got == list(range(offset + 1)) and pc.position == offset + 1
    pc.stop()
    await asyncio.wait_for(task, 5)
    assert got == [0, 1, 2, 3]
