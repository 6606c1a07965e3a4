"""ConsumerGroup checks that need no broker: handler validation, errors(), error unwrapping."""

from __future__ import annotations

import asyncio
import logging

import pytest

import consumergroup as cg

# Nothing listens here: these tests must fail (or pass) before any connection is made.
NOWHERE = ["127.0.0.1:1"]


class SyncClaim(cg.ConsumerGroupHandler):
    def consume_claim(self, session, claim):  # type: ignore[no-untyped-def,override]
        return None


class Idle(cg.ConsumerGroupHandler):
    async def consume_claim(
        self, session: cg.ConsumerGroupSession, claim: cg.ConsumerGroupClaim
    ) -> None:
        return None


class SyncHook(Idle):
    def on_revoked(self, session, partitions):  # type: ignore[no-untyped-def,override]
        return None


@pytest.mark.parametrize(
    ("handler", "name"), [(SyncClaim(), "consume_claim"), (SyncHook(), "on_revoked")]
)
async def test_a_sync_handler_method_is_rejected_at_start(
    handler: cg.ConsumerGroupHandler, name: str
) -> None:
    """Defect 22: a plain ``def consume_claim`` used to fail only once a claim ran."""
    group = cg.ConsumerGroup(NOWHERE, "g")
    for start in (group.run, group.consume):
        with pytest.raises(cg.ConfigurationError, match=f"async def {name}"):
            await start(["t"], handler)
    await group.close()


def test_hooks_must_be_callable() -> None:
    with pytest.raises(cg.ConfigurationError, match="on_lost must be a callable"):
        cg.ConsumerGroup(NOWHERE, "g", on_lost="print")  # type: ignore[arg-type]


async def test_consume_after_close_raises_closed_error() -> None:
    """Defect 2: it returned None at once, so ``while True: await consume()`` spun."""
    group = cg.ConsumerGroup(NOWHERE, "g")
    await group.close()
    with pytest.raises(cg.ClosedError):
        await group.consume(["t"], Idle())
    assert group.state is cg.GroupState.CLOSED


def _error(n: int) -> cg.ConsumerError:
    return cg.ConsumerError(f"error {n}", topic="t", partition=0)


async def test_cancelling_the_errors_reader_loses_nothing() -> None:
    """Defect 8: the cancelled reader's pending get() took the next error with it."""
    config = cg.Config()
    config.consumer.return_errors = True
    group = cg.ConsumerGroup(NOWHERE, "g", config)
    first: list[cg.ConsumerError] = []
    got_one = asyncio.Event()

    async def read(sink: list[cg.ConsumerError]) -> None:
        async for err in group.errors():
            sink.append(err)
            got_one.set()

    reader = asyncio.create_task(read(first))
    group._push_error(_error(1))
    await asyncio.wait_for(got_one.wait(), 5)
    await asyncio.sleep(0.01)  # the reader is back waiting for the next error
    reader.cancel()  # while it waits for the next error
    await asyncio.gather(reader, return_exceptions=True)
    group._push_error(_error(2))
    await asyncio.sleep(0.05)  # a leaked getter would take it now
    second: list[cg.ConsumerError] = []
    reader = asyncio.create_task(read(second))
    await group.close()
    await asyncio.wait_for(reader, 5)
    assert [e.message for e in first] == ["error 1"]
    assert [e.message for e in second] == ["error 2"]


async def test_errors_overflow_is_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Defect 8: beyond the buffer, errors were dropped silently."""
    config = cg.Config()
    config.consumer.return_errors = True
    group = cg.ConsumerGroup(NOWHERE, "g", config)
    caplog.set_level(logging.WARNING, logger="consumergroup.group")
    for n in range(1024 + 5):
        group._push_error(_error(n))
    assert group.stats().errors_dropped == 5
    assert any("5 errors dropped" in r.getMessage() for r in caplog.records) or any(
        "4 errors dropped" in r.getMessage() for r in caplog.records
    )
    await group.close()
    got = [e.message async for e in group.errors()]
    assert got[0] == "error 5" and got[-1] == "error 1028" and len(got) == 1024


def test_an_exception_group_becomes_its_one_error() -> None:
    """Defect 17: the public API raises the error inside, never the group."""
    from consumergroup.group.consumer_group import _single_error

    inner = cg.NoBrokersAvailableError("none answered")
    assert _single_error(BaseExceptionGroup("x", [ExceptionGroup("y", [inner])])) is inner


def test_an_exception_group_of_many_becomes_a_consumer_group_error() -> None:
    from consumergroup.group.consumer_group import _single_error

    err = _single_error(ExceptionGroup("x", [ValueError("a"), KeyError("b")]))
    assert type(err) is cg.ConsumerGroupError
    assert "ValueError: a" in str(err) and "KeyError" in str(err)


def test_keyboard_interrupt_in_a_group_stays_itself() -> None:
    from consumergroup.group.consumer_group import _single_error

    interrupt = KeyboardInterrupt()
    assert _single_error(BaseExceptionGroup("x", [ValueError("a"), interrupt])) is interrupt
