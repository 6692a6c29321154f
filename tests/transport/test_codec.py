"""The sans-IO codec: frames in, messages out, however the bytes are split."""

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transport import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecodeError,
    FrameDecoder,
    FrameTooLargeError,
    encode_frame,
    encode_frames,
    pack,
    unpack,
)

MESSAGES = [
    [0, 0, 1, "client-1", {"topic": "t", "partitions": [[0, 5], [1, 7]]}],
    b"\x00\xff raw bytes",
    "text é",
    None,
    [True, False, 1.5, -(2**40), 2**63 - 1],
    {"nested": {"list": [b"", "", []]}},
    list(range(40)),
]


def test_bytes_travel_as_bin_and_str_as_str():
    assert unpack(pack([b"\xff", "x"])) == [b"\xff", "x"]


def test_a_frame_is_a_big_endian_length_then_one_msgpack_object():
    frame = encode_frame({"a": 1})
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    assert unpack(frame[4:]) == {"a": 1}


def test_maps_with_integer_keys_are_rejected_on_decode():
    """Callers send them as lists of pairs; the decoder refuses them (strict_map_key)."""
    decoder = FrameDecoder()
    with pytest.raises(FrameDecodeError, match="map key"):
        decoder.feed(encode_frame({1: "a"}))


def test_decoder_returns_every_message_when_fed_at_every_split_point():
    stream = encode_frames(MESSAGES)
    for split in range(len(stream) + 1):
        decoder = FrameDecoder()
        received = decoder.feed(stream[:split]) + decoder.feed(stream[split:])
        assert received == MESSAGES, f"split at byte {split}"
        assert decoder.buffered == 0


def test_decoder_records_each_message_body_size_however_the_bytes_arrive():
    """What a server's queued.max.request.bytes counts per request."""
    stream = encode_frames(MESSAGES)
    bodies = [len(pack(message)) for message in MESSAGES]
    decoder = FrameDecoder()
    for i in range(0, len(stream), 7):
        decoder.feed(stream[i : i + 7])
    assert decoder.frame_sizes == bodies


def test_decoder_handles_every_pair_of_split_points():
    stream = encode_frames(MESSAGES[:3])
    for first in range(len(stream) + 1):
        for second in range(first, len(stream) + 1):
            decoder = FrameDecoder()
            received = (
                decoder.feed(stream[:first])
                + decoder.feed(stream[first:second])
                + decoder.feed(stream[second:])
            )
            assert received == MESSAGES[:3], f"splits at {first} and {second}"


def test_decoder_fed_one_byte_at_a_time():
    stream = encode_frames(MESSAGES)
    decoder = FrameDecoder()
    received = []
    for i in range(len(stream)):
        received += decoder.feed(stream[i : i + 1])
        assert decoder.buffered == (i + 1) - len(encode_frames(received))
    assert received == MESSAGES


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_decoder_with_random_chunking(cuts):
    stream = encode_frames(MESSAGES)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    received = []
    for start, end in itertools.pairwise(points):
        received += decoder.feed(stream[start:end])
    assert received == MESSAGES


def test_oversized_header_is_rejected_before_the_body_arrives():
    decoder = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(FrameTooLargeError, match="1001 bytes exceeds max_frame_bytes=1000"):
        decoder.feed(struct.pack(">I", 1001))
    assert decoder.buffered == 0


def test_frame_of_exactly_the_limit_is_accepted():
    body = pack(b"x" * 90)
    decoder = FrameDecoder(max_frame_bytes=len(body))
    assert decoder.feed(struct.pack(">I", len(body)) + body) == [b"x" * 90]


def test_default_limit_is_16_mib():
    assert FrameDecoder().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES == 16 * 1024 * 1024


def test_messages_before_a_bad_frame_are_kept_on_the_error():
    decoder = FrameDecoder(max_frame_bytes=100)
    stream = encode_frames(["a", "b"]) + struct.pack(">I", 5000)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(stream)
    assert info.value.decoded == ["a", "b"]
    # The stream cannot be resynchronised: the decoder stays failed.
    with pytest.raises(FrameTooLargeError):
        decoder.feed(encode_frame("c"))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty body"),
        (b"\xc1", "reserved msgpack byte"),
        (b"\x93\x01", "truncated array"),
        (b"\x01\x02", "two objects in one frame"),
        (b"\xa2\xff\xfe", "invalid utf-8 in a str"),
    ],
)
def test_a_body_that_is_not_exactly_one_msgpack_object_is_a_decode_error(body, reason):
    decoder = FrameDecoder()
    with pytest.raises(FrameDecodeError, match="not one valid msgpack object"):
        decoder.feed(struct.pack(">I", len(body)) + body)


def test_encoding_more_than_the_limit_raises():
    with pytest.raises(FrameTooLargeError, match="message of 1003 bytes"):
        encode_frame(b"x" * 1000, max_frame_bytes=1000)
    with pytest.raises(FrameTooLargeError):
        encode_frames(["ok", b"x" * 1000], max_frame_bytes=1000)


def test_unpackable_objects_raise_type_error_naming_them():
    with pytest.raises(TypeError, match="object"):
        encode_frame([object()])


def test_encode_frames_equals_the_frames_joined():
    assert encode_frames(MESSAGES) == b"".join(encode_frame(m) for m in MESSAGES)
    assert encode_frames([]) == b""


def test_a_claimed_first_frame_turns_the_stream_raw():
    decoder = FrameDecoder(claims_raw=lambda body: body[:1] == b"\x00")
    kafka_like = [b"\x00\x12rest", b"\x95not msgpack after all"]
    stream = b"".join(struct.pack(">I", len(body)) + body for body in kafka_like)
    assert decoder.feed(stream[:3]) == []
    assert decoder.feed(stream[3:]) == kafka_like
    assert decoder.raw


def test_an_unclaimed_first_frame_keeps_the_stream_msgpack():
    decoder = FrameDecoder(claims_raw=lambda body: body[:1] == b"\x00")
    assert decoder.feed(encode_frames([[1, 2], b"\x00bytes"])) == [[1, 2], b"\x00bytes"]
    assert not decoder.raw


def test_a_claimed_first_word_is_the_one_message_and_the_rest_is_ignored():
    # ZooKeeper's "ruok": four letters where a length would be, then nothing that matters.
    decoder = FrameDecoder(claims_word=lambda word: word == b"ruok")
    assert decoder.feed(b"ru") == []
    assert decoder.feed(b"ok\n") == [b"ruok"]
    assert decoder.word and decoder.raw
    assert decoder.feed(b"\x00\x00\x00\x01x") == []


def test_an_unclaimed_first_word_is_read_as_a_frame_length():
    decoder = FrameDecoder(claims_word=lambda word: word == b"ruok")
    assert decoder.feed(encode_frames([[1, 2], "ruok"])) == [[1, 2], "ruok"]
    assert not decoder.word and not decoder.raw
