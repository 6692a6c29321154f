"""The client-side assignors, checked with cases ported from Kafka 3.5's RangeAssignorTest,
RoundRobinAssignorTest, AbstractStickyAssignorTest and CooperativeStickyAssignorTest (the
rack-unaware configurations). Kafka's subscriptions map in those tests is a HashMap, so the
dicts here are filled in the same order as the Java test fills it."""

from __future__ import annotations

import itertools
import random

import pytest

from kcore.client.assignors import (
    DEFAULT_GENERATION,
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    Subscription,
    assignor_by_name,
)
from kcore.common import TopicPartition


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def run(assignor, partitions_per_topic, subscriptions) -> dict[str, list[TopicPartition]]:
    result = assignor.assign(partitions_per_topic, subscriptions)
    assert set(result) == set(subscriptions)
    assert all(isinstance(assignment, Assignment) for assignment in result.values())
    return {member: list(assignment.partitions) for member, assignment in result.items()}


def sub(*topics: str, owned=(), generation=DEFAULT_GENERATION, instance=None) -> Subscription:
    return Subscription(
        topics, owned_partitions=owned, generation_id=generation, group_instance_id=instance
    )


def test_names_and_protocols():
    assert assignor_by_name("range").supported_protocols == (RebalanceProtocol.EAGER,)
    assert assignor_by_name("roundrobin").name == "roundrobin"
    cooperative = assignor_by_name("cooperative-sticky")
    assert cooperative.supported_protocols == (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )
    with pytest.raises(ValueError, match="unknown partition assignor 'sticky'"):
        assignor_by_name("sticky")


# ------------------------------------------------------------------------------ range


def test_range_one_consumer_no_topic_and_nonexistent_topic():
    assert run(RangeAssignor(), {}, {"c1": sub()}) == {"c1": []}
    assert run(RangeAssignor(), {"t1": 3}, {"c1": sub("missing")}) == {"c1": []}


def test_range_one_consumer_multiple_topics():
    assert run(RangeAssignor(), {"topic1": 1, "topic2": 2}, {"c1": sub("topic1", "topic2")}) == {
        "c1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]
    }


def test_range_two_consumers_one_topic_one_partition():
    result = run(RangeAssignor(), {"topic1": 1}, {"c1": sub("topic1"), "c2": sub("topic1")})
    assert result == {"c1": [tp("topic1", 0)], "c2": []}


def test_range_multiple_consumers_mixed_topics():
    result = run(
        RangeAssignor(),
        {"topic1": 3, "topic2": 2},
        {
            "consumer1": sub("topic1"),
            "consumer2": sub("topic1", "topic2"),
            "consumer3": sub("topic1"),
        },
    )
    assert result["consumer1"] == [tp("topic1", 0)]
    assert sorted(result["consumer2"]) == [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]
    assert result["consumer3"] == [tp("topic1", 2)]


def test_range_two_consumers_two_topics_six_partitions():
    result = run(
        RangeAssignor(),
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub("topic1", "topic2"), "consumer2": sub("topic1", "topic2")},
    )
    assert result["consumer1"] == [
        tp("topic1", 0),
        tp("topic1", 1),
        tp("topic2", 0),
        tp("topic2", 1),
    ]
    assert result["consumer2"] == [tp("topic1", 2), tp("topic2", 2)]


def test_range_static_members_are_ordered_by_instance_id():
    # testTwoStaticConsumersTwoTopicsSixPartitions and
    # testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions: "consumer-b" sorts
    # after "consumer-a" but wins on its instance id / on having one.
    for high_instance in ("instance2", None):
        result = run(
            RangeAssignor(),
            {"topic1": 3, "topic2": 3},
            {
                "consumer-b": sub("topic1", "topic2", instance="instance1"),
                "consumer-a": sub("topic1", "topic2", instance=high_instance),
            },
        )
        assert result["consumer-b"] == [
            tp("topic1", 0),
            tp("topic1", 1),
            tp("topic2", 0),
            tp("topic2", 1),
        ]
        assert result["consumer-a"] == [tp("topic1", 2), tp("topic2", 2)]


