"""Every error the transport raises is a `TransportError`."""

from __future__ import annotations


class TransportError(Exception):
    """Base of every transport error."""


class FrameTooLargeError(TransportError):
    """A frame is larger than the connection's `max_frame_bytes` (sent or announced)."""

    def __init__(self, size: int, limit: int, *, where: str = "frame") -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"{where} of {size} bytes exceeds max_frame_bytes={limit}")


class FrameDecodeError(TransportError):
    """A frame's body is not exactly one valid msgpack object."""


class ConnectionClosedError(TransportError):
    """The connection is gone: closed by either side, reset, or broken."""


class TruncatedFrameError(FrameDecodeError, ConnectionClosedError):
    """The peer closed the connection in the middle of a frame."""


class ConnectError(TransportError):
    """Could not open a connection (refused, unreachable, or timed out); nothing was sent."""


class RequestTimeoutError(TransportError):
    """A request got no response within its timeout; it may or may not have been applied."""


class RemoteProtocolError(TransportError):
    """The peer sent a well-formed frame that does not match the RPC envelope."""
