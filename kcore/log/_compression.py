"""The compression codecs of Kafka's record batches (attributes bits 0-2), applied to a batch's
whole records section (Kafka 3.5's CompressionType).

What each client writes, and so what `decompress` must read:

- gzip: a gzip stream (Java's GZIPOutputStream, librdkafka's zlib with a gzip header,
  kafka-python and aiokafka's `gzip`). Read with the standard library, members concatenated
  or not.
- snappy: Java's client writes xerial's SnappyOutputStream framing (the 16-byte header
  `\\x82SNAPPY\\x00` + version 1 + compatible version 1, then blocks of a 4-byte big-endian
  length and raw snappy of at most 32 KiB of input); kafka-python and aiokafka write the same
  framing; librdkafka writes bare raw snappy. Java's SnappyInputStream, librdkafka and the
  Python clients all read both (the 8-byte magic decides), and so do we.
- lz4: the LZ4 frame format with independent blocks (KIP-57); the Java client refuses
  linked blocks and checks the frame descriptor's checksum (magic 2 batches always carry a
  correct one).
- zstd: a zstd frame (zstd-jni's stream, possibly without a content size).

We write what the Java consumer reads: gzip, xerial-framed snappy, lz4 frames with
independent blocks, zstd frames. Pure and deterministic (the gzip header's mtime is 0).
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

__all__ = [
    "COMPRESSION_TYPES",
    "CodecError",
    "codec_id",
    "codec_name",
    "compress",
    "decompress",
]

# Kafka's names, indexed by the codec id of attributes bits 0-2 (CompressionType.forId).
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_MASK = 0x07

# Java's GZIPOutputStream compresses at zlib's default level; zstd-jni's default is 3; LZ4
# level 1 is LZ4's fast (not high-compression) mode, Kafka 3.5's LZ4Factory.fastCompressor.
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3
_LZ4_LEVEL = 1
_GZIP_WBITS = 31  # 16 + 15: a gzip header and trailer around a deflate stream

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size, which Kafka's client uses
_BLOCK_LENGTH = struct.Struct(">i")


class CodecError(ValueError):
    """A records section that its codec cannot decompress (or an unknown codec id)."""


def codec_id(name: str) -> int:
    """The attributes bits of a codec named as Kafka names it ("none", "gzip", ...)."""
    try:
        return COMPRESSION_TYPES.index(name)
    except ValueError:
        raise ValueError(
            f"unknown compression type {name!r}; expected one of {', '.join(COMPRESSION_TYPES)}"
        ) from None


def codec_name(codec: int) -> str:
    """Kafka's name of a codec id; ids 5-7 are not codecs and get a name saying so."""
    return COMPRESSION_TYPES[codec] if 0 <= codec < len(COMPRESSION_TYPES) else f"unknown({codec})"


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """`data` compressed as Kafka's Java producer writes `codec`."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        # zlib with gzip framing rather than gzip.compress: no clock read for the header's
        # mtime (0, as Java writes it), and one call into C.
        return zlib.compress(data, _GZIP_LEVEL, _GZIP_WBITS)
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        # Independent blocks (KIP-57: the Java client cannot read linked blocks); no content
        # checksum, which the Java client would skip anyway; the fast compressor as Kafka
        # 3.5's client uses (cramjam's default level is the high-compression one, 8 times
        # slower for 1% smaller batches). aiokafka writes the same framing.
        compressor = cramjam.lz4.Compressor(
            level=_LZ4_LEVEL, content_checksum=False, block_linked=False
        )
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise CodecError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """The records section of a batch compressed with `codec`, as any client writes it.
    Raises `CodecError` when it cannot be decompressed."""
    view = memoryview(data)
    try:
        if codec == GZIP:
            return gzip.decompress(view)
        if codec == SNAPPY:
            if view[:8] == _XERIAL_MAGIC:
                return _xerial_decompress(view)
            return bytes(cramjam.snappy.decompress_raw(view))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(view))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(view))
        if codec == NONE:
            return bytes(view)
    except (cramjam.DecompressionError, OSError, EOFError, zlib.error, ValueError) as error:
        # gzip raises BadGzipFile (an OSError), EOFError for a truncated stream and
        # zlib.error for bad deflate data; cramjam raises DecompressionError.
        raise CodecError(f"{codec_name(codec)} data cannot be decompressed: {error}") from error
    raise CodecError(f"unknown compression codec id {codec}")


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK])
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def _xerial_decompress(view: memoryview) -> bytes:
    """xerial's block stream after its 16-byte header. A header may start again at a block
    boundary (streams concatenated), as xerial's SnappyInputStream accepts."""
    parts = []
    position = len(_XERIAL_HEADER)
    end = len(view)
    while position < end:
        if view[position : position + 8] == _XERIAL_MAGIC:
            position += len(_XERIAL_HEADER)
            continue
        if end - position < 4:
            raise CodecError(f"snappy (xerial) block length truncated at byte {position}")
        (length,) = _BLOCK_LENGTH.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > end:
            raise CodecError(
                f"snappy (xerial) block at byte {position - 4} claims {length} bytes, "
                f"{end - position} left"
            )
        parts.append(bytes(cramjam.snappy.decompress_raw(view[position : position + length])))
        position += length
    return b"".join(parts)
