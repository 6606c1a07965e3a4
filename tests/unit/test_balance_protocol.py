"""ConsumerProtocol subscription/assignment codecs: round trips, wire compatibility, bad input."""

from __future__ import annotations

import struct

import pytest
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from consumergroup.balance import MemberAssignment, MemberSubscription
from tests.fuzz import examples

# --- hand-rolled classic encoding, independent of the code under test ---------------------------


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def string(value: str | None) -> bytes:
    if value is None:
        return i16(-1)
    raw = value.encode()
    return i16(len(raw)) + raw


def blob(value: bytes | None) -> bytes:
    return i32(-1) if value is None else i32(len(value)) + value


def topic_partitions(value: dict[str, list[int]]) -> bytes:
    out = i32(len(value))
    for topic, partitions in value.items():
        out += string(topic) + i32(len(partitions)) + b"".join(i32(p) for p in partitions)
    return out


FULL = MemberSubscription(
    topics=["orders", "pay\u00e9ments"],
    user_data=b"\x00\x01user",
    owned_partitions={"orders": [0, 3], "pay\u00e9ments": [7]},
    generation_id=42,
    rack_id="rack-a",
    version=3,
)


def hand_built_subscription(version: int) -> bytes:
    out = i16(version) + i32(2) + string("orders") + string("pay\u00e9ments")
    out += blob(b"\x00\x01user")
    if version >= 1:
        out += topic_partitions({"orders": [0, 3], "pay\u00e9ments": [7]})
    if version >= 2:
        out += i32(42)
    if version >= 3:
        out += string("rack-a")
    return out


def at_version(sub: MemberSubscription, version: int) -> MemberSubscription:
    """`sub` as it survives a round trip at `version` (later fields back to defaults)."""
    return MemberSubscription(
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions=sub.owned_partitions if version >= 1 else {},
        generation_id=sub.generation_id if version >= 2 else -1,
        rack_id=sub.rack_id if version >= 3 else None,
        version=version,
    )


# --- subscriptions -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_matches_hand_built_bytes(version: int) -> None:
    sub = at_version(FULL, version)
    assert sub.encode() == hand_built_subscription(version)
    assert MemberSubscription.decode(hand_built_subscription(version)) == sub


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_encoding_drops_fields_newer_than_version(version: int) -> None:
    sub = MemberSubscription(
        FULL.topics, FULL.user_data, FULL.owned_partitions, 42, "rack-a", version=version
    )
    assert sub.encode() == hand_built_subscription(version)
    assert MemberSubscription.decode(sub.encode()) == at_version(FULL, version)


def test_null_fields_round_trip() -> None:
    sub = MemberSubscription(["t"], user_data=None, rack_id=None, version=3)
    raw = sub.encode()
    assert raw == i16(3) + i32(1) + string("t") + blob(None) + i32(0) + i32(-1) + string(None)
    assert MemberSubscription.decode(raw) == sub


topic_names = st.text(min_size=1, max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
subscriptions = st.builds(
    MemberSubscription,
    topics=st.lists(topic_names, max_size=5),
    user_data=st.none() | st.binary(max_size=20),
    owned_partitions=st.dictionaries(topic_names, st.lists(int32s, max_size=5), max_size=4),
    generation_id=int32s,
    rack_id=st.none() | st.text(max_size=10),
    version=st.integers(0, 3),
)


@settings(max_examples=examples(100), deadline=None)
@given(subscriptions)
def test_subscription_round_trip_any_version(sub: MemberSubscription) -> None:
    assert MemberSubscription.decode(sub.encode()) == at_version(sub, sub.version)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(topic_names, max_size=5), st.none() | st.binary(max_size=20))
def test_subscription_v0_byte_compatible_with_aiokafka(
    topics: list[str], user_data: bytes | None
) -> None:
    ours = MemberSubscription(topics, user_data, version=0).encode()
    theirs = ConsumerProtocolMemberMetadata(0, topics, user_data).encode()
    assert ours == theirs
    decoded = ConsumerProtocolMemberMetadata.decode(ours)
    assert (decoded.version, decoded.subscription, decoded.user_data) == (0, topics, user_data)
    assert MemberSubscription.decode(theirs) == MemberSubscription(topics, user_data, version=0)


def test_aiokafka_reads_the_v0_prefix_of_newer_subscriptions() -> None:
    # aiokafka only knows v0 fields; a v3 body must still start with a v0-compatible prefix.
    decoded = ConsumerProtocolMemberMetadata.decode(FULL.encode())
    assert (decoded.version, decoded.subscription, decoded.user_data) == (
        3,
        FULL.topics,
        FULL.user_data,
    )


def test_forward_compatible_with_unknown_later_versions() -> None:
    # A hypothetical v4 appends fields after the v3 ones; we read the v3 part and stop.
    v4 = i16(4) + hand_built_subscription(3)[2:] + i32(99) + string("future")
    assert MemberSubscription.decode(v4) == FULL


def test_v1_header_with_v0_body_is_tolerated() -> None:
    # Some third-party clients label a v0 body as v1; the missing owned_partitions are empty.
    raw = i16(1) + i32(1) + string("t") + blob(None)
    assert MemberSubscription.decode(raw) == MemberSubscription(["t"], version=1)


