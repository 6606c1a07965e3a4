"""What a share-group handler receives and decides: :class:`ShareRecord` and :class:`AckType`."""

from __future__ import annotations

import enum
import functools

from ..message import ConsumerMessage

__all__ = ["AckType", "ShareRecord", "record_class"]


class AckType(enum.IntEnum):
    """How a record handed to a share-group member ends (its value is the wire code).

    * ``ACCEPT``: handled; the broker never delivers it again (a handler that returns).
    * ``RELEASE``: handed back; the broker delivers it again, to this member or another,
      with its delivery count one higher (a handler that raises). Once the count reaches
      the group's ``share.delivery.count.limit`` the broker archives it instead.
    * ``REJECT``: unprocessable; the broker archives it at once and never delivers it
      again (a poison record).
    """

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class ShareRecord(ConsumerMessage):
    """A record acquired for this member: a :class:`~consumergroup.ConsumerMessage`
    (``topic, partition, offset, key, value, headers, timestamp``) plus
    ``delivery_count``, how many times the broker has handed it out (1 the first time).

    A record is decoded as a ``ConsumerMessage`` by the fetch path's C decoder and then
    takes this class's place in one assignment (``__class__``): the delivery count is a
    class attribute of one subclass per count (:func:`record_class`), so the hot path
    allocates nothing per record for it. ``isinstance(r, ShareRecord)`` holds for all.
    """

    __slots__ = ()

    #: How many times the broker has delivered this record (1 on its first delivery).
    delivery_count: int = 1

    def __repr__(self) -> str:
        return (
            f"ShareRecord(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r}, timestamp_ms={self.timestamp_ms}, "
            f"delivery_count={self.delivery_count})"
        )


@functools.cache
def record_class(delivery_count: int) -> type[ShareRecord]:
    """The :class:`ShareRecord` subclass whose records were delivered ``delivery_count``
    times (same layout as ``ConsumerMessage``: a decoded message may become one)."""
    cls = type(
        "ShareRecord",
        (ShareRecord,),
        {"__slots__": (), "delivery_count": delivery_count, "__module__": __name__},
    )
    cls.__qualname__ = "ShareRecord"
    return cls
