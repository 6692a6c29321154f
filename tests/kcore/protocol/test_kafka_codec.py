"""The Kafka binary codec: hand-checked frames, error reports, and a round trip of every
request and response version kio has a schema for."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcore.protocol.kafka import (
    KafkaCodecError,
    RequestHeader,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    is_flexible,
    known_versions,
    message_schema,
)

from ._kafka_values import (
    EVERY_API_KEY,
    api_name,
    every_version_settings,
    frozen_to_plain,
    message_values,
)

API_VERSIONS, METADATA, PRODUCE, FETCH, HEARTBEAT = 18, 3, 0, 1, 12


def body_of(frame: bytes) -> bytes:
    """A frame without its size prefix, after checking the prefix is the size."""
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    return frame[4:]


def compact(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


def legacy(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


# ------------------------------------------------------------------------ golden frames

# ApiVersions v3 as librdkafka sends it first: request header v2 (client_id still an int16
# length string, then an empty tagged-field section), a body of two compact strings and an
# empty tagged-field section.
LIBRDKAFKA_API_VERSIONS = (
    b"\x00\x12"  # api_key 18
    b"\x00\x03"  # api_version 3
    b"\x00\x00\x00\x01"  # correlation_id 1
    + legacy("rdkafka")
    + b"\x00"  # header tagged fields
    + compact("librdkafka")
    + compact("2.16.1")
    + b"\x00"  # body tagged fields
)


def test_decodes_librdkafkas_api_versions_request():
    header, body = decode_request(LIBRDKAFKA_API_VERSIONS)
    assert header == RequestHeader(api_key=18, api_version=3, correlation_id=1, client_id="rdkafka")
    assert body == {"client_software_name": "librdkafka", "client_software_version": "2.16.1"}


def test_encodes_librdkafkas_api_versions_request_byte_for_byte():
    frame = encode_request(
        18,
        3,
        1,
        "rdkafka",
        {"client_software_name": "librdkafka", "client_software_version": "2.16.1"},
    )
    assert body_of(frame) == LIBRDKAFKA_API_VERSIONS


def test_api_versions_response_keeps_header_v0_and_writes_only_non_default_tags():
    """KIP-511: the ApiVersions response header has no tagged-field section even in
    flexible versions. Tagged fields holding their default are left out."""
    frame = encode_response(
        18,
        3,
        1,
        {
            "error_code": 0,
            "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
            "throttle_time_ms": 0,
            "finalized_features_epoch": 5,  # tag 1, default -1
            "supported_features": [],  # tag 0, default: empty
        },
    )
    assert body_of(frame) == (
        b"\x00\x00\x00\x01"  # correlation_id; no tagged-field byte after it (header v0)
        b"\x00\x00"  # error_code
        b"\x02"  # compact array: one element
        b"\x00\x12\x00\x00\x00\x04\x00"  # api_key, min, max, the element's tagged fields
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x01"  # one tagged field
        b"\x01\x08\x00\x00\x00\x00\x00\x00\x00\x05"  # tag 1, 8 bytes, int64 5
    )
    correlation_id, body = decode_response(18, 3, body_of(frame))
    assert correlation_id == 1
    assert body["finalized_features_epoch"] == 5
    assert body["supported_features"] == []
    assert body["finalized_features"] == []
    assert body["zk_migration_ready"] is False


def test_other_flexible_responses_have_header_v1():
    frame = encode_response(HEARTBEAT, 4, 9, {"throttle_time_ms": 0, "error_code": 27})
    assert body_of(frame) == (
        b"\x00\x00\x00\x09"  # correlation_id
        b"\x00"  # header v1: tagged fields
        b"\x00\x00\x00\x00"  # throttle_time_ms
        b"\x00\x1b"  # error_code 27 (REBALANCE_IN_PROGRESS)
        b"\x00"  # body tagged fields
    )
    assert decode_response(HEARTBEAT, 4, body_of(frame)) == (
        9,
        {"throttle_time_ms": 0, "error_code": 27},
    )


def test_metadata_v1_request_null_topics_means_all_topics():
    frame = b"\x00\x03\x00\x01\x00\x00\x00\x07" + legacy("cli") + b"\xff\xff\xff\xff"
    header, body = decode_request(frame)
    assert header == RequestHeader(3, 1, 7, "cli")
    assert body == {"topics": None}
    # ... and an empty array is no topics at all: the two must stay apart.
    assert body_of(encode_request(3, 1, 7, "cli", {"topics": None})) == frame
    empty = encode_request(3, 1, 7, "cli", {"topics": []})
    assert body_of(empty).endswith(b"\x00\x00\x00\x00")
    assert decode_request(body_of(empty))[1] == {"topics": []}


def test_null_client_id():
    frame = body_of(encode_request(METADATA, 1, 7, None, {"topics": []}))
    assert frame[8:10] == b"\xff\xff"
    assert decode_request_header(frame).client_id is None


def test_produce_request_with_records_from_any_buffer():
    records = bytes(range(256)) * 10
    bodies = [
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30_000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": data}]}],
        }
        for data in (records, bytearray(records), memoryview(records))
    ]
    frames = {encode_request(PRODUCE, 9, 3, "p", body) for body in bodies}
    assert len(frames) == 1
    (frame,) = frames
    _, body = decode_request(memoryview(body_of(frame)))
    assert body["topic_data"][0]["partition_data"][0] == {"index": 2, "records": records}
    assert type(body["topic_data"][0]["partition_data"][0]["records"]) is bytes


def test_timedelta_fields_keep_kafkas_ms_names():
    schema = message_schema(FETCH, 12, "request")
    names = {field.name for field in schema.body.fields}
    assert {"max_wait_ms", "session_epoch", "replica_id"} <= names
    response = message_schema(PRODUCE, 9, "response")
    assert [field.name for field in response.body.fields] == ["responses", "throttle_time_ms"]
    topic = response.body.fields[0].type.element
    partition = {field.name: field for field in topic.fields}["partition_responses"]
    assert "log_append_time_ms" in [field.name for field in partition.type.element.fields]


def test_a_key_the_version_lacks_is_ignored():
    """Callers build one dict for every version; a Produce v9 topic has no topic id."""
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "topic_id": uuid.uuid4(), "partition_data": [{"index": 0}]}],
    }
    _, decoded = decode_request(body_of(encode_request(PRODUCE, 9, 1, None, body)))
    assert decoded["topic_data"] == [
        {"name": "t", "partition_data": [{"index": 0, "records": None}]}
    ]
    _, decoded = decode_request(body_of(encode_request(PRODUCE, 13, 1, None, body)))
    assert decoded["topic_data"][0]["topic_id"] == body["topic_data"][0]["topic_id"]
    assert "name" not in decoded["topic_data"][0]


def test_unknown_tagged_fields_are_skipped():
    """A newer client's tags we do not know must not break decoding (KIP-482)."""
    known = body_of(encode_request(HEARTBEAT, 4, 5, "c", {"group_id": "g", "member_id": "m"}))
    assert known.endswith(b"\x00")
    unknown_tags = b"\x02" + b"\x07\x03abc" + b"\x09\x00"  # two tags we have no field for
    _, body = decode_request(known[:-1] + unknown_tags)
    assert body == {
        "group_id": "g",
        "generation_id": 0,
        "member_id": "m",
        "group_instance_id": None,
    }