def test_trailing_bytes_after_known_version_are_ignored() -> None:
    raw = hand_built_subscription(0) + b"\xff\xff"
    assert MemberSubscription.decode(raw) == at_version(FULL, 0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "version needs 2 bytes"),
        (b"\x00", "version needs 2 bytes"),
        (i16(-1) + i32(0) + blob(None), "negative version"),
        (i16(0), "topics length"),
        (i16(0) + i32(-1) + blob(None), "invalid array length -1"),
        (i16(0) + i32(2) + string("t"), "topics length needs 2 bytes"),
        (i16(0) + i32(1) + i16(5) + b"ab", "topics needs 5 bytes"),
        (i16(0) + i32(1) + string(None) + blob(None), "topics is null"),
        (i16(0) + i32(1) + i16(2) + b"\xff\xfe" + blob(None), "not valid UTF-8"),
        (i16(0) + i32(1) + i16(-3) + blob(None), "invalid length -3"),
        (i16(0) + i32(0) + i32(5) + b"abc", "user_data needs 5 bytes"),
        (i16(0) + i32(0) + i32(-2), "user_data has invalid length -2"),
        (i16(1) + i32(0) + blob(None) + i32(1) + string("t") + i32(3) + i32(0), "partitions"),
        (i16(2) + i32(0) + blob(None) + i32(0) + b"\x00\x00", "generation_id needs 4 bytes"),
        (i16(3) + i32(0) + blob(None) + i32(0) + i32(1) + i16(4) + b"ab", "rack_id needs 4"),
    ],
)
def test_malformed_subscription_raises_value_error(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match="malformed ConsumerProtocolSubscription") as info:
        MemberSubscription.decode(raw)
    assert message in str(info.value)


@settings(max_examples=examples(100), deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_value_error(raw: bytes) -> None:
    # Any other exception type escapes and fails the test; what decodes must re-encode stably.
    for cls in (MemberSubscription, MemberAssignment):
        try:
            decoded = cls.decode(raw)
        except ValueError:
            continue
        assert cls.decode(decoded.encode()) == decoded


@pytest.mark.parametrize(
    "sub",
    [
        MemberSubscription(["t"], version=4),
        MemberSubscription(["t"], version=-1),
        MemberSubscription(["t"], owned_partitions={"t": [2**31]}),
        MemberSubscription(["t"], generation_id=2**31, version=2),
        MemberSubscription(["x" * 40000]),
    ],
)
def test_unencodable_subscription_raises_value_error(sub: MemberSubscription) -> None:
    with pytest.raises(ValueError):
        sub.encode()


# --- assignments ---------------------------------------------------------------------------------

assignments = st.builds(
    MemberAssignment,
    topics=st.dictionaries(topic_names, st.lists(int32s, max_size=5), max_size=4),
    user_data=st.none() | st.binary(max_size=20),
    version=st.integers(0, 3),
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_matches_hand_built_bytes(version: int) -> None:
    assignment = MemberAssignment({"a": [1, 2], "b": []}, b"ud", version)
    raw = i16(version) + topic_partitions({"a": [1, 2], "b": []}) + blob(b"ud")
    assert assignment.encode() == raw
    assert MemberAssignment.decode(raw) == assignment


@settings(max_examples=examples(100), deadline=None)
@given(assignments)
def test_assignment_round_trip(assignment: MemberAssignment) -> None:
    assert MemberAssignment.decode(assignment.encode()) == assignment


@settings(max_examples=examples(100), deadline=None)
@given(
    st.dictionaries(topic_names, st.lists(int32s, max_size=5), max_size=4),
    st.none() | st.binary(max_size=20),
)
def test_assignment_byte_compatible_with_aiokafka(
    topics: dict[str, list[int]], user_data: bytes | None
) -> None:
    ours = MemberAssignment(topics, user_data, version=0).encode()
    theirs = ConsumerProtocolMemberAssignment(0, list(topics.items()), user_data).encode()
    assert ours == theirs
    decoded = ConsumerProtocolMemberAssignment.decode(ours)
    assert dict(decoded.assignment) == topics
    assert decoded.user_data == user_data
    assert MemberAssignment.decode(theirs) == MemberAssignment(topics, user_data, version=0)


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert MemberAssignment.decode(b"") == MemberAssignment({})


def test_assignment_later_version_is_read_with_known_layout() -> None:
    raw = i16(7) + topic_partitions({"t": [0]}) + blob(None) + b"future"
    assert MemberAssignment.decode(raw) == MemberAssignment({"t": [0]}, None, version=3)


def test_assignment_repeated_topic_entries_are_merged() -> None:
    raw = i16(0) + i32(2) + string("t") + i32(1) + i32(0) + string("t") + i32(1) + i32(5)
    assert MemberAssignment.decode(raw + blob(None)).topics == {"t": [0, 5]}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\x00", "version needs 2 bytes"),
        (i16(-5) + i32(0) + blob(None), "negative version"),
        (i16(0) + i32(1) + string("t"), "partitions length"),
        (i16(0) + i32(1) + string("t") + i32(-1) + blob(None), "invalid array length -1"),
        (i16(0) + i32(0), "user_data length"),
    ],
)
def test_malformed_assignment_raises_value_error(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match="malformed ConsumerProtocolAssignment") as info:
        MemberAssignment.decode(raw)
    assert message in str(info.value)
