"""`kcore.protocol.kafka.data`: Kafka's data messages (no API key) through the same codec."""

from __future__ import annotations

import pytest

from kcore.protocol.kafka import KafkaCodecError, UnsupportedVersionError
from kcore.protocol.kafka.data import data_schema, decode_data, encode_data

SUBSCRIPTION = "consumer_protocol_subscription"


def test_schema_fields_follow_kafkas_json():
    assert [field.name for field in data_schema(SUBSCRIPTION, 0).fields] == ["topics", "user_data"]
    v3 = data_schema(SUBSCRIPTION, 3)
    assert [field.name for field in v3.fields] == [
        "topics",
        "user_data",
        "owned_partitions",
        "generation_id",
        "rack_id",
    ]
    assert v3.fields[3].default == -1
    assert v3.fields[4].nullable


def test_round_trip_and_defaults():
    value = {"topics": ["a"], "owned_partitions": [{"topic": "a", "partitions": [0]}]}
    encoded = encode_data(SUBSCRIPTION, 2, value)
    decoded, end = decode_data(SUBSCRIPTION, 2, encoded)
    assert end == len(encoded)
    assert decoded == {**value, "user_data": None, "generation_id": -1}


def test_trailing_bytes_only_when_allowed():
    encoded = encode_data("consumer_protocol_assignment", 0, {}) + b"extra"
    with pytest.raises(KafkaCodecError, match="5 trailing bytes"):
        decode_data("consumer_protocol_assignment", 0, encoded)
    value, end = decode_data("consumer_protocol_assignment", 0, encoded, allow_trailing=True)
    assert value == {"assigned_partitions": [], "user_data": None}
    assert end == len(encoded) - 5


def test_errors_name_message_version_and_field():
    with pytest.raises(KafkaCodecError, match=r"ConsumerProtocolSubscription v1: topics\[0\]"):
        encode_data(SUBSCRIPTION, 1, {"topics": [5]})
    with pytest.raises(KafkaCodecError, match="ConsumerProtocolSubscription v0: user_data"):
        decode_data(SUBSCRIPTION, 0, b"\x00\x00\x00\x00\x00")
    with pytest.raises(UnsupportedVersionError, match="version 9"):
        data_schema(SUBSCRIPTION, 9)
    with pytest.raises(UnsupportedVersionError):
        data_schema("no_such_message", 0)
