"""The consumer protocol's subscription and assignment bytes, with cases ported from Kafka
3.5's ConsumerProtocolTest and golden bytes worked out by hand from
ConsumerProtocolSubscription.json / ConsumerProtocolAssignment.json."""

from __future__ import annotations

import struct

import pytest

from kcore.client.assignors import DEFAULT_GENERATION, Assignment, Subscription
from kcore.client.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kcore.common import TopicPartition
from kcore.protocol.kafka import KafkaCodecError

TP1 = TopicPartition("topic1", 10)
TP2 = TopicPartition("topic2", 11)


def string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


# -------------------------------------------------------------------- golden bytes


def test_subscription_v3_golden_bytes():
    subscription = Subscription(
        ["b", "a"],  # written sorted
        b"\x01\x02",
        [TopicPartition("t", 2), TopicPartition("t", 1)],  # written sorted
        generation_id=7,
        rack_id="r1",
    )
    expected = (
        b"\x00\x03"  # version
        + int32(2)
        + string("a")
        + string("b")  # topics
        + int32(2)
        + b"\x01\x02"  # user_data
        + int32(1)
        + string("t")
        + int32(2)
        + int32(1)
        + int32(2)  # owned_partitions
        + int32(7)  # generation_id
        + string("r1")  # rack_id
    )
    assert encode_subscription(subscription) == expected
    assert decode_subscription(expected) == Subscription(
        ["a", "b"],
        b"\x01\x02",
        [TopicPartition("t", 1), TopicPartition("t", 2)],
        generation_id=7,
        rack_id="r1",
    )


def test_subscription_v0_golden_bytes_with_null_user_data():
    subscription = Subscription(["foo"], None, [TP1], generation_id=3, rack_id="r")
    expected = b"\x00\x00" + int32(1) + string("foo") + b"\xff\xff\xff\xff"
    assert encode_subscription(subscription, version=0) == expected
    # Fields v0 lacks come back as their defaults.
    assert decode_subscription(expected) == Subscription(["foo"])


def test_subscription_v2_without_generation_and_v3_null_rack():
    encoded = encode_subscription(Subscription(["t"]), version=3)
    assert encoded.endswith(int32(-1) + b"\xff\xff")  # generation -1, rack_id null
    assert encode_subscription(Subscription(["t"]), version=2).endswith(int32(0) + int32(-1))


def test_assignment_golden_bytes():
    assignment = Assignment(
        [TopicPartition("y", 3), TopicPartition("x", 0), TopicPartition("y", 1)], b""
    )
    expected = (
        b"\x00\x03"
        + int32(2)
        + string("y")
        + int32(2)
        + int32(3)
        + int32(1)  # first topic first, partition order kept
        + string("x")
        + int32(1)
        + int32(0)
        + int32(0)  # empty (not null) user_data
    )
    assert encode_assignment(assignment) == expected
    assert decode_assignment(expected) == Assignment(
        [TopicPartition("y", 3), TopicPartition("y", 1), TopicPartition("x", 0)], b""
    )


# ----------------------------------------------------- ported from ConsumerProtocolTest


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_serialize_deserialize_subscription_all_versions(version):
    subscription = Subscription(
        ["foo", "bar"], b"hello", [TP1, TP2], generation_id=1, rack_id="rack-a"
    )
    parsed = decode_subscription(encode_subscription(subscription, version))
    assert set(parsed.topics) == {"foo", "bar"}
    assert parsed.user_data == b"hello"
    assert set(parsed.owned_partitions) == (set() if version < 1 else {TP1, TP2})
    assert parsed.generation_id == (DEFAULT_GENERATION if version < 2 else 1)
    assert parsed.rack_id == (None if version < 3 else "rack-a")


def test_serialize_deserialize_null_subscription_user_data_and_empty_rack():
    parsed = decode_subscription(encode_subscription(Subscription(["foo"], None, rack_id="")))
    assert parsed.user_data is None
    assert parsed.rack_id is None  # Kafka reads an empty rack id as absent


def test_serialize_subscription_orders_topics_and_owned_partitions():
    subscription = Subscription(
        ["topic2", "topic1"],
        owned_partitions=[
            TopicPartition("topic2", 1),
            TopicPartition("topic1", 5),
            TopicPartition("topic2", 0),
        ],
    )
    parsed = decode_subscription(encode_subscription(subscription))
    assert parsed.topics == ("topic1", "topic2")
    assert parsed.owned_partitions == (
        TopicPartition("topic1", 5),
        TopicPartition("topic2", 0),
        TopicPartition("topic2", 1),
    )


