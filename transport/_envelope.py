"""The RPC envelope (sans-IO): what a request, a response and a server push look like on
the wire, and the checks a received envelope must pass.

request  `[api_key, api_version, correlation_id, client_id, body]`
response `[correlation_id, error_code, body]`
push     `[-1, 0, body]` (unsolicited, e.g. a watch event)
"""

from __future__ import annotations

import attrs

from transport._codec import DEFAULT_MAX_FRAME_BYTES, encode_frame
from transport._errors import RemoteProtocolError

__all__ = [
    "INVALID_REQUEST",
    "MAX_CORRELATION_ID",
    "NONE",
    "PUSH_CORRELATION_ID",
    "UNKNOWN_SERVER_ERROR",
    "Response",
    "RpcError",
    "encode_push",
    "encode_request",
    "encode_response",
    "parse_request",
    "parse_response",
]

# Kafka's error codes for what the envelope layer itself answers.
NONE = 0
UNKNOWN_SERVER_ERROR = -1
INVALID_REQUEST = 42

PUSH_CORRELATION_ID = -1
MAX_CORRELATION_ID = 2**31 - 1  # Kafka's int32


@attrs.frozen
class Response:
    error_code: int
    body: object


class RpcError(Exception):
    """Raised by a handler to answer with `error_code`; the body is `body`, or
    `{"error_message": message}` when only a message is given."""

    def __init__(self, error_code: int, message: str = "", body: object = None) -> None:
        if isinstance(error_code, bool) or not isinstance(error_code, int):
            raise TypeError(f"error_code must be an int, got {error_code!r}")
        super().__init__(message or f"error code {error_code}")
        self.error_code = error_code
        self.message = message
        if body is None and message:
            body = {"error_message": message}
        self.body = body


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: object,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> bytes:
    return encode_frame([api_key, api_version, correlation_id, client_id, body], max_frame_bytes)


def encode_response(
    correlation_id: int,
    error_code: int,
    body: object,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> bytes:
    return encode_frame([correlation_id, error_code, body], max_frame_bytes)


def encode_push(body: object, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    return encode_frame([PUSH_CORRELATION_ID, NONE, body], max_frame_bytes)


def parse_request(message: object) -> tuple[int, int, int, str | None, object]:
    """`(api_key, api_version, correlation_id, client_id, body)`, or `RemoteProtocolError`
    saying what is wrong with the envelope."""
    if type(message) is not list or len(message) != 5:
        raise RemoteProtocolError(
            f"malformed request envelope: expected a list of 5 items, got {_describe(message)}"
        )
    api_key, api_version, correlation_id, client_id, body = message
    if not _is_int(api_key):
        raise RemoteProtocolError(f"malformed request envelope: api_key {api_key!r} is not an int")
    if not _is_int(api_version) or api_version < 0:
        raise RemoteProtocolError(
            f"malformed request envelope: api_version {api_version!r} is not an int >= 0"
        )
    if not _is_int(correlation_id) or not 0 <= correlation_id <= MAX_CORRELATION_ID:
        raise RemoteProtocolError(
            f"malformed request envelope: correlation_id {correlation_id!r} is not an int32 >= 0"
        )
    if client_id is not None and not isinstance(client_id, str):
        raise RemoteProtocolError(
            f"malformed request envelope: client_id {client_id!r} is not a str"
        )
    return api_key, api_version, correlation_id, client_id, body


def parse_response(message: object) -> tuple[int, int, object]:
    """`(correlation_id, error_code, body)`, or `RemoteProtocolError`."""
    if type(message) is not list or len(message) != 3:
        raise RemoteProtocolError(
            f"malformed response envelope: expected a list of 3 items, got {_describe(message)}"
        )
    correlation_id, error_code, body = message
    if not _is_int(correlation_id) or not _is_int(error_code):
        raise RemoteProtocolError(
            f"malformed response envelope: correlation id {correlation_id!r} and error code "
            f"{error_code!r} must be ints"
        )
    return correlation_id, error_code, body


def _describe(message: object) -> str:
    if isinstance(message, list):
        return f"a list of {len(message)} items"
    text = repr(message)
    return f"{type(message).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
