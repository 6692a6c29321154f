"""What the group coordinator keeps in `__consumer_offsets`, as plain values.

The coordinator core does not encode records (the record key / value codecs live in
`kcore.coordinator.group.records`, written separately): it hands the shell these values in
its `StoreGroup` / `StoreOffsets` / `AppendTombstones` effects, and the shell hands them
back, decoded from the log, when it loads a partition. Field names are the snake_case of
Kafka's `GroupMetadataValue.json` and `OffsetCommitValue.json`, so
`attrs.asdict(value)` is the dict those schemas describe.

`OffsetsPartitionReplay` folds one partition's records, in log order, into the groups to
load: the last value per key wins and a tombstone (None) deletes, as compaction would.
"""

from __future__ import annotations

import attrs

from kcore.coordinator.group.state import OffsetAndMetadata, TopicPartition


@attrs.frozen
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@attrs.frozen
class GroupMetadataValue:
    """A group's metadata record: the generation, its protocol and leader, and each
    member with its subscription (metadata of the selected protocol) and assignment."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


@attrs.frozen
class OffsetCommitValue:
    """One committed offset record. `leader_epoch` and `expire_timestamp` are -1 when
    absent (Kafka writes value version 1 only when an expire timestamp is set)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1

    @classmethod
    def from_offset(cls, om: OffsetAndMetadata) -> OffsetCommitValue:
        return cls(
            offset=om.offset,
            leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
            metadata=om.metadata,
            commit_timestamp=om.commit_timestamp,
            expire_timestamp=-1 if om.expire_timestamp is None else om.expire_timestamp,
        )

    def to_offset(self) -> OffsetAndMetadata:
        return OffsetAndMetadata(
            offset=self.offset,
            leader_epoch=None if self.leader_epoch < 0 else self.leader_epoch,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp,
            expire_timestamp=None if self.expire_timestamp < 0 else self.expire_timestamp,
        )


@attrs.frozen
class LoadedOffset:
    value: OffsetCommitValue
    record_offset: int | None = None


@attrs.frozen
class LoadedGroup:
    """A group as read back from its offsets partition: its last metadata record (None if
    it only has offsets) and its committed offsets."""

    group_id: str
    metadata: GroupMetadataValue | None
    offsets: dict[TopicPartition, LoadedOffset] = attrs.field(factory=dict)


@attrs.define
class OffsetsPartitionReplay:
    """Replays one `__consumer_offsets` partition in log order (Kafka's
    doLoadGroupsAndOffsets, minus transactional offsets)."""

    _metadata: dict[str, GroupMetadataValue | None] = attrs.field(factory=dict)
    _offsets: dict[str, dict[TopicPartition, LoadedOffset]] = attrs.field(factory=dict)

    def group_metadata(self, group_id: str, value: GroupMetadataValue | None) -> None:
        self._metadata[group_id] = value

    def offset_commit(
        self,
        group_id: str,
        topic: str,
        partition: int,
        value: OffsetCommitValue | None,
        record_offset: int | None = None,
    ) -> None:
        group_offsets = self._offsets.setdefault(group_id, {})
        if value is None:
            group_offsets.pop((topic, partition), None)
        else:
            group_offsets[(topic, partition)] = LoadedOffset(value, record_offset)

    def loaded_groups(self) -> list[LoadedGroup]:
        """Groups with a live metadata record or at least one offset, sorted by id."""
        out = []
        for group_id in sorted(set(self._metadata) | set(self._offsets)):
            metadata = self._metadata.get(group_id)
            offsets = self._offsets.get(group_id, {})
            if metadata is None and not offsets:
                continue
            out.append(LoadedGroup(group_id, metadata, dict(offsets)))
        return out
