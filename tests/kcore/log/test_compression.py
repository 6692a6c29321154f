"""The codecs of a batch's records section, in the framings real clients write and read: gzip
streams, xerial-framed and raw snappy, LZ4 frames with independent blocks and a correct
descriptor checksum, zstd frames; batches crossed with aiokafka (which compresses with the
same cramjam, but frames and parses batches with its own code)."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import crc32c
import pytest

from kcore.log import COMPRESSION_TYPES, CorruptRecordError, build_batch, iter_records
from kcore.log._compression import CodecError, codec_id, compress, decompress

CODECS = [name for name in COMPRESSION_TYPES if name != "none"]
DATA = b"".join(b"record %06d with some repetitive payload; " % i for i in range(4000))


def _xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, written out from its specification: the LZ4 frame's header checksum, checked
    independently of the library that computed it."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    def lane(v: int, i: int) -> int:
        return rotl((v + int.from_bytes(data[i : i + 4], "little") * p2) & mask, 13) * p1 & mask

    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed, (seed - p1) & mask]
        while i <= n - 16:
            v = [lane(v[k], i + 4 * k) for k in range(4)]
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        h = rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & mask, 17) * p4 & mask
        i += 4
    while i < n:
        h = rotl((h + data[i] * p5) & mask, 11) * p1 & mask
        i += 1
    h ^= h >> 15
    h = h * p2 & mask
    h ^= h >> 13
    h = h * p3 & mask
    return h ^ (h >> 16)


def test_xxh32_helper_matches_known_values():
    assert _xxh32(b"") == 0x02CC5D05
    assert _xxh32(b"a") == 0x550D7456
    assert _xxh32(b"abc") == 0x32D153FF
    assert _xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("name", CODECS)
def test_codecs_round_trip(name):
    codec = codec_id(name)
    for data in (b"", b"x", DATA, bytes(range(256)) * 1000):
        assert decompress(codec, compress(codec, data)) == data
    assert len(compress(codec, DATA)) < len(DATA) // 4


def test_gzip_is_a_gzip_stream_and_concatenated_members_are_read():
    stream = compress(codec_id("gzip"), DATA)
    assert stream[:4] == b"\x1f\x8b\x08\x00" and stream[4:8] == b"\x00\x00\x00\x00"  # no mtime
    assert gzip.decompress(stream) == DATA
    # Java's GZIPInputStream reads concatenated members; so do we.
    two = gzip.compress(b"first ", mtime=0) + zlib.compress(b"second", 9, 31)
    assert decompress(codec_id("gzip"), two) == b"first second"


def test_snappy_is_written_in_xerial_framing_with_32k_blocks():
    stream = compress(codec_id("snappy"), DATA)
    assert stream[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, chunks = 16, []
    while position < len(stream):
        (length,) = struct.unpack_from(">i", stream, position)
        chunks.append(
            bytes(cramjam.snappy.decompress_raw(stream[position + 4 : position + 4 + length]))
        )
        position += 4 + length
    assert position == len(stream)
    assert [len(c) for c in chunks[:-1]] == [32 * 1024] * (len(DATA) // (32 * 1024))
    assert b"".join(chunks) == DATA


def test_snappy_reads_raw_blocks_and_concatenated_xerial_streams():
    snappy = codec_id("snappy")
    # librdkafka writes raw snappy, without the xerial framing
    assert decompress(snappy, bytes(cramjam.snappy.compress_raw(DATA))) == DATA
    # xerial's SnappyInputStream accepts a stream appended to another
    assert decompress(snappy, compress(snappy, b"one ") + compress(snappy, b"two")) == b"one two"


def _lz4_descriptor(frame: bytes) -> tuple[int, int, bytes, int]:
    """(FLG, BD, descriptor bytes, header checksum byte) of an LZ4 frame."""
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg, bd = frame[4], frame[5]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    return flg, bd, frame[4:end], frame[end]


def test_lz4_frames_are_what_the_java_client_reads():
    frame = compress(codec_id("lz4"), DATA)
    flg, bd, descriptor, checksum = _lz4_descriptor(frame)
    assert flg >> 6 == 0b01  # frame format version 1
    assert flg & 0x20  # independent blocks (KIP-57: Java refuses linked blocks)
    assert not flg & 0x02 and not bd & 0x8F  # reserved bits clear
    assert 4 <= (bd >> 4) & 0x07 <= 7  # a block maximum Java knows (64 KiB .. 4 MiB)
    assert checksum == (_xxh32(descriptor) >> 8) & 0xFF  # the correct header checksum


def _lz4_frame(payload: bytes, *, flg: int, content_checksum: bool = False) -> bytes:
    """A frame holding `payload` as one uncompressed block, written out by hand."""
    descriptor = bytes([flg, 0x40]) + (struct.pack("<Q", len(payload)) if flg & 0x08 else b"")
    frame = b"\x04\x22\x4d\x18" + descriptor + bytes([(_xxh32(descriptor) >> 8) & 0xFF])
    frame += struct.pack("<I", len(payload) | 0x80000000) + payload
    if flg & 0x10:
        frame += struct.pack("<I", _xxh32(payload))
    frame += b"\x00\x00\x00\x00"
    if content_checksum:
        frame += struct.pack("<I", _xxh32(payload))
    return frame


@pytest.mark.parametrize(
    ("flg", "content_checksum"),
    [(0x60, False), (0x68, False), (0x70, False), (0x64, True)],
    ids=["java", "content size (python lz4.frame)", "block checksums", "content checksum"],
)
def test_lz4_frames_of_every_client_are_read(flg, content_checksum):
    payload = DATA[:50_000]
    assert (
        decompress(codec_id("lz4"), _lz4_frame(payload, flg=flg, content_checksum=content_checksum))
        == payload
    )


def test_zstd_reads_streamed_frames_without_a_content_size_and_several_frames():
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(DATA)
    streamed = bytes(compressor.finish())
    assert decompress(codec_id("zstd"), streamed) == DATA
    assert decompress(codec_id("zstd"), streamed + compress(codec_id("zstd"), b"!")) == DATA + b"!"


def _with_section(batch: bytes, section: bytes) -> bytes:
    """`batch` with another records section, its length and CRC fixed (so only the records
    are wrong)."""
    whole = bytearray(batch[:61] + section)
    struct.pack_into(">i", whole, 8, len(whole) - 12)
    struct.pack_into(">I", whole, 17, crc32c.crc32c(bytes(whole[21:])))
    return bytes(whole)


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_corrupt_compressed_section_is_a_corrupt_record_error(name, damage):
    batch = build_batch(
        [(i, None, b"value %d" % i) for i in range(200)], base_offset=30, compression=name
    )
    section = batch[61:]
    damaged = {
        "truncated": section[: len(section) // 2],
        "garbage": section[:20] + bytes(range(256)) * 3,
        "empty": b"",
    }[damage]
    with pytest.raises(CorruptRecordError, match=r"offsets 30\.\.229 cannot be decoded"):
        list(iter_records(_with_section(batch, damaged)))


def test_codec_errors_name_the_codec():
    with pytest.raises(CodecError, match="lz4"):
        decompress(codec_id("lz4"), b"not a frame")
    with pytest.raises(CodecError, match="unknown compression codec id 6"):
        decompress(6, b"")
    with pytest.raises(ValueError, match="unknown compression type 'lzma'"):
        codec_id("lzma")


# -- aiokafka: batches both ways, every codec --------------------------------------------

RECORDS = [
    (1_700_000_000_000 + i, None if i % 5 == 0 else b"k%d" % i,
     None if i % 7 == 3 else b"value %d " % i * (i % 40), [("h", b"%d" % i), ("n", None)][: i % 3])
    for i in range(300)
]  # fmt: skip


@pytest.mark.parametrize("name", COMPRESSION_TYPES)
def test_aiokafka_reads_our_batches(name):
    default_records = pytest.importorskip("aiokafka.record.default_records")
    batch = build_batch(
        RECORDS,
        base_offset=500,
        producer_id=8,
        producer_epoch=1,
        base_sequence=40,
        compression=name,
    )
    parsed = default_records.DefaultRecordBatch(batch)
    assert parsed.validate_crc()
    assert parsed.compression_type == codec_id(name)
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (8, 1, 40)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in parsed] == [
        (500 + i, t, k, v, h) for i, (t, k, v, h) in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("name", COMPRESSION_TYPES)
def test_we_read_aiokafkas_batches(name):
    default_records = pytest.importorskip("aiokafka.record.default_records")
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec_id(name),
        is_transactional=0,
        producer_id=8,
        producer_epoch=1,
        base_sequence=40,
        batch_size=1 << 22,
    )
    for i, (timestamp, key, value, headers) in enumerate(RECORDS):
        assert (
            builder.append(i, timestamp=timestamp, key=key, value=value, headers=headers)
            is not None
        )
    batch = bytes(builder.build())
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)] == [
        (i, t, k, v, tuple(h)) for i, (t, k, v, h) in enumerate(RECORDS)
    ]


def test_aiokafkas_codecs_and_ours_read_each_other():
    codec = pytest.importorskip("aiokafka.codec")
    pairs = [
        ("gzip", codec.gzip_encode, codec.gzip_decode),
        ("snappy", codec.snappy_encode, codec.snappy_decode),
        ("lz4", codec.lz4_encode, codec.lz4_decode),
        ("zstd", codec.zstd_encode, codec.zstd_decode),
    ]
    for name, encode, decode in pairs:
        assert decompress(codec_id(name), encode(DATA)) == DATA, name
        assert decode(compress(codec_id(name), DATA)) == DATA, name
    # aiokafka can also write raw snappy (no xerial framing), as librdkafka does
    assert (
        decompress(codec_id("snappy"), codec.snappy_encode(DATA, xerial_compatible=False)) == DATA
    )
