"""The accumulator's count of buffered bytes (what the producer's `buffer_memory` bounds):
every batch counts its size from its first record until it is completed, expired or
aborted."""

from kcore.client._accumulator import RecordAccumulator, record_size
from kcore.common import TopicPartition
from kcore.log import HEADER_SIZE

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
RECORD = record_size(None, b"x" * 10)


def test_batches_count_from_their_first_record_until_they_are_settled():
    acc = RecordAccumulator(batch_size=HEADER_SIZE + 2 * RECORD, linger=1.0)
    assert acc.try_append(T0, 1, None, b"x" * 10, RECORD) is None  # no open batch yet
    assert acc.buffered == 0
    first = acc.append_new_batch(T0, 1, None, b"x" * 10, RECORD, now=0.0)
    assert acc.try_append(T0, 1, None, b"x" * 10, RECORD) is first  # now full
    assert acc.try_append(T0, 1, None, b"x" * 10, RECORD) is None
    second = acc.append(T0, 1, None, b"x" * 10, now=0.0)
    third = acc.append(T1, 1, None, b"x" * 10, now=0.5)
    assert acc.buffered == first.size + second.size + third.size == 3 * HEADER_SIZE + 4 * RECORD

    ready, _ = acc.drain(0.0, lambda tp: 1, max_request_size=10**6)
    assert ready == {1: [first]}
    assert acc.buffered == 3 * HEADER_SIZE + 4 * RECORD  # in flight still counts
    acc.completed(first)
    assert acc.buffered == 2 * HEADER_SIZE + 2 * RECORD
    assert acc.expired(1.0, delivery_timeout=1.0) == [second]
    assert acc.buffered == HEADER_SIZE + RECORD
    assert acc.abort_all() == [third]
    assert acc.buffered == 0
