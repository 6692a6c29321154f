"""The time index as a structure (Kafka's TimeIndex): which entries it takes, what a lookup
by timestamp answers, truncation, its 12-byte file layout and what a damaged file is."""

import struct

import pytest

from kcore.log._time_index import (
    NO_TIMESTAMP,
    CorruptTimeIndexError,
    TimeIndex,
    TimestampOffset,
    decode_entries,
)


def filled(base_offset=100):
    index = TimeIndex(base_offset)
    for timestamp, offset in ((1000, 104), (1500, 110), (2000, 120)):
        index.maybe_append(timestamp, offset)
    return index


def test_an_entry_is_kafkas_twelve_bytes_an_int64_timestamp_and_a_relative_int32_offset():
    index = TimeIndex(base_offset=100)
    assert index.maybe_append(1_700_000_000_000, 105) == struct.pack(">qi", 1_700_000_000_000, 5)
    assert index.encode() == struct.pack(">qi", 1_700_000_000_000, 5)


def test_only_a_larger_timestamp_adds_an_entry():
    index = filled()
    assert index.maybe_append(2000, 125) == b""  # the same largest timestamp: nothing
    assert index.maybe_append(2000, 120, skip_full_check=True) == b""  # a seal repeated
    assert index.maybe_append(2001, 130) != b""
    assert index.last_entry == TimestampOffset(2001, 130)
    assert TimeIndex(0).maybe_append(NO_TIMESTAMP, 5) == b""  # batches without timestamps


def test_entries_never_go_backwards():
    index = filled()
    with pytest.raises(ValueError, match="offset"):
        index.maybe_append(3000, 119)
    with pytest.raises(ValueError, match="timestamp"):
        index.maybe_append(1999, 130)


def test_lookup_answers_the_last_entry_at_or_below_the_target():
    index = filled()
    assert index.lookup(999) == TimestampOffset(NO_TIMESTAMP, 100)  # scan the whole segment
    assert index.lookup(1000) == TimestampOffset(1000, 104)
    assert index.lookup(1499) == TimestampOffset(1000, 104)
    assert index.lookup(1500) == TimestampOffset(1500, 110)
    assert index.lookup(10**12) == TimestampOffset(2000, 120)
    assert TimeIndex(7).lookup(5) == TimestampOffset(NO_TIMESTAMP, 7)


def test_truncation_removes_the_entries_at_or_above_the_offset():
    index = filled()
    index.truncate_to(111)
    assert index.entries == [TimestampOffset(1000, 104), TimestampOffset(1500, 110)]
    index.truncate_to(110)
    assert index.entries == [TimestampOffset(1000, 104)]
    index.truncate_to(50)
    assert len(index) == 0 and index.last_entry == TimestampOffset(NO_TIMESTAMP, 100)


def test_a_full_index_takes_only_the_entry_written_at_a_roll():
    index = TimeIndex(0, max_index_bytes=30)  # rounded down to two entries
    index.maybe_append(10, 1)
    assert not index.is_full
    index.maybe_append(20, 2)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(30, 3)
    assert index.maybe_append(30, 3, skip_full_check=True)


def test_decode_reads_back_what_was_written():
    index = filled()
    decoded = TimeIndex.decode(index.encode(), 100)
    assert decoded.entries == index.entries
    assert decode_entries(index.encode() + b"\x00" * 5, 100) == index.entries


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">qi", 1000, 4) + b"\x00" * 5,  # not whole entries
        struct.pack(">qi", 2000, 4) + struct.pack(">qi", 1000, 10),  # timestamps go back
        struct.pack(">qi", 1000, 10) + struct.pack(">qi", 2000, 4),  # offsets go back
        struct.pack(">qi", 1000, -1),  # below the base offset
        struct.pack(">qi", 1000, 4) * 2,  # the zeroes Kafka's crashed files end with, alike
    ],
)
def test_a_damaged_file_is_refused(data):
    with pytest.raises(CorruptTimeIndexError):
        TimeIndex.decode(data, 100)