def test_range_static_member_assignment_persists_across_member_id_changes():
    # testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges
    def by_instance(subscriptions):
        result = run(RangeAssignor(), {"topic1": 5, "topic2": 5}, subscriptions)
        return {subscriptions[member].group_instance_id: parts for member, parts in result.items()}

    members = {f"consumer{i}": sub("topic1", "topic2", instance=f"instance{i}") for i in (1, 2, 3)}
    before = by_instance(members)
    assert before == {
        "instance1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "instance2": [tp("topic1", 2), tp("topic1", 3), tp("topic2", 2), tp("topic2", 3)],
        "instance3": [tp("topic1", 4), tp("topic2", 4)],
    }
    renamed = {
        "consumer1": members["consumer1"],
        "consumer4": members["consumer3"],
        "consumer5": members["consumer2"],
    }
    assert by_instance(renamed) == before


# ------------------------------------------------------------------------- round robin


def test_roundrobin_multiple_consumers_mixed_topics():
    result = run(
        RoundRobinAssignor(),
        {"topic1": 3, "topic2": 2},
        {
            "consumer1": sub("topic1"),
            "consumer2": sub("topic1", "topic2"),
            "consumer3": sub("topic1"),
        },
    )
    assert result == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)],
    }


def test_roundrobin_two_consumers_two_topics_six_partitions():
    result = run(
        RoundRobinAssignor(),
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub("topic1", "topic2"), "consumer2": sub("topic1", "topic2")},
    )
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }


def test_roundrobin_javadoc_example_with_unequal_subscriptions():
    # RoundRobinAssignor's javadoc: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2].
    result = run(
        RoundRobinAssignor(),
        {"t0": 1, "t1": 2, "t2": 3},
        {"C0": sub("t0"), "C1": sub("t0", "t1"), "C2": sub("t0", "t1", "t2")},
    )
    assert result == {
        "C0": [tp("t0", 0)],
        "C1": [tp("t1", 0)],
        "C2": [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)],
    }


def test_roundrobin_static_members_keep_their_partitions_after_member_id_changes():
    # testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges
    def by_instance(subscriptions):
        result = run(RoundRobinAssignor(), {"topic1": 5, "topic2": 5}, subscriptions)
        return {subscriptions[member].group_instance_id: parts for member, parts in result.items()}

    members = {f"c{i}": sub("topic1", "topic2", instance=f"instance{i}") for i in (1, 2, 3)}
    before = by_instance(members)
    assert before["instance1"] == [
        tp("topic1", 0),
        tp("topic1", 3),
        tp("topic2", 1),
        tp("topic2", 4),
    ]
    assert by_instance({"c9": members["c1"], "c8": members["c2"], "c7": members["c3"]}) == before


# ---------------------------------------------------------------- sticky: helpers


def verify_validity_and_balance(subscriptions, assignments):
    """AbstractStickyAssignorTest.verifyValidityAndBalance."""
    assert set(subscriptions) == set(assignments)
    consumers = sorted(assignments)
    for i, consumer in enumerate(consumers):
        partitions = assignments[consumer]
        for partition in partitions:
            assert partition.topic in subscriptions[consumer].topics, (consumer, partition)
        for other in consumers[i + 1 :]:
            other_partitions = assignments[other]
            assert not set(partitions) & set(other_partitions), (consumer, other)
            if abs(len(partitions) - len(other_partitions)) <= 1:
                continue
            # The more loaded one must hold nothing the less loaded one could take.
            assert not {p.topic for p in partitions} & {p.topic for p in other_partitions}, (
                consumer,
                other,
                assignments,
            )


def is_fully_balanced(assignments) -> bool:
    sizes = [len(partitions) for partitions in assignments.values()]
    return max(sizes) - min(sizes) <= 1


def cooperative_rounds(assignor, partitions_per_topic, subscriptions, assignments, generation=1):
    """CooperativeStickyAssignorTest.verifyValidityAndBalance: while partitions are being
    revoked, check none of them is handed to a new owner in the same rebalance, then run the
    follow-up rebalance with what each member now owns. Returns the final assignment."""
    subscriptions = dict(subscriptions)
    rebalances = 0
    while True:
        added: set[TopicPartition] = set()
        revoked: set[TopicPartition] = set()
        for member, assigned in assignments.items():
            owned = set(subscriptions[member].owned_partitions)
            revoked |= owned - set(assigned)
            added |= set(assigned) - owned
        assert not added & revoked, f"assigned while being revoked: {added & revoked}"
        if not revoked:
            break
        for member, assigned in assignments.items():
            subscriptions[member] = sub(
                *subscriptions[member].topics, owned=assigned, generation=generation
            )
        assignments = run(assignor, partitions_per_topic, subscriptions)
        rebalances += 1
        assert rebalances <= 4
    verify_validity_and_balance(subscriptions, assignments)
    return assignments


