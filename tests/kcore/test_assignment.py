import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcore.assignment import assign_replicas_to_brokers
from kcore.errors import InvalidPartitionsError, InvalidReplicationFactorError


def test_kafka_vector_five_brokers_ten_partitions() -> None:
    # AdminTest.testReplicaAssignment / AdminRackAwareTest in Kafka.
    assert assign_replicas_to_brokers(range(5), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_broker_ids_are_sorted_before_assignment() -> None:
    assert assign_replicas_to_brokers([30, 10, 20], 3, 2, fixed_start_index=0) == {
        0: [10, 20],
        1: [20, 30],
        2: [30, 10],
    }


def test_adding_partitions_numbers_from_start_partition_id() -> None:
    added = assign_replicas_to_brokers(range(5), 4, 3, fixed_start_index=0, start_partition_id=6)
    # Kafka only bumps the follower shift when the partition id itself crosses a multiple
    # of the broker count, so 6..9 keep the initial shift.
    assert added == {6: [1, 2, 3], 7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}


def test_same_seed_same_assignment() -> None:
    first = assign_replicas_to_brokers([1, 2, 3], 6, 2, rng=random.Random(7))
    second = assign_replicas_to_brokers([1, 2, 3], 6, 2, rng=random.Random(7))
    assert first == second


@pytest.mark.parametrize("factor", [0, -1, 4])
def test_bad_replication_factor_is_named(factor: int) -> None:
    with pytest.raises(InvalidReplicationFactorError, match=str(factor)):
        assign_replicas_to_brokers([1, 2, 3], 1, factor, fixed_start_index=0)


@pytest.mark.parametrize("partitions", [0, -2])
def test_bad_partition_count_is_named(partitions: int) -> None:
    with pytest.raises(InvalidPartitionsError, match=str(partitions)):
        assign_replicas_to_brokers([1, 2, 3], partitions, 1, fixed_start_index=0)


@given(
    brokers=st.sets(st.integers(0, 50), min_size=1, max_size=8),
    data=st.data(),
    seed=st.integers(0, 2**32),
)
def test_distinct_replicas_and_even_leaders(brokers: set[int], data, seed: int) -> None:
    factor = data.draw(st.integers(1, len(brokers)))
    partitions = data.draw(st.integers(1, 40))
    result = assign_replicas_to_brokers(brokers, partitions, factor, rng=random.Random(seed))
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(replicas) == factor
        assert len(set(replicas)) == factor
        assert set(replicas) <= brokers
    leaders = Counter(replicas[0] for replicas in result.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1
