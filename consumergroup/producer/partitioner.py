"""Which partition a record goes to: Java's built-in partitioner.

* An explicit partition wins.
* A keyed record goes to ``murmur2(key) & 0x7fffffff % partitions``: the partition the
  Java client (and librdkafka's ``murmur2_random``, franz-go's ``StickyKeyPartitioner``)
  picks for the same key, so keyed data written here lines up with theirs.
* Records without a key follow the uniform sticky partitioner (KIP-794): they stay on
  one partition until ``batch_size`` bytes went there, then move to another one picked
  at random among the partitions that have a leader. Batches fill (fewer, larger
  requests), and over time every partition gets the same share.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

__all__ = ["StickyPartitioner", "murmur2", "murmur2_partition"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")  # murmur2 reads the key as little-endian 32-bit words


def murmur2(key: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c) as a signed 32-bit int, like Java's."""
    length = len(key)
    h = (0x9747B28C ^ length) & _MASK
    end = length - length % 4
    for (k,) in _WORDS.iter_unpack(key[:end]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = key[end:]
    if tail:
        for i in reversed(range(len(tail))):
            h ^= tail[i] << (8 * i)
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition index Java's default partitioner picks for ``key`` among
    ``partitions`` (``toPositive(murmur2(key)) % partitions``)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """The uniform sticky partitioner's state for one topic (KIP-794).

    Owned by the producer's ``send()`` (the event loop): :meth:`next` keeps the current
    partition while fewer than ``batch_size`` bytes went there, else :meth:`switch`
    picks the next one.
    """

    __slots__ = ("_batch_size", "_current", "_produced")

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size
        self._current = -1
        self._produced = 0

    def next(self, size: int) -> int:
        """The current partition, counting ``size`` bytes to it; -1 when it is time to
        :meth:`switch`."""
        if self._current < 0 or self._produced >= self._batch_size:
            return -1
        self._produced += size
        return self._current

    def switch(self, available: list[int], count: int, size: int) -> int:
        """Move to a partition picked at random among ``available`` (those with a
        leader; all ``count`` when none has one now), not the one just filled."""
        choices: Sequence[int] = available or range(count)
        current = self._current
        if len(choices) > 1 and current in choices:
            pick = choices[random.randrange(len(choices) - 1)]
            current = choices[-1] if pick == current else pick
        else:
            current = choices[random.randrange(len(choices))]
        self._current = current
        self._produced = size
        return current
