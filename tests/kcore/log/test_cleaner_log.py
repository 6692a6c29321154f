"""Compaction of a partition log (file and memory alike): what a cleaned log holds, that a
clean the log changed under is abandoned, that an idempotent producer's state survives,
that a crash at any step of a swap leaves a log that loads with every record it should
have, and that the file and memory logs agree through cleans."""

import os
import pathlib
import random
import shutil

import pytest

from kcore.log import (
    CleaningAbortedError,
    MemoryPartitionLog,
    OffsetMap,
    PartitionLog,
    _segment,
    build_batch,
    cleanable_offsets,
    iter_batch_records,
    log_to_clean,
    parse_header,
)

from ._agreement import check_file_and_memory_logs_agree

DAY_MS = 86_400_000


@pytest.fixture
def no_fsync(monkeypatch):
    """Durability is not what these tests look at; fsync costs milliseconds here."""
    monkeypatch.setattr(os, "fsync", lambda descriptor: None)


def keyed(key, value, timestamp=1000, **producer):
    return build_batch([(timestamp, key, value)], **producer)


def fill(log, rounds, keys=5, start_round=0, value_size=20):
    """`rounds` batches of one record per key (k0..k{keys-1}), value `v{round}-...`."""
    for r in range(start_round, start_round + rounds):
        for k in range(keys):
            value = f"v{r}-".encode().ljust(value_size, b".")
            log.append(keyed(f"k{k}".encode(), value), 0, now_ms=1000)


def compact(log, *, now_ms=10_000, high_watermark=None, checkpoint=None, capacity=1000,
            delete_retention_ms=DAY_MS):  # fmt: skip
    """One cleaner pass over `log`, as the broker's cleaner runs it; the offset the log is
    then clean to."""
    summaries = log.cleaner_segments()
    offsets = cleanable_offsets(
        summaries,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        checkpoint=checkpoint,
        last_stable_offset=log.log_end_offset if high_watermark is None else high_watermark,
        min_compaction_lag_ms=0,
        now_ms=now_ms,
    )
    plan = log_to_clean(None, summaries, offsets, needs_compaction_now=False, min_cleanable_ratio=0)
    offset_map = OffsetMap(capacity)
    for _ in log.clean(
        offset_map,
        first_dirty_offset=plan.first_dirty_offset,
        first_uncleanable_offset=plan.first_uncleanable_offset,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
    ):
        pass
    return max(offset_map.latest_offset + 1, plan.first_dirty_offset)


def records(log, start=None):
    start = log.log_start_offset if start is None else start
    return [(r.offset, r.key, r.value) for r in iter_batch_records(log.read(start, 10**8))]


def last_values(rows):
    found = {}
    for _, key, value in rows:
        found[key] = value
    return {key: value for key, value in found.items() if value is not None}


def test_a_compacted_log_keeps_the_last_record_of_each_key_below_its_active_segment(open_log):
    log = open_log(segment_bytes=1000)
    fill(log, 6)
    before = records(log)
    active_base = log.segment_base_offsets()[-1]
    assert compact(log) == active_base
    after = records(log)
    below = [row for row in after if row[0] < active_base]
    # Below the active segment each key once, at the offset of its last record there.
    expected_below = {}
    for offset, key, value in before:
        if offset < active_base:
            expected_below[key] = (offset, key, value)
    assert sorted(below) == sorted(expected_below.values())
    assert [row for row in after if row[0] >= active_base] == [
        row for row in before if row[0] >= active_base
    ]
    assert last_values(after) == last_values(before)
    assert log.log_end_offset == 30 and log.log_start_offset == 0
    # Small cleaned segments were merged: fewer segments, same active one.
    assert len(log.segment_base_offsets()) < 5 and log.segment_base_offsets()[-1] == active_base


def test_nothing_at_or_above_the_high_watermark_is_cleaned(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 8)
    bases = log.segment_base_offsets()
    hw = bases[3] + 1  # inside the fourth segment: the cleaner stops at its base
    before = records(log)
    assert compact(log, high_watermark=hw) == bases[3]
    assert [row for row in records(log) if row[0] >= bases[3]] == [
        row for row in before if row[0] >= bases[3]
    ]


def test_a_read_from_a_gap_compaction_left_goes_on_to_the_next_segment(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=300)
    fill(log, 4, keys=2)
    fill(log, 4, keys=2, start_round=4)  # rewrites every key: the older segments empty out
    compact(log)
    log.close()
    log = PartitionLog(tmp_path, segment_bytes=300, recovery_point=log.recovery_point)
    rows = records(log)
    gap = next(o for o in range(log.log_end_offset) if o not in {row[0] for row in rows})
    # A consumer positioned in the gap (say, it read up to there before the clean) gets
    # what follows, not an empty answer forever.
    assert records(log, gap) == [row for row in rows if row[0] > gap]
    log.close()


