"""Bootstrap addresses as users write them: a list, one comma-separated string, or a list
holding such strings (``[cluster.bootstrap]``), accepted by every constructor that connects."""

from __future__ import annotations

import pytest

import consumergroup as cg
from consumergroup.admin import ClusterAdmin
from consumergroup.client import Client, bootstrap_addresses


@pytest.mark.parametrize(
    "given",
    [
        ["h1:9092", "h2:9093"],
        "h1:9092,h2:9093",
        " h1:9092 , h2:9093 ,",
        ["h1:9092,h2:9093"],
        ("h1:9092", "h2:9093"),
        ["h1:9092", "h2:9093,"],
    ],
)
def test_every_form_gives_the_same_seeds(given: str | list[str]) -> None:
    assert bootstrap_addresses(given) == ["h1:9092", "h2:9093"]
    assert Client(given)._seeds == [("h1", 9092), ("h2", 9093)]


def test_ipv6_and_a_single_address() -> None:
    assert Client("[::1]:9092,127.0.0.1:9093")._seeds == [("::1", 9092), ("127.0.0.1", 9093)]
    assert Client("127.0.0.1:9092")._seeds == [("127.0.0.1", 9092)]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("", "no bootstrap brokers"),
        ([], "no bootstrap brokers"),
        (",", "no bootstrap brokers"),
        ("h1:9092;h2:9092", "is not HOST:PORT"),
        ("h1:9092,h2", "'h2' is not HOST:PORT"),
        (["h1:9092", 9092], "is not a string"),
        ("h1:99999", "is not HOST:PORT"),
    ],
)
def test_a_malformed_one_is_a_configuration_error_at_once(given: object, says: str) -> None:
    # Before: "h1:9092,h2:9092" was read as host "h1:9092,h2" and retried as
    # "Unknown error -2" (a DNS failure) for ever.
    with pytest.raises(cg.ConfigurationError, match=says):
        Client(given)  # type: ignore[arg-type]


def test_the_public_constructors_accept_a_comma_separated_string() -> None:
    group = cg.ConsumerGroup("h1:9092,h2:9093", "g")
    assert group._client._seeds == [("h1", 9092), ("h2", 9093)]
    consumer = cg.Consumer("h1:9092,h2:9093")
    assert consumer._client._seeds == [("h1", 9092), ("h2", 9093)]
    admin = ClusterAdmin(["h1:9092,h2:9093"])
    assert admin.client._seeds == [("h1", 9092), ("h2", 9093)]
    with pytest.raises(cg.ConfigurationError, match="is not HOST:PORT"):
        cg.ConsumerGroup("h1:9092;h2:9093", "g")
