"""The broker's idempotent-producer rules, sans-IO (Kafka 3.5's ProducerAppendInfo
checkProducerEpoch / checkSequence and ProducerStateEntry.findDuplicateBatch), applied to
batch headers directly."""

from __future__ import annotations

import pytest

from kcore import errors
from kcore.log import (
    MemoryPartitionLog,
    build_batch,
    iter_batch_records,
    parse_header,
    with_base_offset,
)
from kcore.log._producer_state import BATCHES_KEPT, ProducerStateManager, check_batch

INT_MAX = 2**31 - 1


def header(pid: int, epoch: int, seq: int, count: int = 1, offset: int = 0):
    batch = build_batch(
        [(0, None, b"v")] * count, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    return parse_header(with_base_offset(batch, offset))


def state_with(*headers) -> ProducerStateManager:
    state = ProducerStateManager()
    for h in headers:
        assert state.check(h) is None
        state.update(h)
    return state


def test_an_unknown_producer_is_taken_at_any_epoch_and_sequence():
    state = ProducerStateManager()
    assert check_batch(None, header(7, 0, 0)) is None
    assert state.check(header(7, 3, 42)) is None  # e.g. its batches were all deleted


def test_in_the_same_epoch_sequences_must_follow():
    state = state_with(header(7, 0, 0, count=3, offset=0))
    assert state.check(header(7, 0, 3, offset=3)) is None
    with pytest.raises(errors.OutOfOrderSequenceError, match="out of order"):
        state.check(header(7, 0, 4, offset=3))  # a gap
    with pytest.raises(errors.OutOfOrderSequenceError):
        state.check(header(7, 0, 1, offset=3))  # overlaps, not a duplicate


def test_sequences_wrap_after_int_max():
    state = state_with(header(7, 0, INT_MAX - 1, count=2))
    assert state.check(header(7, 0, 0, offset=2)) is None


def test_a_newer_epoch_must_start_at_sequence_zero():
    state = state_with(header(7, 0, 0, count=5))
    with pytest.raises(errors.OutOfOrderSequenceError, match="new epoch"):
        state.check(header(7, 1, 5, offset=5))
    assert state.check(header(7, 1, 0, offset=5)) is None
    state.update(header(7, 1, 0, offset=5))
    assert state.producers[7].epoch == 1
    assert [b.first_seq for b in state.producers[7].batches] == [0]  # the old epoch's cleared


def test_an_older_epoch_is_fenced_even_for_a_former_duplicate():
    old = header(7, 0, 0, count=2, offset=0)
    state = state_with(old, header(7, 1, 0, offset=2))
    with pytest.raises(errors.InvalidProducerEpochError, match="smaller than the last seen"):
        state.check(old)
    with pytest.raises(errors.InvalidProducerEpochError):
        state.check(header(7, 0, 2, offset=3))


def test_duplicates_of_the_last_five_batches_get_their_original_offsets():
    headers = [header(7, 0, seq, offset=seq) for seq in range(BATCHES_KEPT + 2)]
    state = state_with(*headers)
    for h in headers[-BATCHES_KEPT:]:
        assert state.check(header(7, 0, h.base_sequence, offset=99)) == (h.base_offset,) * 2
    # Older than the last five: not known as a duplicate, and out of order.
    with pytest.raises(errors.OutOfOrderSequenceError):
        state.check(header(7, 0, 1, offset=99))


def test_a_duplicate_must_match_the_whole_sequence_range():
    state = state_with(header(7, 0, 0, count=2), header(7, 0, 2, count=2, offset=2))
    assert state.check(header(7, 0, 2, count=2, offset=9)) == (2, 3)
    with pytest.raises(errors.OutOfOrderSequenceError):
        state.check(header(7, 0, 2, count=1, offset=9))


def test_followers_take_an_epoch_change_as_it_comes():
    # A follower (or a rebuild from the log) updates without checks; another epoch clears
    # the kept batches, as Kafka's ProducerStateEntry.maybeUpdateProducerEpoch.
    state = ProducerStateManager()
    state.update(header(7, 2, 0))
    state.update(header(7, 1, 0, offset=1))
    assert state.producers[7].epoch == 1
    assert len(state.producers[7].batches) == 1


def test_the_log_applies_the_rules_per_batch_and_keeps_non_idempotent_batches():
    log = MemoryPartitionLog()
    log.append(build_batch([(0, None, b"a")], producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.append(build_batch([(0, None, b"plain")]), 0)
    with pytest.raises(errors.OutOfOrderSequenceError):
        log.append(
            build_batch([(0, None, b"b")], producer_id=7, producer_epoch=1, base_sequence=1), 0
        )
    log.append(build_batch([(0, None, b"b")], producer_id=7, producer_epoch=1, base_sequence=0), 0)
    values = [r.value for r in iter_batch_records(log.read(0, 1 << 20))]
    assert values == [b"a", b"plain", b"b"]