def owned_sub(topics, owned, generation=1):
    return sub(*topics, owned=owned, generation=generation)


# ------------------------------------------------------------------ sticky: cases


def test_sticky_one_consumer_cases():
    assignor = CooperativeStickyAssignor()
    assert run(assignor, {}, {"consumer": sub("topic")}) == {"consumer": []}
    assert run(assignor, {"topic": 3}, {"consumer": sub("topic")}) == {
        "consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]
    }
    # testOnlyAssignsPartitionsFromSubscribedTopics / testOneConsumerMultipleTopics
    assert run(assignor, {"topic": 3, "other": 3}, {"consumer": sub("topic")}) == {
        "consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]
    }
    assert run(assignor, {"topic1": 1, "topic2": 2}, {"consumer": sub("topic1", "topic2")}) == {
        "consumer": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]
    }


def test_sticky_two_consumers_one_topic_two_partitions():
    assignor = CooperativeStickyAssignor()
    result = run(assignor, {"topic": 2}, {"consumer1": sub("topic"), "consumer2": sub("topic")})
    assert result == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_multiple_consumers_mixed_topic_subscriptions():
    assignor = CooperativeStickyAssignor()
    subscriptions = {
        "consumer1": sub("topic1"),
        "consumer2": sub("topic1", "topic2"),
        "consumer3": sub("topic1"),
    }
    result = run(assignor, {"topic1": 3, "topic2": 2}, subscriptions)
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2)],
        "consumer2": [tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 1)],
    }
    assert assignor.partitions_transferring_ownership is None  # the general algorithm ran
    verify_validity_and_balance(subscriptions, result)


def test_sticky_two_consumers_two_topics_six_partitions():
    assignor = CooperativeStickyAssignor()
    result = run(
        assignor,
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub("topic1", "topic2"), "consumer2": sub("topic1", "topic2")},
    )
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }


def test_sticky_consumer_owning_min_quota_expected_max_quota():
    assignor = CooperativeStickyAssignor()
    topics = ("topic1", "topic2")
    result = run(
        assignor,
        {"topic1": 2, "topic2": 3},
        {
            "consumer1": owned_sub(topics, [tp("topic1", 0), tp("topic2", 1)]),
            "consumer2": owned_sub(topics, [tp("topic1", 1), tp("topic2", 2)]),
        },
    )
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic2", 1), tp("topic2", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 2)],
    }
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_max_quota_consumers_more_than_expected_max_capacity_members():
    # Which of consumer1 / consumer2 keeps its second partition follows Java's HashMap order.
    assignor = CooperativeStickyAssignor()
    topics = ("topic1", "topic2")
    partitions_per_topic = {"topic1": 2, "topic2": 2}
    subscriptions = {
        "consumer1": owned_sub(topics, [tp("topic1", 0), tp("topic2", 0)]),
        "consumer2": owned_sub(topics, [tp("topic1", 1), tp("topic2", 1)]),
        "consumer3": owned_sub(topics, []),
    }
    first = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {tp("topic2", 0): "consumer3"}
    # Phase one: consumer1 gives up topic2-0, nobody gets it yet.
    assert first == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 1)],
        "consumer3": [],
    }
    final = cooperative_rounds(assignor, partitions_per_topic, subscriptions, first)
    assert final == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 1)],
        "consumer3": [tp("topic2", 0)],
    }
    assert is_fully_balanced(final)


def test_sticky_all_consumers_under_min_quota():
    assignor = CooperativeStickyAssignor()
    topics = ("topic1", "topic2")
    result = run(
        assignor,
        {"topic1": 2, "topic2": 3},
        {
            "consumer1": owned_sub(topics, [tp("topic1", 0)]),
            "consumer2": owned_sub(topics, [tp("topic1", 1)]),
            "consumer3": owned_sub(topics, []),
        },
    )
    assert assignor.partitions_transferring_ownership == {}
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 2)],
        "consumer3": [tp("topic2", 0)],
    }


