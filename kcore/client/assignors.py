"""The client-side partition assignors of a consumer group: `range`, `roundrobin` and
`cooperative-sticky`, ported from Kafka 3.5's RangeAssignor, RoundRobinAssignor and
CooperativeStickyAssignor (with AbstractStickyAssignor's algorithm).

Sans-IO. The group's leader member runs one of these on every member's `Subscription` and
sends each member its `Assignment` through SyncGroup; the coordinator never looks inside.
Because any member can be the leader, a kcore leader must compute what a Java leader would
(and the sticky algorithm reads what the previous leader handed out), so the algorithms
are Kafka's step by step, including their tie-breaks:

- Members are ordered as Kafka's `MemberInfo` orders them: static members (with a
  `group_instance_id`) first, by instance id, then the others by member id.
- Where Kafka iterates a `java.util.HashMap` / `HashSet` and the order decides the result
  (which member of several keeps its extra owned partition; which moved partition is moved
  back), `_java_hash_order` reproduces Java's iteration order: by hash bucket, then by
  insertion. The leader's subscriptions map is a HashMap filled in JoinGroup member order,
  which is the order of the `subscriptions` dict given here.

Not ported: rack-aware assignment (KIP-881; `rack_id` is accepted and ignored), and the eager
`sticky` assignor. Strings compare by Python's code-point order, which equals Java's
UTF-16 order for every character below U+10000.
"""

from __future__ import annotations

import bisect
import enum
import struct
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Protocol, TypeVar

import attrs

from kcore._fetcher_id import java_string_hash
from kcore.common import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "Assignment",
    "Assignor",
    "AssignorError",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "Subscription",
    "assignor_by_name",
]

# Kafka's AbstractStickyAssignor.DEFAULT_GENERATION: "no generation known".
DEFAULT_GENERATION = -1


class RebalanceProtocol(enum.IntEnum):
    """How members give up partitions (ConsumerPartitionAssignor.RebalanceProtocol).

    EAGER: every member revokes everything before it rejoins. COOPERATIVE (KIP-429): members
    keep their partitions while rejoining, and the assignor never hands a partition to a new
    owner in the rebalance that takes it from the old one; the old owner revokes it, rejoins,
    and the follow-up rebalance assigns it."""

    EAGER = 0
    COOPERATIVE = 1


def _tuple_of_partitions(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(partitions)


@attrs.frozen
class Subscription:
    """What one member sends in JoinGroup (ConsumerPartitionAssignor.Subscription).

    `owned_partitions` keeps the member's order: the sticky assignor keeps the first ones
    when a member owns more than its quota. `generation_id` is the generation the member
    last got an assignment in, `DEFAULT_GENERATION` (or any negative) when unknown, as in a
    v0 / v1 subscription. `group_instance_id` is not in the subscription bytes: the
    coordinator reports it per member in the JoinGroup response, and the leader adds it."""

    topics: tuple[str, ...] = attrs.field(converter=tuple)
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = attrs.field(
        default=(), converter=_tuple_of_partitions
    )
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None

    @property
    def generation(self) -> int | None:
        """The generation id, None when unknown (Kafka's `Optional<Integer>`)."""
        return self.generation_id if self.generation_id >= 0 else None


@attrs.frozen
class Assignment:
    """What the leader sends one member in SyncGroup (ConsumerPartitionAssignor.Assignment)."""

    partitions: tuple[TopicPartition, ...] = attrs.field(converter=_tuple_of_partitions)
    user_data: bytes | None = None


class AssignorError(Exception):
    """The assignor reached a state Kafka's code treats as a bug (its IllegalStateException);
    the leader cannot produce an assignment from these subscriptions."""


class Assignor(Protocol):
    """A client-side partition assignor (Kafka's ConsumerPartitionAssignor)."""

    @property
    def name(self) -> str:
        """The protocol name a member lists in JoinGroup: "range", "roundrobin", ..."""
        ...

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        """The rebalance protocols this assignor honours, preferred first."""
        ...

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        """The user data this member puts in its subscription."""
        ...

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Every member's assignment (one entry per member in `subscriptions`).

        `partitions_per_topic` is the partition count of each topic the leader has metadata
        for; subscribed topics missing from it (or with no partitions) are not assigned."""
        ...

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Called on every member with its own assignment when SyncGroup completes."""
        ...


# ------------------------------------------------------------------------------ helpers


def _member_order_key(member_id: str, subscription: Subscription) -> tuple[int, str]:
    # Kafka's MemberInfo.compareTo: static members first, by instance id; then by member id.
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id)
    return (1, member_id)


