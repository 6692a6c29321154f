"""A partition log's time indexes (file and memory alike): ListOffsets by timestamp reads
only the batches from the index entry on; rolling, truncation, compaction's swap, a crash
and a reopen keep each `.timeindex` what its batches say; a missing or damaged one is
rebuilt with a warning; `kcore dump-log` prints one as Kafka's tool does."""

import logging
import os
import random
import shutil

import pytest

from kcore.cli import main
from kcore.log import MemoryPartitionLog, PartitionLog, build_batch, iter_batch_records
from kcore.log._time_index import TimeIndex, TimestampOffset

from .test_cleaner_log import compact, fill

# Every batch takes an index entry: each lookup has an entry to start from.
SETTINGS = {"index_interval_bytes": 0, "segment_bytes": 2000}


def stamped(timestamp, count=1):
    return build_batch([(timestamp + i, None, b"v" * 30) for i in range(count)])


def fill_stamped(log, batches, start=1000, step=10):
    for i in range(batches):
        log.append(stamped(start + i * step), 0, now_ms=start + i * step)


def time_index_entries(log):
    return [segment.time_index.entries for segment in log._segments]


def stored_entries(log):
    """Each segment's time index as its store holds it (the file's bytes for a file log)."""
    return [
        TimeIndex.decode(segment.store.read_time_index() or b"", segment.base_offset).entries
        for segment in log._segments
    ]


def scanned_answer(log, target):
    """The first record at or after `target`, found by decoding the whole log."""
    for record in iter_batch_records(log.read(log.log_start_offset, 10**8)):
        if record.timestamp >= target:
            return record.offset, record.timestamp
    return None


def answer(log, target, max_offset=None):
    found = log.offset_for_timestamp(target, max_offset)
    return None if found is None else (found.offset, found.timestamp)


def test_lookups_answer_as_a_scan_of_every_record_would(open_log):
    log = open_log(**SETTINGS)
    for i in range(60):
        log.append(stamped(1000 + i * 10, count=3), 0)
    assert len(log.segment_base_offsets()) > 1
    for target in (0, 1000, 1001, 1003, 1005, 1250, 1590, 1592, 1593, 10**12):
        assert answer(log, target) == scanned_answer(log, target), target
    assert answer(log, 1250, max_offset=78) == (75, 1250)
    assert answer(log, 1250, max_offset=77) is None  # the batch reaches the high watermark
    found = log.offset_for_timestamp(1250)
    assert found.leader_epoch == 0


def test_a_lookup_reads_nothing_before_the_index_entry(open_log):
    """The bytes before the entry's batch are overwritten with garbage that a scan from the
    segment's start would stop at: the lookup never reads them."""
    log = open_log(**SETTINGS)
    fill_stamped(log, 20)
    segment = log._segments[0]
    entry = segment.time_index.lookup(1150)
    assert entry == TimestampOffset(1150, 15)
    start = segment.lookup(entry.offset)
    reads = []
    read = segment.store.read

    def counting_read(position, size):
        reads.append(position)
        return read(position, size)

    segment.store.read = counting_read
    if isinstance(log, PartitionLog):
        with open(segment.store.log_path, "r+b") as file:
            file.write(b"\xff" * start)
    else:
        segment.store.data[:start] = b"\xff" * start
    assert answer(log, 1150) == (15, 1150)
    assert min(reads) == start
    assert len(reads) == 2  # the header of the entry's batch, then the batch to decode


def test_each_segment_is_sealed_with_its_largest_timestamp_when_rolled(open_log):
    log = open_log(index_interval_bytes=10**6, segment_bytes=2000)
    fill_stamped(log, 40)
    first, *_ = time_index_entries(log)
    # The first batch takes the only sparse entry; the roll adds the segment's largest.
    sealed = log._segments[0]
    assert first == [
        TimestampOffset(1000, 0),
        TimestampOffset(sealed.max_timestamp, sealed.next_offset - 1),
    ]
    assert stored_entries(log) == time_index_entries(log)


