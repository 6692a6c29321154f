"""Idempotent producers: a retried batch is not written twice, sequences must follow."""

import pytest

from kcore import errors
from kcore.log import MemoryPartitionLog, build_batch, iter_batch_records, split_batches


def _batch(pid, seq, *values, epoch=0):
    return build_batch(
        [(0, None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def _values(log):
    return [r.value for r in iter_batch_records(log.read(0, 1 << 20))]


def test_a_retried_batch_gets_the_original_offsets_and_is_not_appended_again():
    log = MemoryPartitionLog()
    assert log.append(_batch(7, 0, b"a", b"b"), 0) == (0, 1)
    assert log.append(_batch(7, 2, b"c"), 0) == (2, 2)
    assert log.append(_batch(7, 0, b"a", b"b"), 0) == (0, 1)  # the retry
    assert _values(log) == [b"a", b"b", b"c"]


def test_a_sequence_gap_is_out_of_order():
    log = MemoryPartitionLog()
    log.append(_batch(7, 0, b"a"), 0)
    with pytest.raises(errors.OutOfOrderSequenceError):
        log.append(_batch(7, 5, b"x"), 0)
    # A producer the partition has no state for is taken at any sequence (Kafka 3.5's
    # ProducerAppendInfo.checkSequence; see test_producer_state_rules.py).
    log.append(_batch(8, 3, b"y"), 0)
    assert _values(log) == [b"a", b"y"]


def test_an_older_producer_epoch_is_fenced():
    log = MemoryPartitionLog()
    log.append(_batch(7, 0, b"a", epoch=2), 0)
    with pytest.raises(errors.InvalidProducerEpochError):
        log.append(_batch(7, 1, b"b", epoch=1), 0)
    log.append(_batch(7, 0, b"b", epoch=3), 0)  # a new epoch restarts at 0
    assert _values(log) == [b"a", b"b"]


def test_non_idempotent_batches_are_never_deduplicated():
    log = MemoryPartitionLog()
    log.append(build_batch([(0, None, b"a")]), 0)
    log.append(build_batch([(0, None, b"a")]), 0)
    assert _values(log) == [b"a", b"a"]


def test_the_state_follows_the_log_through_truncation_and_to_followers():
    leader, follower = MemoryPartitionLog(), MemoryPartitionLog()
    for seq, value in enumerate([b"a", b"b", b"c"]):
        leader.append(_batch(7, seq, value), 0)
    follower.append_as_follower(b"".join(leader.read(0, 1 << 20)))
    # The follower, become leader, recognises the producer's retry of offset 2.
    assert follower.append(_batch(7, 2, b"c"), 1) == (2, 2)
    follower.truncate_to(2)
    # After truncation the batch at offset 2 is gone, so its retry is appended again.
    assert follower.append(_batch(7, 2, b"c"), 1) == (2, 2)
    assert _values(follower) == [b"a", b"b", b"c"]
    assert [
        h.partition_leader_epoch for h, _ in split_batches(b"".join(follower.read(0, 1 << 20)))
    ] == [0, 0, 1]