def test_deserialize_new_subscription_read_as_old_version():
    # deserializeNewSubscriptionWithOldVersion: a v3 body under a v0 header reads as v0.
    body = encode_subscription(Subscription(["foo", "bar"], None, [TP2], 5, "r"))[2:]
    parsed = decode_subscription(b"\x00\x00" + body)
    assert set(parsed.topics) == {"foo", "bar"}
    assert parsed.owned_partitions == ()
    assert parsed.generation is None
    assert parsed.rack_id is None


def test_deserialize_future_subscription_version():
    # Version 100 adds a string field after rack_id: we read what v3 knows.
    data = (
        struct.pack(">h", 100)
        + int32(1)
        + string("topic")
        + int32(0)  # empty user_data
        + int32(1)
        + string("topic2")
        + int32(1)
        + int32(11)
        + int32(1)  # generation_id
        + string("rack-a")
        + string("bar")  # unknown to v3
    )
    parsed = decode_subscription(data)
    assert parsed == Subscription(["topic"], b"", [TP2], generation_id=1, rack_id="rack-a")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("user_data", [b"hello", b"", None])
def test_serialize_deserialize_assignment_all_versions(version, user_data):
    assignment = Assignment([TP1, TP2], user_data)
    assert decode_assignment(encode_assignment(assignment, version)) == assignment


def test_deserialize_future_assignment_version():
    data = (
        struct.pack(">h", 100)
        + int32(1)
        + string("topic1")
        + int32(1)
        + int32(10)
        + int32(0)
        + string("bar")
    )
    assert decode_assignment(data) == Assignment([TP1], b"")


# -------------------------------------------------------------- malformed bytes


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short for the 2-byte version"),
        (b"\x00", "too short for the 2-byte version"),
        (b"\xff\xff" + int32(0) + int32(-1), "unsupported version -1"),
        (b"\x00\x00", "topics: truncated"),
        (b"\x00\x00" + int32(1000) + b"ab", "topics: array of 1000 elements"),
        (b"\x00\x00" + int32(1) + struct.pack(">h", 9) + b"abc", r"topics\[0\]: truncated"),
        (b"\x00\x00" + int32(1) + string("a") + int32(5) + b"x", "user_data: truncated"),
        (b"\x00\x00" + int32(-1) + int32(-1), "topics: null in an array"),
        (b"\x00\x00" + int32(1) + b"\x00\x02\xff\xfe" + int32(-1), r"topics\[0\]: invalid UTF-8"),
        (
            b"\x00\x01" + int32(0) + int32(-1) + int32(1) + string("t") + int32(3) + int32(1),
            r"owned_partitions\[0\].partitions",
        ),
    ],
)
def test_malformed_subscription_names_what_is_wrong(data, message):
    with pytest.raises(ConsumerProtocolError, match=message) as error:
        decode_subscription(data)
    assert isinstance(error.value, KafkaCodecError)


def test_malformed_assignment_names_what_is_wrong():
    with pytest.raises(ConsumerProtocolError, match=r"assigned_partitions\[0\].topic"):
        decode_assignment(b"\x00\x00" + int32(1) + struct.pack(">h", 5) + b"ab")
    with pytest.raises(ConsumerProtocolError, match="user_data: truncated"):
        decode_assignment(b"\x00\x00" + int32(0))


def test_every_truncation_of_a_valid_message_is_a_clear_error():
    data = encode_subscription(Subscription(["a", "bb"], b"u", [TP1, TP2], 4, "rack"))
    for end in range(len(data)):
        with pytest.raises(ConsumerProtocolError):
            decode_subscription(data[:end])
    data = encode_assignment(Assignment([TP1, TP2], b"xyz"))
    for end in range(len(data)):
        with pytest.raises(ConsumerProtocolError):
            decode_assignment(data[:end])


def test_encoding_rejects_unknown_versions_and_bad_values():
    with pytest.raises(ConsumerProtocolError, match="version 4"):
        encode_subscription(Subscription(["t"]), version=4)
    with pytest.raises(ConsumerProtocolError, match="version -1"):
        encode_assignment(Assignment([]), version=-1)
    with pytest.raises(ConsumerProtocolError, match="partitions"):
        encode_assignment(Assignment([TopicPartition("t", 2**31)]))