def test_sticky_add_remove_consumer_one_topic():
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"topic": 3}
    result = run(assignor, partitions_per_topic, {"consumer1": sub("topic")})
    assert result == {"consumer1": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}

    subscriptions = {
        "consumer1": owned_sub(["topic"], result["consumer1"]),
        "consumer2": owned_sub(["topic"], []),
    }
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {tp("topic", 2): "consumer2"}
    result = cooperative_rounds(assignor, partitions_per_topic, subscriptions, result)
    assert result == {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
    }

    # consumer1 leaves: consumer2 keeps its partition and takes the rest.
    result = run(
        assignor, partitions_per_topic, {"consumer2": owned_sub(["topic"], result["consumer2"])}
    )
    assert set(result["consumer2"]) == {tp("topic", 0), tp("topic", 1), tp("topic", 2)}
    assert result["consumer2"][0] == tp("topic", 2)
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_add_remove_two_consumers_two_topics():
    assignor = CooperativeStickyAssignor()
    topics = ("topic1", "topic2")
    partitions_per_topic = {"topic1": 3, "topic2": 4}
    result = run(
        assignor, partitions_per_topic, {"consumer1": sub(*topics), "consumer2": sub(*topics)}
    )
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }

    # Two consumers join.
    subscriptions = {
        "consumer1": owned_sub(topics, result["consumer1"]),
        "consumer2": owned_sub(topics, result["consumer2"]),
        "consumer3": owned_sub(topics, []),
        "consumer4": owned_sub(topics, []),
    }
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {
        tp("topic2", 1): "consumer3",
        tp("topic2", 3): "consumer3",
        tp("topic2", 2): "consumer4",
    }
    result = cooperative_rounds(assignor, partitions_per_topic, subscriptions, result)
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0)],
        "consumer3": [tp("topic2", 1), tp("topic2", 3)],
        "consumer4": [tp("topic2", 2)],
    }

    # Two consumers leave.
    subscriptions = {
        "consumer3": owned_sub(topics, result["consumer3"]),
        "consumer4": owned_sub(topics, result["consumer4"]),
    }
    result = run(assignor, partitions_per_topic, subscriptions)
    assert result == {
        "consumer3": [tp("topic2", 1), tp("topic2", 3), tp("topic1", 0), tp("topic2", 0)],
        "consumer4": [tp("topic2", 2), tp("topic1", 1), tp("topic1", 2)],
    }
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_poor_round_robin_assignment_scenario():
    partitions_per_topic = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    subscriptions = {
        "consumer1": sub("topic1", "topic2", "topic3", "topic4", "topic5"),
        "consumer2": sub("topic1", "topic3", "topic5"),
        "consumer3": sub("topic1", "topic3", "topic5"),
        "consumer4": sub("topic1", "topic2", "topic3", "topic4", "topic5"),
    }
    result = run(CooperativeStickyAssignor(), partitions_per_topic, subscriptions)
    verify_validity_and_balance(subscriptions, result)


def test_sticky_add_remove_topic_two_consumers():
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"topic": 3}
    first = run(
        assignor, partitions_per_topic, {"consumer1": sub("topic"), "consumer2": sub("topic")}
    )
    assert sorted(len(parts) for parts in first.values()) == [1, 2]

    partitions_per_topic["topic2"] = 3
    subscriptions = {
        member: owned_sub(["topic", "topic2"], parts) for member, parts in first.items()
    }
    second = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subscriptions, second)
    for member in first:
        assert len(second[member]) == 3
        assert set(first[member]) <= set(second[member])  # stickiness

    del partitions_per_topic["topic"]
    subscriptions = {member: owned_sub(["topic2"], parts) for member, parts in second.items()}
    third = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {}
    assert sorted(len(parts) for parts in third.values()) == [1, 2]
    for member in first:
        assert set(third[member]) <= set(second[member])


def _topic_name(i: int, max_number: int) -> str:
    return f"t{i:0{len(str(max_number))}d}"


def _consumer_name(i: int, max_number: int) -> str:
    return f"c{i:0{len(str(max_number))}d}"


