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

    Owned by the producer's ``send()`` (the event loop), which reads it inline (the
    per-record path makes no call here): while ``left`` (bytes still to go to the
    current partition) is above 0 a keyless record goes to ``current`` and counts its
    size off ``left``; then :meth:`switch` picks the next partition.
    """

    __slots__ = ("_batch_size", "current", "left")

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size
        self.current = -1
        self.left = 0

    def switch(self, available: list[int], count: int, size: int) -> int:
        """Move to a partition picked at random among ``available`` (those with a
        leader; all ``count`` when none has one now), not the one just filled; a record
        of ``size`` bytes goes there first."""
        choices: Sequence[int] = available or range(count)
        current = self.current
        if len(choices) > 1 and current in choices:
            pick = choices[random.randrange(len(choices) - 1)]
            current = choices[-1] if pick == current else pick
        else:
            current = choices[random.randrange(len(choices))]
        self.current = current
        self.left = self._batch_size - size
        return current
