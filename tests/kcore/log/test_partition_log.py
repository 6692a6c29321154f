"""Behaviour shared by the file and the memory log (each test runs on both)."""

import pytest

from kcore.errors import OffsetOutOfRangeError
from kcore.log import (
    CorruptRecordError,
    UnexpectedAppendOffsetError,
    build_batch,
    iter_batch_records,
    parse_header,
)


def offsets(batches):
    return [record.offset for record in iter_batch_records(batches)]


def test_empty_log(open_log):
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (0, 0, None)
    assert log.read(0, 1000) == []
    with pytest.raises(OffsetOutOfRangeError, match="offset 1"):
        log.read(1, 1000)


def test_leader_append_assigns_offsets_and_epochs(open_log, make_batch):
    log = open_log()
    assert log.append(make_batch(3, base_offset=77), leader_epoch=0) == (0, 2)
    assert log.append(make_batch(2) + make_batch(1), leader_epoch=1) == (3, 5)
    assert log.log_end_offset == 6
    batches = log.read(0, 10_000)
    assert offsets(batches) == [0, 1, 2, 3, 4, 5]
    assert [parse_header(batch).partition_leader_epoch for batch in batches] == [0, 1, 1]
    assert log.epoch_cache.entries() == [(0, 0), (1, 3)]
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(1) == (1, 6)


def test_corrupt_append_is_refused(open_log, make_batch):
    log = open_log()
    batch = bytearray(make_batch(2))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(bytes(batch), leader_epoch=0)
    assert log.log_end_offset == 0


def test_follower_append_keeps_leader_offsets(open_log):
    log = open_log()
    leader_batches = [
        build_batch([(0, None, b"a"), (0, None, b"b")], base_offset=0, partition_leader_epoch=3),
        build_batch([(0, None, b"c")], base_offset=2, partition_leader_epoch=5),
    ]
    assert log.append_as_follower(b"".join(leader_batches)) == (0, 2)
    assert log.read(0, 10_000) == leader_batches
    assert log.epoch_cache.entries() == [(3, 0), (5, 2)]
    with pytest.raises(UnexpectedAppendOffsetError, match="offset 2 below the log end offset 3"):
        log.append_as_follower(leader_batches[1])


def test_read_limits(open_log, make_batch):
    log = open_log()
    for _ in range(5):
        log.append(make_batch(2, value_size=100), leader_epoch=0)
    size = len(log.read(0, 1)[0])
    assert offsets(log.read(0, 1)) == [0, 1]  # always at least one whole batch
    assert offsets(log.read(3, 2 * size)) == [2, 3, 4, 5]  # from the batch holding offset 3
    assert offsets(log.read(0, 10_000, max_offset=6)) == [0, 1, 2, 3, 4, 5]
    assert offsets(log.read(0, 10_000, max_offset=5)) == [0, 1, 2, 3]
    assert log.read(4, 10_000, max_offset=4) == []
    assert log.read(10, 10_000) == []


def test_roll_by_size_and_index_lookup(open_log, make_batch):
    log = open_log(segment_bytes=1000, index_interval_bytes=150)
    for _ in range(30):
        log.append(make_batch(2, value_size=50), leader_epoch=0)
    bases = log.segment_base_offsets()
    assert len(bases) > 3 and bases[0] == 0 and bases == sorted(bases)
    for start in range(60):
        assert offsets(log.read(start, 1))[0] == start - start % 2
    assert offsets(log.read(0, 100_000)) == list(range(60))


def test_roll_by_time(open_log, make_batch):
    log = open_log(segment_ms=1000)
    log.append(make_batch(timestamp=0), leader_epoch=0, now_ms=0)
    log.append(make_batch(timestamp=500), leader_epoch=0, now_ms=1000)
    assert log.segment_base_offsets() == [0]
    log.append(make_batch(timestamp=1001), leader_epoch=0, now_ms=1001)
    assert log.segment_base_offsets() == [0, 2]


def test_truncate_to_also_truncates_epoch_cache(open_log, make_batch):
    log = open_log(segment_bytes=300)
    for epoch in range(6):
        log.append(make_batch(2, value_size=60), leader_epoch=epoch)
    assert len(log.segment_base_offsets()) > 2
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert offsets(log.read(0, 100_000)) == list(range(6))
    assert log.epoch_cache.entries() == [(0, 0), (1, 2), (2, 4)]
    assert log.segment_base_offsets()[-1] <= 6
    log.truncate_to(9)  # beyond the end: nothing
    assert log.log_end_offset == 6
    assert log.append(make_batch(), leader_epoch=7) == (6, 6)
    assert log.epoch_cache.entries() == [(0, 0), (1, 2), (2, 4), (7, 6)]


def test_truncate_fully_and_start_at(open_log, make_batch):
    log = open_log()
    log.append(make_batch(4), leader_epoch=1)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.epoch_cache.entries() == []
    assert log.append(make_batch(), leader_epoch=2) == (100, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_by_time_stops_at_high_watermark(open_log, make_batch):
    log = open_log(segment_bytes=1)  # one batch per segment
    for timestamp in (100, 200, 300, 400):
        log.append(make_batch(timestamp=timestamp), leader_epoch=0)
    assert (
        log.delete_old_segments(now_ms=1000, retention_ms=750, retention_bytes=-1, high_watermark=4)
        == 2
    )
    assert log.log_start_offset == 2
    assert (
        log.delete_old_segments(now_ms=10_000, retention_ms=0, retention_bytes=-1, high_watermark=2)
        == 0
    )
    assert (
        log.delete_old_segments(now_ms=10_000, retention_ms=0, retention_bytes=-1, high_watermark=4)
        == 1
    )
    assert log.segment_base_offsets() == [3]  # never the active segment
    assert (log.log_start_offset, log.log_end_offset) == (3, 4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)


def test_retention_by_size(open_log, make_batch):
    log = open_log(segment_bytes=1)
    for _ in range(5):
        log.append(make_batch(value_size=100), leader_epoch=0)
    one = log.size_in_bytes // 5
    deleted = log.delete_old_segments(
        now_ms=0, retention_ms=-1, retention_bytes=2 * one, high_watermark=5
    )
    assert deleted == 3
    assert log.segment_base_offsets() == [3, 4]
    assert (
        log.delete_old_segments(now_ms=0, retention_ms=-1, retention_bytes=-1, high_watermark=5)
        == 0
    )


def test_retention_moves_epoch_cache_start(open_log, make_batch):
    log = open_log(segment_bytes=1)
    for epoch in range(3):
        log.append(make_batch(2, timestamp=0), leader_epoch=epoch)
    log.delete_old_segments(now_ms=10, retention_ms=5, retention_bytes=-1, high_watermark=6)
    assert log.epoch_cache.entries() == [(2, 4)]


def test_flush_advances_recovery_point(open_log, make_batch):
    log = open_log()
    log.append(make_batch(3), leader_epoch=0)
    assert log.recovery_point == 0
    assert log.flush() == 1
    assert log.recovery_point == 3
    assert log.flush() == 0
