"""The consumer's side of a consumer group: Kafka's ConsumerCoordinator (with its
AbstractCoordinator) over kcore's msgpack RPC.

The member finds its group's coordinator (FindCoordinator, retried with backoff on
COORDINATOR_NOT_AVAILABLE, found again after NOT_COORDINATOR or a lost connection), joins
(JoinGroup; KIP-394: the first join is answered MEMBER_ID_REQUIRED with the member id to
join with), and, when the coordinator names it the leader, computes every member's
assignment with the protocol's assignor (`kcore.client.assignors`) from the members'
subscriptions (`kcore.client.consumer_protocol`'s bytes); SyncGroup hands each member its
assignment. A heartbeat task keeps the membership alive every `heartbeat_interval_ms`; an
answer of REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID makes the member
rejoin (the latter two with a new member id, its partitions lost), and a consumer that does
not poll for `max_poll_interval_ms` leaves the group, as Kafka's heartbeat thread makes it.

As in Kafka, the consumer's `poll` drives the rebalance: it runs the preparation on the
caller's task (the commit of the positions, `on_revoke` of the partitions given up), lets a
background task send JoinGroup and SyncGroup (whose requests may outlive one poll, like
Kafka's join future), and applies the assignment on the next poll's task (`on_revoke` of
the partitions the cooperative protocol moves away, `on_assign` of the new ones). The
consumer supplies the hooks (`GroupHost`).

Offsets: OffsetCommit carries the generation and member id of a subscribed member (-1 and
"" for manually assigned partitions, as Kafka allows); OffsetFetch reads what the group
committed.

The group requests' bodies are Kafka's request bodies at the versions below (snake_case
field names); the broker checks them against Kafka's schema.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import attrs
import trio

from kcore import errors
from kcore.client._connections import Address, Connections
from kcore.client._metadata import MetadataManager
from kcore.client.assignors import (
    Assignment,
    Assignor,
    RebalanceProtocol,
    Subscription,
)
from kcore.client.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kcore.common import TopicPartition
from kcore.protocol.api_keys import ApiKey

__all__ = [
    "CommittedOffset",
    "ConsumerGroupMetadata",
    "GroupHost",
    "GroupMember",
    "JoinResult",
    "partition_changes",
    "rebalance_protocol",
]

log = logging.getLogger("kcore.client.group")

# The versions kcore's consumer speaks (the coordinator serves more).
FIND_COORDINATOR_VERSION = 0
JOIN_GROUP_VERSION = 9  # group_instance_id (v5), reason and skip_assignment (v9)
SYNC_GROUP_VERSION = 5
HEARTBEAT_VERSION = 4
LEAVE_GROUP_VERSION = 5
OFFSET_COMMIT_VERSION = 8
OFFSET_FETCH_VERSION = 7
JOIN_GROUP_API, HEARTBEAT_API, LEAVE_GROUP_API, SYNC_GROUP_API = 11, 12, 13, 14

NO_GENERATION = -1
# Kafka's AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE: a JoinGroup waits up to the
# rebalance timeout on the broker; the client waits this much longer.
JOIN_GROUP_TIMEOUT_LAPSE = 5.0

_CODE = errors.ERROR_CODES
COORDINATOR_ERRORS = frozenset(
    {_CODE["COORDINATOR_NOT_AVAILABLE"], _CODE["NOT_COORDINATOR"], _CODE["REQUEST_TIMED_OUT"]}
)
RETRY_ERRORS = frozenset({_CODE["COORDINATOR_LOAD_IN_PROGRESS"], _CODE["UNSTABLE_OFFSET_COMMIT"]})
GENERATION_ERRORS = frozenset({_CODE["ILLEGAL_GENERATION"], _CODE["UNKNOWN_MEMBER_ID"]})
REBALANCE_IN_PROGRESS = _CODE["REBALANCE_IN_PROGRESS"]
MEMBER_ID_REQUIRED = _CODE["MEMBER_ID_REQUIRED"]
FENCED_INSTANCE_ID = _CODE["FENCED_INSTANCE_ID"]


@attrs.frozen
class ConsumerGroupMetadata:
    """Kafka's ConsumerGroupMetadata: who this member is in its group right now."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@attrs.frozen
