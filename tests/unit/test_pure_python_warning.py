"""The pure-Python fallback (no C compiler at install) is never silent: one warning per
process when the first partition opens, and ``stats().c_extensions`` is False."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from consumergroup.consumer._native import c_extensions_in_use

PROGRAM = textwrap.dedent(
    """
    import asyncio, contextlib, logging, sys
    if sys.argv[1] == "unbuilt":  # as on a machine without a C compiler: the import fails
        sys.modules["consumergroup.consumer._crecords"] = None
        sys.modules["consumergroup.consumer._cstream"] = None
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    import consumergroup as cg

    print("c_extensions", cg.ConsumerGroup("127.0.0.1:1", "g").stats().c_extensions, flush=True)

    async def main():
        config = cg.Config()
        config.metadata.retry.max = 0
        config.net.dial_timeout = 0.5
        for _ in range(2):  # two partitions opened (no broker: they fail): one warning
            consumer = cg.Consumer("127.0.0.1:1", config)
            with contextlib.suppress(cg.KafkaError):
                await consumer.consume_partition("t", 0, cg.OFFSET_OLDEST)
            await consumer.close()

    asyncio.run(main())
    """
)


def run(mode: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    return done.stdout, done.stderr


@pytest.mark.skipif(not c_extensions_in_use(), reason="the C extensions are not built here")
def test_built_extensions_say_so_and_warn_nothing() -> None:
    out, err = run("built")
    assert "c_extensions True" in out
    assert "C extensions are not in use" not in err, err


def test_unbuilt_extensions_warn_once_and_show_in_stats() -> None:
    # Before: the fallback (about 10x the CPU per record) was taken without a word.
    out, err = run("unbuilt")
    assert "c_extensions False" in out
    warnings = [line for line in err.splitlines() if "C extensions are not in use" in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith("WARNING") and "apt-get install gcc python3-dev" in warnings[0]


def test_a_chosen_fallback_is_logged_at_info_not_warned() -> None:
    import os

    out, err = run("built", {**os.environ, "CONSUMERGROUP_PURE_PYTHON": "1"})
    assert "c_extensions False" in out
    assert "C extensions are not in use" not in err
    assert "INFO consumergroup runs its pure-Python record decoder" in err, err