def test_sticky_reassignment_after_one_consumer_leaves():
    # Consumer i subscribes to topics 1..i; topic i has i partitions.
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {_topic_name(i, 20): i for i in range(1, 20)}
    subscriptions = {
        _consumer_name(i, 20): sub(*(_topic_name(j, 20) for j in range(1, i + 1)))
        for i in range(1, 20)
    }
    result = run(assignor, partitions_per_topic, subscriptions)
    verify_validity_and_balance(subscriptions, result)

    subscriptions = {
        member: owned_sub(subscription.topics, result[member])
        for member, subscription in subscriptions.items()
        if member != "c10"
    }
    second = run(assignor, partitions_per_topic, subscriptions)
    final = cooperative_rounds(assignor, partitions_per_topic, subscriptions, second)
    # Stickiness: the partitions the remaining members keep in the first phase are never
    # taken from them, and everything c10 had is now owned by someone.
    for member in subscriptions:
        assert set(second[member]) <= set(final[member])
    assert set(result["c10"]) <= {p for parts in final.values() for p in parts}


def test_sticky_reassignment_after_one_consumer_added():
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"topic": 20}
    subscriptions = {_consumer_name(i, 10): sub("topic") for i in range(1, 10)}
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subscriptions, result)

    subscriptions[_consumer_name(10, 10)] = sub("topic")
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subscriptions, result)


def test_sticky_same_subscriptions_member_leaves():
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {_topic_name(i, 15): i for i in range(1, 15)}
    topics = list(partitions_per_topic)
    subscriptions = {_consumer_name(i, 9): sub(*topics) for i in range(1, 9)}
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {}
    verify_validity_and_balance(subscriptions, result)

    subscriptions = {
        member: owned_sub(topics, result[member]) for member in subscriptions if member != "c5"
    }
    second = run(assignor, partitions_per_topic, subscriptions)
    # Nothing is taken from a remaining member: only c5's partitions move.
    assert assignor.partitions_transferring_ownership == {}
    for member in subscriptions:
        assert set(result[member]) <= set(second[member])
    verify_validity_and_balance(subscriptions, second)


def test_sticky_stickiness_after_a_member_leaves():
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"topic1": 3}
    subscriptions = {f"consumer{i}": sub("topic1") for i in range(1, 5)}
    first = run(assignor, partitions_per_topic, subscriptions)
    assert all(len(parts) <= 1 for parts in first.values())

    subscriptions = {
        member: owned_sub(["topic1"], first[member])
        for member in ("consumer2", "consumer3", "consumer4")
    }
    second = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {}
    for member, parts in second.items():
        assert len(parts) == 1
        assert not first[member] or first[member][0] in parts


def test_sticky_move_existing_assignments():
    partitions_per_topic = {f"topic{i}": 1 for i in range(1, 7)}
    subscriptions = {
        "consumer1": owned_sub(["topic1", "topic2"], [tp("topic1", 0)]),
        "consumer2": owned_sub(
            ["topic1", "topic2", "topic3", "topic4"], [tp("topic2", 0), tp("topic3", 0)]
        ),
        "consumer3": owned_sub(
            ["topic2", "topic3", "topic4", "topic5", "topic6"],
            [tp("topic4", 0), tp("topic5", 0), tp("topic6", 0)],
        ),
    }
    assignor = CooperativeStickyAssignor()
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership is None
    cooperative_rounds(assignor, partitions_per_topic, subscriptions, result)


def test_sticky_assignment_updated_for_deleted_topic():
    assignor = CooperativeStickyAssignor()
    result = run(
        assignor, {"topic1": 1, "topic3": 100}, {"consumer": sub("topic1", "topic2", "topic3")}
    )
    assert len(result["consumer"]) == 101


def test_sticky_no_exception_when_only_subscribed_topic_deleted():
    assignor = CooperativeStickyAssignor()
    result = run(assignor, {"topic": 3}, {"consumer": sub("topic")})
    result = run(assignor, {}, {"consumer": owned_sub(["topic"], result["consumer"])})
    assert result == {"consumer": []}
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("seed", range(10))
def test_sticky_reassignment_with_random_subscriptions_and_changes(seed):
    # testReassignmentWithRandomSubscriptionsAndChanges, seeded and with fewer rounds.
    rng = random.Random(seed)
    topics = [_topic_name(i, 20) for i in range(rng.randrange(10, 20))]
    partitions_per_topic = {topic: index + 1 for index, topic in enumerate(topics)}
    members = [_consumer_name(i, 40) for i in range(rng.randrange(20, 40))]

    def random_sublist():
        chosen = list(topics)
        for _ in range(rng.randrange(len(topics))):
            chosen.pop(rng.randrange(len(chosen)))
        return sorted(chosen)

    assignor = CooperativeStickyAssignor()
    subscriptions = {member: sub(*random_sublist()) for member in members}
    result = run(assignor, partitions_per_topic, subscriptions)
    verify_validity_and_balance(subscriptions, result)

    subscriptions = {member: owned_sub(random_sublist(), result[member]) for member in members}
    result = run(assignor, partitions_per_topic, subscriptions)
    cooperative_rounds(assignor, partitions_per_topic, subscriptions, result)


