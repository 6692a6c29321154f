"""The group coordinator's decisions (Kafka 3.5's GroupCoordinator.scala, with the parts of
GroupMetadataManager, DelayedJoin, InitialDelayedJoin, DelayedSync and DelayedHeartbeat
that decide), sans-IO.

`GroupCoordinatorCore` never waits, reads a clock or does I/O. Every method takes the
current time (`now_ms`, milliseconds) where time matters and returns a list of *effects*
(`effects.py`) for the shell to carry out, in order:

- `Respond(token, body)`: send `body` as the response to the request tagged `token` (the
  opaque value the shell passed with the request). A JoinGroup or SyncGroup is often
  answered by a later call (another member's request, a timer, a storage completion),
  so the shell must keep the request's connection until its token comes back. Every
  request is answered exactly once, unless the coordinator is shut down.
- `SetTimer(key, deadline_ms)` / `CancelTimer(key)`: keep one timer per key (a new
  `SetTimer` replaces the old deadline); when it fires, call `on_timer(key, now_ms)`. The
  core checks the key and deadline against its own table, so a late or stale firing is
  harmless.
- `StoreGroup(group_id, partition, value, write_id)`: append the group metadata record
  with acks=all and then call `group_stored(write_id, error_code, now_ms)` with the
  append's error code (0 on success); the core maps it as Kafka does.
- `StoreOffsets(group_id, partition, offsets, write_id)`: the same for offset commits,
  then `offsets_stored(write_id, error_code, now_ms, record_offset=...)`.
- `AppendTombstones(group_id, partition, offsets, group_metadata)`: append tombstones,
  no acks, no callback.

Ownership of `__consumer_offsets` partitions: `begin_loading(partition, epoch)` when this
broker becomes the partition's leader (its groups answer COORDINATOR_LOAD_IN_PROGRESS),
`load_group(loaded, now_ms)` for each group read back from the log (see
`stored.OffsetsPartitionReplay`), `finish_loading(partition, now_ms)`; and
`unload_groups(partition, now_ms)` when it stops being the leader (waiting members get
NOT_COORDINATOR). `startup(now_ms)` / `shutdown()` bracket the coordinator's life.

Request methods take Kafka's request fields as keyword arguments and answer with Kafka's
response body (a dict keyed by the snake_case of Kafka's JSON field names, carrying
every field any version has, so the codec encodes whatever version was asked);
`handle_request(api_key, api_version, body, token, ...)` maps a decoded request body
onto them, which is all the shell needs.

Deviations from Kafka, all about requests Kafka would leave unanswered: a JoinGroup or
SyncGroup that is superseded by the same member's next one is answered with
REBALANCE_IN_PROGRESS, and a member removed while awaiting SyncGroup gets
UNKNOWN_MEMBER_ID. Transactional offset commits and OffsetDelete are not implemented.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from kcore._fetcher_id import java_string_hash
from kcore.coordinator.group import _codes as E
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
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
    Protocol,
    TopicPartition,
    Waiter,
    plain_protocol_set,
)
from kcore.coordinator.group.stored import (
    GroupMetadataValue,
    LoadedGroup,
    MemberMetadataValue,
    OffsetCommitValue,
)

logger = logging.getLogger("kcore.coordinator.group")

Empty = GroupState.EMPTY
PreparingRebalance = GroupState.PREPARING_REBALANCE
CompletingRebalance = GroupState.COMPLETING_REBALANCE
Stable = GroupState.STABLE
Dead = GroupState.DEAD

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
# A new member's JoinGroup is parked at most this long (Kafka's NewMemberJoinTimeoutMs):
# it cannot heartbeat yet, and a client that gave up would otherwise stay a member.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# DescribeGroups' AuthorizedOperations when not requested / not computed.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
_INT32_MAX = 2**31 - 1

API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_JOIN_GROUP = 11
API_HEARTBEAT = 12
API_LEAVE_GROUP = 13
API_SYNC_GROUP = 14
API_DESCRIBE_GROUPS = 15
API_LIST_GROUPS = 16
API_DELETE_GROUPS = 42
GROUP_API_KEYS = frozenset(
    {
        API_OFFSET_COMMIT,
        API_OFFSET_FETCH,
        API_JOIN_GROUP,
        API_HEARTBEAT,
        API_LEAVE_GROUP,
        API_SYNC_GROUP,
        API_DESCRIBE_GROUPS,
        API_LIST_GROUPS,
        API_DELETE_GROUPS,
    }
)
# APIs that accept the empty group id (offset storage without group management, and the
# admin APIs that must be able to see and delete such a group).
_EMPTY_GROUP_ID_OK = frozenset(
    {API_OFFSET_COMMIT, API_OFFSET_FETCH, API_DESCRIBE_GROUPS, API_DELETE_GROUPS}
)


# Kafka's property name -> GroupConfig attribute
_GROUP_CONFIG_PROPERTIES = {
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
}


@attrs.frozen
class GroupConfig:
    """The broker settings the group coordinator reads (Kafka's names and defaults)."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = _INT32_MAX
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> GroupConfig:
        """From Kafka's dotted names; keys this config does not know are ignored (they are
        other components' settings)."""
        kwargs = {
            attr: int(properties[name])  # type: ignore[call-overload]
            for name, attr in _GROUP_CONFIG_PROPERTIES.items()
            if name in properties
        }
        return cls(**kwargs)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000


@attrs.frozen
class MemberIdentity:
    """One member of a LeaveGroup request (v3+; v0-v2's single member id maps to one)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


def uuid_member_ids(rng: random.Random) -> Callable[[str], str]:
    """Kafka's member ids (`prefix + "-" + UUID`), with the UUIDs drawn from `rng`."""

    def new_member_id(prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"

    return new_member_id


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`."""
    code = java_string_hash(group_id)
    return (0 if code == -(2**31) else abs(code)) % num_partitions


# -- in-flight operations (what Kafka keeps in its purgatories) ----------------------------


@attrs.define
class _DelayedJoin:
    """Kafka's DelayedJoin (`initial=False`: completes when every member has rejoined or
    at the deadline) or InitialDelayedJoin (`initial=True`: only at the deadline, and
    waits again while new members keep arriving, up to the rebalance timeout)."""

    initial: bool
    delay_ms: int
    remaining_ms: int = 0


@attrs.define
class _SyncAssignmentWrite:
    group: GroupMetadata
    generation_id: int
    assignment: dict[str, bytes]


@attrs.define
class _EmptyGroupWrite:
    group: GroupMetadata
    generation_id: int


@attrs.define
class _StaticMemberWrite:
    group: GroupMetadata
    member: MemberMetadata
    group_instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: list[Protocol]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    previous_leader_id: str | None
    support_skipping_assignment: bool


@attrs.define
class _OffsetWrite:
    group: GroupMetadata
    token: object
    # every partition of the request, in request order, with its error if it was decided
    # before the write (unknown partition, metadata too large); None: the write decides
    partitions: list[tuple[TopicPartition, int | None]]
    offsets: dict[TopicPartition, OffsetAndMetadata]


_GroupWrite = _SyncAssignmentWrite | _EmptyGroupWrite | _StaticMemberWrite


# -- responses --------------------------------------------------------------------------


def _join_response(
    member_id: str,
    error: int,
    *,
    api_version: int,
    generation_id: int = NO_GENERATION,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = None,
    skip_assignment: bool = False,
    members: Sequence[dict] = (),
) -> dict:
    if protocol_name is None and api_version < 7:
        protocol_name = ""  # nullable only from v7
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "generation_id": generation_id,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "leader": leader or "",
        "skip_assignment": skip_assignment,
        "member_id": member_id,
        "members": list(members),
    }


def _sync_response(
    error: int,
    *,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    assignment: bytes = b"",
) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "assignment": assignment,
    }


def _group_append_error(error: int) -> int:
    """Kafka's mapping of a group metadata append error to the error members see."""
    if error in (
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error == E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return error


def _offset_append_error(error: int) -> int:
    """Kafka's mapping of an offset commit append error to the commit's error."""
    if error in (
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return error


def _by_topic(items: Iterable[tuple[TopicPartition, dict]]) -> list[dict]:
    """[{name, partitions: [...]}] from ((topic, partition), partition dict) pairs, topics
    in first-seen order."""
    topics: dict[str, list[dict]] = {}
    for (topic, _), partition in items:
        topics.setdefault(topic, []).append(partition)
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


class GroupCoordinatorCore:
    """The group coordinator of one broker, for the `__consumer_offsets` partitions it
    leads. Not thread-safe and not re-entrant: one task drives it."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        new_member_id: Callable[[str], str],
    ) -> None:
        self.config = config or GroupConfig()
        self._new_member_id = new_member_id
        self._active = False
        self._groups: dict[str, GroupMetadata] = {}
        self._owned_partitions: set[int] = set()
        self._loading_partitions: set[int] = set()
        self._partition_epochs: dict[int, int] = {}
        self._timers: dict[TimerKey, int] = {}
        self._join_ops: dict[str, _DelayedJoin] = {}
        self._sync_ops: dict[str, int] = {}
        self._group_writes: dict[int, _GroupWrite] = {}
        self._offset_writes: dict[int, _OffsetWrite] = {}
        self._next_write_id = 1

    # -- inspection (tests, metrics, the shell) ---------------------------------------

    def group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    @property
    def groups(self) -> Mapping[str, GroupMetadata]:
        return self._groups

    @property
    def timers(self) -> Mapping[TimerKey, int]:
        """The armed timers and their deadlines."""
        return self._timers

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    @property
    def is_loading(self) -> bool:
        return bool(self._loading_partitions)

    # -- lifecycle --------------------------------------------------------------------

    def startup(self, now_ms: int) -> list[Effect]:
        self._active = True
        fx: list[Effect] = []
        self._set_timer(
            fx, OffsetsRetentionTimer(), now_ms + self.config.offsets_retention_check_interval_ms
        )
        return fx

    def shutdown(self, now_ms: int) -> list[Effect]:
        """Unload every group (waiting members get NOT_COORDINATOR) and stop."""
        fx: list[Effect] = []
        for partition in sorted(self._owned_partitions | self._loading_partitions):
            fx.extend(self.unload_groups(partition, now_ms))
        self._active = False
        for key in list(self._timers):
            self._cancel_timer(fx, key)
        return fx

    def begin_loading(self, partition: int, coordinator_epoch: int) -> list[Effect]:
        """This broker became the leader of `__consumer_offsets` partition `partition`;
        its groups answer COORDINATOR_LOAD_IN_PROGRESS until `finish_loading`."""
        current = self._partition_epochs.get(partition)
        if current is None or coordinator_epoch >= current:
            self._partition_epochs[partition] = coordinator_epoch
        self._loading_partitions.add(partition)
        logger.info("loading offsets partition %d in epoch %d", partition, coordinator_epoch)
        return []

    def load_group(self, loaded: LoadedGroup, now_ms: int) -> list[Effect]:
        """Install a group read back from its offsets partition (Kafka's loadGroup and
        onGroupLoaded): Stable if its record has members, else Empty."""
        fx: list[Effect] = []
        if loaded.group_id in self._groups:
            logger.debug("group %s is already cached; not loading it again", loaded.group_id)
            return fx
        group = _group_from_record(loaded, now_ms)
        for tp, offset in loaded.offsets.items():
            group.offsets[tp] = CommittedOffset(offset.value.to_offset(), offset.record_offset)
        self._groups[group.group_id] = group
        logger.info(
            "loaded group %s in generation %d (%s, %d members)",
            group.group_id,
            group.generation_id,
            group.state.value,
            group.size,
        )
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(fx, group, now_ms, "freshly-loaded group is over capacity")
        for member in list(group.members.values()):
            self._schedule_heartbeat(fx, group, member.member_id, member.session_timeout_ms, now_ms)
        return fx

    def finish_loading(self, partition: int, now_ms: int) -> list[Effect]:
        self._loading_partitions.discard(partition)
        self._owned_partitions.add(partition)
        logger.info("finished loading offsets partition %d", partition)
        return []

    def unload_groups(
        self, partition: int, now_ms: int, coordinator_epoch: int | None = None
    ) -> list[Effect]:
        """This broker is no longer the leader of `partition`: drop its groups, answering
        their waiting members with NOT_COORDINATOR (Kafka's onGroupUnloaded)."""
        fx: list[Effect] = []
        current = self._partition_epochs.get(partition)
        if coordinator_epoch is not None:
            if current is not None and coordinator_epoch < current:
                logger.info(
                    "not unloading offsets partition %d in epoch %d: current epoch is %d",
                    partition,
                    coordinator_epoch,
                    current,
                )
                return fx
            self._partition_epochs[partition] = coordinator_epoch
        self._owned_partitions.discard(partition)
        self._loading_partitions.discard(partition)
        for group_id in sorted(self._groups):
            if self.partition_for(group_id) != partition:
                continue
            group = self._groups.pop(group_id)
            previous = group.state
            group.transition_to(Dead, now_ms)
            for member in group.members.values():
                if previous is PreparingRebalance:
                    waiter = group.take_join_waiter(member)
                    if waiter is not None:
                        self._respond(
                            fx,
                            waiter.token,
                            _join_response(
                                member.member_id, E.NOT_COORDINATOR, api_version=waiter.api_version
                            ),
                        )
                elif previous in (Stable, CompletingRebalance):
                    waiter = group.take_sync_waiter(member)
                    if waiter is not None:
                        self._respond(fx, waiter.token, _sync_response(E.NOT_COORDINATOR))
            self._forget_group_timers(fx, group)
            logger.info("unloaded group %s in generation %d", group_id, group.generation_id)
        return fx

    # -- JoinGroup --------------------------------------------------------------------

    def join_group(
        self,
        token: object,
        *,
        group_id: str,
        member_id: str,
        protocol_type: str,
        protocols: Sequence[Protocol],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now_ms: int,
        group_instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        reason: str | None = None,
        api_version: int = 9,
    ) -> list[Effect]:
        """Kafka's handleJoinGroup. The response comes now (errors, MEMBER_ID_REQUIRED, a
        follower of a stable group) or when the join phase completes."""
        fx: list[Effect] = []
        waiter = Waiter(token, api_version)
        protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        # v4+: a dynamic member without an id gets one and must rejoin with it (KIP-394).
        require_known_member_id = api_version >= 4 and group_instance_id is None
        support_skipping_assignment = api_version >= 9
        join_reason = reason or "not provided"

        def reject(error: int, answer_member_id: str = member_id) -> list[Effect]:
            self._respond(
                fx, token, _join_response(answer_member_id, error, api_version=api_version)
            )
            return fx

        error = self._validate_group_status(group_id, API_JOIN_GROUP)
        if error:
            return reject(error)
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return reject(E.INVALID_SESSION_TIMEOUT)
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
        if group is None:
            # A group comes into being when a member without an id joins it.
            if not is_unknown_member:
                return reject(E.UNKNOWN_MEMBER_ID)
            group = GroupMetadata(group_id, Empty, now_ms)
            self._groups[group_id] = group

        if not self._accept_joining_member(group, member_id):
            removed = group.remove(member_id)
            if removed is not None:
                # Kafka drops the member silently; answer what it was still waiting on.
                self._cancel_timer(fx, HeartbeatTimer(group_id, member_id))
                if removed.join_waiter is not None:
                    stale = removed.join_waiter
                    removed.join_waiter = None
                    self._respond(
                        fx,
                        stale.token,
                        _join_response(
                            UNKNOWN_MEMBER_ID,
                            E.GROUP_MAX_SIZE_REACHED,
                            api_version=stale.api_version,
                        ),
                    )
                self._answer_orphaned_sync(fx, removed)
            return reject(E.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)

        new_member = _JoiningMember(
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=protocols,
            waiter=waiter,
            reason=join_reason,
        )
        if is_unknown_member:
            self._new_member_join(
                fx,
                group,
                new_member,
                require_known_member_id,
                support_skipping_assignment,
                now_ms,
            )
        else:
            self._current_member_join(fx, group, member_id, new_member, now_ms)

        if group.is_(PreparingRebalance):
            self._try_complete_join(fx, group, now_ms)
        return fx

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (Empty, Dead):
            return True
        if group.is_(PreparingRebalance):
            # Counting members that already rejoined (not the group size, which may exceed
            # a lowered max) kicks out the last members to rejoin.
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_members_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _new_member_join(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        joining: _JoiningMember,
        require_known_member_id: bool,
        support_skipping_assignment: bool,
        now_ms: int,
    ) -> None:
        token, version = joining.waiter.token, joining.waiter.api_version
        if group.is_(Dead):
            # Unloaded or deleted meanwhile: let the member find the coordinator again.
            self._respond(
                fx,
                token,
                _join_response(UNKNOWN_MEMBER_ID, E.COORDINATOR_NOT_AVAILABLE, api_version=version),
            )
            return
        if not group.supports_protocols(
            joining.protocol_type, plain_protocol_set(joining.protocols)
        ):
            self._respond(
                fx,
                token,
                _join_response(
                    UNKNOWN_MEMBER_ID, E.INCONSISTENT_GROUP_PROTOCOL, api_version=version
                ),
            )
            return
        instance_id = joining.group_instance_id
        new_member_id = self._new_member_id(
            instance_id if instance_id is not None else joining.client_id
        )
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                logger.info(
                    "static member %s of group %s rejoins with an unknown member id in state "
                    "%s; replacing member id %s with %s",
                    instance_id,
                    group.group_id,
                    group.state.value,
                    old_member_id,
                    new_member_id,
                )
                self._update_static_member_and_rebalance(
                    fx,
                    group,
                    old_member_id,
                    new_member_id,
                    joining,
                    support_skipping_assignment,
                    now_ms,
                )
            else:
                self._add_member_and_rebalance(fx, group, new_member_id, joining, now_ms)
        elif require_known_member_id:
            # KIP-394: hand out the id and wait for the member to come back with it, so a
            # client that retries does not leave a trail of defunct members.
            group.add_pending_member(new_member_id)
            self._schedule_heartbeat(fx, group, new_member_id, joining.session_timeout_ms, now_ms)
            self._respond(
                fx, token, _join_response(new_member_id, E.MEMBER_ID_REQUIRED, api_version=version)
            )
        else:
            self._add_member_and_rebalance(fx, group, new_member_id, joining, now_ms)

    def _current_member_join(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        member_id: str,
        joining: _JoiningMember,
        now_ms: int,
    ) -> None:
        token, version = joining.waiter.token, joining.waiter.api_version

        def answer(error: int) -> None:
            self._respond(fx, token, _join_response(member_id, error, api_version=version))

        if group.is_(Dead):
            answer(E.COORDINATOR_NOT_AVAILABLE)
            return
        if not group.supports_protocols(
            joining.protocol_type, plain_protocol_set(joining.protocols)
        ):
            answer(E.INCONSISTENT_GROUP_PROTOCOL)
            return
        if group.is_pending_member(member_id):
            if joining.group_instance_id is not None:
                # Pending member ids are only handed to dynamic members.
                answer(E.UNKNOWN_SERVER_ERROR)
                return
            self._add_member_and_rebalance(fx, group, member_id, joining, now_ms)
            return
        error = self._validate_current_member(group, member_id, joining.group_instance_id)
        if error:
            answer(error)
            return
        member = group.get(member_id)
        state = group.state
        if state is PreparingRebalance:
            self._update_member_and_rebalance(
                fx, group, member, joining, now_ms, f"member {member_id} joining during rebalance"
            )
        elif state is CompletingRebalance:
            if member.matches(joining.protocols):
                # Same metadata (the member probably lost our JoinGroup response): answer
                # with the current generation.
                self._respond(fx, token, self._generation_join_response(group, member_id, version))
            else:
                self._update_member_and_rebalance(
                    fx, group, member, joining, now_ms, f"member {member_id} changed its metadata"
                )
        elif state is Stable:
            if group.is_leader(member_id):
                # A leader's JoinGroup forces a rebalance: it is how the leader reacts to
                # changes the member metadata does not show (e.g. new topic partitions).
                self._update_member_and_rebalance(
                    fx, group, member, joining, now_ms, f"leader {member_id} rejoining"
                )
            elif not member.matches(joining.protocols):
                self._update_member_and_rebalance(
                    fx, group, member, joining, now_ms, f"member {member_id} changed its metadata"
                )
            else:
                response = self._generation_join_response(group, member_id, version)
                response["members"] = []
                self._respond(fx, token, response)
        else:
            logger.warning(
                "member %s rejoins group %s in unexpected state %s",
                member_id,
                group.group_id,
                state.value,
            )
            answer(E.UNKNOWN_MEMBER_ID)

    def _generation_join_response(
        self, group: GroupMetadata, member_id: str, api_version: int
    ) -> dict:
        return _join_response(
            member_id,
            E.NONE,
            api_version=api_version,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id,
            members=group.current_member_metadata() if group.is_leader(member_id) else (),
        )

    def _add_member_and_rebalance(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        member_id: str,
        joining: _JoiningMember,
        now_ms: int,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=joining.group_instance_id,
            client_id=joining.client_id,
            client_host=joining.client_host,
            rebalance_timeout_ms=joining.rebalance_timeout_ms,
            session_timeout_ms=joining.session_timeout_ms,
            protocol_type=joining.protocol_type,
            supported_protocols=list(joining.protocols),
            is_new=True,
        )
        # During the group's first rebalance, each new member extends the initial delay.
        if group.is_(PreparingRebalance) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, joining.waiter)
        self._schedule_heartbeat(fx, group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS, now_ms)
        self._maybe_prepare_rebalance(
            fx,
            group,
            now_ms,
            f"adding new member {member_id} with group instance id "
            f"{joining.group_instance_id}; client reason: {joining.reason}",
        )

    def _update_member_and_rebalance(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        member: MemberMetadata,
        joining: _JoiningMember,
        now_ms: int,
        reason: str,
    ) -> None:
        replaced = group.update_member(
            member,
            joining.protocols,
            joining.rebalance_timeout_ms,
            joining.session_timeout_ms,
            joining.waiter,
        )
        if replaced is not None and replaced != joining.waiter:
            self._respond(
                fx,
                replaced.token,
                _join_response(
                    member.member_id, E.REBALANCE_IN_PROGRESS, api_version=replaced.api_version
                ),
            )
        self._maybe_prepare_rebalance(
            fx, group, now_ms, f"{reason}; client reason: {joining.reason}"
        )

    def _update_static_member_and_rebalance(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        joining: _JoiningMember,
        support_skipping_assignment: bool,
        now_ms: int,
    ) -> None:
        assert joining.group_instance_id is not None
        previous_leader_id = group.leader_id
        member, old_join, old_sync = group.replace_static_member(
            joining.group_instance_id, old_member_id, new_member_id
        )
        # Fence whatever the old incarnation is still waiting on.
        if old_join is not None:
            self._respond(
                fx,
                old_join.token,
                _join_response(
                    old_member_id, E.FENCED_INSTANCE_ID, api_version=old_join.api_version
                ),
            )
        if old_sync is not None:
            self._respond(fx, old_sync.token, _sync_response(E.FENCED_INSTANCE_ID))
        self._cancel_timer(fx, HeartbeatTimer(group.group_id, old_member_id))
        self._schedule_heartbeat(fx, group, new_member_id, member.session_timeout_ms, now_ms)

        old_protocols = list(member.supported_protocols)
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(
            member,
            joining.protocols,
            joining.rebalance_timeout_ms,
            joining.session_timeout_ms,
            joining.waiter,
        )
        state = group.state
        if state is Stable:
            # No rebalance if the next generation would keep the protocol: persist the new
            # member id and hand the member the current generation.
            if group.protocol_name == group.select_protocol():
                write = _StaticMemberWrite(
                    group=group,
                    member=member,
                    group_instance_id=joining.group_instance_id,
                    old_member_id=old_member_id,
                    new_member_id=new_member_id,
                    old_protocols=old_protocols,
                    old_rebalance_timeout_ms=old_rebalance_timeout_ms,
                    old_session_timeout_ms=old_session_timeout_ms,
                    previous_leader_id=previous_leader_id,
                    support_skipping_assignment=support_skipping_assignment,
                )
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self._store_group(fx, group, assignment, write)
            else:
                self._maybe_prepare_rebalance(
                    fx,
                    group,
                    now_ms,
                    f"static member {joining.group_instance_id} rejoined with a protocol change",
                )
        elif state is CompletingRebalance:
            # The leader may be computing an assignment for the old member id: start over.
            self._prepare_rebalance(
                fx,
                group,
                now_ms,
                f"static member {joining.group_instance_id} rejoined during CompletingRebalance",
            )
        elif state is PreparingRebalance:
            pass  # it counts as rejoined; the join phase completes as usual
        else:
            raise AssertionError(
                f"group {group.group_id} cannot be {state.value} with static member "
                f"{joining.group_instance_id}"
            )

    # -- SyncGroup --------------------------------------------------------------------

    def sync_group(
        self,
        token: object,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        now_ms: int,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        api_version: int = 5,
    ) -> list[Effect]:
        """Kafka's handleSyncGroup. A follower's response waits for the leader's
        assignment to be stored; the leader's too."""
        fx: list[Effect] = []
        error = self._validate_group_status(group_id, API_SYNC_GROUP)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator: have the member rejoin
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            error = E.REBALANCE_IN_PROGRESS
        if error:
            self._respond(fx, token, _sync_response(error))
            return fx
        group = self._groups.get(group_id)
        if group is None:
            self._respond(fx, token, _sync_response(E.UNKNOWN_MEMBER_ID))
            return fx

        if group.is_(Dead):
            error = E.COORDINATOR_NOT_AVAILABLE
        else:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if not error:
                if generation_id != group.generation_id:
                    error = E.ILLEGAL_GENERATION
                elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                    protocol_name is not None and protocol_name != group.protocol_name
                ):
                    error = E.INCONSISTENT_GROUP_PROTOCOL
        if error:
            self._respond(fx, token, _sync_response(error))
            return fx

        state = group.state
        if state is Empty:
            self._respond(fx, token, _sync_response(E.UNKNOWN_MEMBER_ID))
        elif state is PreparingRebalance:
            self._respond(fx, token, _sync_response(E.REBALANCE_IN_PROGRESS))
        elif state is CompletingRebalance:
            member = group.get(member_id)
            superseded = member.sync_waiter
            if superseded is not None:
                self._respond(fx, superseded.token, _sync_response(E.REBALANCE_IN_PROGRESS))
            member.sync_waiter = Waiter(token, api_version)
            self._remove_pending_sync_member(fx, group, member_id)
            if group.is_leader(member_id):
                logger.info(
                    "assignment received from leader %s of group %s for generation %d (%d "
                    "members, %d static)",
                    member_id,
                    group_id,
                    group.generation_id,
                    group.size,
                    len(group.static_members),
                )
                # Members the leader left out get an empty assignment.
                assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
                missing = [m for m in group.members if m not in assignments]
                if missing:
                    logger.warning(
                        "group %s generation %d: empty assignment for %s",
                        group_id,
                        group.generation_id,
                        missing,
                    )
                write = _SyncAssignmentWrite(group, group.generation_id, assignment)
                self._store_group(fx, group, assignment, write)
        elif state is Stable:
            self._remove_pending_sync_member(fx, group, member_id)
            member = group.get(member_id)
            self._respond(
                fx,
                token,
                _sync_response(
                    E.NONE,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                ),
            )
            self._schedule_heartbeat(fx, group, member_id, member.session_timeout_ms, now_ms)
        return fx

    # -- Heartbeat --------------------------------------------------------------------

    def heartbeat(
        self,
        token: object,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> list[Effect]:
        """Kafka's handleHeartbeat: REBALANCE_IN_PROGRESS tells a member to rejoin."""
        fx: list[Effect] = []
        error = self._validate_group_status(group_id, API_HEARTBEAT)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            error = E.NONE  # the group is still loading: answer blindly
        elif not error:
            error = self._heartbeat(
                fx, group_id, member_id, generation_id, group_instance_id, now_ms
            )
        self._respond(fx, token, {"throttle_time_ms": 0, "error_code": error})
        return fx

    def _heartbeat(
        self,
        fx: list[Effect],
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        now_ms: int,
    ) -> int:
        group = self._groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(Dead):
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(Empty):
            return E.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        self._schedule_heartbeat(fx, group, member_id, member.session_timeout_ms, now_ms)
        return E.REBALANCE_IN_PROGRESS if group.is_(PreparingRebalance) else E.NONE

    # -- LeaveGroup -------------------------------------------------------------------

    def leave_group(
        self,
        token: object,
        *,
        group_id: str,
        members: Sequence[MemberIdentity],
        now_ms: int,
        api_version: int = 5,
    ) -> list[Effect]:
        """Kafka's handleLeaveGroup, for a batch of members (KIP-345): by member id, or by
        group instance id alone (an admin removing a static member)."""
        fx: list[Effect] = []
        top_error = self._validate_group_status(group_id, API_LEAVE_GROUP)
        results: list[tuple[MemberIdentity, int]] = []
        if not top_error:
            group = self._groups.get(group_id)
            if group is None:
                results = [(m, E.UNKNOWN_MEMBER_ID) for m in members]
            elif group.is_(Dead):
                top_error = E.COORDINATOR_NOT_AVAILABLE
            else:
                results = [(m, self._leave_one(fx, group, m, now_ms)) for m in members]
        if api_version < 3:
            # v0-v2 carry one member and only a top-level error.
            member_error = next((error for _, error in results if error), E.NONE)
            body = {"throttle_time_ms": 0, "error_code": top_error or member_error, "members": []}
        else:
            body = {
                "throttle_time_ms": 0,
                "error_code": top_error,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "error_code": error,
                    }
                    for m, error in results
                ],
            }
        self._respond(fx, token, body)
        return fx

    def _leave_one(
        self, fx: list[Effect], group: GroupMetadata, leaving: MemberIdentity, now_ms: int
    ) -> int:
        reason = (
            f"removing member {{}} on LeaveGroup; client reason: {leaving.reason or 'not provided'}"
        )
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            current = (
                group.current_static_member_id(leaving.group_instance_id)
                if leaving.group_instance_id is not None
                else None
            )
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            self._remove_member_and_update_group(
                fx, group, group.get(current), now_ms, reason.format(current)
            )
            return E.NONE
        if group.is_pending_member(leaving.member_id):
            self._cancel_timer(fx, HeartbeatTimer(group.group_id, leaving.member_id))
            self._remove_pending_member_and_update_group(fx, group, leaving.member_id, now_ms)
            return E.NONE
        error = self._validate_current_member(group, leaving.member_id, leaving.group_instance_id)
        if error:
            return error
        self._remove_member_and_update_group(
            fx, group, group.get(leaving.member_id), now_ms, reason.format(leaving.member_id)
        )
        logger.info("member %s has left group %s", leaving.member_id, group.group_id)
        return E.NONE

    # -- OffsetCommit -----------------------------------------------------------------

    def commit_offsets(
        self,
        token: object,
        *,
        group_id: str,
        topics: Sequence[Mapping],
        now_ms: int,
        generation_id: int = NO_GENERATION,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> list[Effect]:
        """Kafka's OffsetCommit (v1+): `topics` is the request's topics array
        ([{name, partitions: [{partition_index, committed_offset, committed_leader_epoch,
        committed_metadata, commit_timestamp}]}]). `partition_exists`, if given, rejects
        partitions the broker does not know with UNKNOWN_TOPIC_OR_PARTITION (KafkaApis'
        metadata check). The response comes once the commit is stored."""
        fx: list[Effect] = []
        partitions: list[tuple[TopicPartition, int | None]] = []
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic in topics:
            name = topic["name"]
            for partition in topic.get("partitions", ()):
                tp = (name, partition["partition_index"])
                if partition_exists is not None and not partition_exists(*tp):
                    partitions.append((tp, E.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                partitions.append((tp, None))
                commit_timestamp = partition.get("commit_timestamp", -1)
                leader_epoch = partition.get("committed_leader_epoch", -1)
                offsets[tp] = OffsetAndMetadata(
                    offset=partition["committed_offset"],
                    leader_epoch=None if leader_epoch is None or leader_epoch < 0 else leader_epoch,
                    metadata=partition.get("committed_metadata") or "",
                    commit_timestamp=now_ms if commit_timestamp in (None, -1) else commit_timestamp,
                    expire_timestamp=None
                    if retention_time_ms in (None, -1)
                    else now_ms + retention_time_ms,
                )

        def answer(error: int | None) -> list[Effect]:
            self._respond(fx, token, _commit_response(partitions, error))
            return fx

        if not offsets:
            return answer(None)
        error = self._validate_group_status(group_id, API_OFFSET_COMMIT)
        if error:
            return answer(error)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a generation this coordinator does not know: reject.
                return answer(E.ILLEGAL_GENERATION)
            # Offset storage without group management.
            group = GroupMetadata(group_id, Empty, now_ms)
            self._groups[group_id] = group
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error:
            return answer(error)
        state = group.state
        if state is CompletingRebalance:
            # The member has the new generation but not its assignment yet.
            return answer(E.REBALANCE_IN_PROGRESS)
        if state in (Stable, PreparingRebalance) and group.has(member_id):
            # A commit is a sign of life; during PreparingRebalance the next heartbeat
            # tells the member to rejoin.
            member = group.get(member_id)
            self._schedule_heartbeat(fx, group, member_id, member.session_timeout_ms, now_ms)
        self._store_offsets(fx, group, token, partitions, offsets)
        return fx

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> int:
        if group.is_(Dead):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(Empty):
            # Admin client or a consumer without group management: allowed on an empty
            # group.
            return E.NONE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error:
                return error
            return E.ILLEGAL_GENERATION if generation_id != group.generation_id else E.NONE
        if not group.is_(Empty):
            # Only members may commit to a group with members.
            return E.UNKNOWN_MEMBER_ID
        return E.NONE

    def _store_offsets(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        token: object,
        partitions: list[tuple[TopicPartition, int | None]],
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> None:
        max_bytes = self.config.offset_metadata_max_bytes
        too_large = {tp for tp, om in offsets.items() if len(om.metadata) > max_bytes}
        partitions = [
            (tp, E.OFFSET_METADATA_TOO_LARGE if tp in too_large else error)
            for tp, error in partitions
        ]
        to_store = {tp: om for tp, om in offsets.items() if tp not in too_large}
        if not to_store:
            self._respond(fx, token, _commit_response(partitions, None))
            return
        group.prepare_offset_commit(to_store)
        write_id = self._take_write_id()
        self._offset_writes[write_id] = _OffsetWrite(group, token, partitions, to_store)
        fx.append(
            StoreOffsets(
                group_id=group.group_id,
                partition=self.partition_for(group.group_id),
                offsets=tuple(
                    (tp, OffsetCommitValue.from_offset(om)) for tp, om in to_store.items()
                ),
                write_id=write_id,
            )
        )

    def offsets_stored(
        self, write_id: int, error_code: int, now_ms: int, record_offset: int | None = None
    ) -> list[Effect]:
        """A `StoreOffsets` append completed with `error_code` (0: stored, at log offset
        `record_offset` if the shell knows it)."""
        fx: list[Effect] = []
        write = self._offset_writes.pop(write_id, None)
        if write is None:
            logger.warning("completion of unknown offset write %d ignored", write_id)
            return fx
        group = write.group
        if error_code == E.NONE:
            if not group.is_(Dead):
                for tp, om in write.offsets.items():
                    group.on_offset_commit_append(tp, CommittedOffset(om, record_offset))
            error = E.NONE
        else:
            if not group.is_(Dead):
                for tp, om in write.offsets.items():
                    group.fail_pending_offset_write(tp, om)
            error = _offset_append_error(error_code)
            logger.debug(
                "offset commit to group %s failed: append error %d, answering %d",
                group.group_id,
                error_code,
                error,
            )
        self._respond(fx, write.token, _commit_response(write.partitions, error))
        return fx

    # -- OffsetFetch ------------------------------------------------------------------

    def fetch_offsets(
        self,
        token: object,
        groups: Sequence[tuple[str, Sequence[Mapping] | None]],
        *,
        require_stable: bool = False,
        api_version: int = 8,
    ) -> list[Effect]:
        """Kafka's OffsetFetch: `groups` is [(group_id, topics)] where topics is the
        request's [{name, partition_indexes}] or None for all of the group's offsets. v0-v7
        carry one group (the response has top-level topics / error_code), v8 many."""
        fx: list[Effect] = []
        results = [self._fetch_group_offsets(g, t, require_stable) for g, t in groups]
        if api_version >= 8:
            body = {"throttle_time_ms": 0, "groups": results}
        else:
            if len(results) != 1:
                raise ValueError(f"OffsetFetch v{api_version} carries one group")
            result = results[0]
            topics = result["topics"]
            if api_version < 2 and result["error_code"]:
                # No top-level error before v2: it goes on every partition.
                for topic in topics:
                    for partition in topic["partitions"]:
                        partition["error_code"] = result["error_code"]
            body = {"throttle_time_ms": 0, "topics": topics, "error_code": result["error_code"]}
        self._respond(fx, token, body)
        return fx

    def _fetch_group_offsets(
        self, group_id: str, topics: Sequence[Mapping] | None, require_stable: bool
    ) -> dict:
        error = self._validate_group_status(group_id, API_OFFSET_FETCH)
        if error:
            return {"group_id": group_id, "topics": [], "error_code": error}
        requested: list[TopicPartition] | None = (
            None
            if topics is None
            else [(t["name"], p) for t in topics for p in t.get("partition_indexes", ())]
        )
        group = self._groups.get(group_id)
        if group is None or group.is_(Dead):
            tps = requested or []
            items = [(tp, _fetched_partition(tp, None, E.NONE)) for tp in tps]
        else:
            tps = requested if requested is not None else sorted(group.offsets)
            items = []
            for tp in tps:
                if require_stable and group.has_pending_offset_commit(tp):
                    items.append((tp, _fetched_partition(tp, None, E.UNSTABLE_OFFSET_COMMIT)))
                else:
                    items.append((tp, _fetched_partition(tp, group.offset(tp), E.NONE)))
        return {"group_id": group_id, "topics": _by_topic(items), "error_code": E.NONE}

    # -- ListGroups / DescribeGroups / DeleteGroups -----------------------------------

    def list_groups(self, token: object, states_filter: Iterable[str] = ()) -> list[Effect]:
        fx: list[Effect] = []
        if not self._active:
            body = {"throttle_time_ms": 0, "error_code": E.COORDINATOR_NOT_AVAILABLE, "groups": []}
        else:
            states = set(states_filter or ())
            body = {
                "throttle_time_ms": 0,
                # Groups of partitions still loading are missing: say so, but list the rest.
                "error_code": E.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading else E.NONE,
                "groups": [
                    {
                        "group_id": group.group_id,
                        "protocol_type": group.protocol_type or "",
                        "group_state": group.state.value,
                    }
                    for group_id, group in sorted(self._groups.items())
                    if not states or group.state.value in states
                ],
            }
        self._respond(fx, token, body)
        return fx

    def describe_groups(self, token: object, group_ids: Iterable[str]) -> list[Effect]:
        fx: list[Effect] = []
        self._respond(
            fx,
            token,
            {"throttle_time_ms": 0, "groups": [self.describe_group(g) for g in group_ids]},
        )
        return fx

    def describe_group(self, group_id: str) -> dict:
        """One DescribeGroups result (Kafka's handleDescribeGroup and group summary)."""
        error = self._validate_group_status(group_id, API_DESCRIBE_GROUPS)
        described = {
            "error_code": error,
            "group_id": group_id,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
        if error:
            return described
        group = self._groups.get(group_id)
        if group is None:
            described["group_state"] = Dead.value
            return described
        described["group_state"] = group.state.value
        described["protocol_type"] = group.protocol_type or ""
        stable = group.is_(Stable)
        if stable:
            described["protocol_data"] = group.protocol_name or ""
        described["members"] = [
            {
                "member_id": member.member_id,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                # Metadata and assignment only mean something in a stable generation.
                "member_metadata": member.metadata(group.protocol_name)
                if stable and group.protocol_name is not None
                else b"",
                "member_assignment": member.assignment if stable else b"",
            }
            for member in group.members.values()
        ]
        return described

    def delete_groups(self, token: object, group_ids: Iterable[str], now_ms: int) -> list[Effect]:
        """Kafka's handleDeleteGroups: only empty groups go; their offsets and metadata
        get tombstones."""
        fx: list[Effect] = []
        results: dict[str, int] = {}
        deletable: list[GroupMetadata] = []
        for group_id in dict.fromkeys(group_ids):  # distinct, in request order
            error = self._validate_group_status(group_id, API_DELETE_GROUPS)
            if error:
                results[group_id] = error
                continue
            group = self._groups.get(group_id)
            if group is None or group.is_(Dead):
                results[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.is_(Empty):
                group.transition_to(Dead, now_ms)
                deletable.append(group)
                results[group_id] = E.NONE
            else:
                results[group_id] = E.NON_EMPTY_GROUP
        for group in deletable:
            removed = group.remove_all_offsets()
            self._cleanup_group(fx, group, removed, now_ms)
            logger.info("deleted group %s (%d offsets)", group.group_id, len(removed))
        self._respond(
            fx,
            token,
            {
                "throttle_time_ms": 0,
                "results": [{"group_id": g, "error_code": e} for g, e in results.items()],
            },
        )
        return fx

    # -- offsets expiry ---------------------------------------------------------------

    def expire_offsets(self, now_ms: int) -> list[Effect]:
        """Kafka's cleanupGroupMetadata: drop expired offsets (tombstones for them), and
        groups left empty with no offsets (a tombstone for the group if it ever had a
        generation)."""
        fx: list[Effect] = []
        retention_ms = self.config.offsets_retention_ms
        removed_total = 0
        for group_id in sorted(self._groups):
            group = self._groups[group_id]
            removed = group.remove_expired_offsets(now_ms, retention_ms)
            removed_total += len(removed)
            self._cleanup_group(fx, group, removed, now_ms)
        if removed_total:
            logger.info("removed %d expired offsets", removed_total)
        return fx

    def _cleanup_group(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        removed: Mapping[TopicPartition, OffsetAndMetadata],
        now_ms: int,
    ) -> None:
        if group.is_(Empty) and not group.has_offsets:
            logger.info(
                "group %s transitioned to Dead in generation %d",
                group.group_id,
                group.generation_id,
            )
            group.transition_to(Dead, now_ms)
        delete_metadata = False
        if group.is_(Dead) and self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
            self._forget_group_timers(fx, group)
            # A group that never had a generation only stored offsets: no metadata record.
            delete_metadata = group.generation_id > 0
        if removed or delete_metadata:
            fx.append(
                AppendTombstones(
                    group_id=group.group_id,
                    partition=self.partition_for(group.group_id),
                    offsets=tuple(removed),
                    group_metadata=delete_metadata,
                )
            )

    # -- timers -----------------------------------------------------------------------

    def on_timer(self, key: TimerKey, now_ms: int) -> list[Effect]:
        """A timer the core set has fired. Stale firings (cancelled, re-armed later, or
        early) do nothing."""
        fx: list[Effect] = []
        deadline = self._timers.get(key)
        if deadline is None or now_ms < deadline:
            return fx
        del self._timers[key]
        if isinstance(key, HeartbeatTimer):
            self._on_heartbeat_expired(fx, key.group_id, key.member_id, now_ms)
        elif isinstance(key, JoinTimer):
            self._on_join_deadline(fx, key.group_id, now_ms)
        elif isinstance(key, SyncTimer):
            self._on_sync_deadline(fx, key.group_id, now_ms)
        elif isinstance(key, OffsetsRetentionTimer):
            fx.extend(self.expire_offsets(now_ms))
            self._set_timer(fx, key, now_ms + self.config.offsets_retention_check_interval_ms)
        return fx

    def _on_heartbeat_expired(
        self, fx: list[Effect], group_id: str, member_id: str, now_ms: int
    ) -> None:
        group = self._groups.get(group_id)
        if group is None or group.is_(Dead):
            return
        if group.is_pending_member(member_id):
            logger.info("pending member %s of group %s expired", member_id, group_id)
            self._remove_pending_member_and_update_group(fx, group, member_id, now_ms)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        logger.info(
            "member %s of group %s has failed (session timeout); removing it", member_id, group_id
        )
        self._remove_member_and_update_group(
            fx, group, member, now_ms, f"removing member {member_id} on heartbeat expiration"
        )

    def _on_join_deadline(self, fx: list[Effect], group_id: str, now_ms: int) -> None:
        op = self._join_ops.pop(group_id, None)
        group = self._groups.get(group_id)
        if op is None or group is None:
            return
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            # New members keep arriving: wait one more delay, within the rebalance timeout.
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._schedule_join(fx, group, _DelayedJoin(True, delay, remaining), now_ms)
            return
        self._on_complete_join(fx, group, now_ms)

    def _on_sync_deadline(self, fx: list[Effect], group_id: str, now_ms: int) -> None:
        generation = self._sync_ops.pop(group_id, None)
        group = self._groups.get(group_id)
        if generation is None or group is None:
            return
        if generation != group.generation_id or group.state not in (CompletingRebalance, Stable):
            return
        if group.has_received_sync_from_all_members:
            return
        laggards = sorted(group.pending_sync_members)
        for member_id in laggards:
            removed = group.remove(member_id)
            self._cancel_timer(fx, HeartbeatTimer(group_id, member_id))
            if removed is not None:
                self._answer_orphaned_sync(fx, removed)
        logger.info("group %s removed members that did not sync: %s", group_id, laggards)
        self._prepare_rebalance(
            fx, group, now_ms, f"removing {laggards} on pending sync request expiration"
        )

    # -- storage completions ----------------------------------------------------------

    def group_stored(self, write_id: int, error_code: int, now_ms: int) -> list[Effect]:
        """A `StoreGroup` append completed with `error_code` (0: stored)."""
        fx: list[Effect] = []
        write = self._group_writes.pop(write_id, None)
        if write is None:
            logger.warning("completion of unknown group write %d ignored", write_id)
            return fx
        error = _group_append_error(error_code)
        group = write.group
        if isinstance(write, _SyncAssignmentWrite):
            # Another member may have joined meanwhile: only act on the same generation.
            if group.is_(CompletingRebalance) and group.generation_id == write.generation_id:
                if error:
                    self._reset_and_propagate_assignment_error(fx, group, error, now_ms)
                    self._maybe_prepare_rebalance(
                        fx, group, now_ms, f"error {error} storing the group assignment"
                    )
                else:
                    for member in group.members.values():
                        member.assignment = write.assignment.get(member.member_id, b"")
                    self._propagate_assignment(fx, group, E.NONE, now_ms)
                    group.transition_to(Stable, now_ms)
                    logger.info(
                        "group %s is stable in generation %d with %d members",
                        group.group_id,
                        group.generation_id,
                        group.size,
                    )
        elif isinstance(write, _EmptyGroupWrite):
            if error:
                # Safe to ignore: an empty generation has no members to mislead.
                logger.warning(
                    "failed to write empty metadata for group %s: error %d", group.group_id, error
                )
        else:
            self._static_member_stored(fx, write, error, now_ms)
        return fx

    def _static_member_stored(
        self, fx: list[Effect], write: _StaticMemberWrite, error: int, now_ms: int
    ) -> None:
        group, member = write.group, write.member
        if error:
            logger.warning(
                "failed to persist static member %s of group %s: error %d; reverting",
                write.group_instance_id,
                group.group_id,
                error,
            )
            waiter = member.join_waiter
            group.update_member(
                member,
                write.old_protocols,
                write.old_rebalance_timeout_ms,
                write.old_session_timeout_ms,
                None,
            )
            if (
                group.has(write.new_member_id)
                and group.current_static_member_id(write.group_instance_id) == write.new_member_id
            ):
                group.replace_static_member(
                    write.group_instance_id, write.new_member_id, write.old_member_id
                )
                self._cancel_timer(fx, HeartbeatTimer(group.group_id, write.new_member_id))
                self._schedule_heartbeat(
                    fx, group, write.old_member_id, member.session_timeout_ms, now_ms
                )
            if waiter is not None:
                self._respond(
                    fx,
                    waiter.token,
                    _join_response(
                        UNKNOWN_MEMBER_ID,
                        error,
                        api_version=waiter.api_version,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=write.previous_leader_id,
                    ),
                )
            return
        waiter = group.take_join_waiter(member)
        if waiter is None:
            return
        if write.support_skipping_assignment:
            # v9+: tell a static leader it leads, but that the assignment stands (the
            # assignors are not idempotent; a stable group would ignore a new assignment).
            is_leader = group.is_leader(write.new_member_id)
            response = _join_response(
                write.new_member_id,
                E.NONE,
                api_version=waiter.api_version,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id,
                skip_assignment=is_leader,
                members=group.current_member_metadata() if is_leader else (),
            )
        else:
            # Before v9: answer with the old leader id so a returning static leader does
            # not run a pointless assignment the stable group would ignore.
            response = _join_response(
                write.new_member_id,
                E.NONE,
                api_version=waiter.api_version,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=write.previous_leader_id,
            )
        self._respond(fx, waiter.token, response)

    # -- the rebalance machinery ------------------------------------------------------

    def _maybe_prepare_rebalance(
        self, fx: list[Effect], group: GroupMetadata, now_ms: int, reason: str
    ) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(fx, group, now_ms, reason)

    def _prepare_rebalance(
        self, fx: list[Effect], group: GroupMetadata, now_ms: int, reason: str
    ) -> None:
        # Members waiting for an assignment must rejoin instead.
        if group.is_(CompletingRebalance):
            self._reset_and_propagate_assignment_error(fx, group, E.REBALANCE_IN_PROGRESS, now_ms)
        self._remove_sync_expiration(fx, group)
        if group.is_(Empty):
            delay = self.config.group_initial_rebalance_delay_ms
            op = _DelayedJoin(True, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            op = _DelayedJoin(False, group.rebalance_timeout_ms)
        group.transition_to(PreparingRebalance, now_ms)
        logger.info(
            "preparing to rebalance group %s with old generation %d (%s-%d) (reason: %s)",
            group.group_id,
            group.generation_id,
            "__consumer_offsets",
            self.partition_for(group.group_id),
            reason,
        )
        self._schedule_join(fx, group, op, now_ms)

    def _schedule_join(
        self, fx: list[Effect], group: GroupMetadata, op: _DelayedJoin, now_ms: int
    ) -> None:
        self._join_ops[group.group_id] = op
        self._set_timer(fx, JoinTimer(group.group_id), now_ms + op.delay_ms)
        self._try_complete_join(fx, group, now_ms)

    def _try_complete_join(self, fx: list[Effect], group: GroupMetadata, now_ms: int) -> None:
        """DelayedJoin.tryComplete: done once every known member has rejoined (the
        initial delay always runs its course)."""
        op = self._join_ops.get(group.group_id)
        if op is None or op.initial or not group.has_all_members_joined:
            return
        del self._join_ops[group.group_id]
        self._cancel_timer(fx, JoinTimer(group.group_id))
        self._on_complete_join(fx, group, now_ms)

    def _on_complete_join(self, fx: list[Effect], group: GroupMetadata, now_ms: int) -> None:
        """The join phase is over (Kafka's onCompleteJoin): drop dynamic members that did
        not rejoin, start the next generation, answer every JoinGroup."""
        for member in group.not_yet_rejoined_members():
            if member.is_static_member:
                continue  # static members keep their place until their session expires
            group.remove(member.member_id)
            self._cancel_timer(fx, HeartbeatTimer(group.group_id, member.member_id))
            self._answer_orphaned_sync(fx, member)
            logger.info(
                "group %s removed dynamic member %s which did not rejoin",
                group.group_id,
                member.member_id,
            )
        if group.is_(Dead):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined: wait again, until their
            # sessions expire.
            logger.error(
                "group %s could not complete rebalance because no members rejoined",
                group.group_id,
            )
            self._schedule_join(fx, group, _DelayedJoin(False, group.rebalance_timeout_ms), now_ms)
            return
        group.init_next_generation(now_ms)
        if group.is_(Empty):
            logger.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )
            self._store_group(fx, group, {}, _EmptyGroupWrite(group, group.generation_id))
            return
        logger.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            group.size,
        )
        for member in list(group.members.values()):
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self._respond(
                    fx,
                    waiter.token,
                    self._generation_join_response(group, member.member_id, waiter.api_version),
                )
            self._schedule_heartbeat(fx, group, member.member_id, member.session_timeout_ms, now_ms)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._sync_ops[group.group_id] = group.generation_id
        self._set_timer(fx, SyncTimer(group.group_id), now_ms + group.rebalance_timeout_ms)

    def _remove_member_and_update_group(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        member: MemberMetadata,
        now_ms: int,
        reason: str,
    ) -> None:
        # A new member may be parked in JoinGroup: answer it so the client rejoins if alive.
        waiter = group.take_join_waiter(member)
        if waiter is not None:
            self._respond(
                fx,
                waiter.token,
                _join_response(
                    UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, api_version=waiter.api_version
                ),
            )
        self._answer_orphaned_sync(fx, member)
        group.remove(member.member_id)
        self._cancel_timer(fx, HeartbeatTimer(group.group_id, member.member_id))
        if group.state in (Stable, CompletingRebalance):
            self._maybe_prepare_rebalance(fx, group, now_ms, reason)
        elif group.is_(PreparingRebalance):
            self._try_complete_join(fx, group, now_ms)

    def _remove_pending_member_and_update_group(
        self, fx: list[Effect], group: GroupMetadata, member_id: str, now_ms: int
    ) -> None:
        group.remove(member_id)
        if group.is_(PreparingRebalance):
            self._try_complete_join(fx, group, now_ms)

    def _answer_orphaned_sync(self, fx: list[Effect], member: MemberMetadata) -> None:
        waiter = GroupMetadata.take_sync_waiter(member)
        if waiter is not None:
            self._respond(fx, waiter.token, _sync_response(E.UNKNOWN_MEMBER_ID))

    def _reset_and_propagate_assignment_error(
        self, fx: list[Effect], group: GroupMetadata, error: int, now_ms: int
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(fx, group, error, now_ms)

    def _propagate_assignment(
        self, fx: list[Effect], group: GroupMetadata, error: int, now_ms: int
    ) -> None:
        for member in group.members.values():
            waiter = group.take_sync_waiter(member)
            if waiter is None:
                continue
            if error:
                body = _sync_response(error)
            else:
                body = _sync_response(
                    E.NONE,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                )
            self._respond(fx, waiter.token, body)
            # The member's session restarts now: its deadline may have passed while it
            # waited for the leader or for the store, and was then ignored.
            self._schedule_heartbeat(fx, group, member.member_id, member.session_timeout_ms, now_ms)

    def _remove_pending_sync_member(
        self, fx: list[Effect], group: GroupMetadata, member_id: str
    ) -> None:
        group.pending_sync_members.discard(member_id)
        self._maybe_complete_sync(fx, group)

    def _remove_sync_expiration(self, fx: list[Effect], group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync(fx, group)

    def _maybe_complete_sync(self, fx: list[Effect], group: GroupMetadata) -> None:
        """DelayedSync.tryComplete: the sync deadline is moot once every member synced
        or the generation moved on."""
        generation = self._sync_ops.get(group.group_id)
        if generation is None:
            return
        if (
            generation != group.generation_id
            or group.state not in (CompletingRebalance, Stable)
            or group.has_received_sync_from_all_members
        ):
            del self._sync_ops[group.group_id]
            self._cancel_timer(fx, SyncTimer(group.group_id))

    def _store_group(
        self,
        fx: list[Effect],
        group: GroupMetadata,
        assignment: Mapping[str, bytes],
        write: _GroupWrite,
    ) -> None:
        protocol = group.protocol_name
        members = []
        for member in group.members.values():
            if protocol is None:
                raise AssertionError(f"non-empty group {group.group_id} without a protocol")
            members.append(
                MemberMetadataValue(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout=member.rebalance_timeout_ms,
                    session_timeout=member.session_timeout_ms,
                    subscription=member.metadata(protocol),
                    assignment=assignment[member.member_id],
                )
            )
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=-1
            if group.current_state_timestamp is None
            else group.current_state_timestamp,
            members=tuple(members),
        )
        write_id = self._take_write_id()
        self._group_writes[write_id] = write
        fx.append(StoreGroup(group.group_id, self.partition_for(group.group_id), value, write_id))

    # -- helpers ----------------------------------------------------------------------

    def _validate_group_status(self, group_id: str | None, api_key: int) -> int:
        """Kafka's validateGroupStatus: a valid id, of a group this coordinator owns and
        has loaded."""
        if group_id is None or (not group_id and api_key not in _EMPTY_GROUP_ID_OK):
            return E.INVALID_GROUP_ID
        if not self._active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned_partitions:
            return E.NOT_COORDINATOR
        return E.NONE

    @staticmethod
    def _validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> int:
        """The member exists, and a given group instance id maps to it (else the caller
        is an old incarnation of a static member: FENCED_INSTANCE_ID)."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                logger.info(
                    "member %s with group instance id %s is fenced by member %s",
                    member_id,
                    group_instance_id,
                    current,
                )
                return E.FENCED_INSTANCE_ID
        return E.NONE if group.has(member_id) else E.UNKNOWN_MEMBER_ID

    def _schedule_heartbeat(
        self, fx: list[Effect], group: GroupMetadata, member_id: str, timeout_ms: int, now_ms: int
    ) -> None:
        self._set_timer(fx, HeartbeatTimer(group.group_id, member_id), now_ms + timeout_ms)

    def _forget_group_timers(self, fx: list[Effect], group: GroupMetadata) -> None:
        self._join_ops.pop(group.group_id, None)
        self._sync_ops.pop(group.group_id, None)
        for key in list(self._timers):
            if not isinstance(key, OffsetsRetentionTimer) and key.group_id == group.group_id:
                self._cancel_timer(fx, key)

    def _set_timer(self, fx: list[Effect], key: TimerKey, deadline_ms: int) -> None:
        self._timers[key] = deadline_ms
        fx.append(SetTimer(key, deadline_ms))

    def _cancel_timer(self, fx: list[Effect], key: TimerKey) -> None:
        if self._timers.pop(key, None) is not None:
            fx.append(CancelTimer(key))

    @staticmethod
    def _respond(fx: list[Effect], token: object, body: dict) -> None:
        fx.append(Respond(token, body))

    def _take_write_id(self) -> int:
        write_id = self._next_write_id
        self._next_write_id += 1
        return write_id

    # -- the shell's entry point ------------------------------------------------------

    def handle_request(
        self,
        api_key: int,
        api_version: int,
        body: Mapping,
        token: object,
        *,
        now_ms: int,
        client_id: str = "",
        client_host: str = "",
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> list[Effect]:
        """Dispatch a decoded group API request body (kcore's Kafka codec's dict) to the
        method above, doing what KafkaApis does between the wire and the coordinator."""
        if api_key == API_JOIN_GROUP:
            rebalance_timeout_ms = body.get("rebalance_timeout_ms", -1)
            if rebalance_timeout_ms is None or rebalance_timeout_ms < 0:
                # v0 has no rebalance timeout: the session timeout is used.
                rebalance_timeout_ms = body["session_timeout_ms"]
            return self.join_group(
                token,
                group_id=body["group_id"],
                member_id=body.get("member_id", ""),
                group_instance_id=body.get("group_instance_id"),
                protocol_type=body["protocol_type"],
                protocols=[(p["name"], p["metadata"]) for p in body.get("protocols", ())],
                session_timeout_ms=body["session_timeout_ms"],
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=client_id,
                client_host=client_host,
                reason=body.get("reason"),
                now_ms=now_ms,
                api_version=api_version,
            )
        if api_key == API_SYNC_GROUP:
            if api_version >= 5 and (
                body.get("protocol_type") is None or body.get("protocol_name") is None
            ):
                # Mandatory from v5.
                return [Respond(token, _sync_response(E.INCONSISTENT_GROUP_PROTOCOL))]
            return self.sync_group(
                token,
                group_id=body["group_id"],
                generation_id=body["generation_id"],
                member_id=body["member_id"],
                group_instance_id=body.get("group_instance_id"),
                protocol_type=body.get("protocol_type"),
                protocol_name=body.get("protocol_name"),
                assignments={a["member_id"]: a["assignment"] for a in body.get("assignments", ())},
                now_ms=now_ms,
                api_version=api_version,
            )
        if api_key == API_HEARTBEAT:
            return self.heartbeat(
                token,
                group_id=body["group_id"],
                member_id=body["member_id"],
                generation_id=body["generation_id"],
                group_instance_id=body.get("group_instance_id"),
                now_ms=now_ms,
            )
        if api_key == API_LEAVE_GROUP:
            if api_version < 3:
                members = [MemberIdentity(body["member_id"])]
            else:
                members = [
                    MemberIdentity(m["member_id"], m.get("group_instance_id"), m.get("reason"))
                    for m in body.get("members", ())
                ]
            return self.leave_group(
                token,
                group_id=body["group_id"],
                members=members,
                now_ms=now_ms,
                api_version=api_version,
            )
        if api_key == API_OFFSET_COMMIT:
            return self.commit_offsets(
                token,
                group_id=body["group_id"],
                topics=body.get("topics", ()),
                # kio names v8's field after Kafka 3.6's rename (KIP-848)
                generation_id=body.get(
                    "generation_id", body.get("generation_id_or_member_epoch", NO_GENERATION)
                ),
                member_id=body.get("member_id", ""),
                group_instance_id=body.get("group_instance_id"),
                retention_time_ms=body.get("retention_time_ms", -1),
                partition_exists=partition_exists,
                now_ms=now_ms,
            )
        if api_key == API_OFFSET_FETCH:
            if api_version >= 8:
                groups = [(g["group_id"], g.get("topics")) for g in body.get("groups", ())]
            else:
                groups = [(body["group_id"], body.get("topics"))]
            return self.fetch_offsets(
                token,
                groups,
                require_stable=bool(body.get("require_stable", False)),
                api_version=api_version,
            )
        if api_key == API_LIST_GROUPS:
            return self.list_groups(token, body.get("states_filter") or ())
        if api_key == API_DESCRIBE_GROUPS:
            return self.describe_groups(token, body.get("groups", ()))
        if api_key == API_DELETE_GROUPS:
            return self.delete_groups(token, body.get("groups_names", ()), now_ms)
        raise ValueError(f"api key {api_key} is not a group coordinator API")


@attrs.frozen
class _JoiningMember:
    """What a JoinGroup request says about the member."""

    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]
    waiter: Waiter
    reason: str


def _commit_response(
    partitions: Sequence[tuple[TopicPartition, int | None]], error: int | None
) -> dict:
    """The OffsetCommit response: each partition's own error if it has one, else `error`."""
    items = [
        (
            tp,
            {
                "partition_index": tp[1],
                "error_code": own if own is not None else (error or E.NONE),
            },
        )
        for tp, own in partitions
    ]
    return {"throttle_time_ms": 0, "topics": _by_topic(items)}


def _fetched_partition(tp: TopicPartition, om: OffsetAndMetadata | None, error: int) -> dict:
    if om is None:
        return {
            "partition_index": tp[1],
            "committed_offset": -1,
            "committed_leader_epoch": -1,
            "metadata": "",
            "error_code": error,
        }
    return {
        "partition_index": tp[1],
        "committed_offset": om.offset,
        "committed_leader_epoch": -1 if om.leader_epoch is None else om.leader_epoch,
        "metadata": om.metadata,
        "error_code": error,
    }


def _group_from_record(loaded: LoadedGroup, now_ms: int) -> GroupMetadata:
    """A group from its last metadata record (Kafka's readGroupMessageValue + loadGroup);
    a group with offsets only is Empty in generation 0."""
    record = loaded.metadata
    if record is None:
        return GroupMetadata(loaded.group_id, Empty, now_ms)
    state = Stable if record.members else Empty
    group = GroupMetadata(
        loaded.group_id,
        state,
        None if record.current_state_timestamp < 0 else record.current_state_timestamp,
        protocol_type=record.protocol_type or None,
        protocol_name=record.protocol,
        generation_id=record.generation,
        leader_id=record.leader,
    )
    for value in record.members:
        member = MemberMetadata(
            member_id=value.member_id,
            group_instance_id=value.group_instance_id,
            client_id=value.client_id,
            client_host=value.client_host,
            rebalance_timeout_ms=value.rebalance_timeout,
            session_timeout_ms=value.session_timeout,
            protocol_type=record.protocol_type,
            supported_protocols=[(record.protocol or "", value.subscription)],
            assignment=value.assignment,
        )
        group.add(member)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
