"""Offsets by timestamp over batches: the first record at or after a timestamp, and the
record with the largest timestamp (ListOffsets' KIP-79 and KIP-734 lookups)."""

from kcore.log import (
    TimestampAndOffset,
    build_batch,
    first_at_or_after,
    max_timestamp,
    with_base_offset,
    with_partition_leader_epoch,
)


def restamp(batch: bytes, base_offset: int, epoch: int) -> bytes:
    """The batch as a leader at `epoch` appended it at `base_offset`."""
    return with_partition_leader_epoch(with_base_offset(batch, base_offset), epoch)


# Two batches, offsets 0-2 and 3-5, timestamps not in offset order within the second.
BATCHES = [
    restamp(build_batch([(100, None, b"a"), (200, None, b"b"), (300, None, b"c")]), 0, 1),
    restamp(build_batch([(250, None, b"d"), (500, None, b"e"), (400, None, b"f")]), 3, 2),
]


def test_the_first_record_at_or_after_a_timestamp():
    assert first_at_or_after(BATCHES, 150, 0) == TimestampAndOffset(200, 1, 1)
    assert first_at_or_after(BATCHES, 300, 0) == TimestampAndOffset(300, 2, 1)
    # The second batch holds a later offset with an earlier timestamp (250): offsets rule.
    assert first_at_or_after(BATCHES, 301, 0) == TimestampAndOffset(500, 4, 2)
    assert first_at_or_after(BATCHES, 0, 2) == TimestampAndOffset(300, 2, 1)  # log start
    assert first_at_or_after(BATCHES, 501, 0) is None


def test_the_record_with_the_largest_timestamp():
    assert max_timestamp(BATCHES, 0) == TimestampAndOffset(500, 4, 2)
    assert max_timestamp([], 0) is None