def test_sticky_all_consumers_reach_expected_quota():
    assignor = CooperativeStickyAssignor()
    result = run(
        assignor,
        {"topic": 4},
        {
            "consumer1": owned_sub(["topic"], [tp("topic", 0), tp("topic", 1)]),
            "consumer2": owned_sub(["topic"], [tp("topic", 2)]),
            "consumer3": owned_sub(["topic"], []),
        },
    )
    assert result == {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
        "consumer3": [tp("topic", 3)],
    }
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("stale_generation", [9, DEFAULT_GENERATION])
def test_sticky_owned_partitions_of_a_stale_or_unknown_generation_are_invalidated(
    stale_generation,
):
    assignor = CooperativeStickyAssignor()
    owned = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)]
    result = run(
        assignor,
        {"topic": 3, "topic2": 3},
        {
            "consumer1": owned_sub(["topic", "topic2"], owned, generation=10),
            "consumer2": owned_sub(["topic", "topic2"], owned, generation=stale_generation),
        },
    )
    assert set(result["consumer1"]) == set(owned)
    assert set(result["consumer2"]) == {tp("topic", 1), tp("topic2", 0), tp("topic2", 2)}
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_partition_claimed_by_two_members_of_one_generation():
    # testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumers-
    # InSameGeneration
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"topic": 3}
    subscriptions = {
        "consumer1": owned_sub(["topic"], [tp("topic", 0), tp("topic", 1)]),
        "consumer2": owned_sub(["topic"], [tp("topic", 0), tp("topic", 2)]),
        "consumer3": owned_sub(["topic"], []),
    }
    result = run(assignor, partitions_per_topic, subscriptions)
    assert assignor.partitions_transferring_ownership == {tp("topic", 0): "consumer3"}
    # CooperativeStickyAssignorTest: topic-0 counts as owned, so it waits for both revocations.
    assert result == {"consumer1": [tp("topic", 1)], "consumer2": [tp("topic", 2)], "consumer3": []}
    final = cooperative_rounds(assignor, partitions_per_topic, subscriptions, result)
    assert final == {
        "consumer1": [tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
        "consumer3": [tp("topic", 0)],
    }


def test_sticky_claimed_by_two_members_with_unequal_partitions_per_consumer():
    assignor = CooperativeStickyAssignor()
    result = run(
        assignor,
        {"topic": 4},
        {
            "consumer1": owned_sub(["topic"], [tp("topic", 0), tp("topic", 1)]),
            "consumer2": owned_sub(["topic"], [tp("topic", 0), tp("topic", 2)]),
            "consumer3": owned_sub(["topic"], []),
        },
    )
    assert result == {
        "consumer1": [tp("topic", 1), tp("topic", 3)],
        "consumer2": [tp("topic", 2)],
        "consumer3": [],
    }


def test_sticky_partitions_go_to_the_highest_generation():
    assignor = CooperativeStickyAssignor()
    topics = ["topic", "topic2", "topic3"]
    result = run(
        assignor,
        {"topic": 3, "topic2": 3, "topic3": 3},
        {
            "consumer1": owned_sub(
                topics, [tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], generation=10
            ),
            "consumer2": owned_sub(
                topics, [tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], generation=9
            ),
            "consumer3": owned_sub(
                topics, [tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], generation=8
            ),
        },
    )
    assert set(result["consumer1"]) == {tp("topic", 0), tp("topic2", 0), tp("topic3", 0)}
    assert set(result["consumer2"]) == {tp("topic", 1), tp("topic2", 1), tp("topic3", 1)}
    assert set(result["consumer3"]) == {tp("topic", 2), tp("topic2", 2), tp("topic3", 2)}
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_no_reassignment_on_current_members():
    assignor = CooperativeStickyAssignor()
    topics = ["topic", "topic2", "topic3", "topic1"]
    result = run(
        assignor,
        {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3},
        {
            "consumer1": owned_sub(topics, [], generation=DEFAULT_GENERATION),
            "consumer2": owned_sub(
                topics, [tp("topic", 0), tp("topic2", 0), tp("topic1", 0)], generation=9
            ),
            "consumer3": owned_sub(
                topics, [tp("topic3", 2), tp("topic2", 2), tp("topic1", 1)], generation=8
            ),
            "consumer4": owned_sub(
                topics, [tp("topic3", 1), tp("topic", 1), tp("topic", 2)], generation=7
            ),
        },
    )
    assert set(result["consumer1"]) == {tp("topic1", 2), tp("topic2", 1), tp("topic3", 0)}
    assert assignor.partitions_transferring_ownership == {}


def test_sticky_owned_partitions_invalidated_for_multiple_generations():
    assignor = CooperativeStickyAssignor()
    result = run(
        assignor,
        {"topic": 3, "topic2": 3},
        {
            "consumer1": owned_sub(
                ["topic", "topic2"],
                [tp("topic", 0), tp("topic2", 1), tp("topic", 1)],
                generation=10,
            ),
            "consumer2": owned_sub(
                ["topic", "topic2"],
                [tp("topic", 0), tp("topic2", 1), tp("topic2", 2)],
                generation=8,
            ),
        },
    )
    assert set(result["consumer1"]) == {tp("topic", 0), tp("topic2", 1), tp("topic", 1)}
    assert set(result["consumer2"]) == {tp("topic", 2), tp("topic2", 2), tp("topic2", 0)}


# --------------------------------------------------------- cooperative specifics


def test_cooperative_user_data_carries_the_generation():
    # testEncodeAndDecodeGeneration / testMemberDataWithInconsistentData: a v0 / v1
    # subscription has no generation field, so the leader reads it from the user data.
    assignor = CooperativeStickyAssignor()
    assert assignor.subscription_user_data(["topic"]) == b"\xff\xff\xff\xff"
    assignor.on_assignment(Assignment([tp("topic", 0)]), 10)
    assert assignor.subscription_user_data(["topic"]) == b"\x00\x00\x00\x0a"


def test_cooperative_with_old_version_subscriptions():
    # testAssignorWithOldVersionSubscriptions: two v1 members (generation only in user
    # data) and one v2 member.
    assignor = CooperativeStickyAssignor()
    user_data = (1).to_bytes(4, "big")
    result = run(
        assignor,
        {"topic1": 3},
        {
            "consumer1": Subscription(["topic1"], user_data, [tp("topic1", 0)]),
            "consumer2": Subscription(["topic1"], user_data, [tp("topic1", 1)]),
            "consumer3": Subscription(["topic1"], None, [], generation_id=1),
        },
    )
    assert result == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1)],
        "consumer3": [tp("topic1", 2)],
    }


