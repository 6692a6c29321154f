"""What the group coordinator core asks its shell to do (the return values of every
`GroupCoordinatorCore` method) and the timer keys it uses. See `coordinator.py` for the
contract."""

from __future__ import annotations

import attrs

from kcore.coordinator.group.state import TopicPartition
from kcore.coordinator.group.stored import GroupMetadataValue, OffsetCommitValue


@attrs.frozen
class HeartbeatTimer:
    """A member's session deadline (or a pending member's join deadline, KIP-394)."""

    group_id: str
    member_id: str


@attrs.frozen
class JoinTimer:
    """The end of a group's join phase: the rebalance timeout (DelayedJoin) or the next
    step of the initial rebalance delay (InitialDelayedJoin)."""

    group_id: str


@attrs.frozen
class SyncTimer:
    """The deadline for every member of a new generation to send SyncGroup."""

    group_id: str


@attrs.frozen
class OffsetsRetentionTimer:
    """The periodic offsets expiry (`offsets.retention.check.interval.ms`)."""


TimerKey = HeartbeatTimer | JoinTimer | SyncTimer | OffsetsRetentionTimer


@attrs.frozen
class Respond:
    """Send `body` (a response dict for the request's API, keyed like kcore's Kafka codec
    wants) as the response to the request the shell tagged with `token`."""

    token: object
    body: dict


@attrs.frozen
class SetTimer:
    """Arrange for `on_timer(key, now_ms)` at `deadline_ms`, replacing any timer with the
    same key."""

    key: TimerKey
    deadline_ms: int


@attrs.frozen
class CancelTimer:
    key: TimerKey


@attrs.frozen
class StoreGroup:
    """Append the group's metadata record (key: the group id) to `__consumer_offsets`
    partition `partition` with acks=all, then call `group_stored(write_id, error_code,
    now_ms)` with the append's error code (0 on success)."""

    group_id: str
    partition: int
    value: GroupMetadataValue
    write_id: int


@attrs.frozen
class StoreOffsets:
    """Append one offset commit record per (topic, partition) (key: group id, topic,
    partition) to `__consumer_offsets` partition `partition` with acks=all, in one batch,
    then call `offsets_stored(write_id, error_code, now_ms, record_offset=...)`."""

    group_id: str
    partition: int
    offsets: tuple[tuple[TopicPartition, OffsetCommitValue], ...]
    write_id: int


@attrs.frozen
class AppendTombstones:
    """Append tombstones (null values) to `__consumer_offsets` partition `partition`: one
    per offset key in `offsets`, plus the group metadata key if `group_metadata`. Kafka
    appends these without waiting for acks and retries on the next expiry cycle, so there
    is no completion callback."""

    group_id: str
    partition: int
    offsets: tuple[TopicPartition, ...]
    group_metadata: bool


Effect = Respond | SetTimer | CancelTimer | StoreGroup | StoreOffsets | AppendTombstones
