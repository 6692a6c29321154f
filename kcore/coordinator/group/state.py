"""The group coordinator's runtime objects: a group's state machine, its members, its
committed offsets (Kafka 3.5's GroupMetadata.scala and MemberMetadata.scala).

Plain data and bookkeeping, no decisions about requests (those are in `coordinator.py`),
no clock (every time-stamping method takes `now_ms`), no I/O. Where Kafka keeps a
response callback on a member ("awaiting join" / "awaiting sync"), we keep a `Waiter`: the
opaque request token the shell gave us and the request's API version, so the coordinator
can answer that request later with a `Respond` effect.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections import Counter
from collections.abc import Iterable, Sequence

import attrs

logger = logging.getLogger("kcore.coordinator.group")

CONSUMER_PROTOCOL_TYPE = "consumer"

# (topic, partition)
TopicPartition = tuple[str, int]
# (protocol name, member metadata for that protocol), in the member's preference order
Protocol = tuple[str, bytes]


class GroupState(enum.Enum):
    """A group's state; the value is Kafka's name for it (what DescribeGroups / ListGroups
    report)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's `validPreviousStates` per target state.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class IllegalGroupTransition(RuntimeError):
    """A transition Kafka's state table forbids: a bug in the coordinator, never a client
    error."""


@attrs.frozen
class Waiter:
    """A request whose response is sent later: the shell's opaque token and the request's
    API version (some response fields depend on it)."""

    token: object
    api_version: int


@attrs.frozen
class OffsetAndMetadata:
    """One committed offset (Kafka's OffsetAndMetadata). `leader_epoch` is None when the
    client sent none (-1 on the wire); `expire_timestamp` is only set by OffsetCommit v2-v4
    requests with an explicit retention time."""

    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@attrs.frozen
class CommittedOffset:
    """An offset that is in the log, with the log offset of the record that carries it
    (Kafka's CommitRecordMetadataAndOffset): a commit replaces a stored one only if its
    record is newer. `record_offset` is None when the shell did not say."""

    offset_and_metadata: OffsetAndMetadata
    record_offset: int | None = None

    def older_than(self, other: CommittedOffset) -> bool:
        if self.record_offset is None or other.record_offset is None:
            return True  # without log positions, the later completion wins
        return self.record_offset < other.record_offset


