"""The controller's partition and replica states with Kafka's valid-transition tables
(PartitionStateMachine / ReplicaStateMachine): a state may only be entered from one of its
valid previous states."""

from __future__ import annotations

import enum


class _ControllerState(enum.Enum):
    @property
    def valid_previous_states(self) -> frozenset[_ControllerState]:
        return _VALID_PREVIOUS[self]


class PartitionState(_ControllerState):
    NEW_PARTITION = "NewPartition"
    ONLINE_PARTITION = "OnlinePartition"
    OFFLINE_PARTITION = "OfflinePartition"
    NON_EXISTENT_PARTITION = "NonExistentPartition"


class ReplicaState(_ControllerState):
    NEW_REPLICA = "NewReplica"
    ONLINE_REPLICA = "OnlineReplica"
    OFFLINE_REPLICA = "OfflineReplica"
    REPLICA_DELETION_STARTED = "ReplicaDeletionStarted"
    REPLICA_DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    REPLICA_DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT_REPLICA = "NonExistentReplica"


_P = PartitionState
_VALID_PREVIOUS: dict[_ControllerState, frozenset[_ControllerState]] = {
    _P.NEW_PARTITION: frozenset({_P.NON_EXISTENT_PARTITION}),
    _P.ONLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.OFFLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.NON_EXISTENT_PARTITION: frozenset({_P.OFFLINE_PARTITION}),
}
_R = ReplicaState
_LIVE_OR_NEW = frozenset(
    {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
)
_VALID_PREVIOUS |= {
    _R.NEW_REPLICA: frozenset({_R.NON_EXISTENT_REPLICA}),
    _R.ONLINE_REPLICA: _LIVE_OR_NEW,
    _R.OFFLINE_REPLICA: _LIVE_OR_NEW,
    _R.REPLICA_DELETION_STARTED: frozenset({_R.OFFLINE_REPLICA}),
    _R.REPLICA_DELETION_SUCCESSFUL: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.REPLICA_DELETION_INELIGIBLE: frozenset({_R.OFFLINE_REPLICA, _R.REPLICA_DELETION_STARTED}),
    _R.NON_EXISTENT_REPLICA: frozenset({_R.REPLICA_DELETION_SUCCESSFUL}),
}


class IllegalStateChangeError(Exception):
    """A state machine was asked for a transition its table forbids."""

    def __init__(
        self, what: object, from_state: _ControllerState, to_state: _ControllerState
    ) -> None:
        super().__init__(
            f"Invalid state transition of {what} from {from_state.value} to {to_state.value}; "
            f"{to_state.value} may only be entered from "
            f"{sorted(s.value for s in to_state.valid_previous_states)}"
        )
        self.what = what
        self.from_state = from_state
        self.to_state = to_state


def is_valid_transition(
    from_state: PartitionState | ReplicaState, to_state: PartitionState | ReplicaState
) -> bool:
    """Whether `to_state` may be entered from `from_state` (both of the same machine)."""
    if type(from_state) is not type(to_state):
        return False
    return from_state in to_state.valid_previous_states


def check_transition(
    what: object,
    from_state: PartitionState | ReplicaState,
    to_state: PartitionState | ReplicaState,
) -> None:
    """Raises IllegalStateChangeError naming `what` and both states unless valid."""
    if not is_valid_transition(from_state, to_state):
        raise IllegalStateChangeError(what, from_state, to_state)