def _sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(
        subscriptions, key=lambda member: _member_order_key(member, subscriptions[member])
    )


def _subscribed_partition_counts(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """The topics Kafka's AbstractPartitionAssignor hands to an assignor: subscribed by some
    member, known to the metadata, with at least one partition."""
    subscribed = {topic for subscription in subscriptions.values() for topic in subscription.topics}
    return {
        topic: count
        for topic, count in partitions_per_topic.items()
        if topic in subscribed and count > 0
    }


def _partitions(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for partition in range(count)]


def _java_topic_partition_hash(tp: TopicPartition) -> int:
    # org.apache.kafka.common.TopicPartition.hashCode, in 32-bit arithmetic.
    return (31 * (31 + tp.partition) + java_string_hash(tp.topic)) & 0xFFFFFFFF


def _java_bucket(hash_code: int, capacity: int) -> int:
    # java.util.HashMap.hash (spread the high bits down) masked to the table size.
    hash_code &= 0xFFFFFFFF
    return (hash_code ^ (hash_code >> 16)) & (capacity - 1)


def _java_capacity_for(size: int) -> int:
    """The table size of a `new HashMap<>()` after `size` puts (load factor 0.75)."""
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


_T = TypeVar("_T")


def _java_hash_order(keys: Iterable[_T], hash_code: Callable[[_T], int], capacity: int) -> list[_T]:
    """The iteration order of a java.util.HashMap / HashSet holding `keys` (given in
    insertion order) in a table of `capacity` buckets: by bucket, and within a bucket by
    insertion (a resize splits each bucket keeping that order). Ignores treeified buckets,
    which need eight colliding keys."""
    return sorted(keys, key=lambda key: _java_bucket(hash_code(key), capacity))


def _java_member_order(members: Iterable[str]) -> list[str]:
    """Member ids in the iteration order of a `new HashMap<>()` filled in this order."""
    members = list(members)
    return _java_hash_order(members, java_string_hash, _java_capacity_for(len(members)))


class _JavaHashSet:
    """A java.util.HashSet<TopicPartition>, only for its iteration order: PartitionMovements
    moves back "the first" partition of a set, which is whatever Java's table yields first."""

    __slots__ = ("_capacity", "_items")

    def __init__(self) -> None:
        self._items: dict[TopicPartition, None] = {}  # insertion order
        self._capacity = 16  # grows on insertion, never shrinks, as Java's table

    def add(self, item: TopicPartition) -> None:
        if item in self._items:
            return
        self._items[item] = None
        if len(self._items) > self._capacity * 3 // 4:
            self._capacity *= 2

    def discard(self, item: TopicPartition) -> None:
        self._items.pop(item, None)

    def __len__(self) -> int:
        return len(self._items)

    def first(self) -> TopicPartition:
        return _java_hash_order(self._items, _java_topic_partition_hash, self._capacity)[0]


# ------------------------------------------------------------------------- range


class RangeAssignor:
    """Kafka's `range` assignor: per topic, the members subscribed to it (in MemberInfo
    order) each take a contiguous range of partitions; the first `partitions % members`
    take one more. Co-partitioned topics land on the same members."""

    name = "range"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        return None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        pass

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        counts = _subscribed_partition_counts(partitions_per_topic, subscriptions)
        members_per_topic: dict[str, list[str]] = {}
        for member_id, subscription in subscriptions.items():
            for topic in dict.fromkeys(subscription.topics):  # a topic listed twice counts once
                members_per_topic.setdefault(topic, []).append(member_id)

        assigned: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        # Kafka walks its partitionsPerTopic HashMap; the order only shows in each member's
        # list, never in who gets what, and following it keeps the lists identical too.
        topic_order = _java_hash_order(counts, java_string_hash, _java_capacity_for(len(counts)))
        for topic in topic_order:
            members = sorted(
                members_per_topic.get(topic, ()),
                key=lambda member: _member_order_key(member, subscriptions[member]),
            )
            if not members:
                continue
            per_member, with_extra = divmod(counts[topic], len(members))
            start = 0
            for index, member in enumerate(members):
                length = per_member + (1 if index < with_extra else 0)
                assigned[member].extend(_partitions(topic, counts[topic])[start : start + length])
                start += length
        return {member: Assignment(partitions) for member, partitions in assigned.items()}


# -------------------------------------------------------------------- round robin


class RoundRobinAssignor:
    """Kafka's `roundrobin` assignor: all partitions of all subscribed topics (topics in
    name order) dealt one by one to the members in MemberInfo order, skipping a member that
    is not subscribed to the partition's topic."""

    name = "roundrobin"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        return None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        pass

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = _sorted_members(subscriptions)
        topics = sorted({topic for sub in subscriptions.values() for topic in sub.topics})
        next_member = 0  # Kafka's CircularIterator
        for topic in topics:
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            for partition in _partitions(topic, count):
                # Some member is subscribed to every topic in `topics`, so this ends.
                while topic not in subscriptions[members[next_member]].topics:
                    next_member = (next_member + 1) % len(members)
                assigned[members[next_member]].append(partition)
                next_member = (next_member + 1) % len(members)
        return {member: Assignment(partitions) for member, partitions in assigned.items()}


# ------------------------------------------------------------------------- sticky


@attrs.frozen
class _MemberData:
    """AbstractStickyAssignor.MemberData: what a member says it owned, and in which
    generation (None: unknown)."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None


_GENERATION_USER_DATA = struct.Struct(">i")


def _cooperative_member_data(subscription: Subscription) -> _MemberData:
    """CooperativeStickyAssignor.memberData: the generation from the subscription (v2+), else
    from the user data an older member encodes it in (an unreadable one counts as
    DEFAULT_GENERATION), else unknown."""
    if subscription.generation is not None:
        return _MemberData(subscription.owned_partitions, subscription.generation)
    if subscription.user_data is None:
        return _MemberData(subscription.owned_partitions, None)
    try:
        (generation,) = _GENERATION_USER_DATA.unpack_from(subscription.user_data, 0)
    except struct.error:
        generation = DEFAULT_GENERATION
    return _MemberData(subscription.owned_partitions, generation)


class _SortedMembers:
    """Kafka's `TreeSet<String>` of members ordered by (assignment size, member id).

    The key of a member is stored when it is added: Kafka always removes a member before
    changing its assignment and adds it back after, so the stored key is the current one."""

    __slots__ = ("_keys", "_sorted")

    def __init__(self) -> None:
        self._sorted: list[tuple[int, str]] = []
        self._keys: dict[str, tuple[int, str]] = {}

    def add(self, member: str, size: int) -> None:
        if member in self._keys:
            return
        key = (size, member)
        self._keys[member] = key
        bisect.insort(self._sorted, key)

    def remove(self, member: str) -> None:
        key = self._keys.pop(member, None)
        if key is not None:
            del self._sorted[bisect.bisect_left(self._sorted, key)]

    def first(self) -> str:
        return self._sorted[0][1]

    def last(self) -> str:
        return self._sorted[-1][1]

    def __iter__(self):
        return iter([member for _, member in self._sorted])


class _PartitionMovements:
    """AbstractStickyAssignor.PartitionMovements: the moves made so far in one assignment,
    so that a partition moving from A to B while another of the same topic moved from B to
    A is turned into moving that one back (keeping both where they were)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], _JavaHashSet]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}  # partition -> (src, dst)

    def _remove_record(self, partition: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(partition)
        for_topic = self.by_topic[partition.topic]
        for_topic[pair].discard(partition)
        if not len(for_topic[pair]):
            del for_topic[pair]
        if not for_topic:
            del self.by_topic[partition.topic]
        return pair

    def _add_record(self, partition: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[partition] = pair
        self.by_topic.setdefault(partition.topic, {}).setdefault(pair, _JavaHashSet()).add(
            partition
        )

    def move(self, partition: TopicPartition, old: str, new: str) -> None:
        if partition in self.moves:
            src, _dst = self._remove_record(partition)
            if src != new:  # not moving back to where it started
                self._add_record(partition, (src, new))
        else:
            self._add_record(partition, (old, new))

    def partition_to_move(self, partition: TopicPartition, old: str, new: str) -> TopicPartition:
        for_topic = self.by_topic.get(partition.topic)
        if for_topic is None:
            return partition
        if partition in self.moves:
            old = self.moves[partition][0]
        reverse = for_topic.get((new, old))
        if reverse is None:
            return partition
        return reverse.first()


class _StickyAssignment:
    """One run of AbstractStickyAssignor.assignPartitions (rack-unaware)."""

    def __init__(
        self,
        partition_counts: dict[str, int],
        subscriptions: Mapping[str, Subscription],
        member_data: Callable[[Subscription], _MemberData],
    ):
        self.partition_counts = partition_counts
        self.subscriptions = subscriptions
        self.member_data = member_data
        # Kafka iterates its subscriptions HashMap; see the module docstring.
        self.member_order = _java_member_order(subscriptions)
        self.max_generation = DEFAULT_GENERATION
        # Partitions whose new owner must wait for the old one to revoke them; None when
        # the general algorithm ran (the cooperative assignor then works them out).
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = None

    def run(self) -> dict[str, list[TopicPartition]]:
        owned: dict[str, list[TopicPartition]] = {}
        multiply_owned: set[TopicPartition] = set()
        if self._all_subscriptions_equal(owned, multiply_owned):
            self.partitions_transferring_ownership = {}
            return self._constrained(owned, multiply_owned)
        self.partitions_transferring_ownership = None
        return _GeneralAssignment(self, owned).run()

    def _all_subscriptions_equal(
        self, owned: dict[str, list[TopicPartition]], multiply_owned: set[TopicPartition]
    ) -> bool:
        """Whether every member subscribes to the same topics; fills `owned` with each
        member's still-valid owned partitions (a partition claimed by two members of one
        generation goes to neither, by members of different generations to the newer)."""
        all_equal = True
        first_topics: set[str] = set()
        previous_owner: dict[TopicPartition, str] = {}
        for member in self.member_order:
            subscription = self.subscriptions[member]
            if not first_topics:
                first_topics.update(subscription.topics)
            elif all_equal and not (
                len(subscription.topics) == len(first_topics)
                and first_topics.issuperset(subscription.topics)
            ):
                all_equal = False

            data = self.member_data(subscription)
            generation = data.generation if data.generation is not None else DEFAULT_GENERATION
            self.max_generation = max(self.max_generation, generation)

            member_owned: list[TopicPartition] = []
            owned[member] = member_owned
            for tp in data.partitions:
                if tp.topic not in self.partition_counts:
                    continue
                other = previous_owner.get(tp)
                previous_owner[tp] = member  # Kafka's put, before it looks at `other`
                if other is None:
                    member_owned.append(tp)
                    continue
                # Kafka reads the other member's generation from its subscription, not its
                # member data (they differ for a v0/v1 subscription).
                other_subscription_generation = self.subscriptions[other].generation
                other_generation = (
                    other_subscription_generation
                    if other_subscription_generation is not None
                    else DEFAULT_GENERATION
                )
                if generation == other_generation:
                    multiply_owned.add(tp)
                    _remove_first(owned[other], tp)
                elif generation > other_generation:
                    member_owned.append(tp)
                    _remove_first(owned[other], tp)
                # else: the other member keeps it (though previous_owner now names this one)
        return all_equal

    # -------------------------------------------------- all subscriptions equal

    def _constrained(
        self, current: dict[str, list[TopicPartition]], multiply_owned: set[TopicPartition]
    ) -> dict[str, list[TopicPartition]]:
        """ConstrainedAssignmentBuilder: every member may take any partition, so each keeps
        its owned partitions up to its quota and the rest are dealt round robin."""
        transferring = self.partitions_transferring_ownership
        assert transferring is not None
        total = sum(self.partition_counts.values())
        members = len(current)
        min_quota, extra = divmod(total, members)
        max_quota = min_quota + (1 if extra else 0)
        expected_over_min = extra  # members that end with max_quota (when it differs)
        current_over_min = 0

        assignment: dict[str, list[TopicPartition]] = {member: [] for member in current}
        assigned: list[TopicPartition] = []
        revoked: set[TopicPartition] = set()
        under_min: list[str] = []  # may take partitions, below min_quota
        exactly_min: list[str] = []  # at min_quota, may take one more

        # Step 1: keep owned partitions, up to the quota.
        for member in _java_hash_order(current, java_string_hash, _java_capacity_for(len(current))):
            owned = [tp for tp in current[member] if tp not in multiply_owned]
            if len(owned) < min_quota:
                assignment[member].extend(owned)
                assigned.extend(owned)
                under_min.append(member)
            elif len(owned) >= max_quota and current_over_min < expected_over_min:
                current_over_min += 1
                if current_over_min == expected_over_min:
                    exactly_min.clear()
                assignment[member].extend(owned[:max_quota])
                assigned.extend(owned[:max_quota])
                revoked.update(owned[max_quota:])
            else:
                assignment[member].extend(owned[:min_quota])
                assigned.extend(owned[:min_quota])
                revoked.update(owned[min_quota:])
                if current_over_min < expected_over_min:
                    exactly_min.append(member)

        unassigned = self._constrained_unassigned(assigned)
        under_min.sort()
        exactly_min.sort()

        def assign_new(tp: TopicPartition, member: str) -> int:
            assignment[member].append(tp)
            # It was owned by someone: whoever gets it must wait for the revocation.
            if tp in revoked or tp in multiply_owned:
                transferring[tp] = member
            return len(assignment[member])

        # Step 2: deal the rest round robin, to under_min first, then to exactly_min.
        # `position` is Kafka's iterator over under_min (which supports remove()).
        position = 0
        for index, tp in enumerate(unassigned):
            if position < len(under_min):
                member = under_min[position]
                position += 1
            elif not under_min and not exactly_min:
                raise AssignorError(
                    f"no more unfilled members; partitions left to assign: {unassigned[index:]}"
                )
            elif not under_min:
                member = exactly_min.pop(0)
            else:
                position = 0
                member = under_min[position]
                position += 1
            count = assign_new(tp, member)
            if count == min_quota:
                position -= 1
                del under_min[position]
                exactly_min.append(member)
            elif count == max_quota:
                current_over_min += 1

        # Kafka's verifyUnfilledMembers.
        if under_min:
            if current_over_min != expected_over_min:
                raise AssignorError(
                    "fewer members than expected reached more than the minimum quota, "
                    "and no partitions are left to assign"
                )
            for member in under_min:
                if len(assignment[member]) != min_quota:
                    raise AssignorError(
                        f"member {member} has {len(assignment[member])} partitions, "
                        f"below the minimum quota {min_quota}"
                    )
        return assignment

    def _constrained_unassigned(self, assigned: list[TopicPartition]) -> list[TopicPartition]:
        """All partitions (topics by name, then partition) not in `assigned`, by Kafka's
        two-pointer walk (which assumes every assigned partition exists)."""
        topics = sorted(self.partition_counts)
        if not assigned:
            return [
                tp for topic in topics for tp in _partitions(topic, self.partition_counts[topic])
            ]
        return _two_pointer_difference(
            (tp for topic in topics for tp in _partitions(topic, self.partition_counts[topic])),
            sorted(assigned),
        )


def _remove_first(items: list[TopicPartition], item: TopicPartition) -> None:
    # Java's List.remove(Object): the first occurrence, if any.
    try:
        items.remove(item)
    except ValueError:
        pass


def _two_pointer_difference(
    all_sorted: Iterable[TopicPartition], assigned_sorted: list[TopicPartition]
) -> list[TopicPartition]:
    """Kafka's getUnassignedPartitions: walk both sorted lists once. Kept literal: a stale
    assigned partition that is not in `all_sorted` stops the matching, as in Kafka."""
    unassigned: list[TopicPartition] = []
    assigned_iter = iter(assigned_sorted)
    next_assigned = next(assigned_iter)
    add_directly = False
    for tp in all_sorted:
        if add_directly or tp != next_assigned:
            unassigned.append(tp)
        else:
            following = next(assigned_iter, None)
            if following is None:
                add_directly = True
            else:
                next_assigned = following
    return unassigned


class _GeneralAssignment:
    """GeneralAssignmentBuilder: members subscribe to different topics. Keep what is still
    valid, give unassigned partitions to the least loaded eligible members, then move
    partitions until no move improves the balance (a move is undone if the result is not
    more balanced than before)."""

    def __init__(self, sticky: _StickyAssignment, current: dict[str, list[TopicPartition]]):
        self.sticky = sticky
        self.counts = sticky.partition_counts
        self.subscriptions = sticky.subscriptions
        self.total = sum(self.counts.values())
        self.current = current  # Kafka's currentAssignment
        self.topic_members: dict[str, list[str]] = {topic: [] for topic in self.counts}
        self.member_topics: dict[str, list[str]] = {}
        for member in sticky.member_order:
            subscribed = [
                topic for topic in self.subscriptions[member].topics if topic in self.counts
            ]
            self.member_topics[member] = subscribed
            for topic in subscribed:
                self.topic_members[topic].append(member)
            current.setdefault(member, [])
        self.partition_owner: dict[TopicPartition, str] = {
            tp: member for member, partitions in current.items() for tp in partitions
        }
        # Topics with the fewest potential members first (their partitions are the
        # hardest to place), then by name.
        self.sorted_topics = sorted(self.counts, key=self._topic_key)
        self.sorted_all_partitions = [
            tp for topic in self.sorted_topics for tp in _partitions(topic, self.counts[topic])
        ]
        self.by_size = _SortedMembers()
        self.movements = _PartitionMovements()
        self.revocation_required = False

    def _topic_key(self, topic: str) -> tuple[int, str]:
        return (len(self.topic_members[topic]), topic)

    def run(self) -> dict[str, list[TopicPartition]]:
        previous = self._previous_assignment()
        assigned = self._keep_owned_partitions()
        unassigned = self._unassigned(assigned)
        for member in self.current:
            self.by_size.add(member, len(self.current[member]))
        self._balance(previous, unassigned)
        return self.current

    def _previous_assignment(self) -> dict[TopicPartition, tuple[str, int]]:
        """prepopulateCurrentAssignments: for each partition, the member that owned it in
        the newest generation older than the current one (to move it back there)."""
        previous: dict[TopicPartition, tuple[str, int]] = {}
        max_generation = self.sticky.max_generation
        for member in self.sticky.member_order:
            data = self.sticky.member_data(self.subscriptions[member])
            if data.generation is not None and data.generation < max_generation:
                generation = data.generation
            elif data.generation is None and max_generation > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in data.partitions:
                known = previous.get(tp)
                if known is None or generation > known[1]:
                    previous[tp] = (member, generation)
        return previous

    def _keep_owned_partitions(self) -> list[TopicPartition]:
        assigned: list[TopicPartition] = []
        for member, partitions in self.current.items():
            subscription = self.subscriptions[member]
            kept = []
            for tp in partitions:
                if tp.topic not in self.topic_members:
                    self.partition_owner.pop(tp, None)
                elif tp.topic not in subscription.topics:
                    # Kafka leaves partition_owner pointing at this member here.
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.append(tp)
            partitions[:] = kept
        return assigned

    def _unassigned(self, assigned: list[TopicPartition]) -> list[TopicPartition]:
        if not assigned:
            return self.sorted_all_partitions  # the same list, as in Kafka
        assigned.sort(key=lambda tp: (*self._topic_key(tp.topic), tp.partition))
        return _two_pointer_difference(self.sorted_all_partitions, assigned)

    def _max_assignment_size(self, topics: list[str]) -> int:
        if len(topics) == len(self.counts):
            return self.total
        return sum(self.counts[topic] for topic in topics)

    def _is_balanced(self) -> bool:
        smallest = len(self.current[self.by_size.first()])
        largest = len(self.current[self.by_size.last()])
        if smallest >= largest - 1:
            return True
        owner_of = {tp: member for member, tps in self.current.items() for tp in tps}
        for member in self.by_size:
            partitions = self.current[member]
            count = len(partitions)
            topics = self.member_topics[member]
            if count == self._max_assignment_size(topics):
                continue
            have = set(partitions)
            for topic in topics:
                for tp in _partitions(topic, self.counts[topic]):
                    if tp not in have and count < len(self.current[owner_of[tp]]):
                        return False
        return True

    def _balance_score(self, assignment: dict[str, list[TopicPartition]]) -> int:
        sizes = [len(partitions) for partitions in assignment.values()]
        return sum(
            abs(sizes[i] - sizes[j]) for i in range(len(sizes)) for j in range(i + 1, len(sizes))
        )

    def _assign_to_least_loaded(self, tp: TopicPartition) -> None:
        for member in self.by_size:
            if tp.topic in self.member_topics[member]:
                self.by_size.remove(member)
                self.current[member].append(tp)
                self.partition_owner[tp] = member
                self.by_size.add(member, len(self.current[member]))
                return

    def _member_can_move(self, member: str) -> bool:
        partitions = self.current[member]
        if len(partitions) < self._max_assignment_size(self.member_topics[member]):
            return True
        return any(len(self.topic_members[tp.topic]) >= 2 for tp in partitions)

    def _balance(
        self,
        previous: dict[TopicPartition, tuple[str, int]],
        unassigned: list[TopicPartition],
    ) -> None:
        initializing = not self.current[self.by_size.last()]

        for tp in unassigned:
            if self.topic_members[tp.topic]:
                self._assign_to_least_loaded(tp)

        # Only partitions of topics with two or more potential members can move...
        fixed_partitions = {
            tp
            for topic, members in self.topic_members.items()
            if len(members) < 2
            for tp in _partitions(topic, self.counts[topic])
        }
        self.sorted_all_partitions[:] = [
            tp for tp in self.sorted_all_partitions if tp not in fixed_partitions
        ]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed_partitions]

        # ...and only members that could take or give one take part.
        fixed_assignments: dict[str, list[TopicPartition]] = {}
        for member in self.member_topics:
            if not self._member_can_move(member):
                self.by_size.remove(member)
                fixed_assignments[member] = self.current.pop(member)

        before = {member: list(tps) for member, tps in self.current.items()}
        owners_before = dict(self.partition_owner)

        # Unless a subscription change forces revocations anyway, first try to balance by
        # moving only the partitions that were just handed out.
        if not self.revocation_required:
            self._reassign(unassigned, previous)
        moved = self._reassign(self.sorted_all_partitions, previous)

        if (
            not initializing
            and moved
            and self._balance_score(self.current) >= self._balance_score(before)
        ):
            # Moving did not make it more balanced: keep the sticky assignment instead.
            self.current.clear()
            self.current.update(before)
            self.partition_owner = owners_before

        for member, partitions in fixed_assignments.items():
            self.current[member] = partitions
            self.by_size.add(member, len(partitions))

    def _reassign(
        self,
        partitions: list[TopicPartition],
        previous: dict[TopicPartition, tuple[str, int]],
    ) -> bool:
        performed = False
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                member = self.partition_owner[tp]
                earlier = previous.get(tp)
                if earlier is not None and len(self.current[member]) > (
                    len(self.current[earlier[0]]) + 1
                ):
                    # Back to its previous owner, which now has far fewer.
                    self._move(tp, earlier[0])
                    performed = modified = True
                    continue
                for other in self.topic_members[tp.topic]:
                    if len(self.current[member]) > len(self.current[other]) + 1:
                        self._move(tp, self._least_loaded_for(tp.topic))
                        performed = modified = True
                        break
            if not modified:
                return performed

    def _least_loaded_for(self, topic: str) -> str:
        for member in self.by_size:
            if topic in self.member_topics[member]:
                return member
        raise AssignorError(f"no member can take a partition of {topic}")

    def _move(self, tp: TopicPartition, new_member: str) -> None:
        old_member = self.partition_owner[tp]
        # Prefer undoing an earlier opposite move of the same topic (stickiness).
        tp = self.movements.partition_to_move(tp, old_member, new_member)
        old_member = self.partition_owner[tp]
        self.by_size.remove(old_member)
        self.by_size.remove(new_member)
        self.movements.move(tp, old_member, new_member)
        self.current[old_member].remove(tp)
        self.current[new_member].append(tp)
        self.partition_owner[tp] = new_member
        self.by_size.add(new_member, len(self.current[new_member]))
        self.by_size.add(old_member, len(self.current[old_member]))


class CooperativeStickyAssignor:
    """Kafka's `cooperative-sticky` assignor (KIP-429): the sticky algorithm (balanced,
    moving as few partitions as it can), then every partition that changes owner is left
    out of its new owner's assignment. The old owner sees it gone and revokes it; that
    triggers a follow-up rebalance in which it is free and gets assigned.

    Stateful like Kafka's: `on_assignment` records the generation, which
    `subscription_user_data` sends (4-byte big-endian int) for leaders that only read
    v0 / v1 subscriptions, where the generation field does not exist."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        self.generation = DEFAULT_GENERATION
        # The last assign's partitions left out because their owner must revoke them first
        # (Kafka's partitionsTransferringOwnership, kept for tests); None when the general
        # algorithm ran and they were computed from the owned partitions instead.
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = None

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        return _GENERATION_USER_DATA.pack(self.generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self.generation = generation_id

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        if not subscriptions:
            return {}
        counts = _subscribed_partition_counts(partitions_per_topic, subscriptions)
        sticky = _StickyAssignment(counts, subscriptions, _cooperative_member_data)
        assigned = sticky.run()
        transferring = self.partitions_transferring_ownership = (
            sticky.partitions_transferring_ownership
        )
        if transferring is None:
            transferring = _partitions_transferring_ownership(subscriptions, assigned)
        for tp, member in transferring.items():
            _remove_first(assigned[member], tp)
        return {member: Assignment(assigned[member]) for member in subscriptions}


def _partitions_transferring_ownership(
    subscriptions: Mapping[str, Subscription], assigned: Mapping[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    """The partitions assigned to a member other than the one that owns them now."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, partitions in assigned.items():
        owned = set(subscriptions[member].owned_partitions)
        new = set(partitions)
        added.update((tp, member) for tp in partitions if tp not in owned)
        revoked.update(tp for tp in subscriptions[member].owned_partitions if tp not in new)
    return {tp: member for tp, member in added.items() if tp in revoked}


_ASSIGNORS: dict[str, Callable[[], Assignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def assignor_by_name(name: str) -> Assignor:
    """A new assignor for a `partition.assignment.strategy` name ("range", "roundrobin",
    "cooperative-sticky"); ValueError names the known ones."""
    factory = _ASSIGNORS.get(name)
    if factory is None:
        raise ValueError(f"unknown partition assignor {name!r} (known: {', '.join(_ASSIGNORS)})")
    return factory()
