"""`__consumer_offsets` keys and values: golden bytes worked out by hand from Kafka 3.5's
OffsetCommitKey / OffsetCommitValue / GroupMetadataKey / GroupMetadataValue JSON schemas,
the versions GroupMetadataManager writes, and round trips through every version."""

from __future__ import annotations

import struct

import pytest

from kcore.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitValue,
    OffsetKey,
    RecordError,
    UnknownKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    offset_value_version,
)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def string(text: str) -> bytes:
    return i16(len(text)) + text.encode()


def data(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


NULL_STRING = b"\xff\xff"

MEMBER = MemberMetadataValue(
    member_id="m1",
    group_instance_id=None,
    client_id="c",
    client_host="/h",
    rebalance_timeout=300000,
    session_timeout=45000,
    subscription=b"\x00\x01",
    assignment=b"",
)
GROUP = GroupMetadataValue(
    protocol_type="consumer",
    generation=7,
    protocol="range",
    leader="m1",
    current_state_timestamp=1_700_000_000_000,
    members=(MEMBER,),
)


# ------------------------------------------------------------------------- golden bytes


def test_offset_key_golden_bytes():
    key = OffsetKey("g", "t", 3)
    expected = i16(1) + string("g") + string("t") + i32(3)  # Kafka writes key version 1
    assert encode_key(key) == expected
    assert decode_key(expected) == key


def test_group_key_golden_bytes():
    expected = i16(2) + string("grp")
    assert encode_key(GroupMetadataKey("grp")) == expected
    assert decode_key(expected) == GroupMetadataKey("grp")


def test_offset_value_v3_golden_bytes():
    value = OffsetCommitValue(offset=100, leader_epoch=5, metadata="m", commit_timestamp=1000)
    expected = i16(3) + i64(100) + i32(5) + string("m") + i64(1000)
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == value


def test_offset_value_with_expire_timestamp_is_v1():
    value = OffsetCommitValue(
        offset=100, leader_epoch=5, metadata="", commit_timestamp=1000, expire_timestamp=2000
    )
    assert offset_value_version(value) == 1
    expected = i16(1) + i64(100) + string("") + i64(1000) + i64(2000)
    assert encode_offset_value(value) == expected
    # v1 has no leader epoch: it reads back as -1.
    assert decode_offset_value(expected) == OffsetCommitValue(100, -1, "", 1000, 2000)


def test_group_value_v3_golden_bytes():
    expected = (
        i16(3)
        + string("consumer")
        + i32(7)
        + string("range")
        + string("m1")
        + i64(1_700_000_000_000)
        + i32(1)
        + string("m1")
        + NULL_STRING  # group_instance_id
        + string("c")
        + string("/h")
        + i32(300000)
        + i32(45000)
        + data(b"\x00\x01")
        + data(b"")
    )
    assert encode_group_value(GROUP) == expected
    assert decode_group_value(expected) == GROUP


def test_offset_value_v4_flexible_golden_bytes():
    # Kafka 3.5 reads v4 (KIP-915) without writing it: compact string, tagged fields.
    encoded = i16(4) + i64(9) + i32(2) + b"\x03ab" + i64(77) + b"\x00"
    assert decode_offset_value(encoded) == OffsetCommitValue(9, 2, "ab", 77)
    assert encode_offset_value(OffsetCommitValue(9, 2, "ab", 77), version=4) == encoded
    # An unknown tagged field from a later writer is skipped.
    with_tag = i16(4) + i64(9) + i32(2) + b"\x03ab" + i64(77) + b"\x01\x05\x02zz"
    assert decode_offset_value(with_tag) == OffsetCommitValue(9, 2, "ab", 77)


def test_group_value_v4_flexible_golden_bytes():
    member = (
        b"\x03m1"  # member_id
        + b"\x00"  # null group_instance_id
        + b"\x02c"
        + b"\x03/h"
        + i32(300000)
        + i32(45000)
        + b"\x03\x00\x01"  # subscription, compact bytes
        + b"\x01"  # empty assignment
        + b"\x00"  # member's tagged fields
    )
    encoded = (
        i16(4)
        + b"\x09consumer"
        + i32(7)
        + b"\x06range"
        + b"\x03m1"
        + i64(1_700_000_000_000)
        + b"\x02"  # one member, compact array
        + member
        + b"\x00"
    )
    assert decode_group_value(encoded) == GROUP
    assert encode_group_value(GROUP, version=4) == encoded


# -------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("version", [0, 1])
def test_offset_key_round_trip(version):
    key = OffsetKey("group-é", "topic.x", 2**31 - 1, version)
    assert decode_key(encode_key(key)) == key


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_value_round_trip(version):
    value = OffsetCommitValue(
        offset=2**40,
        leader_epoch=3 if version >= 3 else -1,
        metadata="meta",
        commit_timestamp=123,
        expire_timestamp=456 if version == 1 else -1,
    )
    assert decode_offset_value(encode_offset_value(value, version)) == value


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_round_trip(version):
    static = MemberMetadataValue("m2", "instance-2", "c2", "/h2", 60000, 10000, b"s", b"a")
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol=None,
        leader=None,
        current_state_timestamp=99 if version >= 2 else -1,
        members=(
            MEMBER
            if version >= 1
            else MemberMetadataValue("m1", None, "c", "/h", 45000, 45000, b"", b""),
            static
            if version >= 3
            else MemberMetadataValue(
                "m2", None, "c2", "/h2", 60000 if version >= 1 else 10000, 10000, b"s", b"a"
            ),
        ),
    )
    assert decode_group_value(encode_group_value(value, version)) == value


