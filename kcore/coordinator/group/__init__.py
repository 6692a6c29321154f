"""Kafka's (classic) group coordinator, sans-IO: consumer group membership, rebalances,
committed offsets. `GroupCoordinatorCore` decides; a Trio shell feeds it requests, timer
firings and storage completions, and carries out the effects it returns (see
`coordinator`'s docstring for the contract)."""

from __future__ import annotations

from kcore.coordinator.group.coordinator import (
    GROUP_API_KEYS,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    GroupConfig,
    GroupCoordinatorCore,
    MemberIdentity,
    partition_for,
    uuid_member_ids,
)
from kcore.coordinator.group.effects import (
    AppendTombstones,
    CancelTimer,
    Effect,
    HeartbeatTimer,
    JoinTimer,
    OffsetsRetentionTimer,
    Respond,
    SetTimer,
    StoreGroup,
    StoreOffsets,
    SyncTimer,
    TimerKey,
)
from kcore.coordinator.group.state import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
)
from kcore.coordinator.group.stored import (
    GroupMetadataValue,
    LoadedGroup,
    LoadedOffset,
    MemberMetadataValue,
    OffsetCommitValue,
    OffsetsPartitionReplay,
)

__all__ = [
    "GROUP_API_KEYS",
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "VALID_PREVIOUS_STATES",
    "AppendTombstones",
    "CancelTimer",
    "Effect",
    "GroupConfig",
    "GroupCoordinatorCore",
    "GroupMetadata",
    "GroupMetadataValue",
    "GroupState",
    "HeartbeatTimer",
    "JoinTimer",
    "LoadedGroup",
    "LoadedOffset",
    "MemberIdentity",
    "MemberMetadata",
    "MemberMetadataValue",
    "OffsetAndMetadata",
    "OffsetCommitValue",
    "OffsetsPartitionReplay",
    "OffsetsRetentionTimer",
    "Respond",
    "SetTimer",
    "StoreGroup",
    "StoreOffsets",
    "SyncTimer",
    "TimerKey",
    "partition_for",
    "uuid_member_ids",
]