def test_a_clean_the_log_was_truncated_under_is_abandoned(open_log):
    log = open_log(segment_bytes=300)
    fill(log, 8)
    summaries = log.cleaner_segments()
    offset_map = OffsetMap(1000)
    steps = log.clean(
        offset_map,
        first_dirty_offset=0,
        first_uncleanable_offset=summaries[-1].base_offset,
        now_ms=0,
        delete_retention_ms=DAY_MS,
    )
    next(steps)  # the map is being built
    truncated_to = summaries[3].base_offset + 1
    log.truncate_to(truncated_to)  # the records the map would keep are gone
    with pytest.raises(CleaningAbortedError):
        for _ in steps:
            pass
    # Nothing below the truncation point was dropped for a record that no longer exists.
    assert [row[0] for row in records(log)] == list(range(truncated_to))


def test_an_idempotent_producers_state_survives_a_clean_and_a_restart(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=300)
    for sequence in range(6):  # producer 7 writes k0..k5, then others overwrite them
        log.append(keyed(f"k{sequence}".encode(), b"p", producer_id=7, producer_epoch=3,
                         base_sequence=sequence), 0)  # fmt: skip
    fill(log, 4, keys=6)
    compact(log)
    # Producer 7's last batch lost its record but stays, as an empty batch.
    headers = [parse_header(batch) for batch in log.read(0, 10**8)]
    (last,) = [h for h in headers if h.producer_id == 7]
    assert (last.base_offset, last.record_count, last.base_sequence) == (5, 0, 5)
    log.close()
    log = PartitionLog(tmp_path, segment_bytes=300, recovery_point=log.recovery_point)
    # A retry of that batch is still recognised, and the next sequence is accepted.
    retry = keyed(b"k5", b"p", producer_id=7, producer_epoch=3, base_sequence=5)
    assert log.append(retry, 0) == (5, 5)
    assert log.append(keyed(b"k6", b"p", producer_id=7, producer_epoch=3, base_sequence=6), 0)
    log.close()


def test_an_empty_batch_of_a_producer_that_wrote_again_goes_at_the_next_clean(open_log):
    log = open_log(segment_bytes=200)
    log.append(keyed(b"k0", b"1", producer_id=1, producer_epoch=0, base_sequence=0), 0)
    fill(log, 3, keys=1)
    log.roll()
    compact(log)
    assert next(h.record_count for h in map(parse_header, log.read(0, 10**8))) == 0
    log.append(keyed(b"b", b"1", producer_id=1, producer_epoch=0, base_sequence=1), 0)
    log.roll()
    compact(log)
    headers = [parse_header(batch) for batch in log.read(0, 10**8)]
    assert [(h.base_offset, h.producer_id) for h in headers if h.record_count == 0] == []
    assert [(o, k) for o, k, _ in records(log)] == [(3, b"k0"), (4, b"b")]


def test_cleaned_tombstones_go_after_delete_retention(open_log):
    log = open_log(segment_bytes=200)
    fill(log, 2, keys=2)
    log.append(keyed(b"k0", None), 0)
    log.roll()
    compact(log, now_ms=1000, delete_retention_ms=500)
    assert (b"k0", None) in [(k, v) for _, k, v in records(log)]
    assert b"k0" not in last_values(records(log))
    fill(log, 1, keys=1, start_round=5)  # k0 again, then the tombstone's horizon passes
    log.append(keyed(b"k0", None), 0)
    log.append(keyed(b"k1", b"x"), 0)
    log.roll()
    compact(log, now_ms=1499, delete_retention_ms=500)
    compact(log, now_ms=1500, delete_retention_ms=500, checkpoint=log.log_end_offset)
    rows = records(log)
    assert [key for _, key, value in rows if value is None] == [b"k0"]  # the newest only
    assert last_values(rows) == {b"k1": b"x"}


# -- crashes -------------------------------------------------------------------------------


