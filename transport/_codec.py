"""Sans-IO framing: a 4-byte big-endian length, then one msgpack object.

No awaits, no sockets: `encode_frame` turns a message into bytes, `FrameDecoder` turns a
stream of byte chunks (split anywhere) back into messages. A decoder can also hand a
connection over to a second protocol with the same framing (Kafka's: a 4-byte size, then a
binary request): the first frame decides, and from then on every frame comes out as raw bytes.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable

import msgpack

from transport._errors import FrameDecodeError, FrameTooLargeError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "HEADER_BYTES",
    "FrameDecoder",
    "encode_frame",
    "encode_frames",
    "pack",
    "unpack",
]

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
HEADER_BYTES = 4
_MAX_ENCODABLE = 2**32 - 1  # what a 4-byte unsigned length can say

_header = struct.Struct(">I")
_unpackb = msgpack.unpackb

# A reused Packer is about three times faster than msgpack.packb (which builds one per
# call). Packers are not thread-safe, and kazoo's adapter runs threads, so one per thread.
_packers = threading.local()


def _packer() -> msgpack.Packer:
    try:
        return _packers.packer
    except AttributeError:
        _packers.packer = msgpack.Packer(use_bin_type=True)
        return _packers.packer


def pack(obj: object) -> bytes:
    """msgpack `obj` (bytes travel as bin, str as str). Raises TypeError naming what
    msgpack cannot pack. Maps with integer keys must be sent as lists of pairs: the
    decoder rejects them."""
    return _packer().pack(obj)


def unpack(data: bytes) -> object:
    """The one msgpack object in `data`; `FrameDecodeError` when `data` is not exactly one
    valid object (truncated, trailing bytes, bad utf-8, non-str map keys...)."""
    try:
        return _unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises ValueError and friends, by design of the format
        raise FrameDecodeError(f"frame body is not one valid msgpack object: {exc}") from exc


def encode_frame(obj: object, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """One frame: the packed body behind its 4-byte length."""
    body = _packer().pack(obj)
    size = len(body)
    if size > max_frame_bytes or size > _MAX_ENCODABLE:
        raise FrameTooLargeError(size, min(max_frame_bytes, _MAX_ENCODABLE), where="message")
    return _header.pack(size) + body


def encode_frames(objs: Iterable[object], max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """Many frames joined into one buffer (one write for the lot)."""
    packer = _packer()
    parts = []
    for obj in objs:
        body = packer.pack(obj)
        size = len(body)
        if size > max_frame_bytes or size > _MAX_ENCODABLE:
            raise FrameTooLargeError(size, min(max_frame_bytes, _MAX_ENCODABLE), where="message")
        parts.append(_header.pack(size))
        parts.append(body)
    return b"".join(parts)


class FrameDecoder:
    """Feed it bytes as they arrive; it returns every message completed so far.

    With `claims_raw` set, the first complete frame's body is shown to it before it is
    unpacked: if it returns True, that frame and every later one are returned as their raw
    body bytes (`raw` becomes True) instead of being unpacked as msgpack.

    With `claims_word` set, the stream's first four bytes are shown to it before they are
    read as a length: if it returns True, they are returned as one message (4 raw bytes;
    `word` and `raw` become True) and every later byte is ignored. That is how ZooKeeper
    tells a four-letter-word command (`ruok`, `srvr`) from a length-prefixed request.

    A header announcing more than `max_frame_bytes` raises `FrameTooLargeError` at once,
    before any of that body is buffered; a body that is not one msgpack object raises
    `FrameDecodeError`. Either error carries `.decoded`, the messages completed before the
    bad frame in the same `feed`, and leaves the decoder failed (the stream cannot be
    resynchronised, so every later `feed` raises the same error).

    `frame_sizes` gets each returned message's body size in bytes, in order (for the
    reader to take: what a request bound counts without walking the decoded message).
    """

    __slots__ = (
        "_buffer",
        "_failure",
        "_need",
        "_undecided",
        "claims_raw",
        "claims_word",
        "frame_sizes",
        "max_frame_bytes",
        "raw",
        "word",
    )

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        claims_raw: Callable[[bytes], bool] | None = None,
        claims_word: Callable[[bytes], bool] | None = None,
    ) -> None:
        if max_frame_bytes < 1:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self.claims_raw = claims_raw
        self.claims_word = claims_word
        self.raw = False
        self.word = False
        self._undecided = True  # no frame seen yet: the first one may switch to raw
        self._buffer = bytearray()
        # Bytes the next step needs buffered: a header, or a header plus its body. Saves
        # re-reading the header of a large frame on every 64 KiB chunk.
        self._need = HEADER_BYTES
        self._failure: Exception | None = None
        self.frame_sizes: list[int] = []

    @property
    def buffered(self) -> int:
        """Bytes received that are not yet part of a returned message."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[object]:
        if self._failure is not None:
            self._failure.decoded = []  # type: ignore[attr-defined]
            raise self._failure
        if self.word:
            return []  # the command word was all this connection had to say
        buffer = self._buffer
        if buffer:
            buffer += data
            if len(buffer) < self._need:
                return []
            view: bytes | bytearray = buffer
        else:
            # Fast path: nothing pending, parse the chunk in place.
            view = data
        messages: list[object] = []
        pos = 0
        end_of_data = len(view)
        limit = self.max_frame_bytes
        try:
            while end_of_data - pos >= HEADER_BYTES:
                if self._undecided and self.claims_word is not None:
                    header = bytes(view[pos : pos + HEADER_BYTES])
                    if self.claims_word(header):
                        self._undecided = False
                        self.raw = self.word = True
                        buffer.clear()
                        self.frame_sizes.append(HEADER_BYTES)
                        return [header]
                (size,) = _header.unpack_from(view, pos)
                if size > limit:
                    raise FrameTooLargeError(size, limit, where="incoming frame")
                end = pos + HEADER_BYTES + size
                if end > end_of_data:
                    self._need = end - pos
                    break
                body = view[pos + HEADER_BYTES : end]
                if self._undecided:
                    self._undecided = False
                    claims = self.claims_raw
                    self.raw = claims is not None and claims(bytes(body))
                messages.append(bytes(body) if self.raw else unpack(body))
                self.frame_sizes.append(size)
                pos = end
            else:
                self._need = HEADER_BYTES
        except (FrameTooLargeError, FrameDecodeError) as exc:
            exc.decoded = messages  # type: ignore[attr-defined]
            self._failure = exc
            buffer.clear()
            raise
        if view is buffer:
            del buffer[:pos]
        elif pos < end_of_data:
            buffer += memoryview(data)[pos:]
        return messages
