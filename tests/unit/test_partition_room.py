"""A reader that makes room in its partition's buffer lets the fetch task write the next
Fetch before it decodes what it took, so that round trip overlaps with the decoding.

The fetch task is woken through the event loop (``_wake_fetcher`` resolves a future it
waits on), and a reader with buffered records never awaits until its buffer is empty: before,
the next Fetch of a backlogged partition was written only once every reader woken by the
last answer had decoded all of it. In-process: the partition is fed framed record sets as
its fetch task would, and the fetch task's wake-up is a callback on the loop, which is how
it reaches the real task; nothing here needs a broker.
"""

from __future__ import annotations

import asyncio

import pytest

from consumergroup.consumer import partition as partition_module
from consumergroup.consumer.partition import PartitionConsumer

from .test_message_stream import CHUNK, _feed, _pc


@pytest.fixture(params=["batches-c", "batches-python", "messages-c", "messages-python"])
def api(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test reads with batches() and messages(), each with its C stream and with its
    Python fallback."""
    if request.param.endswith("-python"):
        monkeypatch.setattr(partition_module, "_MessageStream", None)
        monkeypatch.setattr(partition_module, "_BatchStream", None)
    elif partition_module._MessageStream is None:
        pytest.skip("the C extension _cstream is not built (or CONSUMERGROUP_PURE_PYTHON)")
    return str(request.param)


async def _read(pc: PartitionConsumer, api: str, until: int, got: list[object]) -> None:
    """Append the offsets ``pc`` hands out to ``got`` up to offset ``until``."""
    if api.startswith("batches"):
        async for batch in pc.batches():
            got.extend(m.offset for m in batch)
            if batch[-1].offset >= until:
                return
    else:
        async for msg in pc.messages():
            got.append(msg.offset)
            if msg.offset >= until:
                return


def _fetch_task(pc: PartitionConsumer, events: list[object]) -> None:
    """Stand in for the fetch task: woken through the loop, it notes the reader's position."""
    loop = asyncio.get_running_loop()
    pc._wake_fetcher = lambda: loop.call_soon(lambda: events.append(("fetch", pc.position)))


async def test_a_reader_that_made_room_lets_the_fetch_task_go_first(api: str) -> None:
    pc = _pc()
    events: list[object] = []
    _fetch_task(pc, events)
    _feed(pc, 0, 3 * CHUNK)  # more than the buffer holds: the partition is not fetchable
    assert not pc.fetchable()
    await _read(pc, api, 3 * CHUNK - 1, events)
    # The fetch task ran before the first message was handed out, with the position exact.
    assert events == [("fetch", 0), *range(3 * CHUNK)]


async def test_the_position_is_exact_while_the_fetch_task_goes_first_after_a_seek(api: str) -> None:
    pc = _pc()
    events: list[object] = []
    _feed(pc, 0, 3 * CHUNK)
    await _read(pc, api, 3 * CHUNK - 1, [])
    pc.seek(2)  # what a diverged log does: the next set starts below what was handed out
    _fetch_task(pc, events)
    _feed(pc, 2, 3 * CHUNK)
    await _read(pc, api, 3 * CHUNK + 1, events)
    assert events == [("fetch", 2), *range(2, 3 * CHUNK + 2)]


async def test_a_reader_with_room_to_spare_does_not_yield(api: str) -> None:
    """The low-rate path (a few records per answer) pays no extra pass of the loop."""
    pc = _pc()
    events: list[object] = []
    _fetch_task(pc, events)
    _feed(pc, 0, CHUNK - 1)
    asyncio.get_running_loop().call_soon(events.append, "loop")
    await _read(pc, api, CHUNK - 2, events)
    assert events == [*range(CHUNK - 1)]


async def test_cancelled_while_the_fetch_task_goes_first_loses_nothing(api: str) -> None:
    pc = _pc()
    got: list[object] = []
    reader = asyncio.create_task(_read(pc, api, 3 * CHUNK - 1, got))
    loop = asyncio.get_running_loop()
    pc._wake_fetcher = lambda: loop.call_soon(reader.cancel)
    await asyncio.sleep(0)  # the reader waits for records
    _feed(pc, 0, 3 * CHUNK)
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert got == []
    assert pc.position == 0
    pc._wake_fetcher = lambda: None
    await _read(pc, api, 3 * CHUNK - 1, got)
    assert got == list(range(3 * CHUNK))
