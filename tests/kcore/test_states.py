import pytest

from kcore.common import TopicPartition
from kcore.states import (
    IllegalStateChangeError,
    PartitionState,
    ReplicaState,
    check_transition,
    is_valid_transition,
)

P = PartitionState
R = ReplicaState

PARTITION_VALID = {
    (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION),
    (P.NEW_PARTITION, P.ONLINE_PARTITION),
    (P.ONLINE_PARTITION, P.ONLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.ONLINE_PARTITION),
    (P.NEW_PARTITION, P.OFFLINE_PARTITION),
    (P.ONLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.OFFLINE_PARTITION),
    (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION),
}

_LIVE = (R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE)
REPLICA_VALID = {
    (R.NON_EXISTENT_REPLICA, R.NEW_REPLICA),
    *((s, R.ONLINE_REPLICA) for s in _LIVE),
    *((s, R.OFFLINE_REPLICA) for s in _LIVE),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
    (R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
    (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT_REPLICA),
}


@pytest.mark.parametrize(
    ("states", "valid"), [(list(P), PARTITION_VALID), (list(R), REPLICA_VALID)]
)
def test_transition_tables_match_kafka(states, valid) -> None:
    for source in states:
        for target in states:
            assert is_valid_transition(source, target) == ((source, target) in valid), (
                source,
                target,
            )


def test_partition_and_replica_states_do_not_mix() -> None:
    assert not is_valid_transition(R.NON_EXISTENT_REPLICA, P.NEW_PARTITION)


def test_check_transition_names_the_subject_and_both_states() -> None:
    check_transition(TopicPartition("t", 0), P.NEW_PARTITION, P.ONLINE_PARTITION)
    with pytest.raises(IllegalStateChangeError) as info:
        check_transition(TopicPartition("t", 0), P.NON_EXISTENT_PARTITION, P.ONLINE_PARTITION)
    message = str(info.value)
    assert "t-0" in message
    assert "NonExistentPartition" in message
    assert "OnlinePartition" in message
    assert info.value.from_state is P.NON_EXISTENT_PARTITION


def test_replica_deletion_cannot_skip_offline() -> None:
    with pytest.raises(IllegalStateChangeError, match="replica 3 of t-1"):
        check_transition("replica 3 of t-1", R.ONLINE_REPLICA, R.REPLICA_DELETION_STARTED)
