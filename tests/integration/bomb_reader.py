"""Reads one partition in its own process and reports how much its resident memory grew.

``python -m tests.integration.bomb_reader BOOTSTRAP TOPIC LAST BUFFER_BYTES`` reads offset 0
(a small warm-up record: connections made, decoders loaded), then resets the process's peak
resident set (Linux ``/proc/self/clear_refs``) and reads on up to offset LAST, keeping no
message. Prints one JSON line: ``records`` and ``value_bytes`` read after the warm-up, and
``growth``, the peak resident set minus the resident set before those reads (bytes).
"""

from __future__ import annotations

import asyncio
import json
import sys

import consumergroup as cg


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak resident set starts again from here


async def main(bootstrap: str, topic: str, last: int, buffer_bytes: int) -> None:
    config = cg.Config()
    config.consumer.fetch.buffer_bytes = buffer_bytes
    async with cg.Consumer([bootstrap], config) as consumer:
        pc = await consumer.consume_partition(topic, 0, cg.OFFSET_OLDEST)
        messages = pc.messages()
        warm_up = await anext(messages)
        assert warm_up.offset == 0, warm_up
        base = _status("VmRSS:")
        _reset_peak()
        records = values = 0
        async for message in messages:
            records += 1
            values += len(message.value or b"")
            if message.offset >= last:
                break
        growth = _status("VmHWM:") - base
    print(json.dumps({"records": records, "value_bytes": values, "growth": growth}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
