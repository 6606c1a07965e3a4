"""Wire layer: framed, pipelined broker connections and the codec adapter."""

from .connection import BrokerConnection

__all__ = ["BrokerConnection"]
