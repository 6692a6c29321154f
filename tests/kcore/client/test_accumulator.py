"""The record accumulator (pure): batching by size and linger, one batch in flight per
partition, retries first, expiry."""

import math

from kcore.client._accumulator import RecordAccumulator, record_size
from kcore.common import TopicPartition
from kcore.log import HEADER_SIZE

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def leader(tp):
    return {T0: 1, T1: 2}.get(tp)


def drain(acc, now, **kwargs):
    """(values of the drained batches per node, blocked partitions)."""
    leader_of = kwargs.pop("leader_of", leader)
    ready, blocked = acc.drain(now, leader_of, max_request_size=10**6, **kwargs)
    values = {node: [[r[2] for r in b.records] for b in batches] for node, batches in ready.items()}
    return values, blocked


def test_linger_zero_is_ready_at_once():
    acc = RecordAccumulator(batch_size=16384, linger=0.0)
    acc.append(T0, 1, None, b"a", now=5.0)
    acc.append(T0, 1, None, b"b", now=5.0)
    assert acc.next_ready_time(5.0) == 5.0
    assert drain(acc, 5.0) == ({1: [[b"a", b"b"]]}, set())


def test_linger_waits_unless_full():
    acc = RecordAccumulator(batch_size=HEADER_SIZE + 2 * record_size(None, b"x" * 10), linger=1.0)
    acc.append(T0, 1, None, b"x" * 10, now=0.0)
    assert drain(acc, 0.5) == ({}, set())
    assert acc.next_ready_time(0.5) == 1.0
    assert drain(acc, 1.0) == ({1: [[b"x" * 10]]}, set())
    # A full batch is ready before its linger.
    acc2 = RecordAccumulator(batch_size=HEADER_SIZE + 2 * record_size(None, b"x" * 10), linger=1.0)
    acc2.append(T0, 1, None, b"x" * 10, now=0.0)
    acc2.append(T0, 1, None, b"y" * 10, now=0.0)
    assert drain(acc2, 0.0) == ({1: [[b"x" * 10, b"y" * 10]]}, set())


def test_a_record_that_does_not_fit_opens_a_new_batch():
    size = HEADER_SIZE + record_size(None, b"x" * 10) + 5
    acc = RecordAccumulator(batch_size=size, linger=10.0)
    first = acc.append(T0, 1, None, b"x" * 10, now=0.0)
    second = acc.append(T0, 1, None, b"y" * 10, now=0.0)
    assert first is not second and first.closed
    # The closed first batch is ready; the second is not sent while the first is in flight.
    assert drain(acc, 0.0) == ({1: [[b"x" * 10]]}, set())
    assert drain(acc, 20.0) == ({}, set())
    acc.completed(first)
    assert drain(acc, 20.0) == ({1: [[b"y" * 10]]}, set())


def test_one_batch_in_flight_per_partition_and_retry_goes_first():
    acc = RecordAccumulator(batch_size=16384, linger=0.0)
    first = acc.append(T0, 1, None, b"a", now=0.0)
    ready, _ = acc.drain(0.0, leader, max_request_size=10**6)
    assert ready == {1: [first]}
    acc.append(T0, 1, None, b"b", now=0.1)
    acc.append(T1, 1, None, b"c", now=0.1)
    assert drain(acc, 0.1) == ({2: [[b"c"]]}, set())  # T0 waits for its in-flight batch
    first.attempts = 1
    acc.reenqueue(first, retry_at=0.5)
    assert drain(acc, 0.2) == ({}, set())  # backing off; "b" may not overtake "a"
    assert acc.next_ready_time(0.2) == 0.5
    assert drain(acc, 0.5) == ({1: [[b"a"]]}, set())


def test_unknown_leader_and_busy_node_are_blocked():
    acc = RecordAccumulator(batch_size=16384, linger=0.0)
    acc.append(TopicPartition("u", 0), 1, None, b"a", now=0.0)
    acc.append(T0, 1, None, b"b", now=0.0)
    ready, blocked = drain(acc, 0.0, node_ready=lambda node: node != 1)
    assert ready == {}
    assert blocked == {TopicPartition("u", 0), T0}
    assert acc.next_ready_time(0.0, exclude=blocked) == math.inf


def test_max_request_size_splits_requests_but_sends_at_least_one_batch():
    acc = RecordAccumulator(batch_size=16384, linger=0.0)
    acc.append(T0, 1, None, b"a" * 100, now=0.0)
    acc.append(TopicPartition("t", 2), 1, None, b"b" * 100, now=0.0)
    ready, _ = acc.drain(0.0, lambda tp: 1, max_request_size=50)
    assert [len(batches) for batches in ready.values()] == [1]
    ready, _ = acc.drain(0.0, lambda tp: 1, max_request_size=50)
    assert [len(batches) for batches in ready.values()] == [1]


def test_expired_batches_are_removed():
    acc = RecordAccumulator(batch_size=16384, linger=100.0)
    batch = acc.append(T0, 1, None, b"a", now=0.0)
    assert acc.next_expiry(delivery_timeout=5.0) == 5.0
    assert acc.expired(4.9, 5.0) == []
    assert acc.expired(5.0, 5.0) == [batch]
    assert not acc.has_undrained


def test_flush_makes_lingering_batches_ready():
    acc = RecordAccumulator(batch_size=16384, linger=100.0)
    acc.append(T0, 1, None, b"a", now=0.0)
    assert drain(acc, 0.0) == ({}, set())
    acc.begin_flush()
    assert drain(acc, 0.0) == ({1: [[b"a"]]}, set())
    acc.end_flush()