class CommittedOffset:
    """A group's committed offset of a partition, and the leader epoch of the record
    before it when the committer knew it (None otherwise): KIP-320's
    committed_leader_epoch, which tells the next owner how new its metadata must be."""

    offset: int
    leader_epoch: int | None = None


@attrs.frozen
class JoinResult:
    """A completed JoinGroup + SyncGroup, waiting for the consumer's next poll to apply it."""

    generation_id: int
    member_id: str
    protocol: str
    assignment: Assignment


# -- decisions (sans-IO) ------------------------------------------------------------------


def rebalance_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """The rebalance protocol of a list of assignors: the highest one every assignor
    supports (ConsumerCoordinator's constructor). `[range, cooperative-sticky]`, Kafka 3.x's
    default, is EAGER; `[cooperative-sticky]` alone is COOPERATIVE."""
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols)
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ValueError(f"the assignors {names} support no common rebalance protocol")
    return max(common)


def partition_changes(
    owned: Sequence[TopicPartition], assigned: Sequence[TopicPartition]
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """`(revoked, added)`: what a member owned and is no longer assigned, and what it is
    newly assigned, each sorted."""
    owned_set, assigned_set = set(owned), set(assigned)
    return sorted(owned_set - assigned_set), sorted(assigned_set - owned_set)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


# -- the consumer's hooks -----------------------------------------------------------------


class GroupHost(Protocol):
    """What the group member needs from its consumer."""

    def group_subscription(self) -> frozenset[str]:
        """The topics this member subscribes to (a pattern's matches)."""
        ...

    def owned_partitions(self) -> list[TopicPartition]:
        """The partitions this member owns, in its assignment's order."""
        ...

    async def partitions_per_topic(self, topics: Iterable[str]) -> dict[str, int]:
        """The partition count of each topic the metadata knows (refreshed first)."""
        ...

    async def prepare_rebalance(self, *, generation_valid: bool, eager: bool) -> None:
        """Before JoinGroup: commit (auto-commit) and give up partitions."""
        ...

    async def complete_rebalance(self, result: JoinResult, *, eager: bool) -> None:
        """After SyncGroup: take the assignment."""
        ...

    def wake(self) -> None:
        """Something changed that a poll waiting for nothing should see."""
        ...


class GroupMember:
    """One member of a consumer group (see the module docstring)."""

    def __init__(
        self,
        host: GroupHost,
        *,
        group_id: str,
        group_instance_id: str | None,
        assignors: Sequence[Assignor],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        connections: Connections,
        metadata: MetadataManager,
        bootstrap: Sequence[Address],
        rng: random.Random,
        client_id: str,
    ) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.assignors = list(assignors)
        self.protocol = rebalance_protocol(self.assignors)
        self.session_timeout = session_timeout_ms / 1000
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self._host = host
        self._connections = connections
        self._metadata = metadata
        self._bootstrap = tuple(bootstrap)
        self._rng = rng
        self._client_id = client_id

        self.generation_id = NO_GENERATION
        self.member_id = ""
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        # "unjoined" -> "joining" (JoinGroup / SyncGroup out) -> "stable"
        self.state = "unjoined"
        self.rejoin_needed = True
        self.rejoin_reason = "the consumer subscribed"
        self.coordinator: tuple[int, Address] | None = None
        self._coordinator_lock = trio.Lock()
        self._joining = False
        self._join_done = trio.Event()
        self._pending: JoinResult | None = None
        self._fatal: errors.KafkaError | None = None
        self._joined_subscription: frozenset[str] = frozenset()
        self._assignment_snapshot: dict[str, int] | None = None  # the leader's metadata
        self._prepared = False  # prepare_rebalance ran for the coming join
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self.last_poll = trio.current_time()
        self._last_heartbeat_ok = -math.inf
        self._heartbeat_wakeup = trio.Event()

    # -- identity -------------------------------------------------------------------------

    @property
    def eager(self) -> bool:
        return self.protocol is RebalanceProtocol.EAGER

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(
            self.group_id, self.generation_id, self.member_id, self.group_instance_id
        )

    def generation_if_stable(self) -> tuple[int, str] | None:
        if self.state != "stable" or self.generation_id == NO_GENERATION:
            return None
        return self.generation_id, self.member_id

    @property
    def rebalance_in_progress(self) -> bool:
        return self.state == "joining" or self._pending is not None

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("%s: group %s: rejoining: %s", self._client_id, self.group_id, reason)
        self.rejoin_needed = True
        self.rejoin_reason = reason
        self._host.wake()

    def _reset_generation(self, reason: str, *, reset_member_id: bool = True) -> None:
        log.info(
            "%s: group %s: resetting generation %d%s: %s",
            self._client_id,
            self.group_id,
            self.generation_id,
            " and member id" if reset_member_id else "",
            reason,
        )
        self.generation_id = NO_GENERATION
        if reset_member_id:
            self.member_id = ""
        self.state = "unjoined"
        self._assignment_snapshot = None
        self.request_rejoin(reason)

    def raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def subscription_changed(self) -> None:
        """The consumer's subscription changed: rejoin with it (if it differs)."""
        if self._host.group_subscription() != self._joined_subscription:
            self.request_rejoin("the subscription changed")

    def metadata_changed(self, partitions_per_topic: Mapping[str, int]) -> None:
        """The leader rejoins when a topic the group assigned gains partitions or
        appears / disappears (ConsumerCoordinator.rejoinNeededOrPending's snapshot)."""
        snapshot = self._assignment_snapshot
        if snapshot is None or self.state != "stable":
            return
        now = {topic: partitions_per_topic.get(topic, 0) for topic in snapshot}
        if now != snapshot:
            self.request_rejoin(f"the metadata of the group's topics changed: {now}")

    # -- life -----------------------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._heartbeat_loop)

    def note_poll(self) -> None:
        self.last_poll = trio.current_time()

    def forget(self) -> None:
        """The consumer unsubscribed: the member no longer belongs to a generation."""
        self.generation_id, self.member_id, self.state = NO_GENERATION, "", "unjoined"
        self._pending = None
        self._prepared = False
        self.rejoin_needed = True
        self._joined_subscription = frozenset()
        self._assignment_snapshot = None

    async def leave(self, reason: str) -> None:
        """LeaveGroup, as a dynamic member does on close / unsubscribe / poll timeout;
        a static member (group_instance_id) sends none: its membership ends by session
        timeout, unless it comes back with the same instance id first."""
        member_id = self.member_id
        self.forget()
        if self.group_instance_id is not None or not member_id or self.coordinator is None:
            return
        log.info("%s: group %s: leaving: %s", self._client_id, self.group_id, reason)
        body = {
            "group_id": self.group_id,
            "members": [{"member_id": member_id, "group_instance_id": None, "reason": reason}],
        }
        try:
            response = await self._send(LEAVE_GROUP_API, LEAVE_GROUP_VERSION, body)
        except errors.KafkaError as exc:
            log.info("%s: LeaveGroup failed: %s", self._client_id, exc)
            return
        if response["error_code"]:
            log.info(
                "%s: LeaveGroup: %s",
                self._client_id,
                errors.ERROR_NAMES.get(response["error_code"], response["error_code"]),
            )

    def close(self) -> None:
        self._closed = True

    # -- the coordinator ------------------------------------------------------------------

    def mark_coordinator_unknown(self, reason: str, node: int | None = None) -> None:
        if self.coordinator is None or (node is not None and self.coordinator[0] != node):
            return
        log.info(
            "%s: group %s: coordinator %d is unavailable or invalid (%s): will find it again",
            self._client_id,
            self.group_id,
            self.coordinator[0],
            reason,
        )
        self.coordinator = None

    async def ensure_coordinator(self) -> tuple[int, Address]:
        """The coordinator, found first if unknown (retried with backoff until found or
        cancelled)."""
        while True:
            if self.coordinator is not None:
                return self.coordinator
            async with self._coordinator_lock:
                if self.coordinator is not None:
                    return self.coordinator
                found = await self._find_coordinator()
                if found is not None:
                    self.coordinator = found
                    log.info(
                        "%s: group %s: coordinator is broker %d at %s:%d",
                        self._client_id,
                        self.group_id,
                        found[0],
                        *found[1],
                    )
                    return found
                await trio.sleep(self.retry_backoff)

    def _candidates(self) -> list[Address]:
        known = [b.address for _, b in sorted(self._metadata.cluster.brokers.items())]
        if known:
            start = self._rng.randrange(len(known))
            known = known[start:] + known[:start]
        return known + [a for a in self._bootstrap if a not in known]

    async def _find_coordinator(self) -> tuple[int, Address] | None:
        for address in self._candidates():
            try:
                body = await self._connections.request_body(
                    address,
                    ApiKey.FIND_COORDINATOR,
                    {"key": self.group_id},
                    api_version=FIND_COORDINATOR_VERSION,
                    timeout=self.request_timeout,
                )
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                log.debug("%s: FindCoordinator to %s:%d: %s", self._client_id, *address, exc)
                continue
            code = body["error_code"]
            if code == 0:
                return body["node_id"], (body["host"], body["port"])
            error = errors.error_for_code(code, f"FindCoordinator for group {self.group_id}")
            if not error.retriable:
                raise error
            log.debug("%s: FindCoordinator: %s", self._client_id, error.name)
            return None  # the broker answered: the offsets partition has no leader yet
        return None

    async def _send(
        self, api_key: int, version: int, body: dict, *, timeout: float | None = None
    ) -> dict:
        """A group request to the coordinator; a failed connection or request timeout
        marks the coordinator unknown and raises (retriable)."""
        node, address = await self.ensure_coordinator()
        try:
            return await self._connections.request_body(
                address,
                api_key,
                body,
                api_version=version,
                timeout=self.request_timeout if timeout is None else timeout,
            )
        except errors.KafkaError as exc:
            if exc.retriable:
                self.mark_coordinator_unknown(str(exc), node)
            raise

    def _coordinator_error(self, code: int, what: str) -> None:
        """Marks the coordinator unknown on NOT_COORDINATOR & co."""
        if code in COORDINATOR_ERRORS:
            self.mark_coordinator_unknown(f"{what}: {errors.ERROR_NAMES.get(code, code)}")

    # -- joining --------------------------------------------------------------------------

    async def ensure_active(self, deadline: float, *, wait: bool) -> None:
        """Called by each poll: applies a completed join, prepares and starts a join that
        is needed, and (when `wait`: the consumer owns nothing to fetch meanwhile) waits
        for the join until `deadline`."""
        self.raise_fatal()
        if self._pending is not None:
            await self._apply_pending()
        if not self.rejoin_needed and self._host.group_subscription() != (
            self._joined_subscription
        ):
            self.request_rejoin("the subscription changed")
        if self.rejoin_needed and not self._joining:
            if not self._prepared:
                await self._host.prepare_rebalance(
                    generation_valid=self.generation_id != NO_GENERATION, eager=self.eager
                )
                self._prepared = True
            if self.rejoin_needed and not self._joining:  # (prepare awaited)
                self._start_join()
        if self._joining and wait:
            done = self._join_done
            with trio.move_on_at(deadline):
                await done.wait()
            self.raise_fatal()
            if self._pending is not None:
                await self._apply_pending()

    async def _apply_pending(self) -> None:
        result, self._pending = self._pending, None
        assert result is not None
        self._prepared = False
        for assignor in self.assignors:
            if assignor.name == result.protocol:
                assignor.on_assignment(result.assignment, result.generation_id)
        await self._host.complete_rebalance(result, eager=self.eager)

    def _start_join(self) -> None:
        assert self._nursery is not None
        self._joining = True
        self._join_done = trio.Event()
        self._nursery.start_soon(self._join_task)

    async def _join_task(self) -> None:
        try:
            while not self._closed and self.rejoin_needed:
                try:
                    result = await self._join_and_sync()
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    log.info("%s: group %s: join failed: %s", self._client_id, self.group_id, exc)
                    result = None
                if result is not None:
                    self._pending = result
                    break
                await trio.sleep(self.retry_backoff)
        except errors.KafkaError as exc:
            log.warning("%s: group %s: cannot join: %s", self._client_id, self.group_id, exc)
            self._fatal = exc
        finally:
            self._joining = False
            self._join_done.set()
            self._host.wake()

    def _fatal_error(self, code: int, what: str) -> errors.KafkaError:
        return errors.error_for_code(code, f"{what} for group {self.group_id} failed")

    async def _join_and_sync(self) -> JoinResult | None:
        """One JoinGroup (and SyncGroup): the result, or None to try again."""
        topics = self._host.group_subscription()
        owned = self._host.owned_partitions()
        protocols = [
            {
                "name": assignor.name,
                "metadata": encode_subscription(
                    Subscription(
                        sorted(topics),
                        assignor.subscription_user_data(topics),
                        owned,
                        self.generation_id,
                    )
                ),
            }
            for assignor in self.assignors
        ]
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": int(self.session_timeout * 1000),
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocols": protocols,
            "reason": self.rejoin_reason,
        }
        self.state = "joining"
        # The rejoin this join answers; a request for another one made meanwhile stays.
        self.rejoin_needed = False
        # The subscription this join sends (Kafka's ConsumerCoordinator.metadata() sets
        # joinedSubscription here too): a poll while the join is out compares against it,
        # and rejoins only if the subscription changed since. Set at the SyncGroup, a
        # poll in between saw "a change" and every first join was followed by a second.
        self._joined_subscription = topics
        log.info(
            "%s: group %s: joining (member id %r, generation %d): %s",
            self._client_id,
            self.group_id,
            self.member_id,
            self.generation_id,
            self.rejoin_reason,
        )
        try:
            response = await self._send(
                JOIN_GROUP_API,
                JOIN_GROUP_VERSION,
                body,
                timeout=self.rebalance_timeout_ms / 1000 + JOIN_GROUP_TIMEOUT_LAPSE,
            )
        except BaseException:
            self.rejoin_needed, self.state = True, "unjoined"
            raise
        code = response["error_code"]
        if code != 0:
            self.rejoin_needed = True
            self.state = "unjoined"
            if code == MEMBER_ID_REQUIRED:
                self.member_id = response["member_id"]  # KIP-394: join again with it
                log.info(
                    "%s: group %s: member id %s", self._client_id, self.group_id, self.member_id
                )
                return await self._join_and_sync()
            if code in GENERATION_ERRORS:
                self._reset_generation(f"JoinGroup: {errors.ERROR_NAMES[code]}")
                return None
            if code in COORDINATOR_ERRORS or code in RETRY_ERRORS or code == REBALANCE_IN_PROGRESS:
                self._coordinator_error(code, "JoinGroup")
                return None
            raise self._fatal_error(code, "JoinGroup")
        self.member_id = response["member_id"]
        generation = response["generation_id"]
        protocol = response["protocol_name"]
        self.leader_id = response["leader"]
        assignments: list[dict] = []
        if self.leader_id == self.member_id and not response["skip_assignment"]:
            assignments = await self._assign(protocol, response["members"])
        sync = {
            "group_id": self.group_id,
            "generation_id": generation,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol_type": CONSUMER_PROTOCOL_TYPE,
            "protocol_name": protocol,
            "assignments": assignments,
        }
        try:
            response = await self._send(SYNC_GROUP_API, SYNC_GROUP_VERSION, sync)
        except BaseException:
            self.rejoin_needed, self.state = True, "unjoined"
            raise
        code = response["error_code"]
        if code != 0:
            self.rejoin_needed = True
            self.state = "unjoined"
            if code in GENERATION_ERRORS:
                self._reset_generation(f"SyncGroup: {errors.ERROR_NAMES[code]}")
                return None
            if code in COORDINATOR_ERRORS or code in RETRY_ERRORS or code == REBALANCE_IN_PROGRESS:
                self._coordinator_error(code, "SyncGroup")
                return None
            raise self._fatal_error(code, "SyncGroup")
        data = response["assignment"]
        try:
            assignment = decode_assignment(data) if data else Assignment(())
        except ConsumerProtocolError as exc:
            raise errors.InconsistentGroupProtocolError(
                f"the assignment of group {self.group_id} does not decode: {exc}"
            ) from exc
        self.generation_id, self.protocol_name, self.state = generation, protocol, "stable"
        self._last_heartbeat_ok = trio.current_time()
        self._heartbeat_wakeup.set()
        log.info(
            "%s: group %s: generation %d (%s), member %s%s, assigned %s",
            self._client_id,
            self.group_id,
            generation,
            protocol,
            self.member_id,
            " (leader)" if self.leader_id == self.member_id else "",
            ", ".join(map(str, assignment.partitions)) or "nothing",
        )
        return JoinResult(generation, self.member_id, protocol, assignment)

    async def _assign(self, protocol: str, members: list[dict]) -> list[dict]:
        """The leader's part: every member's assignment (ConsumerCoordinator.
        onLeaderElected)."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise errors.InconsistentGroupProtocolError(
                f"the group chose protocol {protocol!r}, which this member does not have"
            )
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            try:
                subscription = decode_subscription(member["metadata"])
            except ConsumerProtocolError as exc:
                raise errors.InconsistentGroupProtocolError(
                    f"the subscription of member {member['member_id']} does not decode: {exc}"
                ) from exc
            subscriptions[member["member_id"]] = attrs.evolve(
                subscription, group_instance_id=member["group_instance_id"]
            )
        topics = sorted({topic for s in subscriptions.values() for topic in s.topics})
        partitions_per_topic = await self._host.partitions_per_topic(topics)
        assigned = assignor.assign(partitions_per_topic, subscriptions)
        self._assignment_snapshot = {t: partitions_per_topic.get(t, 0) for t in topics}
        log.info(
            "%s: group %s: leader assigned with %s: %s",
            self._client_id,
            self.group_id,
            protocol,
            {m: [str(tp) for tp in a.partitions] for m, a in assigned.items()},
        )
        return [
            {"member_id": member_id, "assignment": encode_assignment(assignment)}
            for member_id, assignment in assigned.items()
        ]

    # -- heartbeats -----------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            self._heartbeat_wakeup = trio.Event()
            with trio.move_on_after(self.heartbeat_interval):
                await self._heartbeat_wakeup.wait()
            if self._closed or self.generation_id == NO_GENERATION:
                continue
            now = trio.current_time()
            if now - self.last_poll > self.rebalance_timeout_ms / 1000:
                log.warning(
                    "%s: group %s: consumer poll timeout has expired: the time between polls "
                    "exceeded max_poll_interval_ms=%d; leaving the group (a slow poll loop: "
                    "raise max_poll_interval_ms or lower max_poll_records)",
                    self._client_id,
                    self.group_id,
                    self.rebalance_timeout_ms,
                )
                await self.leave("consumer poll timeout has expired")
                self._host.wake()
                continue
            if self.state != "stable":
                continue
            if now - self._last_heartbeat_ok > self.session_timeout:
                self.mark_coordinator_unknown("no heartbeat answered within the session timeout")
            await self._heartbeat()

    async def _heartbeat(self) -> None:
        generation, member_id = self.generation_id, self.member_id
        body = {
            "group_id": self.group_id,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": self.group_instance_id,
        }
        try:
            with trio.move_on_after(self.request_timeout):
                response = await self._send(HEARTBEAT_API, HEARTBEAT_VERSION, body)
                code = response["error_code"]
                if (generation, member_id) != (self.generation_id, self.member_id):
                    return  # rejoined meanwhile: the answer is about an old generation
                if code == 0:
                    self._last_heartbeat_ok = trio.current_time()
                elif code == REBALANCE_IN_PROGRESS:
                    self._last_heartbeat_ok = trio.current_time()
                    self.request_rejoin("the group is rebalancing")
                elif code in GENERATION_ERRORS:
                    self._reset_generation(f"Heartbeat: {errors.ERROR_NAMES[code]}")
                elif code in COORDINATOR_ERRORS:
                    self._coordinator_error(code, "Heartbeat")
                elif code == FENCED_INSTANCE_ID:
                    self._fatal = self._fatal_error(code, "Heartbeat")
                    self._host.wake()
                elif code not in RETRY_ERRORS:
                    log.warning(
                        "%s: Heartbeat: %s", self._client_id, errors.ERROR_NAMES.get(code, code)
                    )
        except errors.KafkaError as exc:
            log.info("%s: group %s: heartbeat failed: %s", self._client_id, self.group_id, exc)

    # -- offsets --------------------------------------------------------------------------

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        generation: tuple[int, str] | None,
        deadline: float,
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """OffsetCommit, retried on retriable errors until `deadline` (then
        RequestTimedOutError). `generation` is (generation id, member id), None for
        manually assigned partitions (-1 and ""). `leader_epochs`: the leader epoch of the
        record before each offset, where known (committed as KIP-320's
        committed_leader_epoch; -1 for the others)."""
        epochs = leader_epochs or {}
        generation_id, member_id = generation if generation is not None else (NO_GENERATION, "")
        body = {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": generation_id,
            "member_id": member_id,
            "group_instance_id": self.group_instance_id if generation is not None else None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": offsets[TopicPartition(topic, partition)],
                            "committed_leader_epoch": epochs.get(
                                TopicPartition(topic, partition), -1
                            ),
                            "committed_metadata": "",
                        }
                        for partition in partitions
                    ],
                }
                for topic, partitions in _by_topic(offsets).items()
            ],
        }
        last: str = "no attempt"
        with trio.move_on_at(deadline):
            while True:
                try:
                    response = await self._send(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_VERSION, body)
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = str(exc)
                    await trio.sleep(self.retry_backoff)
                    continue
                retry = self._commit_outcome(response, generation)
                if retry is None:
                    log.debug("%s: committed %s", self._client_id, dict(offsets))
                    return
                last = retry
                await trio.sleep(self.retry_backoff)
        raise errors.RequestTimedOutError(
            f"the offset commit of group {self.group_id} did not complete in time: {last}"
        )

    def _commit_outcome(self, response: dict, generation: tuple[int, str] | None) -> str | None:
        """None when every partition committed; the reason to retry; raises otherwise."""
        codes = sorted({p["error_code"] for t in response["topics"] for p in t["partitions"]} - {0})
        if not codes:
            return None
        for code in codes:
            name = errors.ERROR_NAMES.get(code, str(code))
            if code in GENERATION_ERRORS or code == FENCED_INSTANCE_ID:
                if code in GENERATION_ERRORS and generation is not None:
                    if generation == (self.generation_id, self.member_id):
                        self._reset_generation(f"OffsetCommit: {name}")
                raise errors.CommitFailedError(
                    f"the offset commit of group {self.group_id} failed ({name}): the group "
                    "has rebalanced and assigned the partitions to another member (this "
                    "consumer did not poll within max_poll_interval_ms or missed its session "
                    "timeout); poll to rejoin",
                    error_code=code,
                )
            if code == REBALANCE_IN_PROGRESS:
                self.request_rejoin("OffsetCommit: the group is rebalancing")
                raise errors.RebalanceInProgressError(
                    f"the offset commit of group {self.group_id} cannot complete while the "
                    "group rebalances: poll to complete the rebalance, then commit again"
                )
        for code in codes:
            if code in COORDINATOR_ERRORS:
                self._coordinator_error(code, "OffsetCommit")
            elif code not in RETRY_ERRORS:
                raise errors.error_for_code(code, f"OffsetCommit of group {self.group_id}")
        return "OffsetCommit: " + ", ".join(errors.ERROR_NAMES.get(c, str(c)) for c in codes)

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, CommittedOffset | None] | None:
        """One OffsetFetch (require_stable): each partition's committed offset (None:
        nothing committed); None when the attempt failed with a retriable error."""
        tps = sorted(set(partitions))
        body = {
            "group_id": self.group_id,
            "topics": [
                {"name": topic, "partition_indexes": indexes}
                for topic, indexes in _by_topic(tps).items()
            ],
            "require_stable": True,
        }
        try:
            response = await self._send(ApiKey.OFFSET_FETCH, OFFSET_FETCH_VERSION, body)
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("%s: OffsetFetch failed: %s", self._client_id, exc)
            return None
        code = response["error_code"]
        if code:
            if code in COORDINATOR_ERRORS or code in RETRY_ERRORS:
                self._coordinator_error(code, "OffsetFetch")
                return None
            raise errors.error_for_code(code, f"OffsetFetch of group {self.group_id}")
        found: dict[TopicPartition, CommittedOffset | None] = {}
        for topic in response["topics"]:
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                if p["error_code"]:
                    if p["error_code"] in RETRY_ERRORS:
                        return None
                    raise errors.error_for_code(p["error_code"], f"OffsetFetch of {tp}")
                offset, epoch = p["committed_offset"], p["committed_leader_epoch"]
                found[tp] = (
                    CommittedOffset(offset, epoch if epoch >= 0 else None) if offset >= 0 else None
                )
        return found
