"""Kafka's default partitioner: murmur2 bit-exact with the Java client, sticky partitions."""

import itertools
import random

import pytest

from kcore.client import murmur2, partition_for_key
from kcore.client._partitioner import StickyPartitioner, to_positive


# Kafka's UtilsTest.testMurmur2 vectors (the Java client's values).
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
        (b"", 275646681),
    ],
)
def test_murmur2_matches_kafka(data, expected):
    assert murmur2(data) == expected


def test_to_positive_clears_the_sign_bit():
    assert to_positive(-790332482) == 1357151166
    assert to_positive(-(2**31)) == 0  # where abs() would overflow in Java
    assert to_positive(5) == 5


def test_partition_for_key():
    assert partition_for_key(b"foobar", 50) == 1357151166 % 50 == 16
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)


def test_keyed_records_ignore_availability():
    partitioner = StickyPartitioner(random.Random(0), batch_size=100)
    assert partitioner.partition("t", b"foobar", 12, available=[0]) == 1357151166 % 12


def test_unkeyed_records_stick_until_batch_size_bytes():
    partitioner = StickyPartitioner(random.Random(1), batch_size=100)
    first = partitioner.partition("t", None, 4)
    for _ in range(3):
        assert partitioner.partition("t", None, 4) == first
        partitioner.record_appended("t", first, 30, 4)
    # 90 bytes so far: still sticky; 30 more pass batch_size: another partition.
    assert partitioner.partition("t", None, 4) == first
    partitioner.record_appended("t", first, 30, 4)
    assert partitioner.partition("t", None, 4) != first


def test_unkeyed_records_prefer_partitions_with_a_leader():
    rng = random.Random(3)
    partitioner = StickyPartitioner(rng, batch_size=1)
    seen = set()
    for _ in range(50):
        p = partitioner.partition("t", None, 6, available=[2, 4])
        seen.add(p)
        partitioner.record_appended("t", p, 10, 6, available=[2, 4])
    assert seen == {2, 4}


def test_sticky_choice_comes_from_the_injected_rng():
    a = StickyPartitioner(random.Random(9), batch_size=1)
    b = StickyPartitioner(random.Random(9), batch_size=1)
    picks_a, picks_b = [], []
    for partitioner, picks in ((a, picks_a), (b, picks_b)):
        for _ in range(20):
            p = partitioner.partition("t", None, 8)
            picks.append(p)
            partitioner.record_appended("t", p, 5, 8)
    assert picks_a == picks_b
    assert all(x != y for x, y in itertools.pairwise(picks_a))
