"""The producer id and epoch of an idempotent producer (KIP-98), and its epoch bump
(KIP-360).

With idempotence the broker keeps, per producer id and partition, the sequence numbers
of the last five batches it wrote: a batch sent again (a lost answer, a leader change)
is recognised and not written twice, and a batch whose sequence does not follow is
refused (OUT_OF_ORDER_SEQUENCE_NUMBER) rather than written out of order. The
per-partition sequences live in the accumulator's queues; this module holds what is
per producer.

When the broker has lost the producer's state (UNKNOWN_PRODUCER_ID, e.g. the partition's
records expired by retention) or a batch left a gap that no retry can fill (it failed,
or expired, after it may have been sent), the Java client bumps the epoch: InitProducerId
with the current id and epoch (v3+) returns the same id with the epoch + 1, and every
partition's sequences start again at 0. Brokers before v3 give a new producer id.

Who touches what: the sender (one task) calls :meth:`ProducerIdentity.init` and
:meth:`bump` while nothing is in flight; the sender reads the fields.
"""

from __future__ import annotations

import logging

from ..client import Client
from ..errors import UnsupportedVersionError, raise_for_code
from ..net.protocol import InitProducerIdRequest
from ..retry import retrying

log = logging.getLogger(__name__)

__all__ = ["NO_PRODUCER_ID", "ProducerIdentity"]

#: Producer id and epoch of a producer without idempotence.
NO_PRODUCER_ID = -1


class ProducerIdentity:
    """The producer id and epoch every batch carries (-1, -1 without idempotence)."""

    def __init__(self, client: Client, transaction_timeout_ms: int) -> None:
        self._client = client
        self._timeout_ms = transaction_timeout_ms
        self.producer_id = NO_PRODUCER_ID
        self.epoch = -1

    @property
    def known(self) -> bool:
        """An id was obtained."""
        return self.producer_id >= 0

    async def init(self) -> None:
        """Obtain a producer id (idempotence without transactions: from any broker)."""
        await self._request(-1, -1)

    async def bump(self) -> None:
        """A new epoch for the same id (or a new id from a broker before KIP-360)."""
        old = (self.producer_id, self.epoch)
        await self._request(*old)
        log.info(
            "producer id %d epoch %d -> id %d epoch %d: sequences start again at 0",
            *old,
            self.producer_id,
            self.epoch,
        )

    async def _request(self, producer_id: int, epoch: int) -> None:
        async def attempt() -> tuple[int, int]:
            conn = await self._client.any()
            if conn.version(InitProducerIdRequest.API_KEY) is None:
                raise UnsupportedVersionError(
                    f"broker {conn.address} does not offer InitProducerId, which an "
                    "idempotent producer needs: set producer.idempotent = False for it"
                )
            request = InitProducerIdRequest(None, self._timeout_ms, producer_id, epoch)
            resp = await conn.send(request)
            raise_for_code(resp.error_code, f"InitProducerId from {conn.address}")
            return resp.producer_id, resp.producer_epoch

        self.producer_id, self.epoch = await retrying(
            "InitProducerId", attempt, self._client.config.metadata.retry
        )
