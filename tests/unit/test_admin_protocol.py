"""The admin codecs (DescribeGroups, ListGroups, DeleteGroups) and the CLI's pure helpers."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from aiokafka.protocol.admin import (
    DeleteGroupsResponse_v1,
    DescribeGroupsResponse_v3,
    ListGroupsResponse_v1,
)

from consumergroup.admin import _decode_assignment, _subscription_rack
from consumergroup.balance.protocol import MemberAssignment, MemberSubscription
from consumergroup.cli._cluster import ClusterOptions
from consumergroup.cli._common import CliError
from consumergroup.cli.consume import message_json
from consumergroup.message import ConsumerMessage
from consumergroup.net.protocol import (
    API_NAMES,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    codec_versions,
    prepare,
)


def plain(value: Any) -> Any:
    """Decoded arrays come back as tuples or lists: compare them as lists."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def test_the_admin_apis_are_named_and_have_codecs() -> None:
    versions = codec_versions()
    for key, name in ((15, "DescribeGroups"), (16, "ListGroups"), (42, "DeleteGroups")):
        assert API_NAMES[key] == name
        assert versions[key][0] == 0


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_describe_groups_request_round_trips_at_every_version(version: int) -> None:
    built = prepare(DescribeGroupsRequest(["a", "b"]), {15: (0, version)}, "b:9092")
    assert (15, version) == (built.API_KEY, built.API_VERSION)
    decoded = type(built).decode(built.encode())
    assert plain(decoded.groups) == ["a", "b"]


def test_describe_groups_v3_reads_every_group_of_a_v3_response() -> None:
    # aiokafka 0.14 decodes v3 with the v2 schema (no authorized_operations): the second
    # group would be misread. Ours pairs v3 with the v3 response.
    assignment = MemberAssignment({"t": [0, 2]}).encode()
    member = ("m-1", "client-1", "/10.0.0.1", b"", assignment)
    wire = DescribeGroupsResponse_v3(
        0,
        [
            (0, "g1", "Stable", "consumer", "range", [member], -2147483648),
            (0, "g2", "Empty", "consumer", "", [], -2147483648),
        ],
    ).encode()
    built = prepare(DescribeGroupsRequest(["g1", "g2"]), {15: (0, 5)}, "b:9092")
    assert built.API_VERSION == 3
    response = built.RESPONSE_TYPE.decode(wire)
    groups = plain(response.groups)
    assert [g[1:3] for g in groups] == [["g1", "Stable"], ["g2", "Empty"]]
    assert groups[0][5] == [["m-1", "client-1", "/10.0.0.1", b"", assignment]]


def test_list_and_delete_groups_round_trip() -> None:
    listed = prepare(ListGroupsRequest(), {16: (0, 2)}, "b:9092")
    assert listed.API_VERSION == 2
    wire = ListGroupsResponse_v1(0, 0, [("g1", "consumer"), ("g2", "")]).encode()
    assert plain(listed.RESPONSE_TYPE.decode(wire).groups) == [["g1", "consumer"], ["g2", ""]]

    delete = prepare(DeleteGroupsRequest(["g1"]), {42: (0, 2)}, "b:9092")
    assert delete.API_VERSION == 1
    assert plain(type(delete).decode(delete.encode()).groups_names) == ["g1"]
    wire = DeleteGroupsResponse_v1(0, [("g1", 68)]).encode()
    assert plain(delete.RESPONSE_TYPE.decode(wire).results) == [["g1", 68]]


def test_assignments_decode_only_for_the_consumer_protocol() -> None:
    raw = MemberAssignment({"b": [3, 1], "a": [0]}).encode()
    assert _decode_assignment("consumer", raw) == {"a": [0], "b": [1, 3]}
    assert _decode_assignment("connect", raw) == {}
    assert _decode_assignment("consumer", b"") == {}
    assert _decode_assignment("consumer", b"\x00\x01\xff") == {}  # malformed: shown as none


def test_a_classic_members_rack_is_read_from_its_subscription() -> None:
    """ConsumerProtocol v3 carries the member's rack (KIP-881); describe shows it."""
    raw = MemberSubscription(["a"], rack_id="eu-west-1a", version=3).encode()
    assert _subscription_rack("consumer", raw) == "eu-west-1a"
    assert _subscription_rack("consumer", MemberSubscription(["a"], version=3).encode()) is None
    assert _subscription_rack("consumer", MemberSubscription(["a"], rack_id="x").encode()) is None
    assert _subscription_rack("connect", raw) is None
    assert _subscription_rack("consumer", b"\x00\x03\xff") is None


def test_message_json_is_text_or_base64_and_keeps_nulls() -> None:
    msg = ConsumerMessage(
        "t", 2, 7, None, b"\xff\x00", [("h", b"v"), ("n", None)], 1_700_000_000_123, 0
    )
    got = json.loads(message_json(msg))
    assert got == {
        "topic": "t",
        "partition": 2,
        "offset": 7,
        "timestamp": "2023-11-14T22:13:20.123000+00:00",
        "key": None,
        "key_encoding": None,
        "value": base64.b64encode(b"\xff\x00").decode(),
        "value_encoding": "base64",
        "headers": [
            {"key": "h", "value": "v", "value_encoding": "text"},
            {"key": "n", "value": None, "value_encoding": None},
        ],
    }


def test_command_config_fills_what_options_left_unset(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "# Kafka client properties\n"
        "bootstrap.servers = b1:9093,b2:9093\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        # A doubled backslash in the file is one in the property (Properties.load), and
        # \" in a JAAS quoted value is a quote (StreamTokenizer).
        'username="alice" password="s3cr\\\\"t";\n'
        "ssl.endpoint.identification.algorithm=\n"
    )
    cluster = ClusterOptions(sasl_user="bob")  # an option given on the command line wins
    cluster.fill_from(props)
    assert cluster.addrs == ["b1:9093", "b2:9093"]
    assert (cluster.tls, cluster.tls_insecure) == (True, True)
    assert (cluster.sasl_mechanism, cluster.sasl_user) == ("SCRAM-SHA-512", "bob")
    assert cluster.sasl_password == 's3cr"t'  # JAAS unescapes, as Java's StreamTokenizer
    config = cluster.config()
    assert config.net.tls.enable and config.net.sasl.enable
    assert config.net.sasl.mechanism == "SCRAM-SHA-512"


def test_command_config_errors_name_the_file_and_line(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("bootstrap.servers=b:9092\nsasl.password=\\u00zz\n")
    with pytest.raises(CliError, match=r"bad.properties:line 2: malformed \\uXXXX escape"):
        ClusterOptions().fill_from(props)
    with pytest.raises(CliError, match="cannot read --command-config"):
        ClusterOptions().fill_from(tmp_path / "missing.properties")
    with pytest.raises(CliError, match="no broker given"):
        _ = ClusterOptions().addrs