def test_segment_index_bytes_rolls_the_segment_when_an_index_is_full(open_log):
    log = open_log(index_interval_bytes=0, max_index_bytes=24)  # two time index entries
    fill_stamped(log, 6)
    assert log.segment_base_offsets() == [0, 2, 4]
    assert all(len(entries) == 2 for entries in time_index_entries(log))


def test_truncation_drops_the_entries_of_the_batches_it_drops(open_log):
    log = open_log(**SETTINGS)
    fill_stamped(log, 60)
    log.truncate_to(37)
    assert log.log_end_offset == 37
    for entries in time_index_entries(log):
        assert all(entry.offset < 37 for entry in entries)
    assert time_index_entries(log)[-1][-1] == TimestampOffset(1360, 36)
    assert answer(log, 1365) is None
    fill_stamped(log, 3, start=2000)
    assert answer(log, 1365) == (37, 2000)
    assert stored_entries(log) == time_index_entries(log)


def test_file_and_memory_logs_keep_the_same_time_indexes(tmp_path):
    rng = random.Random(5)
    logs = [PartitionLog(tmp_path / "t-0", **SETTINGS), MemoryPartitionLog(**SETTINGS)]
    now_ms = 1000
    for _ in range(200):
        now_ms += rng.randint(-5, 20)  # producers' clocks disagree: timestamps go back too
        choice = rng.random()
        if choice < 0.8:
            batch = stamped(now_ms, count=rng.randint(1, 3))
            for log in logs:
                log.append(batch, 0)
        elif choice < 0.9 and logs[0].log_end_offset:
            offset = rng.randint(0, logs[0].log_end_offset)
            for log in logs:
                log.truncate_to(offset)
        else:
            for log in logs:
                log.roll()
        assert time_index_entries(logs[0]) == time_index_entries(logs[1])
        target = rng.randint(900, now_ms + 10)
        assert answer(logs[0], target) == answer(logs[1], target) == scanned_answer(logs[1], target)
    assert stored_entries(logs[0]) == time_index_entries(logs[0])
    expected = time_index_entries(logs[0])
    for log in logs:
        log.close()
    reopened = PartitionLog(tmp_path / "t-0", **SETTINGS, recovery_point=logs[0].recovery_point)
    assert time_index_entries(reopened) == expected
    reopened.close()


def test_a_crash_keeps_the_time_index_of_what_survived():
    rng = random.Random(1)
    log = MemoryPartitionLog(**SETTINGS)
    fill_stamped(log, 50)
    log.flush()
    fill_stamped(log, 10, start=5000)
    log.crash(rng, torn_tail=True)
    entries = time_index_entries(log)
    assert all(entry.offset < log.log_end_offset for seg in entries for entry in seg)
    for target in (1000, 1495, 5000, 5050):
        assert answer(log, target) == scanned_answer(log, target)


@pytest.mark.parametrize("damage", ["deleted", "truncated", "garbage", "stale"])
def test_a_missing_or_damaged_time_index_is_rebuilt_with_a_warning(tmp_path, caplog, damage):
    log = PartitionLog(tmp_path, **SETTINGS)
    fill_stamped(log, 80)
    expected = time_index_entries(log)
    assert len(expected) > 2
    log.close()
    path = tmp_path / "00000000000000000000.timeindex"
    if damage == "deleted":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-5])
    elif damage == "garbage":
        path.write_bytes(b"\xff" * 36)
    else:
        path.write_bytes(path.read_bytes()[:12])  # whole entries, but not this segment's
    with caplog.at_level(logging.WARNING, logger="kcore.log"):
        reopened = PartitionLog(tmp_path, **SETTINGS, recovery_point=log.recovery_point)
    assert time_index_entries(reopened) == expected
    assert stored_entries(reopened) == expected
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("00000000000000000000: rebuilding its time index" in w for w in warnings)
    assert answer(reopened, 1500) == (50, 1500)
    reopened.close()


