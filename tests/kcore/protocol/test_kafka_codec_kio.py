"""Cross-check against kio's own serializer (an independent implementation, tested by its
authors against Kafka's Java code): for every API and version, kio parses what we write,
we parse what kio writes, and the bytes are the same."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from kcore.protocol.kafka import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    known_versions,
    message_schema,
)

from ._kafka_values import (
    EVERY_API_KEY,
    api_name,
    every_version_settings,
    kio_class_of,
    kio_to_plain,
    message_values,
    plain_to_kio,
)


def kio_bytes(*entities) -> bytes:
    buffer = io.BytesIO()
    for entity in entities:
        entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def check_request(api_key: int, version: int, value: dict) -> None:
    schema = message_schema(api_key, version, "request")
    kio_class = kio_class_of(api_key, version, "request")
    header_class = KioRequestHeaderV2 if schema.flexible else KioRequestHeaderV1
    assert kio_class.__header_schema__ is header_class

    ours = encode_request(api_key, version, 12345, "client-1", value)[4:]
    header, used = entity_reader(header_class)(ours, 0)
    assert (header.request_api_key, header.request_api_version) == (api_key, version)
    assert (header.correlation_id, header.client_id) == (12345, "client-1")
    entity, size = entity_reader(kio_class)(ours, used)
    assert used + size == len(ours), f"{schema.label}: kio read fewer bytes than we wrote"
    assert kio_to_plain(entity, schema.body) == value, f"{schema.label}: kio reads something else"

    header = header_class(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=12345,
        client_id="client-1",
    )
    theirs = kio_bytes(header, plain_to_kio(value, schema.body, kio_class))
    assert decode_request(theirs)[1] == value, (
        f"{schema.label}: we read kio's bytes as something else"
    )
    assert theirs == ours, f"{schema.label}: kio writes other bytes"


def check_response(api_key: int, version: int, value: dict) -> None:
    schema = message_schema(api_key, version, "response")
    kio_class = kio_class_of(api_key, version, "response")
    # KIP-511 as kio has it: ApiVersions responses use header v0 even when flexible.
    header_class = kio_class.__header_schema__
    assert header_class in (KioResponseHeaderV0, KioResponseHeaderV1)

    ours = encode_response(api_key, version, -7, value)[4:]
    header, used = entity_reader(header_class)(ours, 0)
    assert header.correlation_id == -7
    entity, size = entity_reader(kio_class)(ours, used)
    assert used + size == len(ours), f"{schema.label}: kio read fewer bytes than we wrote"
    assert kio_to_plain(entity, schema.body) == value, f"{schema.label}: kio reads something else"

    theirs = kio_bytes(header_class(correlation_id=-7), plain_to_kio(value, schema.body, kio_class))
    assert decode_response(api_key, version, theirs) == (-7, value), schema.label
    assert theirs == ours, f"{schema.label}: kio writes other bytes"


@pytest.mark.parametrize("api_key", EVERY_API_KEY, ids=api_name)
@every_version_settings(4)
@given(data=st.data())
def test_kio_and_we_agree_on_every_version(api_key, data):
    for version in known_versions(api_key):
        request = data.draw(message_values(api_key, version, "request", True), label="request")
        check_request(api_key, version, request)
        response = data.draw(message_values(api_key, version, "response", True), label="response")
        check_response(api_key, version, response)