def test_a_crash_at_any_step_of_a_clean_leaves_a_log_that_loads_with_its_records(
    tmp_path, monkeypatch, no_fsync
):
    """The directory as a crash would leave it after every rename, deletion and first write
    of a cleaned segment, reopened: every record the clean keeps is there, nothing the
    clean did not see is lost, and the clean's temporary files are gone."""
    directory = tmp_path / "t-0"
    log = PartitionLog(directory, segment_bytes=500)
    fill(log, 4, keys=4)
    fill(log, 1, keys=2, start_round=4)
    log.flush()
    before = records(log)
    snapshots: list[pathlib.Path] = []

    def crash_here():
        copy = tmp_path / f"crash-{len(snapshots)}"
        shutil.copytree(directory, copy)
        snapshots.append(copy)

    real_replace, real_unlink = os.replace, pathlib.Path.unlink
    real_append = _segment.FileStore.append

    def replace(source, target, *args, **kwargs):
        real_replace(source, target, *args, **kwargs)
        crash_here()

    def unlink(path, *args, **kwargs):
        real_unlink(path, *args, **kwargs)
        if pathlib.Path(path).parent == directory:
            crash_here()

    def append(store, data):
        first = store.size() == 0
        real_append(store, data)
        if first and store.log_path.name.endswith(".cleaned"):
            crash_here()  # a cleaned segment being written: it goes, the old ones stay

    with monkeypatch.context() as patches:
        patches.setattr(os, "replace", replace)
        patches.setattr(pathlib.Path, "unlink", unlink)
        patches.setattr(_segment.FileStore, "append", append)
        compact(log)
    after = records(log)
    assert len(after) < len(before) and len(snapshots) > 20
    for snapshot in snapshots:
        reopened = PartitionLog(snapshot, segment_bytes=500)  # recovering every segment
        rows = records(reopened)
        assert set(after) <= set(rows) <= set(before), snapshot.name
        assert last_values(rows) == last_values(before)
        assert [row[0] for row in rows] == sorted(row[0] for row in rows)
        assert reopened.log_end_offset == log.log_end_offset
        suffixes = {p.suffix for p in snapshot.iterdir()}
        assert not suffixes & {".cleaned", ".swap", ".deleted"}, snapshot.name
        reopened.close()
    log.close()


def test_a_power_loss_mid_clean_loses_nothing_acknowledged_in_memory():
    rng = random.Random(3)
    log = MemoryPartitionLog(segment_bytes=300)
    fill(log, 8)
    log.flush()
    fill(log, 2, start_round=8)  # not flushed: a power loss may take these
    before = records(log)
    offset_map = OffsetMap(1000)
    steps = log.clean(
        offset_map,
        first_dirty_offset=0,
        first_uncleanable_offset=log.segment_base_offsets()[-1],
        now_ms=0,
        delete_retention_ms=DAY_MS,
    )
    for _ in range(30):
        next(steps)
    log.crash(rng, torn_tail=True)
    try:
        for _ in steps:
            pass
    except CleaningAbortedError:
        pass
    rows = records(log)
    flushed = [row for row in before if row[0] < 40]
    assert last_values(rows) == last_values(flushed) | last_values(
        [row for row in rows if row[0] >= 40]
    )
    assert set(rows) <= set(before)


def test_stale_cleaner_files_are_removed_when_the_log_opens(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=300)
    fill(log, 3)
    log.close()
    (tmp_path / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    (tmp_path / "00000000000000000005.log.deleted").write_bytes(b"old")
    expected = records(PartitionLog(tmp_path, segment_bytes=300))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert not [n for n in names if n.endswith((".cleaned", ".deleted", ".swap"))]
    assert len(expected) == 15


# -- the file log and the memory log agree -------------------------------------------------

SETTINGS = {"segment_bytes": 500, "index_interval_bytes": 120, "segment_ms": 50}


def observe(log):
    return (
        log.log_start_offset,
        log.log_end_offset,
        log.segment_base_offsets(),
        [(r.offset, r.timestamp, r.key, r.value) for r in iter_batch_records(log.read(0, 10**8))]
        if log.log_start_offset == 0
        else records(log),
    )


def random_step(rng, logs, now_ms, checkpoints):
    first = logs[0]
    choice = rng.random()
    if choice < 0.6:
        rows = [
            (now_ms, f"k{rng.randrange(6)}".encode(), None if rng.random() < 0.1 else bytes(30))
            for _ in range(rng.randint(1, 3))
        ]
        for log in logs:
            log.append(build_batch(rows), 0, now_ms=now_ms)
    elif choice < 0.75:
        hw = rng.randint(first.log_start_offset, first.log_end_offset)
        ends = {compact(log, now_ms=now_ms, high_watermark=hw, checkpoint=checkpoints[0],
                        delete_retention_ms=40) for log in logs}  # fmt: skip
        assert len(ends) == 1
        checkpoints[0] = ends.pop()
    elif choice < 0.82 and first.log_end_offset > first.log_start_offset:
        target = rng.randint(first.log_start_offset, first.log_end_offset)
        for log in logs:
            log.truncate_to(target)
        checkpoints[0] = None  # as the broker's cleaner does when it sees a truncation
    elif choice < 0.9:
        hw = rng.randint(first.log_start_offset, first.log_end_offset)
        assert len({log.delete_old_segments(now_ms, 300, 4000, hw) for log in logs}) == 1
    else:
        for log in logs:
            log.flush()


@pytest.mark.parametrize("seed", range(4))
def test_file_and_memory_logs_agree_through_cleans(tmp_path, seed, no_fsync):
    checkpoints = [None]

    def step(rng, logs, now_ms):
        random_step(rng, logs, now_ms, checkpoints)

    check_file_and_memory_logs_agree(tmp_path, SETTINGS, seed, step, observe)
