"""Kafka's binary protocol on a broker's listener: the `transport.FrameProtocol` that tells a
Kafka client's connection from a kcore one by its first frame, decodes its requests with the
schema-driven codec (`kcore.protocol.kafka`), hands them to the Kafka API handlers
(`kcore.server.kafka_apis`), and encodes their answers at the version each request came in.

Both protocols share the port: a Kafka request header starts with a 16-bit api key (below
256, so its first byte is 0x00), a kcore request with a msgpack array marker (0x90-0x9f,
0xdc, 0xdd), so one byte decides for the connection's whole life.

One exchange is not made of requests: after a SaslHandshake v0 (Kafka's legacy SASL, before
SaslAuthenticate), the SASL tokens go both ways as bare size-prefixed frames, without a
header. The reader cannot tell such a frame from a request (it parses frames before the
handlers run, and knows nothing of the connection), so a request's body is decoded only when
its handler is called: a connection whose context says it reads raw frames
(`READS_RAW_FRAMES`, set by the handshake's handler) has each frame handed to SaslAuthenticate's
handler as a `RawFrame`, whatever its first bytes look like, and a `RawAnswer` goes back bare.
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
SASL_AUTHENTICATE_KEY = 36
# connection.context key: set while the connection's frames are SASL tokens, not requests.
READS_RAW_FRAMES = "kafka_reads_raw_frames"
_UNREADABLE_KEY = -1  # the api key given to a frame without a readable request header
_MIN_HEADER_BYTES = 8  # api key, api version, correlation id: the least a request carries
_CORRELATION_AND_ERROR = struct.Struct(">ih")
_SIZE = struct.Struct(">i")


@attrs.frozen
class UnsupportedRequest:
    """The body of a request at an api key or version kcore does not serve: its handler is
    never called, and it is answered with UNSUPPORTED_VERSION instead of a closed socket."""

    reason: str
    frame: bytes = attrs.field(default=b"", repr=False, eq=False)


@attrs.frozen
class RawFrame:
    """A frame as it came, without a request header: the body SaslAuthenticate's handler is
    given for each SASL token a connection sends after a SaslHandshake v0."""

    data: bytes = attrs.field(repr=False)


@attrs.frozen
class RawAnswer:
    """A handler's answer to a `RawFrame`: sent as a bare size-prefixed frame."""

    data: bytes = attrs.field(repr=False)


