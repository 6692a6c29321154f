"""Rolling by segment.ms as Kafka does (LogSegment.timeWaitedForRoll: from the first batch's
timestamp within the segment to the new batch's; from the segment's creation in the
caller's clock when the first batch has no timestamp), and a roll that cannot open its files
(EMFILE) leaving the log as it was."""

from __future__ import annotations

import errno
import os

import pytest

from kcore.log import PartitionLog, build_batch
from kcore.log import _partition_log as partition_log_module

WALL_CLOCK_MS = 1_700_000_000_000
NO_TIMESTAMP = -1


def batch(timestamp: int) -> bytes:
    return build_batch([(timestamp, None, b"v" * 20)])


def test_batches_stamped_zero_share_one_segment(open_log) -> None:
    log = open_log()  # segment.ms: Kafka's default, 7 days
    for i in range(500):
        log.append(batch(0), leader_epoch=0, now_ms=WALL_CLOCK_MS + i)
    assert log.segment_base_offsets() == [0]
    assert log.log_end_offset == 500


def test_segment_ms_counts_in_record_time_from_the_first_batch(open_log) -> None:
    log = open_log(segment_ms=1000)
    # The wall clock is far ahead and runs on; only the records' timestamps count.
    log.append(batch(5000), leader_epoch=0, now_ms=WALL_CLOCK_MS)
    log.append(batch(6000), leader_epoch=0, now_ms=WALL_CLOCK_MS + 10**9)
    assert log.segment_base_offsets() == [0]
    log.append(batch(6001), leader_epoch=0, now_ms=WALL_CLOCK_MS)
    assert log.segment_base_offsets() == [0, 2]
    # The new segment counts from its own first batch.
    log.append(batch(7001), leader_epoch=0, now_ms=WALL_CLOCK_MS)
    assert log.segment_base_offsets() == [0, 2]
    # As the follower's append, which passes no clock.
    log.append_as_follower(build_batch([(7002, None, b"x")], base_offset=4))
    assert log.segment_base_offsets() == [0, 2, 4]


def test_without_timestamps_segment_ms_counts_from_the_segments_creation(open_log) -> None:
    log = open_log(segment_ms=1000)
    log.append(batch(NO_TIMESTAMP), leader_epoch=0, now_ms=100)
    log.append(batch(NO_TIMESTAMP), leader_epoch=0, now_ms=1100)
    assert log.segment_base_offsets() == [0]
    log.append(batch(NO_TIMESTAMP), leader_epoch=0, now_ms=1101)
    assert log.segment_base_offsets() == [0, 2]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_batches_stamped_zero_do_not_use_a_file_descriptor_each(tmp_path) -> None:
    before = _open_fds()
    log = PartitionLog(tmp_path / "t-0")
    for i in range(500):
        log.append(batch(0), leader_epoch=0, now_ms=WALL_CLOCK_MS + i)
    assert _open_fds() - before <= 2  # one segment: its .log and .index
    log.close()


def test_a_roll_that_hits_emfile_leaves_the_log_as_it_was(tmp_path, monkeypatch) -> None:
    log = PartitionLog(tmp_path / "t-0", segment_bytes=200)
    log.append(batch(0), leader_epoch=0, now_ms=0)
    log.append(batch(0), leader_epoch=0, now_ms=0)
    segments = log.segment_base_offsets()
    real_file_store = partition_log_module.FileStore

    def exhausted(*args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(partition_log_module, "FileStore", exhausted)
    with pytest.raises(OSError) as raised:
        for _ in range(10):  # until the segment is full and a roll is due
            log.append(batch(0), leader_epoch=0, now_ms=0)
    assert raised.value.errno == errno.EMFILE
    end = log.log_end_offset
    assert log.segment_base_offsets() == segments
    assert len(log.read(0, 10**6)) == end
    # Descriptors come back: the log goes on, and reopens whole.
    monkeypatch.setattr(partition_log_module, "FileStore", real_file_store)
    log.append(batch(0), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == end + 1
    assert len(log.segment_base_offsets()) == len(segments) + 1
    log.close()
    reopened = PartitionLog(tmp_path / "t-0", recovery_point=0)
    assert len(reopened.read(0, 10**6)) == end + 1
    reopened.close()