@attrs.define(eq=False)
class MemberMetadata:
    """A group member (Kafka's MemberMetadata)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[Protocol]
    assignment: bytes = b""
    # The JoinGroup / SyncGroup request this member waits on, if any.
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    # A member that has not yet received its first JoinGroup response: its session timeout
    # does not protect it (it cannot heartbeat), so it is expired even while awaiting join.
    is_new: bool = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a heartbeat deadline passing now should spare this member. Kafka
        re-arms the deadline on every sign of life, so when it fires no heartbeat came;
        only a member parked in a JoinGroup / SyncGroup (which cannot heartbeat) is
        spared, unless it is new (a new member's deadline is the join timeout)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: Sequence[Protocol]) -> bool:
        """Same protocols, same order, same metadata bytes."""
        return [(n, bytes(m)) for n, m in protocols] == [
            (n, bytes(m)) for n, m in self.supported_protocols
        ]

    def vote(self, candidates: Iterable[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        candidate_set = set(candidates)
        for name, _ in self.supported_protocols:
            if name in candidate_set:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidate_set)}")


def plain_protocol_set(protocols: Iterable[Protocol]) -> set[str]:
    return {name for name, _ in protocols}


@attrs.define(eq=False)
class GroupMetadata:
    """A group (Kafka's GroupMetadata): membership, generation, protocol, offsets."""

    group_id: str
    state: GroupState
    current_state_timestamp: int | None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    # Insertion-ordered, so "the first remaining member" (the new leader when the leader
    # leaves) is deterministic.
    members: dict[str, MemberMetadata] = attrs.field(factory=dict)
    # group.instance.id -> member id (KIP-345)
    static_members: dict[str, str] = attrs.field(factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet (KIP-394).
    pending_members: set[str] = attrs.field(factory=set)
    # Members that got their JoinGroup response but have not sent SyncGroup yet.
    pending_sync_members: set[str] = attrs.field(factory=set)
    num_members_awaiting_join: int = 0
    # protocol name -> how many members support it
    supported_protocols: Counter[str] = attrs.field(factory=Counter)
    # Set when a member joins during the first rebalance, so the initial delayed join
    # waits once more (Kafka's InitialDelayedJoin).
    new_member_added: bool = False
    # For consumer groups, the union of the members' subscribed topics (None: unknown).
    subscribed_topics: frozenset[str] | None = None
    offsets: dict[TopicPartition, CommittedOffset] = attrs.field(factory=dict)
    # Commits written to the log but not acknowledged yet: invisible to OffsetFetch.
    pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = attrs.field(factory=dict)

    # -- state --------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupTransition(
                f"group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS_STATES[target])} before moving to "
                f"{target.value}, but it is {self.state.value}"
            )
        self.state = target
        self.current_state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # -- members ------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def add(self, member: MemberMetadata, join_waiter: Waiter | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(
                    f"static member {member.group_instance_id} is already in {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.join_waiter = join_waiter
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Sequence[Protocol],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_waiter: Waiter | None,
    ) -> Waiter | None:
        """Kafka's updateMember. Returns the join request this replaces, if the member was
        already waiting on one (Kafka drops it silently; we let the caller answer it)."""
        self._count_protocols(member, -1)
        member.supported_protocols = list(protocols)
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        replaced = member.join_waiter
        if join_waiter is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_waiter is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.join_waiter = join_waiter
        return replaced

    def take_join_waiter(self, member: MemberMetadata) -> Waiter | None:
        """Stop awaiting join (Kafka's maybeInvokeJoinCallback minus the call): the caller
        answers the returned request."""
        waiter = member.join_waiter
        if waiter is not None:
            member.join_waiter = None
            self.num_members_awaiting_join -= 1
        return waiter

    @staticmethod
    def take_sync_waiter(member: MemberMetadata) -> Waiter | None:
        waiter = member.sync_waiter
        member.sync_waiter = None
        return waiter

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> tuple[MemberMetadata, Waiter | None, Waiter | None]:
        """Give a static member a new member id (KIP-345). Returns the member and the join /
        sync requests the old id was waiting on, which the caller fences."""
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise ValueError(f"cannot replace non-existing member id {old_member_id}")
        old_join = self.take_join_waiter(member)
        old_sync = self.take_sync_waiter(member)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member, old_join, old_sync

    def maybe_elect_new_joined_leader(self) -> bool:
        """At the end of the join phase: keep the leader if it rejoined, else pick a member
        that did. False when no member rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                logger.info(
                    "group %s: leader %s failed to join before the rebalance timeout; "
                    "%s is the new leader",
                    self.group_id,
                    self.leader_id,
                    member_id,
                )
                self.leader_id = member_id
                return True
        return False

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise ValueError(f"{member_id} is already a member of {self.group_id}")
        self.pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise ValueError(f"{member_id} is not a member of {self.group_id}")
        self.pending_sync_members.add(member_id)

    @property
    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ----------------------------------------------------------------------

    def _count_protocols(self, member: MemberMetadata, delta: int) -> None:
        for name, _ in member.supported_protocols:
            self.supported_protocols[name] += delta

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        return {name for name, count in self.supported_protocols.items() if count == self.size}

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        return self.protocol_type == member_protocol_type and any(
            self.supported_protocols[name] == self.size for name in member_protocols
        )

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its preferred protocol among those all
        members support; the most votes wins (ties: the protocol voted for first)."""
        if not self.members:
            raise ValueError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                logger.warning(
                    "group %s: cannot parse the consumer protocol subscription of %s; the "
                    "coordinator does not know the subscribed topics",
                    self.group_id,
                    member.member_id,
                )
                return None
            topics.update(parsed)
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[dict]:
        """The members as the leader's JoinGroup response lists them."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise ValueError(f"no member metadata for a group in state {self.state.value}")
        assert self.protocol_name is not None
        return [
            {
                "member_id": member_id,
                "group_instance_id": member.group_instance_id,
                "metadata": member.metadata(self.protocol_name),
            }
            for member_id, member in self.members.items()
        ]

    # -- offsets ------------------------------------------------------------------------

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        committed = self.offsets.get(tp)
        return None if committed is None else committed.offset_and_metadata

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommittedOffset) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
        staged = self.pending_offset_commits.get(tp)
        if staged is not None and staged == committed.offset_and_metadata:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def has_pending_offset_commit(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def remove_offsets(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        removed: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in list(tps):
            self.pending_offset_commits.pop(tp, None)
            committed = self.offsets.pop(tp, None)
            if committed is not None:
                removed[tp] = committed.offset_and_metadata
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's removeExpiredOffsets: an empty group's offsets expire `retention_ms` after
        it became empty; a stable consumer group's offsets of topics no member subscribes to
        expire `retention_ms` after their commit; a group without a protocol type (simple
        commits only) expires each offset `retention_ms` after its commit."""

        def expired(base, keep_topics: frozenset[str] = frozenset()):
            out = {}
            for tp, committed in self.offsets.items():
                if tp[0] in keep_topics or tp in self.pending_offset_commits:
                    continue
                om = committed.offset_and_metadata
                if om.expire_timestamp is None:
                    if now_ms - base(om) >= retention_ms:
                        out[tp] = om
                elif now_ms >= om.expire_timestamp:
                    out[tp] = om
            return out

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            result = expired(lambda om: state_ts if state_ts is not None else om.commit_timestamp)
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            result = expired(lambda om: om.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            result = expired(lambda om: om.commit_timestamp)
        else:
            result = {}
        for tp in result:
            del self.offsets[tp]
        return result


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: v0's fields prefix all
    later ones): int16 version, then an int32 count of int16-length UTF-8 strings. None if
    the bytes do not parse."""
    try:
        view = memoryview(metadata)
        (version,) = struct.unpack_from(">h", view, 0)
        if version < 0:
            return None
        (count,) = struct.unpack_from(">i", view, 2)
        if count < 0:
            return None
        position = 6
        topics = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", view, position)
            position += 2
            if length < 0 or position + length > len(view):
                return None
            topics.append(bytes(view[position : position + length]).decode("utf-8"))
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