def test_is_flexible():
    assert not is_flexible(PRODUCE, 8)
    assert is_flexible(PRODUCE, 9)
    assert not is_flexible(API_VERSIONS, 2)
    assert is_flexible(API_VERSIONS, 3)
    assert known_versions(PRODUCE) == range(3, 14)
    assert known_versions(9999) is None


# ------------------------------------------------------------------------------ errors


def test_unknown_api_key_reports_the_header():
    frame = b"\x27\x0f\x00\x00\x00\x00\x00\x2a" + legacy("x") + b"\x00\x00"  # api_key 9999
    assert decode_request_header(frame) == RequestHeader(9999, 0, 42, "x")
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame)
    assert caught.value.header == RequestHeader(9999, 0, 42, "x")
    assert "9999" in str(caught.value)


def test_unknown_version_reports_the_header():
    frame = b"\x00\x00\x00\x63\x00\x00\x00\x2a" + legacy("x")  # Produce v99
    with pytest.raises(UnsupportedVersionError) as caught:
        decode_request(frame)
    assert caught.value.header == RequestHeader(0, 99, 42, "x")
    assert isinstance(caught.value, KafkaCodecError)
    with pytest.raises(UnsupportedVersionError):
        encode_response(0, 99, 1, {})


def test_truncated_body_names_the_field():
    frame = body_of(encode_request(METADATA, 1, 7, "cli", {"topics": [{"name": "orders"}]}))
    for cut in range(len(frame) - 1, 12, -1):  # the header is 13 bytes
        with pytest.raises(KafkaCodecError) as caught:
            decode_request(frame[:cut])
        assert str(caught.value).startswith("MetadataRequest v1: topics")


