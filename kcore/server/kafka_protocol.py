"""Kafka's binary protocol on a broker's listener: the `transport.FrameProtocol` that tells a
Kafka client's connection from a kcore one by its first frame, decodes its requests with the
schema-driven codec (`kcore.protocol.kafka`), hands them to the Kafka API handlers
(`kcore.server.kafka_apis`), and encodes their answers at the version each request came in.

Both protocols share the port: a Kafka request header starts with a 16-bit api key (below
256, so its first byte is 0x00), a kcore request with a msgpack array marker (0x90-0x9f,
0xdc, 0xdd), so one byte decides for the connection's whole life.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping

import attrs

import transport
from kcore.protocol import kafka as codec
from kcore.server.kafka_versions import API_VERSIONS_KEY, supported_versions

logger = logging.getLogger("kcore.server.kafka_protocol")

UNSUPPORTED_VERSION = 35
_MIN_HEADER_BYTES = 8  # api key, api version, correlation id: the least a request carries
_CORRELATION_AND_ERROR = struct.Struct(">ih")
_SIZE = struct.Struct(">i")


@attrs.frozen
class UnsupportedRequest:
    """The body of a request at an api key or version kcore does not serve: its handler is
    never called, and it is answered with UNSUPPORTED_VERSION instead of a closed socket."""

    reason: str


class KafkaProtocol:
    """`transport.FrameProtocol` for Kafka's wire protocol over `handlers` (api key ->
    handler; a request's body is the codec's dict). A request kcore cannot read never
    reaches a handler: it is answered UNSUPPORTED_VERSION or INVALID_REQUEST here."""

    name = "kafka"

    def __init__(self, handlers: Mapping[int, transport.Handler]) -> None:
        self.handlers = {int(key): _guarded(handler) for key, handler in handlers.items()}

    def claims(self, first_frame_body: bytes) -> bool:
        return len(first_frame_body) >= _MIN_HEADER_BYTES and first_frame_body[0] == 0

    def parse_request(self, frame_body: bytes) -> tuple[int, int, int, str | None, object]:
        try:
            header = codec.decode_request_header(frame_body)
        except codec.KafkaCodecError as error:
            # Without a header there is no correlation id to answer with.
            raise transport.RemoteProtocolError(f"bad Kafka request header: {error}") from None
        versions = supported_versions().get(header.api_key)
        if versions is None or header.api_version not in versions:
            reason = (
                f"api key {header.api_key} is not served"
                if versions is None
                else f"api key {header.api_key} version {header.api_version} is not served "
                f"(versions {versions.start}-{versions.stop - 1} are)"
            )
            return (*_header_fields(header), UnsupportedRequest(reason))
        try:
            _, body = codec.decode_request(frame_body)
        except codec.KafkaCodecError as error:
            # The header was sound, so the client gets an answer it can match: the request
            # fails with INVALID_REQUEST (Kafka closes the connection here).
            return (*_header_fields(header), _Malformed(str(error)))
        return (*_header_fields(header), body)

    def encode_response(self, request: transport.Request, body: object) -> bytes | None:
        if body is None:
            return None  # Produce with acks=0: Kafka sends nothing back
        assert isinstance(body, dict)
        version = request.api_version
        if (
            request.api_key == API_VERSIONS_KEY
            and version not in supported_versions()[API_VERSIONS_KEY]
        ):
            version = 0  # KIP-511: an ApiVersions request the broker cannot read gets v0
        return codec.encode_response(request.api_key, version, request.correlation_id, body)

    def encode_error(self, request: transport.Request, error_code: int, message: str) -> bytes:
        body = request.body
        if isinstance(body, UnsupportedRequest) or error_code == UNSUPPORTED_VERSION:
            logger.info(
                "Answering UNSUPPORTED_VERSION to %s (client %r): %s",
                request.connection.peer_name,
                request.client_id,
                body.reason if isinstance(body, UnsupportedRequest) else message,
            )
            return unsupported_version_frame(request.api_key, request.correlation_id)
        versions = supported_versions().get(request.api_key)
        if versions is None or request.api_version not in versions:
            return unsupported_version_frame(request.api_key, request.correlation_id)
        return codec.encode_response(
            request.api_key,
            request.api_version,
            request.correlation_id,
            {"error_code": error_code, "error_message": message},
        )


@attrs.frozen
class _Malformed:
    reason: str


def unsupported_version_frame(api_key: int, correlation_id: int) -> bytes:
    """What a request kcore cannot read gets: response header v0 (the correlation id), then
    UNSUPPORTED_VERSION in the first field. For ApiVersions that is a whole v0 response
    (KIP-511) listing what the broker serves; for any other api the client cannot parse a
    body at a version it did not expect anyway, and reads the error code first."""
    if api_key == API_VERSIONS_KEY:
        from kcore.server.kafka_versions import api_versions_body

        body = api_versions_body(UNSUPPORTED_VERSION)
        return codec.encode_response(API_VERSIONS_KEY, 0, correlation_id, body)
    payload = _CORRELATION_AND_ERROR.pack(correlation_id, UNSUPPORTED_VERSION)
    return _SIZE.pack(len(payload)) + payload


def _guarded(handler: transport.Handler) -> transport.Handler:
    async def guarded(request: transport.Request) -> object:
        body = request.body
        if isinstance(body, UnsupportedRequest):
            raise transport.RpcError(UNSUPPORTED_VERSION, body.reason)
        if isinstance(body, _Malformed):
            logger.warning(
                "Malformed Kafka request (api key %d v%d) from %s: %s",
                request.api_key,
                request.api_version,
                request.connection.peer_name,
                body.reason,
            )
            raise transport.RpcError(transport.INVALID_REQUEST, body.reason)
        return await handler(request)

    return guarded


def _header_fields(header: codec.RequestHeader) -> tuple[int, int, int, str | None]:
    return header.api_key, header.api_version, header.correlation_id, header.client_id