def test_cooperative_never_assigns_a_partition_in_the_rebalance_that_revokes_it():
    # A member subscribed to fewer topics (the general algorithm) joins a member that owns
    # everything: phase one only revokes, phase two assigns.
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"a": 2, "b": 4}
    owner = owned_sub(["a", "b"], [tp("a", 0), tp("a", 1), *(tp("b", i) for i in range(4))])
    subscriptions = {"owner": owner, "joiner": owned_sub(["b"], [])}
    first = run(assignor, partitions_per_topic, subscriptions)
    assert first["joiner"] == []
    assert len(first["owner"]) == 3  # three partitions of b revoked
    final = cooperative_rounds(assignor, partitions_per_topic, subscriptions, first)
    assert sorted(final["joiner"]) == sorted(set(owner.owned_partitions) - set(first["owner"]))
    assert is_fully_balanced(final)


@pytest.mark.parametrize("members", [2, 3, 5, 7])
def test_cooperative_growing_and_shrinking_group_stays_valid(members):
    assignor = CooperativeStickyAssignor()
    partitions_per_topic = {"x": 7, "y": 5}
    names = [f"m{i}" for i in range(members)]
    assignments = {names[0]: []}
    for count in itertools.chain(range(2, members + 1), range(members - 1, 0, -1)):
        current = names[:count]
        subscriptions = {
            member: owned_sub(["x", "y"], assignments.get(member, [])) for member in current
        }
        result = run(assignor, partitions_per_topic, subscriptions)
        assignments = cooperative_rounds(assignor, partitions_per_topic, subscriptions, result)
        assert sum(len(parts) for parts in assignments.values()) == 12
        assert is_fully_balanced(assignments)
