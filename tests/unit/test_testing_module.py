"""consumergroup.testing's pure parts: the cluster id and the ports the brokers get."""

from __future__ import annotations

import socket
from collections.abc import Iterator

from consumergroup.testing import _ephemeral_range, _new_cluster_id, free_port


def test_an_id_never_starts_with_a_dash() -> None:
    # 0xF8 makes the first base64 character '-': Kafka's storage tool read such an id as an
    # option and refused to format, failing every Kafka test of a worker in CI.
    draws: Iterator[bytes] = iter([b"\xf8" + bytes(15), b"\x01" + bytes(15)])
    cluster_id = _new_cluster_id(lambda: next(draws))
    assert cluster_id == "AQAAAAAAAAAAAAAAAAAAAA"


def test_an_id_is_22_url_safe_characters() -> None:
    for _ in range(1000):
        cluster_id = _new_cluster_id()
        assert len(cluster_id) == 22
        assert not cluster_id.startswith("-")
        assert set(cluster_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_a_free_port_is_outside_the_ephemeral_range_and_bindable() -> None:
    # Outgoing connections take ports from the ephemeral range; a broker's port must not be
    # one of them in the seconds before the broker binds it.
    low, high = _ephemeral_range()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