def test_a_clean_reopen_trusts_the_time_indexes_silently(tmp_path, caplog):
    log = PartitionLog(tmp_path, **SETTINGS)
    fill_stamped(log, 80)
    log.flush()  # the active segment's index not sealed: a crash after a flush
    expected = time_index_entries(log)
    with caplog.at_level(logging.WARNING, logger="kcore.log"):
        reopened = PartitionLog(tmp_path, **SETTINGS, recovery_point=log.recovery_point)
    assert not caplog.records
    assert stored_entries(reopened) == time_index_entries(reopened)
    assert time_index_entries(reopened)[:-1] == expected[:-1]
    reopened.close()
    log.close()


def test_a_clean_swaps_in_the_cleaned_segments_time_index(open_log):
    log = open_log(segment_bytes=500, index_interval_bytes=0)
    fill(log, 6, keys=4)
    before = time_index_entries(log)
    compact(log)
    assert time_index_entries(log) != before
    assert stored_entries(log) == time_index_entries(log)
    for segment in log._segments[:-1]:  # sealed: the last entry is the largest timestamp
        last = segment.time_index.last_entry
        assert last.timestamp == segment.max_timestamp
    if isinstance(log, PartitionLog):
        # (a segment the clean emptied has no index files, as before it was written to)
        written = {f"{s.base_offset:020d}.timeindex" for s in log._segments if s.size}
        assert written <= set(os.listdir(log.directory))


def test_a_crash_at_any_step_of_a_clean_leaves_consistent_time_indexes(
    tmp_path, monkeypatch, caplog
):
    """Reopened without recovery (every segment below the recovery point: its index files
    are trusted if they pass the check) after a crash at each rename and deletion of a
    swap: no time index needs rebuilding, and each answers as the batches do."""
    monkeypatch.setattr(os, "fsync", lambda descriptor: None)
    directory = tmp_path / "t-0"
    log = PartitionLog(directory, segment_bytes=500, index_interval_bytes=0)
    for r in range(6):
        for k in range(4):
            value = f"v{r}-".encode().ljust(20, b".")
            log.append(build_batch([(1000 + r * 10 + k, f"k{k}".encode(), value)]), 0)
    log.flush()
    snapshots = []
    real_replace = os.replace

    def replace(source, target, *args, **kwargs):
        real_replace(source, target, *args, **kwargs)
        copy = tmp_path / f"crash-{len(snapshots)}"
        shutil.copytree(directory, copy)
        snapshots.append(copy)

    with monkeypatch.context() as patches:
        patches.setattr(os, "replace", replace)
        compact(log)
    assert len(snapshots) > 6
    for snapshot in snapshots:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kcore.log"):
            reopened = PartitionLog(
                snapshot,
                segment_bytes=500,
                index_interval_bytes=0,
                recovery_point=log.log_end_offset,
            )
        assert not [r for r in caplog.records if "time index" in r.getMessage()], snapshot
        assert stored_entries(reopened) == time_index_entries(reopened)
        for target in (1000, 1021, 1035, 1100):
            assert answer(reopened, target) == scanned_answer(reopened, target), snapshot
        reopened.close()
    log.close()


def test_dump_log_prints_a_time_index_as_kafkas_tool_does(tmp_path, capsys):
    log = PartitionLog(tmp_path, index_interval_bytes=100, segment_bytes=2000)
    fill_stamped(log, 10)
    log.close()
    path = tmp_path / "00000000000000000000.timeindex"
    assert main(["dump-log", "--files", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Dumping {path}",
        "timestamp: 1000 offset: 0",
        "timestamp: 1020 offset: 2",
        "timestamp: 1040 offset: 4",
        "timestamp: 1060 offset: 6",
        "timestamp: 1080 offset: 8",
        "timestamp: 1090 offset: 9",
    ]
    # A crashed Kafka's preallocated file ends in zeroes: the tool stops at them.
    path.write_bytes(path.read_bytes() + b"\x00" * 24 + b"\x00" * 3)
    assert main(["dump-log", "--files", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "timestamp: 1090 offset: 9"
