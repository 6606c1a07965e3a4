"""Wire layer: framed, pipelined broker connections and the codec adapter.

``BrokerConnection`` loads its module on first use (``consumergroup._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

__all__ = ["BrokerConnection"]

_LAZY: dict[str, tuple[str, str]] = {
    "BrokerConnection": (f"{__name__}.connection", "BrokerConnection"),
}

if TYPE_CHECKING:
    from .connection import BrokerConnection as BrokerConnection

__getattr__, __dir__ = _lazy.exports(globals(), _LAZY)