class KafkaProtocol:
    """`transport.FrameProtocol` for Kafka's wire protocol over `handlers` (api key ->
    handler; a request's body is the codec's dict). A request kcore cannot read never
    reaches a handler: it is answered UNSUPPORTED_VERSION or INVALID_REQUEST here."""

    name = "kafka"

    def __init__(self, handlers: Mapping[int, transport.Handler]) -> None:
        # Where a connection's raw frames (SASL v0 tokens) go, when SASL is served at all.
        self._raw_frames = handlers.get(SASL_AUTHENTICATE_KEY)
        self.handlers = _HandlerTable(
            {int(key): self._guarded(handler) for key, handler in handlers.items()},
            self._guarded(None),
        )

    def claims(self, first_frame_body: bytes) -> bool:
        return len(first_frame_body) >= _MIN_HEADER_BYTES and first_frame_body[0] == 0

    def parse_request(self, frame_body: bytes) -> tuple[int, int, int, str | None, object]:
        """The header's fields, and the frame to decode once the handler is called."""
        try:
            header = codec.decode_request_header(frame_body)
        except codec.KafkaCodecError as error:
            if self._raw_frames is None:
                # Without a header there is no correlation id to answer with.
                raise transport.RemoteProtocolError(f"bad Kafka request header: {error}") from None
            # A SASL v0 token, if the connection expects one; else it is closed then.
            return _UNREADABLE_KEY, 0, -1, None, _Unreadable(frame_body, str(error))
        versions = supported_versions().get(header.api_key)
        if versions is None or header.api_version not in versions:
            reason = (
                f"api key {header.api_key} is not served"
                if versions is None
                else f"api key {header.api_key} version {header.api_version} is not served "
                f"(versions {versions.start}-{versions.stop - 1} are)"
            )
            return (*_header_fields(header), UnsupportedRequest(reason, frame_body))
        return (*_header_fields(header), _Undecoded(frame_body))

    def _guarded(self, handler: transport.Handler | None) -> transport.Handler:
        """`handler` behind the checks every request passes first: a connection reading raw
        frames has this one taken as a SASL token; a request kcore cannot serve is answered
        UNSUPPORTED_VERSION; the body is decoded, INVALID_REQUEST if it cannot be. None:
        the handler of an api key nobody serves (and of a frame without a header)."""

        async def guarded(request: transport.Request) -> object:
            body = request.body
            if self._raw_frames is not None and request.connection.context.get(READS_RAW_FRAMES):
                return await self._raw_frames(_as_raw_frame(request))
            if isinstance(body, _Undecoded):
                try:
                    _, decoded = codec.decode_request(body.frame)
                except codec.KafkaCodecError as error:
                    # The header was sound, so the client gets an answer it can match: the
                    # request fails with INVALID_REQUEST (Kafka closes the connection here).
                    logger.warning(
                        "Malformed Kafka request (api key %d v%d) from %s: %s",
                        request.api_key, request.api_version, request.connection.peer_name,
                        error,
                    )  # fmt: skip
                    raise transport.RpcError(transport.INVALID_REQUEST, str(error)) from None
                request = transport.Request(
                    request.api_key, request.api_version, request.correlation_id,
                    request.client_id, decoded, request.connection, request.timing,
                )  # fmt: skip
            elif isinstance(body, _Unreadable):
                logger.warning(
                    "Closing the connection from %s: bad Kafka request header: %s",
                    request.connection.peer_name, body.reason,
                )  # fmt: skip
                request.connection.close()
                return None  # no header, so no correlation id to answer with
            elif isinstance(body, UnsupportedRequest):
                raise transport.RpcError(UNSUPPORTED_VERSION, body.reason)
            if handler is None:
                reason = f"api key {request.api_key} is not served"
                raise transport.RpcError(UNSUPPORTED_VERSION, reason)
            return await handler(request)

        return guarded

    def encode_response(self, request: transport.Request, body: object) -> bytes | None:
        if body is None:
            return None  # Produce with acks=0: Kafka sends nothing back
        if isinstance(body, RawAnswer):
            return _SIZE.pack(len(body.data)) + body.data
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
        if isinstance(body, RawFrame):
            # A SASL exchange without Kafka's framing has no error answer (Kafka closes).
            logger.warning(
                "Closing the connection from %s: its SASL token failed (error %d): %s",
                request.connection.peer_name, error_code, message,
            )  # fmt: skip
            request.connection.close()
            return b""
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


class _HandlerTable(dict):
    """api key -> handler, with one for every api key nobody serves (the transport asks
    `get`): a SASL v0 token can read as any api key, and must reach the connection's SASL
    state all the same."""

    def __init__(self, handlers: Mapping[int, transport.Handler], fallback: transport.Handler):
        super().__init__(handlers)
        self.fallback = fallback

    def get(self, api_key: int, default: object = None) -> transport.Handler:  # type: ignore[override]
        return super().get(api_key, self.fallback)


@attrs.frozen
class _Undecoded:
    """A served request's body, decoded when its handler is called."""

    frame: bytes = attrs.field(repr=False)


@attrs.frozen
class _Unreadable:
    """A frame without a readable request header."""

    frame: bytes = attrs.field(repr=False)
    reason: str


def _as_raw_frame(request: transport.Request) -> transport.Request:
    """The frame of `request` as a SASL token for SaslAuthenticate's handler."""
    body = request.body
    frame = body.frame if isinstance(body, _Undecoded | _Unreadable | UnsupportedRequest) else b""
    return transport.Request(
        SASL_AUTHENTICATE_KEY, 0, request.correlation_id, request.client_id, RawFrame(frame),
        request.connection, request.timing,
    )  # fmt: skip


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


def _header_fields(header: codec.RequestHeader) -> tuple[int, int, int, str | None]:
    return header.api_key, header.api_version, header.correlation_id, header.client_id
