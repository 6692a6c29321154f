"""Whole messages over a byte stream: the one connection class both networks hand out."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import trio

from transport._codec import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame
from transport._errors import (
    ConnectionClosedError,
    FrameDecodeError,
    FrameTooLargeError,
    TransportError,
    TruncatedFrameError,
)

__all__ = [
    "JOIN_LIMIT_BYTES",
    "RECEIVE_BYTES",
    "Address",
    "ByteStream",
    "MessageConnection",
    "run_handler",
]

log = logging.getLogger(__name__)

RECEIVE_BYTES = 64 * 1024
# Frames are joined into write buffers of about this size. Larger buffers cost more than
# they save: glibc serves them from fresh pages (mmap / heap growth and trim), and the page
# faults halve the throughput of 64 KiB frames when sixteen are joined per write.
JOIN_LIMIT_BYTES = 64 * 1024
Address = tuple[str, int]

# What a dead trio stream raises; all of it means "this connection is gone".
_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class ByteStream(Protocol):
    """The part of `trio.abc.Stream` a connection uses (trio's SocketStream, the sim's
    in-memory stream)."""

    async def send_all(self, data: bytes) -> None: ...

    async def receive_some(self, max_bytes: int) -> bytes: ...

    async def aclose(self) -> None: ...


class MessageConnection:
    """Sends and receives whole messages (anything msgpack packs) as frames.

    One task may send while another receives; concurrent senders are serialised. Every
    failure of the underlying stream surfaces as `ConnectionClosedError`; a bad incoming
    frame raises `FrameTooLargeError` / `FrameDecodeError` once the messages before it have
    been received, and the connection is unusable for receiving after that.
    """

    def __init__(
        self,
        stream: ByteStream,
        *,
        local_address: Address,
        peer_address: Address,
        peer_name: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self._stream = stream
        self.local_address = local_address
        self.peer_address = peer_address
        self.peer_name = peer_name
        self._decoder = FrameDecoder(max_frame_bytes)
        self._inbox: deque[object] = deque()
        self._inbox_sizes: deque[int] = deque()
        # The body size of the frame the last `receive` returned.
        self.last_frame_bytes = 0
        self._send_lock = trio.StrictFIFOLock()
        self._receive_error: TransportError | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<MessageConnection {self.local_address} -> {self.peer_name}>"

    @property
    def max_frame_bytes(self) -> int:
        return self._decoder.max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self._decoder.max_frame_bytes = value

    @property
    def claims_raw(self) -> Callable[[bytes], bool] | None:
        """Shown the first frame's body before it is unpacked; True hands this connection to
        a second protocol: `receive` then returns every frame's body as raw bytes. Set it
        before the first `receive`."""
        return self._decoder.claims_raw

    @claims_raw.setter
    def claims_raw(self, value: Callable[[bytes], bool] | None) -> None:
        self._decoder.claims_raw = value

    @property
    def claims_word(self) -> Callable[[bytes], bool] | None:
        """Shown the stream's first four bytes before they are read as a frame length; True
        makes `receive` return those four bytes as the one message (ZooKeeper's
        four-letter-word commands). Set it before the first `receive`."""
        return self._decoder.claims_word

    @claims_word.setter
    def claims_word(self, value: Callable[[bytes], bool] | None) -> None:
        self._decoder.claims_word = value

    @property
    def word(self) -> bool:
        """True once the stream's first four bytes were claimed by `claims_word`."""
        return self._decoder.word

    @property
    def raw(self) -> bool:
        """True once the first frame was claimed by `claims_raw`."""
        return self._decoder.raw

    @property
    def is_closed(self) -> bool:
        """True once `aclose` was called on this side."""
        return self._closed

    async def send(self, obj: object) -> None:
        await self.send_bytes(encode_frame(obj, self._decoder.max_frame_bytes))

    async def send_many(self, objs: Iterable[object]) -> None:
        """All of `objs`, their frames joined into as few writes as `send_frames` makes.
        Each is encoded just before its group is written, so if one cannot be encoded,
        the groups before it have been sent."""
        limit = self._decoder.max_frame_bytes
        await self.send_frames(encode_frame(obj, limit) for obj in objs)

    async def send_frames(self, frames: Iterable[bytes]) -> None:
        """Writes already-encoded frames, joined into buffers of up to JOIN_LIMIT_BYTES
        (a larger frame goes alone): one `send_all` per buffer instead of one per frame."""
        batch: list[bytes] = []
        size = 0
        for frame in frames:
            if not frame:
                continue  # a request answered with nothing (RpcServer's foreign protocol)
            if batch and size + len(frame) > JOIN_LIMIT_BYTES:
                await self.send_bytes(b"".join(batch))
                batch = []
                size = 0
            batch.append(frame)
            size += len(frame)
        if batch:
            await self.send_bytes(b"".join(batch) if len(batch) > 1 else batch[0])

    async def send_bytes(self, data: bytes) -> None:
        """Writes already-encoded frames (from `encode_frame(s)`) as they are: the path of
        the single writer tasks, which encode each message once and join many frames."""
        async with self._send_lock:
            try:
                await self._stream.send_all(data)
            except _STREAM_ERRORS as exc:
                raise ConnectionClosedError(self._closed_reason(exc)) from exc

    async def receive(self) -> object:
        """The next message; its frame's body size is then `last_frame_bytes`."""
        inbox = self._inbox
        while not inbox:
            if self._receive_error is not None:
                raise self._receive_error
            try:
                data = await self._stream.receive_some(RECEIVE_BYTES)
            except _STREAM_ERRORS as exc:
                self._receive_error = ConnectionClosedError(self._closed_reason(exc))
                raise self._receive_error from exc
            if not data:
                pending = self._decoder.buffered
                if pending:
                    self._receive_error = TruncatedFrameError(
                        f"connection closed by {self.peer_name} in the middle of a frame "
                        f"({pending} bytes of an unfinished frame received)"
                    )
                else:
                    self._receive_error = ConnectionClosedError(
                        f"connection closed by {self.peer_name}"
                    )
                continue
            decoder = self._decoder
            try:
                inbox.extend(decoder.feed(data))
            except (FrameTooLargeError, FrameDecodeError) as exc:
                inbox.extend(exc.decoded)  # type: ignore[attr-defined]
                self._receive_error = exc
            self._inbox_sizes.extend(decoder.frame_sizes)
            decoder.frame_sizes.clear()
        self.last_frame_bytes = self._inbox_sizes.popleft()
        return inbox.popleft()

    async def aclose(self) -> None:
        """Closes the connection (idempotent); a task blocked in `receive` on it gets
        `ConnectionClosedError`."""
        self._closed = True
        await self._stream.aclose()

    def _closed_reason(self, exc: BaseException) -> str:
        if self._closed:
            return f"connection to {self.peer_name} was closed locally"
        detail = str(exc) or type(exc).__name__
        return f"connection to {self.peer_name} broken: {detail}"


async def run_handler(
    handler: Callable[[MessageConnection], Awaitable[object]],
    conn: MessageConnection,
    logger: logging.Logger = log,
) -> None:
    """Runs one accepted connection's handler: its failure is logged with the peer and
    closes that connection only, never the server."""
    try:
        await handler(conn)
    except ConnectionClosedError as exc:
        logger.debug("connection from %s ended: %s", conn.peer_name, exc)
    except Exception:
        logger.exception("handler for connection from %s failed", conn.peer_name)
    finally:
        with trio.CancelScope(shield=True):
            await conn.aclose()
