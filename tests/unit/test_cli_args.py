"""Kafka's tools' command lines, as ours (``consumergroup.cli.kafka_tool_args``)."""

from __future__ import annotations

import pytest

from consumergroup import cli
from consumergroup.cli import kafka_tool_args

COMMANDS = list(cli.COMMANDS)
B = ["--bootstrap-server", "b:9092"]


@pytest.mark.parametrize(
    ("given", "ours"),
    [
        ([*B, "--list"], ["groups", *B]),
        ([*B, "--describe", "--group", "g"], ["describe", *B, "--group", "g"]),
        ([*B, "--describe", "--group", "g", "--members"],
         ["describe", *B, "--group", "g", "--members"]),
        ([*B, "--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--execute"],
         ["reset-offsets", *B, "--group", "g", "--topic", "t", "--to-earliest", "--execute"]),
        ([*B, "--delete", "--group", "g"], ["delete", *B, "--group", "g"]),
        (["-v", *B, "--list"], ["-v", "groups", *B]),
        # kafka-topics.sh: --topic without --group, or --create
        ([*B, "--describe", "--topic", "t"], ["topics", *B, "--describe", "--topic", "t"]),
        ([*B, "--delete", "--topic", "t"], ["topics", *B, "--delete", "--topic", "t"]),
        ([*B, "--create", "--topic", "t", "--partitions", "3"],
         ["topics", *B, "--create", "--topic", "t", "--partitions", "3"]),
        # ours, untouched or with the command first
        (["describe", "g", *B], ["describe", "g", *B]),
        ([*B, "lag", "g"], ["lag", *B, "g"]),
        (["--help"], ["--help"]),
        ([], []),
        ([*B, "--list", "--describe"], [*B, "--list", "--describe"]),  # click says what is wrong
    ],
)  # fmt: skip
def test_kafka_tool_args(given: list[str], ours: list[str]) -> None:
    assert kafka_tool_args(given, COMMANDS) == ours
