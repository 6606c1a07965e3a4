"""The codec adapter (consumergroup/net/protocol.py): versions, ListOffsets, prepare, framing."""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest
from aiokafka.protocol.metadata import MetadataRequest_v1, MetadataResponse_v1

from consumergroup.errors import UnsupportedVersionError
from consumergroup.net import api_versions
from consumergroup.net.protocol import (
    API_NAMES,
    ApiVersionsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    codec_versions,
    decode_response,
    encode_request,
    prepare,
)

TOPICS = [("events", [(0, -2), (1, -1)])]


def plain(value: Any) -> Any:
    """Decoded arrays come back as tuples or lists: compare them as lists."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def test_codec_versions_cover_every_named_api() -> None:
    versions = codec_versions()
    missing = {name for key, name in API_NAMES.items() if key not in versions}
    assert not missing, f"APIs named but without a codec: {missing}"
    for key, (lo, hi) in versions.items():
        assert 0 <= lo <= hi, API_NAMES.get(key, key)
    assert set(versions) <= set(API_NAMES), "every codec needs a name for messages"


def test_codec_floors_meet_kafka_4() -> None:
    # Kafka 4.0 removed old versions; our ranges must reach at least these.
    floors = {1: 4, 2: 1, 3: 0, 8: 2, 9: 1, 10: 0, 11: 2, 12: 0, 13: 0, 14: 0}
    versions = codec_versions()
    for key, floor in floors.items():
        assert versions[key][1] >= floor, API_NAMES[key]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_list_offsets_builds_every_version_and_it_encodes(version: int) -> None:
    built = prepare(ListOffsetsRequest(1, TOPICS), {2: (version, version)}, "b:9092")
    api_key, api_version = built.API_KEY, built.API_VERSION
    assert api_key == 2
    assert api_version == version
    decoded = type(built).decode(built.encode())
    assert decoded.replica_id == -1
    assert plain(decoded.topics) == plain(TOPICS)
    if version >= 2:
        assert decoded.isolation_level == 1


def test_list_offsets_picks_the_highest_common_version() -> None:
    assert prepare(ListOffsetsRequest(0, TOPICS), {2: (0, 9)}, "b:9092").API_VERSION == 3
    assert prepare(ListOffsetsRequest(0, TOPICS), {2: (0, 2)}, "b:9092").API_VERSION == 2


def test_prepare_without_overlap_names_both_ranges() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        prepare(ListOffsetsRequest(0, TOPICS), {2: (4, 9)}, "broker-1:9092")
    message = str(info.value)
    for part in ("ListOffsets", "broker-1:9092", "(4, 9)", "(1, 3)", "upgrade"):
        assert part in message


def test_prepare_for_an_api_the_broker_does_not_offer() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        prepare(MetadataRequest([], False), {18: (0, 3)}, "broker-1:9092")
    message = str(info.value)
    assert "Metadata" in message
    assert "broker-1:9092" in message
    assert "None" not in message, "say the broker does not offer it, not 'versions None'"


def test_encode_request_writes_a_v1_header() -> None:
    data = encode_request(MetadataRequest_v1(["a"]), 7, "cid")
    api_key, api_version, cid, id_len = struct.unpack_from(">hhih", data, 0)
    assert (api_key, api_version, cid, id_len) == (3, 1, 7, 3)
    assert data[10:13] == b"cid"
    assert MetadataRequest_v1.decode(data[13:]).topics == ["a"]


def test_decode_response_skips_the_header() -> None:
    body = MetadataResponse_v1([(1, "h", 9092, None)], 1, [(0, "t", False, [])])
    payload = struct.pack(">i", 7) + body.encode()
    decoded = decode_response(MetadataRequest_v1(["t"]), payload)
    assert decoded.to_object()["topics"][0]["topic"] == "t"
    assert decoded.controller_id == 1


def test_lazy_codecs_versions_are_their_classes() -> None:
    """The share-group and transaction builders load on first use; the versions
    ``codec_versions()`` gives for them without importing them are the classes' own."""
    from consumergroup.net import protocol

    keys = set()
    for name in protocol._LAZY:
        builder = getattr(protocol, name)
        versions = [cls.API_VERSION for cls in builder._CLASSES]
        assert protocol._LAZY_VERSIONS[builder.API_KEY] == (min(versions), max(versions)), name
        assert name in protocol.__all__
        keys.add(builder.API_KEY)
    assert keys == set(protocol._LAZY_VERSIONS)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_api_versions_v0_to_v2_are_aiokafkas_on_the_wire(version: int) -> None:
    """ApiVersions v0-v2 are written in ``net/api_versions.py`` (so a connection does not
    import aiokafka's admin codecs): same request bytes and same decoded answer as
    aiokafka's classes."""
    from aiokafka.protocol import admin

    theirs = (admin.ApiVersionRequest_v0, admin.ApiVersionRequest_v1, admin.ApiVersionRequest_v2)
    built = prepare(ApiVersionsRequest(), {18: (0, version)}, "b:1")
    got = (built.API_KEY, built.API_VERSION)
    assert got == (18, version)
    assert encode_request(built, 7, "c") == encode_request(theirs[version](), 7, "c")
    body = struct.pack(">ih", 7, 0) + struct.pack(">i", 2) + struct.pack(">hhh", 1, 4, 17)
    body += struct.pack(">hhh", 18, 0, 4) + (struct.pack(">i", 5) if version else b"")
    ours = decode_response(built, body)
    assert ours.to_object() == decode_response(theirs[version](), body).to_object()
    assert [tuple(v) for v in ours.api_versions] == [(1, 4, 17), (18, 0, 4)]


@pytest.mark.parametrize(
    "version",
    ["0.1.0", "0.1.0.dev1+g12ab", "1.0 beta", "é1.0", "+++", "", "-.a.-", "1", "..9..", "a_b"],
)
def test_software_version_matches_kip_511(version: str) -> None:
    """What ApiVersions v3 sends as ``client_software_version``: Kafka's pattern holds, and
    it is what a substitution of the other characters and a strip of ``-``/``.`` give."""
    sent = api_versions.software_version(version)
    assert re.fullmatch(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?", sent)
    cleaned = re.sub(r"[^a-zA-Z0-9\-.]", "-", version).strip("-.")
    assert sent == (cleaned or "unknown")
