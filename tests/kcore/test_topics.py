import random

import pytest

from kcore import errors
from kcore.errors import InvalidTopicError
from kcore.topic_creation import NewTopic, plan_partition_addition, plan_topic
from kcore.topics import has_collision, has_collision_chars, is_internal, validate_topic_name


@pytest.mark.parametrize(
    "name", ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...", "a" * 249]
)
def test_legal_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        (".", r'"\." or "\.\."'),
        ("..", r'"\." or "\.\."'),
        ("a" * 250, "longer than 249"),
        ("foo:bar", "character other than"),
        ("foo=bar", "character other than"),
        ("foo bar", "character other than"),
        ("tøpic", "character other than"),
        ("foo/bar", "character other than"),
        ("foo\n", "character other than"),
    ],
)
def test_illegal_names_say_why(name: str, reason: str) -> None:
    with pytest.raises(InvalidTopicError, match=reason):
        validate_topic_name(name)


def test_collision_chars() -> None:
    assert has_collision_chars("a.b")
    assert has_collision_chars("a_b")
    assert not has_collision_chars("a-b")
    assert has_collision("a.b", "a_b")
    assert not has_collision("a.b", "a-b")


def test_internal_topics() -> None:
    assert is_internal("__consumer_offsets")
    assert not is_internal("consumer_offsets")


def _plan(topic, *, existing=(), live=(1, 2, 3)):
    return plan_topic(
        topic,
        live_brokers=live,
        existing_topics=existing,
        default_partitions=2,
        default_replication_factor=2,
        rng=random.Random(0),
    )


def test_a_planned_topic_takes_the_broker_defaults():
    assignment = _plan(NewTopic("t"))
    assert sorted(assignment) == [0, 1]
    assert all(
        len(replicas) == 2 and set(replicas) <= {1, 2, 3} for replicas in assignment.values()
    )


def test_an_explicit_assignment_is_kept():
    assert _plan(NewTopic("t", assignments={0: (3, 1), 1: (1, 2)})) == {0: (3, 1), 1: (1, 2)}


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (NewTopic("t.x"), errors.InvalidTopicError),  # collides with t_x
        (NewTopic("t_x"), errors.TopicAlreadyExistsError),
        (NewTopic("t", 1, assignments={0: (1,)}), errors.InvalidRequestError),
        (NewTopic("t", assignments={0: (1, 1)}), errors.InvalidReplicaAssignmentError),
        (NewTopic("t", assignments={1: (1,)}), errors.InvalidReplicaAssignmentError),
        (NewTopic("t", assignments={0: (1, 9)}), errors.BrokerNotAvailableError),
        (NewTopic("t", configs={"min.insync.replicas": "x"}), errors.InvalidConfigurationError),
    ],
)
def test_a_topic_kafka_refuses_is_refused_with_its_error(topic, error):
    with pytest.raises(error):
        _plan(topic, existing=["t_x"])


def test_added_partitions_continue_kafkas_assignment_from_partition_zero():
    existing = {0: (2, 3, 1), 1: (3, 1, 2)}
    added = plan_partition_addition("t", existing, 5, None, live_brokers=[1, 2, 3])
    assert sorted(added) == [2, 3, 4]
    assert all(len(set(replicas)) == 3 for replicas in added.values())
    # The same start index and partition ids as Kafka's assignReplicasToBrokers call.
    assert [replicas[0] for _, replicas in sorted(added.items())] == [1, 2, 3]


def test_added_partitions_may_be_placed_by_hand():
    added = plan_partition_addition("t", {0: (1, 2)}, 2, {1: (3, 1)}, live_brokers=[1, 2, 3])
    assert added == {1: (3, 1)}


@pytest.mark.parametrize(
    ("count", "assignments", "error"),
    [
        (1, None, errors.InvalidPartitionsError),  # already has 1
        (0, None, errors.InvalidPartitionsError),  # fewer
        (3, {1: (2, 3)}, errors.InvalidReplicaAssignmentError),  # one assignment for two
        (2, {1: (2,)}, errors.InvalidReplicaAssignmentError),  # another replication factor
        (2, {1: (2, 9)}, errors.BrokerNotAvailableError),  # no broker 9
    ],
)
def test_partition_additions_kafka_refuses(count, assignments, error):
    with pytest.raises(error):
        plan_partition_addition("t", {0: (1, 2)}, count, assignments, live_brokers=[1, 2, 3])