def test_v0_group_member_rebalance_timeout_is_its_session_timeout():
    encoded = encode_group_value(GROUP, version=0)
    (member,) = decode_group_value(encoded).members
    assert member.rebalance_timeout == member.session_timeout == 45000


def test_empty_group_and_tombstones():
    empty = GroupMetadataValue("consumer", 1, None, None, 5, ())
    assert decode_group_value(encode_group_value(empty)) == empty
    assert encode_offset_value(None) is None and decode_offset_value(None) is None
    assert encode_group_value(None) is None and decode_group_value(None) is None


# ----------------------------------------------------------------------- bad records


def test_unknown_key_version_is_an_unknown_key():
    assert decode_key(i16(3) + b"whatever") == UnknownKey(3)


@pytest.mark.parametrize(
    ("decode", "encoded", "message"),
    [
        (decode_key, b"\x00", "too short for the 2-byte version"),
        (decode_key, i16(1) + string("g") + string("t"), r"offset commit key v1: .*partition"),
        (decode_key, i16(2) + string("g") + b"x", "1 trailing bytes"),
        (decode_offset_value, i16(5) + i64(0), "unknown offset commit value version 5"),
        (decode_offset_value, i16(3) + i64(1) + i32(0), "metadata: truncated"),
        (decode_group_value, i16(-1), "unknown group metadata value version -1"),
        (
            decode_group_value,
            i16(3)
            + string("consumer")
            + i32(1)
            + NULL_STRING
            + NULL_STRING
            + i64(0)
            + i32(1)
            + string("m"),
            r"members\[0\]",
        ),
        (
            decode_group_value,
            i16(0) + string("consumer") + i32(1) + NULL_STRING + NULL_STRING + i32(-1),
            "members: null",
        ),
    ],
)
def test_malformed_records_name_what_is_wrong(decode, encoded, message):
    with pytest.raises(RecordError, match=message):
        decode(encoded)


def test_every_truncation_of_a_group_value_is_an_error():
    encoded = encode_group_value(GROUP)
    for end in range(len(encoded)):
        with pytest.raises(RecordError):
            decode_group_value(encoded[:end])


def test_encoding_rejects_bad_versions_and_values():
    with pytest.raises(RecordError, match="versions 0-1"):
        encode_key(OffsetKey("g", "t", 0, version=2))
    with pytest.raises(RecordError, match="version 2 only"):
        encode_key(GroupMetadataKey("g", version=1))
    with pytest.raises(RecordError, match="partition"):
        encode_key(OffsetKey("g", "t", 2**31))
    with pytest.raises(RecordError, match="unknown group metadata value version 9"):
        encode_group_value(GROUP, version=9)
