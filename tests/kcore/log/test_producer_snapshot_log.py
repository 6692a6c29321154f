"""The partition log's producer snapshots, as Kafka 3.5's UnifiedLog / LogLoader keep them:
taken at each roll (named by the new segment's base offset) and on close; at start-up the
latest one at or below the log end offset is loaded and only the batches after it replayed;
a truncation deletes those above it; deleted segments take theirs along; a corrupt one is
deleted with a warning and the state rebuilt. A producer retrying its last batch across a
restart gets the original offsets."""

from __future__ import annotations

import logging
import random
import shutil

import pytest

from kcore import errors
from kcore.log import MemoryPartitionLog, PartitionLog, build_batch, iter_batch_records
from kcore.log._producer_snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)


def batch(pid, seq, count=1, epoch=0, timestamp=0):
    return build_batch(
        [(timestamp, None, b"v%d" % (seq + i)) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def values(log):
    return [record.value for record in iter_batch_records(log.read(log.log_start_offset, 1 << 20))]


def snapshot_offsets(directory):
    return sorted(int(path.stem) for path in directory.glob("*.snapshot"))


def read_snapshot(directory, offset):
    name = snapshot_file_name(offset)
    return decode_snapshot((directory / name).read_bytes(), name)


def crash_copy(log, source, target):
    """The partition directory as a process crash leaves it (every write reached the OS; no
    snapshot on close), opened again; the original log is closed."""
    shutil.copytree(source, target)
    recovery_point, log_start = log.recovery_point, log.log_start_offset
    log.close()
    return PartitionLog(
        target,
        segment_bytes=log.segment_bytes,
        recovery_point=recovery_point,
        log_start_offset=log_start,
    )


def test_a_snapshot_is_taken_at_each_roll_named_by_the_new_segment(tmp_path):
    log = PartitionLog(tmp_path)
    log.append(batch(7, 0, count=2, timestamp=10), 0)  # offsets 0-1
    log.append(build_batch([(0, None, b"plain")]), 0)  # offset 2: no producer
    log.roll()
    assert log.segment_base_offsets() == [0, 3]
    assert snapshot_offsets(tmp_path) == [3]
    assert read_snapshot(tmp_path, 3) == [SnapshotEntry(7, 0, 1, 1, 1, 10)]
    log.append(batch(7, 2, timestamp=20), 0)  # offset 3
    log.append(batch(8, 0, epoch=4, timestamp=30), 0)  # offset 4
    log.roll()
    assert snapshot_offsets(tmp_path) == [3, 5]
    assert read_snapshot(tmp_path, 5) == [
        SnapshotEntry(7, 0, 2, 3, 0, 20),
        SnapshotEntry(8, 4, 0, 4, 0, 30),
    ]
    log.close()


def test_a_snapshot_is_taken_at_close_at_the_log_end_offset(tmp_path):
    log = PartitionLog(tmp_path)
    log.append(batch(7, 0, count=3), 0)
    log.append(batch(7, 3), 0)
    log.close()
    assert snapshot_offsets(tmp_path) == [4]
    assert read_snapshot(tmp_path, 4) == [SnapshotEntry(7, 0, 3, 3, 0, 0)]
    # Reopened and closed with nothing new: the snapshot is not written again (a write
    # replaces the file).
    inode = (tmp_path / snapshot_file_name(4)).stat().st_ino
    PartitionLog(tmp_path, recovery_point=4).close()
    assert snapshot_offsets(tmp_path) == [4]
    assert (tmp_path / snapshot_file_name(4)).stat().st_ino == inode


def _two_producers_across_a_roll(log):
    """Producer 7 writes three batches, the segment rolls at offset 3, producer 8 writes
    three more (offsets 3-5)."""
    for seq in range(3):
        log.append(batch(7, seq), 0)
    log.roll()
    for seq in range(3):
        log.append(batch(8, seq), 0)


def test_a_restart_loads_the_latest_snapshot_and_replays_only_the_batches_after_it(tmp_path):
    log = PartitionLog(tmp_path / "before")
    _two_producers_across_a_roll(log)
    restarted = crash_copy(log, tmp_path / "before", tmp_path / "after")
    # Producer 8's batches were replayed: a retry of any of them is recognised.
    assert restarted.append(batch(8, 0), 1) == (3, 3)
    assert restarted.append(batch(8, 1), 1) == (4, 4)
    # Producer 7's come from the snapshot at offset 3, which keeps its last batch only (as
    # Kafka's does): had the replay started below it, its first batch would be known too.
    assert restarted.append(batch(7, 2), 1) == (2, 2)
    with pytest.raises(errors.OutOfOrderSequenceError):
        restarted.append(batch(7, 0), 1)
    assert values(restarted) == [b"v0", b"v1", b"v2", b"v0", b"v1", b"v2"]
    # And the state is snapshotted at the log end offset once rebuilt.
    assert snapshot_offsets(tmp_path / "after") == [3, 6]
    restarted.close()


def test_what_is_below_the_snapshot_is_not_read_again(tmp_path):
    log = PartitionLog(tmp_path / "before")
    _two_producers_across_a_roll(log)
    shutil.copytree(tmp_path / "before", tmp_path / "after")
    log.close()
    # A snapshot at offset 3 that knows no producer: if the batches below it were replayed,
    # producer 7 would be known after the restart.
    (tmp_path / "after" / snapshot_file_name(3)).write_bytes(encode_snapshot([]))
    restarted = PartitionLog(tmp_path / "after")
    assert restarted.append(batch(7, 42), 1) == (6, 6)  # unknown: any sequence is taken
    assert restarted.append(batch(8, 1), 1) == (4, 4)  # replayed after the snapshot
    restarted.close()


@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
def test_a_retried_last_batch_after_a_restart_gets_the_original_offsets(tmp_path, shutdown):
    log = PartitionLog(tmp_path / "before", segment_bytes=300)
    for seq in range(0, 12, 2):
        log.append(batch(7, seq, count=2), 0)
    assert len(log.segment_base_offsets()) > 1
    if shutdown == "clean":
        log.close()
        restarted = PartitionLog(tmp_path / "before", segment_bytes=300, recovery_point=12)
    else:
        restarted = crash_copy(log, tmp_path / "before", tmp_path / "after")
    assert restarted.append(batch(7, 10, count=2), 1) == (10, 11)
    assert restarted.log_end_offset == 12
    assert restarted.append(batch(7, 12), 1) == (12, 12)
    restarted.close()


def test_recovery_gives_the_same_producer_state(tmp_path):
    log = PartitionLog(tmp_path / "before", segment_bytes=400)
    rng = random.Random(5)
    sequences = {7: 0, 8: 0, 9: 0}
    for _ in range(40):
        pid = rng.choice(sorted(sequences))
        count = rng.randint(1, 3)
        log.append(batch(pid, sequences[pid], count=count, timestamp=rng.randrange(10**6)), 0)
        sequences[pid] += count
    assert len(log.segment_base_offsets()) > 2
    before = log.producer_state.snapshot_entries()
    restarted = crash_copy(log, tmp_path / "before", tmp_path / "after")
    assert restarted.producer_state.snapshot_entries() == before
    for pid, next_seq in sorted(sequences.items()):
        assert restarted.append(batch(pid, next_seq), 1)[0] == restarted.log_end_offset - 1
    restarted.close()


def test_without_a_snapshot_recovery_rebuilds_every_kept_batch(tmp_path):
    log = PartitionLog(tmp_path / "before")
    for seq in range(8):
        log.append(batch(7, seq), 0)
    before = dict(log.producer_state.producers)
    restarted = crash_copy(log, tmp_path / "before", tmp_path / "after")
    assert restarted.producer_state.producers == before
    assert restarted.append(batch(7, 3), 1) == (3, 3)  # the oldest of the five kept
    restarted.close()


def test_a_corrupt_snapshot_is_deleted_and_the_state_rebuilt(tmp_path, caplog):
    log = PartitionLog(tmp_path)
    _two_producers_across_a_roll(log)
    log.close()
    assert snapshot_offsets(tmp_path) == [3, 6]
    latest = tmp_path / snapshot_file_name(6)
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF
    latest.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kcore.log"):
        reopened = PartitionLog(tmp_path, recovery_point=6)
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert snapshot_file_name(6) in warning.getMessage()
    assert "CRC" in warning.getMessage()
    # Rebuilt from the snapshot at 3 and the batches after it, then snapshotted afresh.
    assert reopened.append(batch(8, 2), 1) == (5, 5)
    assert reopened.append(batch(7, 2), 1) == (2, 2)
    assert read_snapshot(tmp_path, 6) == reopened.producer_state.snapshot_entries()
    reopened.close()


def test_unreadable_snapshots_fall_back_to_the_whole_log(tmp_path, caplog):
    log = PartitionLog(tmp_path)
    _two_producers_across_a_roll(log)
    log.close()
    for offset in snapshot_offsets(tmp_path):
        (tmp_path / snapshot_file_name(offset)).write_bytes(b"\x00\x01\x00")
    with caplog.at_level(logging.WARNING, logger="kcore.log"):
        reopened = PartitionLog(tmp_path, recovery_point=6)
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2
    assert reopened.append(batch(7, 0), 1) == (0, 0)  # every batch replayed
    assert reopened.append(batch(8, 0), 1) == (3, 3)
    reopened.close()


def test_truncation_below_a_snapshot_deletes_it(open_log):
    log = open_log()
    _two_producers_across_a_roll(log)  # a snapshot at 3
    log.roll()  # and at 6
    log.append(batch(8, 3), 0)
    assert log.producer_snapshots.offsets() == [3, 6]
    log.truncate_to(5)
    # The snapshot at 6 is gone; the state is reloaded from 3 and snapshotted at 5.
    assert log.producer_snapshots.offsets() == [3, 5]
    assert log.append(batch(8, 1), 1) == (4, 4)  # still there
    assert log.append(batch(8, 2), 1) == (5, 5)  # truncated: appended again
    log.truncate_to(1)
    assert log.producer_snapshots.offsets() == [1]
    assert log.append(batch(7, 0), 1) == (0, 0)
    with pytest.raises(errors.OutOfOrderSequenceError):
        log.append(batch(7, 2), 1)


def test_deleted_segments_take_their_snapshots_along(open_log):
    log = open_log()
    for seq in range(4):
        log.append(batch(7, seq), 0)
        log.roll()
    assert log.producer_snapshots.offsets() == [1, 2, 3, 4]
    log.increment_log_start_offset(2)
    assert log.segment_base_offsets() == [2, 3, 4]
    assert log.producer_snapshots.offsets() == [2, 3, 4]
    assert log.delete_old_segments(10**12, 0, -1, high_watermark=4) == 2
    assert log.producer_snapshots.offsets() == [4]
    assert log.append(batch(7, 3), 1) == (3, 3)  # the state outlives the segments
    log.truncate_fully_and_start_at(10)
    assert log.producer_snapshots.offsets() == []
    assert log.append(batch(7, 9), 1) == (10, 10)  # no state: any sequence


def test_at_start_up_only_the_snapshots_of_existing_segments_and_the_latest_are_kept(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=150)
    for seq in range(6):
        log.append(batch(7, seq), 0)
    bases = log.segment_base_offsets()
    log.close()
    assert snapshot_offsets(tmp_path) == [*bases[1:], 6]
    for stray in (2, 4, 9):  # below, between and above the segments
        offset = next(o for o in range(stray, 100) if o not in bases)
        (tmp_path / snapshot_file_name(offset)).write_bytes(encode_snapshot([]))
    reopened = PartitionLog(tmp_path, segment_bytes=150, recovery_point=6)
    # Strays go (the one above the log end offset too, deleted as out of range), and the
    # state is rebuilt as it was.
    assert snapshot_offsets(tmp_path) == [*bases[1:], 6]
    assert reopened.append(batch(7, 5), 1) == (5, 5)
    reopened.close()


def _random_idempotent_step(rng, logs, sequences, tmp_path, step):
    """One operation on every log alike; returns what they answered (must agree)."""
    first = logs[0]
    choice = rng.random()
    if choice < 0.55:
        pid = rng.choice(sorted(sequences))
        epoch, next_seq, sent = sequences[pid]
        if sent and rng.random() < 0.3:
            epoch, seq, count = rng.choice(sent[-6:])  # a retry
        else:
            if rng.random() < 0.1:
                epoch, next_seq = epoch + 1, 0
            seq, count = next_seq, rng.randint(1, 3)
        answers = []
        for log in logs:
            try:
                answers.append(log.append(batch(pid, seq, count, epoch, step), 1))
            except errors.KafkaError as error:
                answers.append(type(error).__name__)
        if isinstance(answers[0], tuple) and seq == next_seq:
            sequences[pid] = (epoch, seq + count, [*sent, (epoch, seq, count)])
        return answers
    if choice < 0.65:
        target = rng.randint(first.log_start_offset, first.log_end_offset)
        for log in logs:
            log.truncate_to(target)
    elif choice < 0.72:
        for log in logs:
            log.roll()
    elif choice < 0.77:
        hw = rng.randint(first.log_start_offset, first.log_end_offset)
        return [log.delete_old_segments(10**12, -1, 300, hw) for log in logs]
    elif choice < 0.87:
        file_log, memory_log = logs
        logs[0] = crash_copy(file_log, file_log.directory, tmp_path / f"crash-{step}")
        memory_log.recover()
    elif choice < 0.95:
        file_log, memory_log = logs
        file_log.close()
        logs[0] = PartitionLog(
            file_log.directory,
            segment_bytes=200,
            recovery_point=file_log.recovery_point,
            log_start_offset=file_log.log_start_offset,
        )
        memory_log.close()
    else:
        for log in logs:
            log.flush()
    return None


@pytest.mark.parametrize("seed", range(3))
def test_the_file_and_memory_logs_keep_the_same_producer_state(tmp_path, seed):
    rng = random.Random(seed)
    logs = [
        PartitionLog(tmp_path / "start", segment_bytes=200),
        MemoryPartitionLog(segment_bytes=200),
    ]
    sequences = {pid: (0, 0, []) for pid in (7, 8, 9)}
    for step in range(120):
        answers = _random_idempotent_step(rng, logs, sequences, tmp_path, step)
        if answers is not None:
            assert answers[0] == answers[1], f"step {step}"
        file_log, memory_log = logs
        assert file_log.producer_state.producers == memory_log.producer_state.producers
        assert file_log.producer_snapshots.offsets() == memory_log.producer_snapshots.offsets()
        assert values(file_log) == values(memory_log)
    logs[0].close()
