"""Seeded random operation sequences: the file log and the memory log must answer alike,
and a reopened file log must equal the one that was closed."""

import pytest

from kcore.log import build_batch, iter_batch_records

from ._agreement import check_file_and_memory_logs_agree

SETTINGS = {"segment_bytes": 600, "index_interval_bytes": 120, "segment_ms": 50}


def observe(log):
    batches = log.read(log.log_start_offset, 1_000_000)
    return (
        log.log_start_offset,
        log.log_end_offset,
        log.segment_base_offsets(),
        log.epoch_cache.entries(),
        [(r.offset, r.timestamp, r.value) for r in iter_batch_records(batches)],
    )


def random_step(rng, logs, now_ms):
    first = logs[0]
    choice = rng.random()
    if choice < 0.6:
        count = rng.randint(1, 4)
        batch = build_batch([(now_ms, None, bytes([rng.randrange(256)]) * 30)] * count)
        epoch = max(first.latest_epoch or 0, rng.choice([0, 0, 1]) + (first.latest_epoch or 0))
        results = {log.append(batch, epoch, now_ms=now_ms) for log in logs}
        assert len(results) == 1
    elif choice < 0.7 and first.log_end_offset > first.log_start_offset:
        target = rng.randint(first.log_start_offset, first.log_end_offset)
        for log in logs:
            log.truncate_to(target)
    elif choice < 0.8:
        hw = rng.randint(first.log_start_offset, first.log_end_offset)
        deleted = {log.delete_old_segments(now_ms, 200, 3000, hw) for log in logs}
        assert len(deleted) == 1
    elif choice < 0.9:
        for log in logs:
            log.flush()
    elif first.log_end_offset > first.log_start_offset:
        start = rng.randint(first.log_start_offset, first.log_end_offset)
        max_bytes = rng.randint(1, 800)
        reads = [log.read(start, max_bytes, max_offset=first.log_end_offset) for log in logs]
        assert reads[0] == reads[1]
        if start < first.log_end_offset:
            assert reads[0], "a read below the end returns at least one batch"


@pytest.mark.parametrize("seed", range(8))
def test_random_operations(tmp_path, seed):
    check_file_and_memory_logs_agree(tmp_path, SETTINGS, seed, random_step, observe)
