"""The consumer (manual assignment): `assign`, `seek*`, then `await poll()` returns the
records from each partition's position on, in offset order, and advances the positions.

A poll sends one FetchRequest per partition leader (as a consumer: replica id -1) carrying
the leader epoch the client's metadata knows (KIP-320), so a fetch that reaches a deposed
leader is fenced instead of returning records that may be truncated. Leader changes are
handled by refreshing metadata and fetching again; an out-of-range position is reset as
`auto_offset_reset` says.

With a `group_id` the consumer is a member of a consumer group (`_group.GroupMember`,
Kafka's ConsumerCoordinator): `subscribe` to topics or a pattern and the group shares their
partitions among its members; `commit` / auto-commit store the positions in the group, and
a partition the group hands this member starts at the group's committed offset.
Reference: Kafka's KafkaConsumer / Fetcher / SubscriptionState / ConsumerCoordinator.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import random
import re
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore.client._config import (
    SECURITY_SETTINGS,
    ClientConfigError,
    check_assignors,
    check_bool,
    check_choice,
    check_group_id,
    check_int,
    check_no_unknown,
    parse_bootstrap,
    security_network,
    to_topic_partition,
)
from kcore.client._connections import Connections
from kcore.client._group import (
    ConsumerGroupMetadata,
    GroupMember,
    JoinResult,
    partition_changes,
)
from kcore.client._metadata import MetadataManager
from kcore.client.assignors import assignor_by_name
from kcore.common import TopicPartition
from kcore.log import CorruptRecordError, iter_records, split_valid_batches
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kcore.protocol.sizing import fetch_records_limit

__all__ = ["Consumer", "ConsumerGroupMetadata", "ConsumerRecord"]

log = logging.getLogger("kcore.client.consumer")

# Answers meaning "your metadata is stale": refresh it and fetch again.
_REFRESH_CODES = frozenset(
    {
        3,  # UNKNOWN_TOPIC_OR_PARTITION
        5,  # LEADER_NOT_AVAILABLE
        errors.NotLeaderOrFollowerError.code,
        errors.FencedLeaderEpochError.code,
        errors.UnknownLeaderEpochError.code,
        errors.ERROR_CODES["KAFKA_STORAGE_ERROR"],
    }
)
_OFFSET_OUT_OF_RANGE = errors.ERROR_CODES["OFFSET_OUT_OF_RANGE"]
_RESETS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}
# Topics a pattern subscription never matches (Kafka's exclude.internal.topics=true).
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# A rebalance listener: called with the partitions (sorted); may be async.
Listener = Callable[[list[TopicPartition]], Awaitable[None] | None]


@attrs.frozen
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Any, ...] = ()
    # The leader epoch its batch was written in (None when the batch carries none):
    # Kafka's ConsumerRecord.leaderEpoch().
    leader_epoch: int | None = None


# Its slots' setters, in field order (what poll builds records with; ConsumerRecord has no
# validators or converters to skip).
_CONSUMER_RECORD_SETTERS = tuple(
    getattr(ConsumerRecord, field.name).__set__ for field in attrs.fields(ConsumerRecord)
)


@attrs.define
class _PartitionState:
    position: int | None = None  # the offset of the next record poll returns
    # The leader epoch of the record before `position`, when known (Kafka's
    # FetchPosition.offsetEpoch): committed with the position, as KIP-320's
    # committed_leader_epoch.
    position_epoch: int | None = None
    reset: str | None = None  # a pending seek_to_beginning/end ("earliest" / "latest")
    buffered: deque[ConsumerRecord] = attrs.field(factory=deque)
    # The position once every buffered record is returned (the end of the fetched
    # batches), and the leader epoch of the last of them; None when nothing is buffered.
    buffer_end: int | None = None
    buffer_end_epoch: int | None = None
    # The position comes from the group's committed offset (looked up lazily), else from
    # auto_offset_reset.
    needs_committed: bool = False
    paused: bool = False

    def move_to(
        self, position: int | None, reset: str | None = None, epoch: int | None = None
    ) -> None:
        """A seek: what was buffered for the old position is dropped."""
        self.position, self.reset, self.position_epoch = position, reset, epoch
        self.needs_committed = False
        self.buffered.clear()
        self.buffer_end = None


_SETTINGS = (
    "client_id",
    "fetch_max_wait_ms",
    "fetch_min_bytes",
    "fetch_max_bytes",
    "max_partition_fetch_bytes",
    "max_poll_records",
    "auto_offset_reset",
    "request_timeout_ms",
    "retry_backoff_ms",
    "default_api_timeout_ms",
    "group_id",
    "group_instance_id",
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "max_poll_interval_ms",
    "partition_assignment_strategy",
    "enable_auto_commit",
    "auto_commit_interval_ms",
    "metadata_max_age_ms",
)


class Consumer:
    """A Kafka consumer (use it as `async with Consumer(...)`): manual assignment
    (`assign`), or, with a `group_id`, a member of a consumer group (`subscribe`).

    `bootstrap`, `network` and `rng` as for the Producer (real TCP and a fresh
    random.Random when None).

    Settings are Kafka's, python-style: `fetch_max_wait_ms`, `fetch_min_bytes`,
    `fetch_max_bytes`, `max_partition_fetch_bytes`, `max_poll_records`,
    `auto_offset_reset` ("earliest", the default here, where Kafka's is "latest": a test or
    a demo usually wants what was produced before it started; "latest"; or "none"),
    `request_timeout_ms`,
    `retry_backoff_ms`, `default_api_timeout_ms` (how long `position`, `end_offsets`,
    `beginning_offsets`, `commit` and `committed` retry). A fetch asks for at most
    `fetch_max_bytes` of records but never more than a response frame can carry
    (`transport.DEFAULT_MAX_FRAME_BYTES`, 16 MiB, less the response's envelope): Kafka's
    clients read responses of any size, kcore's transport bounds them, so the default 50 MiB
    is capped there.

    Groups (Kafka's defaults): `group_id`, `group_instance_id` (static membership: the
    member keeps its partitions across a restart within the session timeout and sends no
    LeaveGroup on close), `session_timeout_ms` (45000), `heartbeat_interval_ms` (3000),
    `max_poll_interval_ms` (300000: also the rebalance timeout; a consumer that does not
    poll that long leaves the group), `partition_assignment_strategy` (names or assignor
    objects, a list or a comma-separated string; default "range,cooperative-sticky", which
    rebalances eagerly; "cooperative-sticky" alone rebalances cooperatively),
    `enable_auto_commit` (True; applies only with a group_id), `auto_commit_interval_ms`
    (5000), `metadata_max_age_ms` (300000: how often the metadata is refreshed, which is
    when a pattern subscription sees new topics).
    """

    def __init__(
        self,
        bootstrap: Any,
        *,
        network: transport.Network | None = None,
        rng: random.Random | None = None,
        client_id: str = "consumer",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        max_poll_records: int = 500,
        auto_offset_reset: str = "earliest",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        default_api_timeout_ms: int = 60000,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: Any = "range,cooperative-sticky",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        metadata_max_age_ms: int = 300000,
        **unknown: Any,
    ) -> None:
        # Kafka's security.protocol and ssl.* settings: the network they describe.
        security = {k: unknown.pop(k) for k in SECURITY_SETTINGS if k in unknown}
        check_no_unknown("consumer", unknown, _SETTINGS + SECURITY_SETTINGS)
        self.bootstrap = parse_bootstrap(bootstrap)
        self.fetch_max_wait_ms = check_int("fetch_max_wait_ms", fetch_max_wait_ms)
        self.fetch_min_bytes = check_int("fetch_min_bytes", fetch_min_bytes)
        self.fetch_max_bytes = check_int("fetch_max_bytes", fetch_max_bytes)
        self.max_partition_fetch_bytes = check_int(
            "max_partition_fetch_bytes", max_partition_fetch_bytes
        )
        self.max_poll_records = check_int("max_poll_records", max_poll_records, minimum=1)
        self.auto_offset_reset = check_choice(
            "auto_offset_reset", auto_offset_reset, ("earliest", "latest", "none")
        )
        self.request_timeout_ms = check_int("request_timeout_ms", request_timeout_ms, minimum=1)
        self.retry_backoff_ms = check_int("retry_backoff_ms", retry_backoff_ms, minimum=1)
        self.default_api_timeout_ms = check_int("default_api_timeout_ms", default_api_timeout_ms)
        if self.request_timeout_ms <= self.fetch_max_wait_ms:
            raise ClientConfigError(
                f"request_timeout_ms ({request_timeout_ms}) must be > fetch_max_wait_ms "
                f"({fetch_max_wait_ms}): a long-polling fetch would time out"
            )
        self.group_id = check_group_id("group_id", group_id, allow_none=True)
        self.group_instance_id = check_group_id(
            "group_instance_id", group_instance_id, allow_none=True
        )
        if self.group_instance_id is not None and self.group_id is None:
            raise ClientConfigError(
                "group_instance_id is set but group_id is not: static membership is a "
                "member of a group"
            )
        self.session_timeout_ms = check_int("session_timeout_ms", session_timeout_ms, minimum=1)
        self.heartbeat_interval_ms = check_int(
            "heartbeat_interval_ms", heartbeat_interval_ms, minimum=1
        )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ClientConfigError(
                f"heartbeat_interval_ms ({heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({session_timeout_ms})"
            )
        self.max_poll_interval_ms = check_int(
            "max_poll_interval_ms", max_poll_interval_ms, minimum=1
        )
        self.partition_assignment_strategy = check_assignors(
            "partition_assignment_strategy", partition_assignment_strategy, assignor_by_name
        )
        self.enable_auto_commit = check_bool("enable_auto_commit", enable_auto_commit)
        self.auto_commit_interval_ms = check_int("auto_commit_interval_ms", auto_commit_interval_ms)
        self.metadata_max_age_ms = check_int("metadata_max_age_ms", metadata_max_age_ms)
        self.client_id = client_id
        self._network = security_network(network, **security)
        self._rng = rng if rng is not None else random.Random()
        self._assignment: dict[TopicPartition, _PartitionState] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._connections: Connections | None = None
        self._metadata: MetadataManager | None = None
        self._metadata_stale = True
        self._metadata_refreshed = -float("inf")
        self._nursery: trio.Nursery | None = None
        self._fetching: set[int] = set()  # leaders with a fetch in flight
        self._fetch_done = trio.Event()  # replaced each time a fetch finishes
        self._fetch_error: errors.KafkaError | None = None
        self._wakeup = trio.Event()  # set when the group needs a waiting poll's attention
        self._closed = False
        # subscribe(): the topics or the pattern, the matched topics, and the listeners
        self._subscribed = False
        self._topics: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._on_assign: Listener | None = None
        self._on_revoke: Listener | None = None
        self._on_lost: Listener | None = None
        self._group: GroupMember | None = None
        self._next_auto_commit = 0.0
        self._auto_committing = False

    def __repr__(self) -> str:
        return f"<Consumer {self.client_id} assigned={sorted(map(str, self._assignment))}>"

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        if self._stack is not None or self._closed:
            raise RuntimeError("a Consumer can be entered once")
        stack = contextlib.AsyncExitStack()
        nursery = await stack.enter_async_context(actors.open_background_nursery())
        self._stack, self._nursery = stack, nursery
        self._connections = Connections(
            self._network,
            client_id=self.client_id,
            rng=self._rng,
            nursery=nursery,
            request_timeout=self.request_timeout_ms / 1000,
            logger=log,
        )
        self._metadata = MetadataManager(
            self._connections,
            self.bootstrap,
            rng=self._rng,
            retry_backoff=self.retry_backoff_ms / 1000,
            request_timeout=self.request_timeout_ms / 1000,
            logger=log,
        )
        if self.group_id is not None:
            self._group = GroupMember(
                self,
                group_id=self.group_id,
                group_instance_id=self.group_instance_id,
                assignors=self.partition_assignment_strategy,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.max_poll_interval_ms,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                retry_backoff_ms=self.retry_backoff_ms,
                request_timeout_ms=self.request_timeout_ms,
                connections=self._connections,
                metadata=self._metadata,
                bootstrap=self.bootstrap,
                rng=self._rng,
                client_id=self.client_id,
            )
            self._group.start(nursery)
            self._next_auto_commit = trio.current_time() + self.auto_commit_interval_ms / 1000
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        assert self._stack is not None and self._connections is not None
        try:
            await self.close()
        except BaseException as error:  # (e.g. Cancelled: the nursery must still exit)
            await self._tear_down()
            if not await self._stack.__aexit__(type(error), error, error.__traceback__):
                raise
            return None
        await self._tear_down()
        return await self._stack.__aexit__(exc_type, exc, tb)

    async def _tear_down(self) -> None:
        assert self._nursery is not None and self._connections is not None
        self._closed = True
        self._nursery.cancel_scope.cancel()  # fetches still out, the group's tasks
        await self._connections.aclose()

    async def close(self) -> None:
        """Closes the consumer; a group member first commits its positions (with
        enable_auto_commit), gives its partitions up (`on_revoke`) and leaves the group
        (LeaveGroup; a static member sends none, as Kafka's). Bounded by
        request_timeout_ms. A consumer cancelled instead (its task's scope cancelled)
        stops like a crashed one: the group notices by the session timeout.
        `async with` calls it on exit."""
        if self._closed or self._metadata is None:
            self._closed = True
            return
        group = self._group
        try:
            if group is not None:
                with trio.move_on_after(self.request_timeout_ms / 1000):
                    try:
                        if self.enable_auto_commit:
                            await self._commit_sync_quietly("the consumer is closing")
                        if self._subscribed:
                            await self._give_up(
                                self.owned_partitions(),
                                lost=group.generation_id == -1,
                            )
                        await group.leave("the consumer is closing")
                    except errors.KafkaError as exc:
                        log.warning("%s: closing the group membership: %s", self.client_id, exc)
        finally:
            self._closed = True
            if group is not None:
                group.close()

    # -- assignment and positions ------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        *,
        on_assign: Listener | None = None,
        on_revoke: Listener | None = None,
        on_lost: Listener | None = None,
    ) -> None:
        """Joins the group (at the next poll) for `topics` (names) or a compiled regex
        `pattern` (matched, whole name, against the cluster's topics at each metadata
        refresh; internal topics never match). Replaces an earlier subscription.

        Listeners (Kafka's ConsumerRebalanceListener; plain or async functions, given a
        sorted list of partitions) run inside `poll` (and `close` / `unsubscribe`):
        `on_revoke` before partitions are given up (eager: all of them at each rebalance;
        cooperative: only those that move to another member), `on_assign` after the group
        assigned partitions (the newly added ones; called after each rebalance, possibly
        with none), `on_lost` when partitions were lost without a chance to commit (the
        member fell out of the group; default: `on_revoke`)."""
        if self.group_id is None:
            raise errors.InvalidGroupIdError(
                "subscribe needs a group_id (a consumer group shares the partitions); "
                "without one, use assign()"
            )
        if self._assignment and not self._subscribed:
            raise RuntimeError(
                "subscribe: the consumer has manually assigned partitions; subscription to "
                "topics, partitions and pattern are mutually exclusive (unsubscribe first)"
            )
        if isinstance(topics, re.Pattern):
            self._pattern, self._topics = topics, frozenset()
        else:
            if isinstance(topics, str):
                topics = [topics]
            names = list(topics)
            for name in names:
                if not isinstance(name, str) or not name.strip():
                    raise ValueError(f"subscribe: bad topic name {name!r}")
            self._pattern, self._topics = None, frozenset(names)
        self._subscribed = True
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        self._metadata_stale = True
        if self._pattern is not None:
            self._match_pattern()
        if self._group is not None:
            self._group.subscription_changed()

    async def unsubscribe(self) -> None:
        """Gives up the subscribed partitions (`on_revoke`), leaves the group, and clears
        the subscription and any manual assignment."""
        if self._subscribed and self._group is not None:
            await self._give_up(self.owned_partitions(), lost=self._group.generation_id == -1)
            await self._group.leave("the consumer unsubscribed")
        self._subscribed = False
        self._topics, self._pattern = frozenset(), None
        self._assignment = {}

    def subscription(self) -> set[str]:
        """The subscribed topics (a pattern's current matches)."""
        return set(self._topics) if self._subscribed else set()

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Kafka's groupMetadata(): the group id, generation and member id right now."""
        if self._group is None:
            raise errors.InvalidGroupIdError("the consumer has no group_id")
        return self._group.group_metadata()

    def assign(self, partitions: Iterable[Any]) -> None:
        """Replaces the assignment; partitions kept keep their positions, new ones start
        where `seek` says, else (with a group_id) at the group's committed offset, else where
        `auto_offset_reset` says."""
        if self._subscribed:
            raise RuntimeError(
                "assign: the consumer is subscribed; subscription to topics, partitions and "
                "pattern are mutually exclusive (unsubscribe first)"
            )
        tps = [to_topic_partition(p) for p in partitions]
        self._assignment = {tp: self._assignment.get(tp) or self._new_state() for tp in tps}
        self._metadata_stale = True

    def _new_state(self) -> _PartitionState:
        return _PartitionState(needs_committed=self.group_id is not None)

    def pause(self, partitions: Iterable[Any]) -> None:
        """No records of these partitions until `resume` (their positions stay)."""
        for p in partitions:
            self._state(p).paused = True

    def resume(self, partitions: Iterable[Any]) -> None:
        for p in partitions:
            self._state(p).paused = False
        self.wake()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._assignment.items() if state.paused}

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def _state(self, tp: Any) -> _PartitionState:
        tp = to_topic_partition(tp)
        state = self._assignment.get(tp)
        if state is None:
            raise errors.KafkaError(f"{tp} is not assigned to this consumer (assign it first)")
        return state

    def seek(self, tp: Any, offset: int) -> None:
        """The next poll returns records of `tp` from `offset` on."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        self._state(tp).move_to(offset)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        """Positions at the log start offset, looked up lazily (at the next `poll` or
        `position`), as Kafka does."""
        self._seek_lazily(partitions, "earliest")

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        """Positions at the high watermark (looked up lazily)."""
        self._seek_lazily(partitions, "latest")

    def _seek_lazily(self, partitions: Iterable[Any] | None, reset: str) -> None:
        states = (
            list(self._assignment.values())
            if partitions is None
            else [self._state(p) for p in partitions]
        )
        for state in states:
            state.move_to(None, reset)

    async def position(self, tp: Any) -> int:
        """The offset of the next record `poll` returns for `tp` (looked up if a seek to
        the beginning / end is pending)."""
        state = self._state(tp)
        self._check_open()
        if state.position is None:
            with trio.move_on_after(self.default_api_timeout_ms / 1000):
                await self._resolve_positions(retry=True)
        if state.position is None:
            raise errors.RequestTimedOutError(
                f"the position of {tp} could not be looked up within "
                f"default_api_timeout_ms={self.default_api_timeout_ms}"
            )
        return state.position

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return await self._offsets_for(partitions, EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """The high watermark of each partition (what a consumer can read up to)."""
        return await self._offsets_for(partitions, LATEST_TIMESTAMP)

    async def _offsets_for(
        self, partitions: Iterable[Any], timestamp: int
    ) -> dict[TopicPartition, int]:
        self._check_open()
        tps = sorted({to_topic_partition(p) for p in partitions})
        found: dict[TopicPartition, int] = {}
        with trio.move_on_after(self.default_api_timeout_ms / 1000):
            while True:
                missing = [tp for tp in tps if tp not in found]
                if not missing:
                    return found
                found.update(await self._list_offsets({tp: timestamp for tp in missing}))
        raise errors.RequestTimedOutError(
            f"offsets of {', '.join(str(tp) for tp in tps if tp not in found)} could not be "
            f"looked up within default_api_timeout_ms={self.default_api_timeout_ms}"
        )

    # -- offsets of the group -----------------------------------------------------------

    def _require_group(self, what: str) -> GroupMember:
        self._check_open()
        if self._group is None:
            raise errors.InvalidGroupIdError(
                f"{what} needs a group_id (offsets are kept per group)"
            )
        return self._group

    def _consumed(self) -> dict[TopicPartition, int]:
        """The positions of the assigned partitions that have one (Kafka's allConsumed)."""
        return {
            tp: state.position
            for tp, state in sorted(self._assignment.items())
            if state.position is not None
        }

    async def commit(self, offsets: Mapping[Any, int] | None = None) -> None:
        """Commits `offsets` ({partition: offset of the next record to read}), or the
        current positions of all assigned partitions, to the group; waits until stored
        (retrying retriable errors up to default_api_timeout_ms). A subscribed member
        commits in its generation: a commit after the group moved on fails with
        CommitFailedError (RebalanceInProgressError while it is rebalancing: poll, then
        commit again); manually assigned partitions commit with generation -1."""
        self._require_group("commit")
        if offsets is None:
            wanted = self._consumed()
        else:
            wanted = {}
            for p, offset in offsets.items():
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                    raise ValueError(f"commit: offset of {p} must be an int >= 0, got {offset!r}")
                wanted[to_topic_partition(p)] = offset
        if wanted:
            await self._commit(wanted)

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        group = self._group
        assert group is not None
        generation = None
        if self._subscribed:
            generation = group.generation_if_stable()
            if generation is None:
                if group.rebalance_in_progress:
                    raise errors.RebalanceInProgressError(
                        f"group {self.group_id} is rebalancing: poll to complete the "
                        "rebalance, then commit again"
                    )
                raise errors.CommitFailedError(
                    f"this consumer is not part of an active generation of group "
                    f"{self.group_id}: poll to rejoin"
                )
        deadline = trio.current_time() + self.default_api_timeout_ms / 1000
        await group.commit(
            offsets,
            generation=generation,
            deadline=deadline,
            leader_epochs=self._epochs_of(offsets),
        )

    def _epochs_of(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The leader epoch of the record before each offset, for the offsets that are
        their partition's position (the consumer read that record; of other offsets it
        knows no epoch)."""
        epochs = {}
        for tp, offset in offsets.items():
            state = self._assignment.get(tp)
            if state is not None and state.position == offset and state.position_epoch is not None:
                epochs[tp] = state.position_epoch
        return epochs

    async def _commit_sync_quietly(self, why: str) -> None:
        offsets = self._consumed()
        if not offsets:
            return
        try:
            await self._commit(offsets)
        except errors.KafkaError as exc:
            log.warning("%s: committing offsets (%s) failed: %s", self.client_id, why, exc)

    def _maybe_auto_commit(self) -> None:
        group = self._group
        if group is None or not self.enable_auto_commit or self._auto_committing:
            return
        now = trio.current_time()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
        offsets = self._consumed()
        if not offsets or (self._subscribed and group.generation_if_stable() is None):
            return
        assert self._nursery is not None
        self._auto_committing = True
        self._nursery.start_soon(self._auto_commit, offsets)

    async def _auto_commit(self, offsets: dict[TopicPartition, int]) -> None:
        try:
            await self._commit(offsets)
        except errors.KafkaError as exc:
            log.warning("%s: auto-commit of offsets failed: %s", self.client_id, exc)
        finally:
            self._auto_committing = False

    async def committed(self, partitions: Any) -> Any:
        """The group's committed offset of one partition (None when nothing is committed),
        or {partition: offset or None} for an iterable of partitions."""
        group = self._require_group("committed")
        single = isinstance(partitions, TopicPartition) or (
            isinstance(partitions, tuple)
            and len(partitions) == 2
            and isinstance(partitions[0], str)
        )
        tps = (
            [to_topic_partition(partitions)]
            if single
            else [to_topic_partition(p) for p in partitions]
        )
        found = None
        with trio.move_on_after(self.default_api_timeout_ms / 1000):
            while True:
                found = await group.fetch_committed(tps)
                if found is not None:
                    break
                await trio.sleep(self.retry_backoff_ms / 1000)
        if found is None:
            raise errors.RequestTimedOutError(
                f"the committed offsets of group {self.group_id} could not be fetched within "
                f"default_api_timeout_ms={self.default_api_timeout_ms}"
            )
        offsets = {tp: None if c is None else c.offset for tp, c in found.items()}
        return offsets.get(tps[0]) if single else {tp: offsets.get(tp) for tp in tps}

    # -- the group's hooks (kcore.client._group.GroupHost) --------------------------------

    def group_subscription(self) -> frozenset[str]:
        return self._topics if self._subscribed else frozenset()

    def owned_partitions(self) -> list[TopicPartition]:
        return list(self._assignment) if self._subscribed else []

    def wake(self) -> None:
        wakeup, self._wakeup = self._wakeup, trio.Event()
        wakeup.set()

    async def partitions_per_topic(self, topics: Iterable[str]) -> dict[str, int]:
        assert self._metadata is not None
        names = sorted(set(topics))
        try:
            await self._metadata.refresh(names)
        except errors.KafkaError as exc:
            log.warning("%s: metadata refresh for the assignment failed: %s", self.client_id, exc)
        found = {}
        for name in names:
            topic = self._metadata.cluster.topic(name)
            if topic is not None and topic.num_partitions:
                found[name] = topic.num_partitions
        return found

    async def prepare_rebalance(self, *, generation_valid: bool, eager: bool) -> None:
        """Kafka's onJoinPrepare: commit the positions (auto-commit), then give up all the
        partitions (eager), only those no longer subscribed (cooperative), or report them
        lost (the member fell out of its generation: too late to commit)."""
        if generation_valid and self.enable_auto_commit:
            await self._commit_sync_quietly("before rebalancing")
        owned = self.owned_partitions()
        if not generation_valid:
            await self._give_up(owned, lost=True)
        elif eager:
            await self._give_up(owned, lost=False)
        else:
            await self._give_up([tp for tp in owned if tp.topic not in self._topics], lost=False)

    async def complete_rebalance(self, result: JoinResult, *, eager: bool) -> None:
        """Kafka's onJoinComplete: revoke what moved away (cooperative; then rejoin so the
        follow-up rebalance can give it to its new owner), take the new assignment (new
        partitions start at the committed offsets), and call on_assign with what was
        added."""
        assigned = list(result.assignment.partitions)
        revoked, added = partition_changes(self.owned_partitions(), assigned)
        if revoked:
            if self.enable_auto_commit:
                kept = self._consumed()
                offsets = {tp: kept[tp] for tp in revoked if tp in kept}
                if offsets:
                    try:
                        await self._commit(offsets)
                    except errors.KafkaError as exc:
                        log.warning("%s: commit before revoking: %s", self.client_id, exc)
            await self._give_up(revoked, lost=False)
            if not eager and self._group is not None:
                self._group.request_rejoin(
                    "partitions were revoked: the follow-up rebalance assigns them"
                )
        self._assignment = {tp: self._assignment.get(tp) or self._new_state() for tp in assigned}
        self._metadata_stale = True
        await _call_listener(self._on_assign, added, "on_assign")
        self.wake()

    async def _give_up(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        if not partitions:
            return
        listener = (self._on_lost or self._on_revoke) if lost else self._on_revoke
        log.info(
            "%s: %s %s",
            self.client_id,
            "lost" if lost else "revoking",
            ", ".join(map(str, sorted(partitions))),
        )
        try:
            await _call_listener(listener, sorted(partitions), "on_lost" if lost else "on_revoke")
        finally:
            for tp in partitions:
                self._assignment.pop(tp, None)

    def _match_pattern(self) -> None:
        if self._pattern is None or self._metadata is None:
            return
        matched = frozenset(
            name
            for name in self._metadata.cluster.topics
            if name not in _INTERNAL_TOPICS and self._pattern.fullmatch(name)
        )
        if matched != self._topics:
            self._topics = matched
            if self._group is not None:
                self._group.subscription_changed()

    async def _maintain_group(self, deadline: float) -> None:
        group = self._group
        assert group is not None
        group.raise_fatal()
        if self._subscribed:
            age = trio.current_time() - self._metadata_refreshed
            if age > self.metadata_max_age_ms / 1000:
                self._metadata_stale = True
            if self._metadata_stale and self._pattern is not None:
                with trio.move_on_at(deadline):
                    await self._refresh_metadata()
            idle = all(state.paused for state in self._assignment.values())
            await group.ensure_active(deadline, wait=idle)
        self._maybe_auto_commit()

    # -- polling -----------------------------------------------------------------------

    async def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        """Records from the assigned partitions' positions on (per partition in offset
        order, at most `max_poll_records`), advancing the positions; [] when nothing came
        within `timeout` seconds. Raises `OffsetOutOfRangeError` when a position is out of
        range and auto_offset_reset='none', and non-retriable fetch errors.

        A group member's poll also takes part in the group: it rebalances (running the
        listeners), auto-commits, and counts for max_poll_interval_ms.

        Fetches may outlive the poll that sent them; their records wait for the next poll.
        `timeout=0` returns what earlier fetches buffered and sends new fetches, but does not
        wait for a metadata refresh or a position lookup: give a first poll some time."""
        return await self._poll(timeout, self.max_poll_records)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        """`async for record in consumer`: one record at a time (a record's position is
        consumed, for commits, when it is handed out); ends when the consumer is closed."""
        while True:
            if self._closed:
                raise StopAsyncIteration
            records = await self._poll(1.0, 1)
            if records:
                return records[0]

    async def _poll(self, timeout: float, max_records: int) -> list[ConsumerRecord]:
        self._check_open()
        if self._group is not None:
            self._group.note_poll()
        deadline = trio.current_time() + max(0.0, timeout)
        while True:
            self._raise_fetch_error()
            if self._group is not None:
                await self._maintain_group(deadline)
            records = self._drain_buffered(max_records)
            if records:
                return records
            started = trio.current_time()
            with trio.move_on_at(deadline):
                await self._resolve_positions(retry=False)
                fetch_done, wakeup = self._fetch_done, self._wakeup
                if await self._send_fetches(deadline) or self._fetching:
                    await fetch_done.wait()
                elif self._metadata_stale:
                    await self._refresh_metadata()
                else:
                    await wakeup.wait()  # nothing to fetch: wait out the poll, or the group
            self._raise_fetch_error()
            records = self._drain_buffered(max_records)
            if records:
                return records
            now = trio.current_time()
            if now >= deadline:
                return []
            if now == started:
                # Nothing was waited for (errors answered at once): do not spin.
                await trio.sleep(min(self.retry_backoff_ms / 1000, deadline - now))

    def _raise_fetch_error(self) -> None:
        error, self._fetch_error = self._fetch_error, None
        if error is not None:
            raise error

    def _check_open(self) -> None:
        if self._closed:
            raise errors.KafkaError("the consumer is closed")
        if self._metadata is None:
            raise RuntimeError("use the consumer as `async with Consumer(...) as consumer:`")

    def _drain_buffered(self, max_records: int) -> list[ConsumerRecord]:
        records: list[ConsumerRecord] = []
        for tp in sorted(self._assignment):
            state = self._assignment[tp]
            if state.paused:
                continue
            taken = len(records)
            while state.buffered and len(records) < max_records:
                records.append(state.buffered.popleft())
            if len(records) > taken:  # the position follows the last record handed out
                last = records[-1]
                state.position, state.position_epoch = last.offset + 1, last.leader_epoch
            if not state.buffered and state.buffer_end is not None:
                state.position, state.buffer_end = state.buffer_end, None
                state.position_epoch = state.buffer_end_epoch
        return records

    async def _refresh_metadata(self, also: Iterable[TopicPartition] = ()) -> None:
        """Metadata of the assigned and subscribed topics (every topic for a pattern), and
        of `also`'s (offsets asked for partitions that are not assigned)."""
        assert self._metadata is not None
        topics: list[str] | None = sorted(
            {tp.topic for tp in self._assignment}
            | {tp.topic for tp in also}
            | (set(self._topics) if self._subscribed else set())
        )
        if self._subscribed and self._pattern is not None:
            topics = None
        try:
            cluster = await self._metadata.refresh(topics)
            self._metadata_stale = False
            self._metadata_refreshed = trio.current_time()
        except errors.KafkaError as exc:
            log.warning("%s: metadata refresh failed: %s", self.client_id, exc)
            return
        if topics is not None:
            # The named topics only: a pattern's matches are those the broker shows.
            self._metadata.raise_if_unauthorized(topics)
        if self._subscribed:
            self._match_pattern()
            if self._group is not None:
                self._group.metadata_changed(
                    {name: t.num_partitions for name, t in cluster.topics.items()}
                )

    async def _leaders(self) -> dict[TopicPartition, int]:
        """The leader of each assigned partition that has a known one."""
        assert self._metadata is not None
        if self._metadata_stale:
            await self._refresh_metadata()
        cluster = self._metadata.cluster
        leaders = {}
        for tp in sorted(self._assignment):
            leader = cluster.leader_for(tp)
            if leader is None:
                self._metadata_stale = True
            else:
                leaders[tp] = leader
        return leaders

    async def _positions_from_committed(self) -> None:
        """Partitions whose position comes from the group: OffsetFetch; those with a
        committed offset start there, the others where auto_offset_reset says."""
        if self._group is None:
            return
        pending = [
            tp
            for tp, state in sorted(self._assignment.items())
            if state.position is None and state.needs_committed
        ]
        if not pending:
            return
        found = await self._group.fetch_committed(pending)
        if found is None:
            return
        for tp in pending:
            state = self._assignment.get(tp)
            if state is None or state.position is not None or not state.needs_committed:
                continue
            committed = found.get(tp)
            if committed is None:
                state.needs_committed = False
                continue
            log.info(
                "%s: %s starts at its committed offset %d", self.client_id, tp, committed.offset
            )
            state.move_to(committed.offset, epoch=committed.leader_epoch)
            if committed.leader_epoch is not None:
                # The partition had a leader at that epoch: metadata older than that names
                # a deposed leader, whose log may end below the committed offset.
                assert self._metadata is not None
                if self._metadata.update_last_seen_epoch_if_newer(tp, committed.leader_epoch):
                    self._metadata_stale = True

    async def _resolve_positions(self, *, retry: bool) -> None:
        """Looks up the positions of partitions that have none (pending seeks to the
        beginning / end, new assignments): the group's committed offsets, else
        ListOffsets to their leaders."""
        while True:
            await self._positions_from_committed()
            pending_committed = any(
                state.position is None and state.needs_committed
                for state in self._assignment.values()
            )
            wanted = {}
            for tp, state in sorted(self._assignment.items()):
                if state.position is not None or state.needs_committed:
                    continue
                strategy = state.reset or self.auto_offset_reset
                if strategy == "none":
                    committed = " nor a committed offset" if self._group is not None else ""
                    raise errors.NoOffsetForPartitionError(
                        f"{tp} has no position{committed} and auto_offset_reset='none': seek first",
                        partitions=(tp,),
                    )
                wanted[tp] = _RESETS[strategy]
            if not wanted:
                if not retry or not pending_committed:
                    return
                await trio.sleep(self.retry_backoff_ms / 1000)
                continue
            found = await self._list_offsets(wanted)
            for tp, offset in found.items():
                state = self._assignment.get(tp)
                if state is not None and state.position is None:
                    state.move_to(offset)
            if not retry or (len(found) == len(wanted) and not pending_committed):
                return

    async def _list_offsets(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """One round of ListOffsets (one request per leader); partitions that failed with a
        retriable error are left out (and metadata marked stale)."""
        assert self._metadata is not None and self._connections is not None
        if self._metadata_stale or any(
            self._metadata.cluster.leader_for(tp) is None for tp in wanted
        ):
            await self._refresh_metadata(also=wanted)
        cluster = self._metadata.cluster
        by_leader: dict[int, list[ListOffsetsPartition]] = {}
        for tp, timestamp in sorted(wanted.items()):
            leader = cluster.leader_for(tp)
            if leader is None:
                self._metadata_stale = True
                continue
            by_leader.setdefault(leader, []).append(
                ListOffsetsPartition(tp.topic, tp.partition, timestamp, cluster.leader_epoch(tp))
            )
        found: dict[TopicPartition, int] = {}
        for leader, queries in sorted(by_leader.items()):
            address = cluster.address_of(leader)
            assert address is not None
            try:
                response = await self._connections.request(
                    address,
                    ApiKey.LIST_OFFSETS,
                    ListOffsetsRequest(CONSUMER_REPLICA_ID, tuple(queries)),
                    ListOffsetsResponse,
                )
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                log.info("%s: ListOffsets to broker %d failed: %s", self.client_id, leader, exc)
                self._metadata_stale = True
                continue
            for answer in response.partitions:
                tp = TopicPartition(answer.topic, answer.partition)
                if answer.error_code == 0:
                    found[tp] = answer.offset
                    continue
                error = errors.error_for_code(
                    answer.error_code, f"ListOffsets for {tp} on broker {leader}"
                )
                if not error.retriable:
                    raise error
                self._metadata_stale = True
        if len(found) < len(wanted) and self._metadata_stale:
            await self._refresh_metadata(also=wanted)  # spaced by retry_backoff_ms
        return found

    async def _send_fetches(self, deadline: float) -> bool:
        """Starts one FetchRequest per leader that has none in flight, for the partitions
        with a position and no buffered records; True if any was started.

        Fetches run in the consumer's nursery and may outlive the poll that sent them (as
        in Kafka): their records wait in the partitions' buffers for the next poll, and a
        poll returns as soon as one fetch brought records.
        """
        assert self._metadata is not None and self._nursery is not None
        leaders = await self._leaders()
        cluster = self._metadata.cluster
        by_leader: dict[int, list[FetchPartition]] = {}
        for tp, leader in leaders.items():
            state = self._assignment[tp]
            if state.position is None or state.buffered or state.paused:
                continue
            if leader in self._fetching:
                continue
            by_leader.setdefault(leader, []).append(
                FetchPartition(
                    tp.topic,
                    tp.partition,
                    state.position,
                    self.max_partition_fetch_bytes,
                    current_leader_epoch=cluster.leader_epoch(tp),
                )
            )
        remaining_ms = max(0, int((deadline - trio.current_time()) * 1000))
        max_wait_ms = min(self.fetch_max_wait_ms, remaining_ms)
        for leader, partitions in sorted(by_leader.items()):
            log.debug(
                "%s: fetching %s from broker %d (max_wait_ms=%d)",
                self.client_id,
                ", ".join(f"{p.topic}-{p.partition}@{p.fetch_offset}" for p in partitions),
                leader,
                max_wait_ms,
            )
            self._fetching.add(leader)
            self._nursery.start_soon(self._fetch_from, leader, partitions, max_wait_ms)
        return bool(by_leader)

    async def _fetch_from(
        self, leader: int, partitions: list[FetchPartition], max_wait_ms: int
    ) -> None:
        try:
            await self._fetch_and_buffer(leader, partitions, max_wait_ms)
        except errors.KafkaError as exc:
            # Not retriable: the next poll raises it.
            self._fetch_error = exc
        finally:
            self._fetching.discard(leader)
            done, self._fetch_done = self._fetch_done, trio.Event()
            done.set()

    async def _fetch_and_buffer(
        self, leader: int, partitions: list[FetchPartition], max_wait_ms: int
    ) -> None:
        assert self._metadata is not None and self._connections is not None
        address = self._metadata.cluster.address_of(leader)
        assert address is not None
        # The response must fit this client's frame limit (the transport's default): ask
        # for no more records than that leaves room for.
        frame_room = fetch_records_limit(
            transport.DEFAULT_MAX_FRAME_BYTES, (p.topic for p in partitions)
        )
        request = FetchRequest(
            CONSUMER_REPLICA_ID,
            -1,
            max_wait_ms,
            self.fetch_min_bytes,
            min(self.fetch_max_bytes, frame_room),
            tuple(partitions),
        )
        try:
            response = await self._connections.request(
                address, ApiKey.FETCH, request, FetchResponse
            )
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("%s: fetch from broker %d failed: %s", self.client_id, leader, exc)
            self._metadata_stale = True
            return
        sent = {(p.topic, p.partition): p.fetch_offset for p in partitions}
        for answer in response.partitions:
            fetch_offset = sent.get((answer.topic, answer.partition))
            if fetch_offset is not None:
                self._handle_fetched(answer, fetch_offset, leader)

    def _handle_fetched(
        self, answer: FetchPartitionResponse, fetch_offset: int, leader: int
    ) -> bool:
        """Buffers a partition's fetched records; True when there are any."""
        tp = TopicPartition(answer.topic, answer.partition)
        state = self._assignment.get(tp)
        if state is None or state.position != fetch_offset or state.buffered:
            return False  # unassigned or seeked while the fetch was out: drop it
        if answer.error_code == _OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                raise errors.OffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} of {tp} is out of range on broker {leader} "
                    "and auto_offset_reset='none'"
                )
            log.info(
                "%s: fetch offset %d of %s is out of range; resetting to %s",
                self.client_id,
                fetch_offset,
                tp,
                self.auto_offset_reset,
            )
            state.move_to(None, self.auto_offset_reset)
            return False
        if answer.error_code in _REFRESH_CODES:
            log.info(
                "%s: fetch of %s from broker %d: %s; refreshing metadata",
                self.client_id,
                tp,
                leader,
                errors.ERROR_NAMES.get(answer.error_code, answer.error_code),
            )
            self._metadata_stale = True
            return False
        if answer.error_code == errors.CorruptMessageError.code:
            raise CorruptRecordError(
                f"the record batch of {tp} at offset {fetch_offset} on broker {leader} is "
                "corrupt; seek past it to go on"
            )
        if answer.error_code != 0:
            raise errors.error_for_code(
                answer.error_code, f"fetch of {tp} from broker {leader} failed"
            )
        if not answer.records:
            return False
        # The records before a corrupt batch are delivered; the next fetch, from the corrupt
        # batch on, raises (Kafka's Fetcher does the same).
        batches, corrupt = split_valid_batches(answer.records)
        if corrupt is not None and not any(h.next_offset > fetch_offset for h, _ in batches):
            raise CorruptRecordError(
                f"fetch of {tp} at offset {fetch_offset} from broker {leader}: {corrupt}; "
                "seek past it to go on"
            )
        end = fetch_offset
        append = state.buffered.append
        topic, partition = tp.topic, tp.partition
        new = object.__new__
        # Built as kcore.log builds its Records: a bare instance and its slots' setters (a
        # frozen class's __init__ goes through object.__setattr__ per field, which was
        # half of what poll spent per record).
        (
            set_topic,
            set_partition,
            set_offset,
            set_timestamp,
            set_key,
            set_value,
            set_headers,
            set_leader_epoch,
        ) = _CONSUMER_RECORD_SETTERS
        end_epoch = state.position_epoch
        for header, batch in batches:
            if header.next_offset <= fetch_offset:
                continue  # a whole batch below the position
            epoch = header.partition_leader_epoch
            epoch = epoch if epoch >= 0 else None
            end_epoch = epoch
            for record in iter_records(batch):
                # A fetch returns whole batches: skip the records below the position.
                if record.offset >= fetch_offset:
                    consumed = new(ConsumerRecord)
                    set_topic(consumed, topic)
                    set_partition(consumed, partition)
                    set_offset(consumed, record.offset)
                    set_timestamp(consumed, record.timestamp)
                    set_key(consumed, record.key)
                    set_value(consumed, record.value)
                    set_headers(consumed, tuple(record.headers))
                    set_leader_epoch(consumed, epoch)
                    append(consumed)
            end = max(end, header.next_offset)
        if state.buffered:
            state.buffer_end, state.buffer_end_epoch = end, end_epoch
            return True
        # Only records below the position: skip past them.
        state.position, state.position_epoch = end, end_epoch
        return False


async def _call_listener(
    listener: Listener | None, partitions: list[TopicPartition], what: str
) -> None:
    """A rebalance listener, plain or async; its error propagates (out of the poll)."""
    if listener is None:
        return
    result = listener(partitions)
    if inspect.isawaitable(result):
        await result