def test_truncated_header():
    with pytest.raises(KafkaCodecError, match="request header"):
        decode_request(b"\x00\x03\x00")
    with pytest.raises(KafkaCodecError, match="client_id truncated"):
        decode_request(b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x09abc")


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_ignores_them():
    # librdkafka 2.16's Metadata v12 request for all topics, as it sends it: a 4-byte
    # placeholder where the compact topics array (null) goes, so 3 bytes follow the body.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    assert body["topics"] is None


def test_trailing_bytes_after_a_response_are_an_error():
    frame = body_of(encode_response(METADATA, 1, 7, {}))
    with pytest.raises(KafkaCodecError, match="1 trailing bytes"):
        decode_response(METADATA, 1, frame + b"\x00")


def test_absurd_array_length_is_an_error_not_an_allocation():
    frame = b"\x00\x03\x00\x01\x00\x00\x00\x07" + legacy("cli") + b"\x7f\xff\xff\xff"
    with pytest.raises(KafkaCodecError, match="array of 2147483647 elements"):
        decode_request(frame)


def test_invalid_utf8_is_an_error():
    frame = b"\x00\x03\x00\x01\x00\x00\x00\x07" + legacy("c")
    frame += b"\x00\x00\x00\x01" + b"\x00\x02\xff\xfe"
    with pytest.raises(KafkaCodecError, match=r"topics\[0\]\.name: invalid UTF-8"):
        decode_request(frame)


def test_null_in_a_non_nullable_field_on_the_wire():
    frame = b"\x00\x03\x00\x01\x00\x00\x00\x07" + legacy("c")
    frame += b"\x00\x00\x00\x01" + b"\xff\xff"  # topics[0].name is null
    with pytest.raises(KafkaCodecError, match=r"topics\[0\]\.name: null"):
        decode_request(frame)


PRODUCE_RESPONSE = {
    "responses": [
        {
            "name": "t",
            "partition_responses": [
                {"index": 0, "error_code": 0, "base_offset": 10, "record_errors": []}
            ],
        }
    ],
    "throttle_time_ms": 0,
}


def produce_response_with(**partition) -> dict:
    response = {**PRODUCE_RESPONSE["responses"][0]}
    response["partition_responses"] = [{**response["partition_responses"][0], **partition}]
    return {**PRODUCE_RESPONSE, "responses": [response]}


@pytest.mark.parametrize(
    ("partition", "message"),
    [
        ({"index": "0"}, "index: expected int, got str"),
        ({"index": None}, "index: None in a field that is not nullable"),
        ({"error_code": 40_000}, "error_code: 40000 is out of range for int16"),
        ({"base_offset": 1.5}, "base_offset: expected int, got float"),
        ({"record_errors": {}}, "record_errors: expected a list"),
        (
            {"record_errors": [{"batch_index": 1, "batch_index_error_message": 5}]},
            "record_errors[0].batch_index_error_message: expected str, got int",
        ),
    ],
)
def test_wrong_values_name_the_api_version_and_field(partition, message):
    with pytest.raises(KafkaCodecError) as caught:
        encode_response(PRODUCE, 9, 1, produce_response_with(**partition))
    assert str(caught.value).startswith("ProduceResponse v9: responses[0].partition_responses[0].")
    assert message in str(caught.value)


def test_wrong_values_in_other_places():
    with pytest.raises(KafkaCodecError, match=r"ProduceResponse v9: responses\[0\]: expected"):
        encode_response(PRODUCE, 9, 1, {"responses": ["t"]})
    with pytest.raises(KafkaCodecError, match="name: None in a field that is not nullable"):
        encode_request(METADATA, 1, 1, None, {"topics": [{"name": None}]})
    with pytest.raises(KafkaCodecError, match="records: expected bytes"):
        encode_request(
            PRODUCE,
            3,
            1,
            None,
            {"topic_data": [{"name": "t", "partition_data": [{"records": "text"}]}]},
        )
    with pytest.raises(KafkaCodecError, match="ApiVersionsResponse v3: zk_migration_ready"):
        encode_response(API_VERSIONS, 3, 1, {"zk_migration_ready": 1})
    with pytest.raises(KafkaCodecError, match="too long for a string"):
        encode_request(METADATA, 1, 1, None, {"topics": [{"name": "x" * 40_000}]})
    with pytest.raises(KafkaCodecError, match="correlation_id"):
        encode_response(HEARTBEAT, 4, 2**31, {})
    with pytest.raises(KafkaCodecError, match=r"expected uuid\.UUID"):
        encode_request(METADATA, 12, 1, None, {"topics": [{"topic_id": str(uuid.uuid4())}]})


# --------------------------------------------------------------- every schema, every version


def test_kio_knows_the_apis_a_kafka_client_needs():
    for api_key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 36):
        assert known_versions(api_key) is not None, api_key


@pytest.mark.parametrize("api_key", EVERY_API_KEY, ids=api_name)
def test_an_empty_body_encodes_every_default(api_key):
    """A dict with no keys encodes each field's default, and decodes to all of them."""
    for version in known_versions(api_key):
        for kind in ("request", "response"):
            schema = message_schema(api_key, version, kind)
            defaults = {field.name: frozen_to_plain(field.default) for field in schema.body.fields}
            if kind == "request":
                _, body = decode_request(body_of(encode_request(api_key, version, 1, "c", {})))
            else:
                _, body = decode_response(
                    api_key, version, body_of(encode_response(api_key, version, 1, {}))
                )
            assert body == defaults, (schema.label, body)


@pytest.mark.parametrize("api_key", EVERY_API_KEY, ids=api_name)
@every_version_settings(6)
@given(data=st.data())
def test_every_version_round_trips(api_key, data):
    for version in known_versions(api_key):
        request = data.draw(message_values(api_key, version, "request", False), label="request")
        frame = body_of(encode_request(api_key, version, 0x7FFF_FFFF, "client-1", request))
        header, decoded = decode_request(frame)
        assert header == RequestHeader(api_key, version, 0x7FFF_FFFF, "client-1")
        assert decoded == request, f"request v{version}"

        response = data.draw(message_values(api_key, version, "response", False), label="response")
        frame = body_of(encode_response(api_key, version, -5, response))
        assert decode_response(api_key, version, frame) == (-5, response), f"v{version}"
