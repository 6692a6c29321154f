"""A second protocol an RpcServer speaks on the same port (Kafka's binary protocol, for one):
same 4-byte size framing, told apart from kcore's msgpack envelope by the first frame."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from transport._server import Handler, Request

__all__ = ["FrameProtocol"]


class FrameProtocol(Protocol):
    """What `RpcServer(foreign_protocol=...)` needs of a second protocol. Its requests run
    through the same pipeline as msgpack ones (concurrency bound, queued-bytes bound,
    responses in arrival order); only decoding, dispatch and encoding are its own."""

    name: str
    handlers: Mapping[int, Handler]

    def claims(self, first_frame_body: bytes) -> bool:
        """True when a connection's first frame is this protocol's, not a msgpack envelope."""
        ...

    def parse_request(self, frame_body: bytes) -> tuple[int, int, int, str | None, object]:
        """`(api_key, api_version, correlation_id, client_id, body)`; raises
        `RemoteProtocolError` for a frame that cannot be answered (the connection closes)."""
        ...

    def encode_response(self, request: Request, body: object) -> bytes | None:
        """The whole response frame (size prefix included) for the handler's `body`; None
        when the request gets no response (Kafka's Produce with acks=0)."""
        ...

    def encode_error(self, request: Request, error_code: int, message: str) -> bytes | None:
        """The response frame when the handler raised `RpcError(error_code, message)`,
        failed (UNKNOWN_SERVER_ERROR), or there is no handler for the api key
        (UNSUPPORTED_VERSION, 35)."""
        ...
