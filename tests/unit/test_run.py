"""``cg.run(main())``: SIGINT and SIGTERM cancel ``main()``, its ``finally`` and ``async with``
exits run, and the process exits 0 without a traceback; a second signal forces the stop."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap

import pytest

import consumergroup as cg

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys
    import consumergroup as cg

    async def main():
        try:
            print("running", flush=True)
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(float(sys.argv[1]))  # the close: awaits still work here
            print("closed", flush=True)

    print("returned", cg.run(main()), flush=True)
    """
)


def start(close_seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(close_seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "running\n"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_cancels_main_which_closes_and_the_process_exits_0(sig: signal.Signals) -> None:
    # Before: asyncio.run() ended SIGINT in a KeyboardInterrupt traceback (exit 130) and
    # SIGTERM killed the process at once (exit 143) without running the finally.
    proc = start(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (0, "closed\nreturned None\n", "")


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)], ids=["INT", "TERM"]
)
def test_a_second_signal_while_closing_forces_the_stop(sig: signal.Signals, code: int) -> None:
    proc = start(30)
    proc.send_signal(sig)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)  # the first one arrived: closing (for 30 s)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, (out, err)
    assert "closed" not in out and "Traceback" not in err, err


def test_it_returns_what_main_returned_and_raises_what_it_raised() -> None:
    async def answer() -> int:
        return 42

    async def fail() -> None:
        raise ValueError("boom")

    assert cg.run(answer()) == 42
    with pytest.raises(ValueError, match="boom"):
        cg.run(fail())


def test_a_coroutine_function_instead_of_a_coroutine_is_refused() -> None:
    async def main() -> None:
        await asyncio.sleep(0)

    with pytest.raises(TypeError, match=r"cg.run\(main\(\)\)"):
        cg.run(main)  # type: ignore[arg-type]
