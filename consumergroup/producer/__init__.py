"""The producer: idempotent, batching, compressing, on this package's client.

Not imported by ``import consumergroup``: ``cg.Producer`` and ``cg.RecordMetadata`` load
it on first use. One module per role: :mod:`.partitioner` (where a record goes),
:mod:`.batch` (one partition's records and their encoding), :mod:`.accumulator`
(per-partition queues, linger, the memory bound), :mod:`.sender` (requests, answers,
retries), :mod:`.idempotence` (producer id and epoch), :mod:`.transactions` (the
transaction coordinator's side) and :mod:`.producer` (the API).
"""

from .metadata import RecordMetadata
from .producer import Producer
from .transactions import GroupMetadata

__all__ = ["GroupMetadata", "Producer", "RecordMetadata"]
