"""The idempotent producer's sequence bookkeeping, sans-IO (Kafka's TransactionManager for
a producer without a transactional id): which batch may be drained, what it is stamped
with, and what a failure does to its partition's sequences."""

from __future__ import annotations

from kcore import errors
from kcore.client._accumulator import ProducerBatch
from kcore.client._idempotence import MAX_EPOCH, IdempotenceManager, ProducerIdAndEpoch
from kcore.common import TopicPartition

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)
OUT_OF_ORDER, UNKNOWN_PRODUCER_ID, NOT_ENOUGH_REPLICAS = 45, 59, 19


def batch(tp: TopicPartition = P0, records: int = 1) -> ProducerBatch:
    b = ProducerBatch(tp, 0.0)
    b.records.extend([(0, None, b"v")] * records)
    return b


def manager(pid: int = 7, epoch: int = 0) -> IdempotenceManager:
    m = IdempotenceManager()
    m.set_producer_id_and_epoch(pid, epoch)
    return m


def drain(m: IdempotenceManager, b: ProducerBatch) -> ProducerBatch:
    assert m.may_drain(b)
    m.assign_sequence(b)
    return b


def stamp(b: ProducerBatch) -> tuple[int, int, int]:
    return (b.producer_id, b.producer_epoch, b.base_sequence)


def test_nothing_drains_without_a_producer_id():
    assert not IdempotenceManager().may_drain(batch())


def test_sequences_follow_per_partition_and_a_retry_keeps_its_stamp():
    m = manager()
    a, b, c = drain(m, batch(records=3)), batch(), drain(m, batch(P1))
    assert stamp(a) == (7, 0, 0) and stamp(c) == (7, 0, 0)
    drain(m, b)  # drained while "a" is in flight: the next sequence
    assert stamp(b) == (7, 0, 3)
    assert not m.may_drain(b)  # a retry goes only as the first in flight
    m.handle_completed(a, 0)
    assert m.may_drain(b)
    m.assign_sequence(b)  # a retry: unchanged
    assert stamp(b) == (7, 0, 3)


def test_a_failed_sent_batch_bumps_the_epoch_and_restarts_its_partition_at_zero():
    m = manager()
    m.handle_completed(drain(m, batch()), 0)
    failed, other = drain(m, batch()), drain(m, batch(P1))
    m.handle_failed(failed, errors.MessageTooLargeError(), adjust_sequences=True)
    assert m.epoch_bump_required
    assert not m.may_drain(batch())  # not before the bump
    m.bump_epoch_if_needed(on_the_wire={P1})
    assert m.producer_id_and_epoch == ProducerIdAndEpoch(7, 1)
    assert stamp(drain(m, batch())) == (7, 1, 0)
    # P1's batch in flight keeps epoch 0; its next new batch waits for it, then restarts.
    assert stamp(other) == (7, 0, 0)
    assert not m.may_drain(batch(P1))
    m.handle_completed(other, 0)
    assert stamp(drain(m, batch(P1))) == (7, 1, 0)


def test_the_bump_waits_until_no_batch_of_its_partitions_is_on_the_wire():
    m = manager()
    a = drain(m, batch())
    m.request_epoch_bump(P0)
    m.bump_epoch_if_needed(on_the_wire={P0})
    assert m.producer_id_and_epoch.epoch == 0
    m.bump_epoch_if_needed(on_the_wire=set())
    assert m.producer_id_and_epoch.epoch == 1
    assert stamp(a) == (7, 1, 0) and a.sequence_reset  # re-stamped: it is retried at 0


def test_an_expired_sent_batch_leaves_its_partition_unresolved_until_the_bump():
    m = manager()
    m.handle_completed(drain(m, batch()), 0)
    expired = drain(m, batch(records=2))
    m.handle_expired(expired)
    assert m.has_unresolved_sequence(P0)
    assert not m.may_drain(batch())
    m.maybe_resolve_sequences()  # nothing in flight, acknowledged up to 0, next is 3
    assert not m.has_unresolved_sequence(P0) and m.epoch_bump_required
    m.bump_epoch_if_needed()
    assert stamp(drain(m, batch())) == (7, 1, 0)


def test_an_expired_unsent_batch_changes_nothing():
    m = manager()
    m.handle_expired(batch())
    m.handle_failed(batch(), errors.RequestTimedOutError(), adjust_sequences=True)
    assert not m.epoch_bump_required
    assert stamp(drain(m, batch())) == (7, 0, 0)


def test_retries_exhausted_is_unresolved_not_an_immediate_bump():
    m = manager()
    a = drain(m, batch())
    m.handle_failed(a, errors.NotEnoughReplicasError(), adjust_sequences=False)
    assert m.has_unresolved_sequence(P0) and not m.epoch_bump_required
    m.maybe_resolve_sequences()
    assert m.epoch_bump_required


def test_out_of_order_on_the_next_batch_bumps_and_it_is_retried_at_zero():
    m = manager()
    m.handle_completed(drain(m, batch()), 0)
    b = drain(m, batch())
    assert m.can_retry(b, OUT_OF_ORDER)
    m.bump_epoch_if_needed()
    assert stamp(b) == (7, 1, 0) and b.sequence_reset
    # Refused again though re-stamped: retried without another bump.
    assert m.can_retry(b, OUT_OF_ORDER) and not m.epoch_bump_required


def test_out_of_order_on_a_batch_that_is_not_next_is_retried_without_a_bump():
    m = manager()
    drain(m, batch())  # sequence 0, its answer still to come
    b = drain(m, batch())
    assert m.can_retry(b, OUT_OF_ORDER) and not m.epoch_bump_required


def test_unknown_producer_id():
    m = manager()
    a = drain(m, batch())
    assert m.can_retry(a, UNKNOWN_PRODUCER_ID, log_start_offset=-1)
    assert not m.epoch_bump_required  # no log start offset: plain retry
    assert m.can_retry(a, UNKNOWN_PRODUCER_ID, log_start_offset=0)
    assert m.epoch_bump_required
    # Failed for good: the partition's sequences start over (no bump of its own).
    m2 = manager()
    b = drain(m2, batch())
    m2.handle_failed(b, errors.UnknownProducerIdError(), adjust_sequences=True)
    assert not m2.epoch_bump_required
    assert stamp(drain(m2, batch())) == (7, 0, 0)


def test_other_errors_retry_as_retriable():
    m = manager()
    a = drain(m, batch())
    assert m.can_retry(a, NOT_ENOUGH_REPLICAS)
    assert not m.can_retry(a, 10)  # MESSAGE_TOO_LARGE
    assert not m.epoch_bump_required


def test_an_exhausted_epoch_drops_the_producer_id_and_the_new_one_restarts_the_partition():
    m = manager(epoch=MAX_EPOCH)
    queued_retry = drain(m, batch())
    m.request_epoch_bump(P0)
    m.bump_epoch_if_needed()
    assert not m.has_producer_id and not m.may_drain(queued_retry)
    m.set_producer_id_and_epoch(8, 0)
    assert stamp(queued_retry) == (8, 0, 0)
    assert stamp(drain(m, batch())) == (8, 0, 1)
