"""Fetch sessions (KIP-227), as Kafka 3.5's kafka.server.FetchSession: the broker remembers
the partitions of a consumer's fetches, so that its next fetches name only what changed
(incremental fetches) and their responses carry only the partitions with something new.

Sans-IO: no clock (times in milliseconds are passed in, from Trio's clock), randomness
from an injected `random.Random`, no awaits. The Fetch handler
(kcore.server.kafka_apis) asks `FetchManager.new_context` for a context per request, fetches
what `context.partitions()` lists, and hands the answers to `context.respond`, which says
the response's top-level error, session id and partitions.

The rules, Kafka's:

- session id 0 with epoch -1 (FINAL_EPOCH, and every request below version 7) is a
  sessionless full fetch; any id with epoch 0 (INITIAL_EPOCH) or -1 is a full fetch that
  closes that session, and epoch 0 asks for a new one (handed out if the cache has room or
  can evict: `FetchSessionCache.maybe_create_session`);
- an id with epoch > 0 is an incremental fetch: unknown id FETCH_SESSION_ID_NOT_FOUND,
  wrong epoch INVALID_FETCH_SESSION_EPOCH, a topic-id session asked below version 13 (or
  the reverse) FETCH_SESSION_TOPIC_ID_ERROR; otherwise the named partitions are added or
  updated, the forgotten ones removed, the epoch advances, and the response leaves out
  every partition with no records, no change of high watermark or log start offset, no
  error, no diverging epoch and no preferred replica. A partition that got records moves
  to the end of the session, so the next fetch reads the others first (KIP-74 limits).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from kcore import errors

logger = logging.getLogger("kcore.server.fetch_session")

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
ZERO_UUID = uuid.UUID(int=0)
# Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a session unused this long
# may be evicted by anyone, and one younger than this only by a privileged one.
EVICTION_MS = 120_000
_INT32_MAX = 2**31 - 1
_NO_PREFERRED_REPLICA = -1


def next_epoch(epoch: int) -> int:
    """The session epoch after `epoch` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH  # the next epoch after FINAL_EPOCH is always FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


@attrs.frozen
class TopicIdPartition:
    """A partition as a fetch names it: by id from version 13 (`topic` None when the broker
    knows no topic with that id), by name below (`topic_id` the zero UUID)."""

    topic_id: uuid.UUID
    topic: str | None
    partition: int

    @property
    def session_key(self) -> tuple[object, int]:
        """What identifies the partition in a session (Kafka's CachedPartition.equals): the
        id when there is one, else the name."""
        return (self.topic_id if self.topic_id != ZERO_UUID else self.topic, self.partition)


@attrs.frozen
class PartitionFetch:
    """What a fetch asks of one partition (Kafka's FetchRequest.PartitionData)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@attrs.define(eq=False, slots=True)
class CachedPartition:
    """A partition of a session: the request's parameters and what the broker last sent."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    request: PartitionFetch
    high_watermark: int = -1
    local_log_start_offset: int = -1

    @property
    def key(self) -> tuple[object, int]:
        return TopicIdPartition(self.topic_id, self.topic, self.partition).session_key

    def must_respond(self, answer: Mapping[str, Any], update: bool) -> bool:
        """Must the partition's `answer` (a Fetch response partition) be sent, and (with
        `update`) remember what it says (Kafka's maybeUpdateResponseData)."""
        must = bool(answer.get("records"))
        high_watermark = answer.get("high_watermark", -1)
        log_start_offset = answer.get("log_start_offset", -1)
        if self.high_watermark != high_watermark:
            must = True
            if update:
                self.high_watermark = high_watermark
        if self.local_log_start_offset != log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = log_start_offset
        if answer.get("preferred_read_replica", _NO_PREFERRED_REPLICA) != _NO_PREFERRED_REPLICA:
            must = True
        if answer.get("error_code", 0) != 0:
            # Errors are always sent; forgetting the high watermark makes the partition sent
            # again once the error is gone.
            must = True
            if update:
                self.high_watermark = -1
        diverging = answer.get("diverging_epoch")
        if diverging is not None and diverging.get("epoch", -1) != -1:
            must = True
        return must


@attrs.define(eq=False)
class FetchSession:
    id: int
    privileged: bool  # created by a follower (kcore's replicas fetch over msgpack: never)
    uses_topic_ids: bool
    creation_ms: float
    last_used_ms: float
    epoch: int
    # session key -> partition, in fetch order.
    partitions: dict[tuple[object, int], CachedPartition] = attrs.field(factory=dict, repr=False)
    # The size the cache last accounted for (-1: not in the cache).
    cached_size: int = -1

    @property
    def size(self) -> int:
        return len(self.partitions)

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: the least valuable session sorts first."""
        return (self.privileged, self.cached_size, self.id)

    def update(
        self,
        fetch_data: Mapping[TopicIdPartition, PartitionFetch],
        to_forget: Iterable[TopicIdPartition],
    ) -> tuple[list[TopicIdPartition], list[TopicIdPartition], list[TopicIdPartition]]:
        """Adds or updates the named partitions and removes the forgotten ones: (added,
        updated, removed)."""
        added, updated, removed = [], [], []
        for tp, fetch in fetch_data.items():
            cached = self.partitions.get(tp.session_key)
            if cached is None:
                self.partitions[tp.session_key] = CachedPartition(
                    tp.topic, tp.topic_id, tp.partition, fetch
                )
                added.append(tp)
            else:
                cached.request = fetch
                updated.append(tp)
        for tp in to_forget:
            if self.partitions.pop(tp.session_key, None) is not None:
                removed.append(tp)
        return added, updated, removed


@attrs.define(eq=False)
class FetchSessionCache:
    """Kafka's FetchSessionCache: at most `max_entries` sessions. A new session takes a
    free slot, else evicts a stale one (unused for `eviction_ms`), else the least valuable
    evictable one if it is worth less than the newcomer (unprivileged before privileged,
    then fewer partitions, then lower id); sessions younger than `eviction_ms` are
    evictable only by privileged newcomers, and privileged ones only once that old.
    `size`, `total_partitions` and `evictions` are what Kafka's FetchSessionCache metrics
    report (NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
    IncrementalFetchSessionEvictionsPerSec)."""

    max_entries: int
    rng: random.Random
    eviction_ms: float = EVICTION_MS
    sessions: dict[int, FetchSession] = attrs.field(factory=dict)
    total_partitions: int = 0
    evictions: int = 0
    # Told of each eviction (the broker's IncrementalFetchSessionEvictionsPerSec meter:
    # kcore.metrics.FetchSessionMetrics).
    on_eviction: Callable[[], None] = lambda: None
    # Ordered sets (dicts) of the sessions each kind of newcomer may evict.
    _evictable_by_all: dict[int, FetchSession] = attrs.field(factory=dict, init=False)
    _evictable_by_privileged: dict[int, FetchSession] = attrs.field(factory=dict, init=False)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    @property
    def size(self) -> int:
        return len(self.sessions)

    def new_session_id(self) -> int:
        """A positive id no session here has."""
        while True:
            session_id = self.rng.randrange(1, _INT32_MAX)
            if session_id not in self.sessions:
                return session_id

    def maybe_create_session(
        self,
        now_ms: float,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[tuple[object, int], CachedPartition]],
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self.try_evict(
            privileged, (privileged, size, 0), now_ms
        ):
            logger.debug("No fetch session created for privileged=%s, size=%d.", privileged, size)
            return INVALID_SESSION_ID
        session = FetchSession(
            self.new_session_id(), privileged, uses_topic_ids, now_ms, now_ms,
            next_epoch(INITIAL_EPOCH), create_partitions(),
        )  # fmt: skip
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        logger.debug("Created fetch session %s", session)
        return session.id

    def try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: float) -> bool:
        """Evicts a session to make room for a newcomer whose EvictableKey is `key`."""
        if not self.sessions:
            return False
        # The least recently used (ties: the lower id), as Kafka's lastUsed tree sorts them.
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            logger.debug("Evicting stale FetchSession %d.", stalest.id)
            self.remove(stalest.id)
            self._evicted()
            return True
        candidates = self._evictable_by_privileged if privileged else self._evictable_by_all
        if not candidates:
            return False
        cheapest = min(candidates.values(), key=lambda s: s.evictable_key)
        if key < cheapest.evictable_key:
            return False
        logger.debug("Evicting %s with %s.", cheapest.evictable_key, key)
        self.remove(cheapest.id)
        self._evicted()
        return True

    def _evicted(self) -> None:
        self.evictions += 1
        self.on_eviction()

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._evictable_by_all.pop(session_id, None)
            self._evictable_by_privileged.pop(session_id, None)
            self.total_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession, now_ms: float) -> None:
        """Marks the session used now and accounts for its current size."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self.total_partitions -= session.cached_size
        session.cached_size = session.size
        self.total_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.eviction_ms
        if not session.privileged or old:
            self._evictable_by_privileged[session.id] = session
        if old:
            self._evictable_by_all[session.id] = session


@attrs.frozen
class FetchAnswer:
    """The top of a Fetch response: its error, session id, and the partitions to send."""

    error_code: int
    session_id: int
    partitions: dict[TopicIdPartition, dict]


class SessionErrorContext:
    """A fetch whose session is unknown or out of step: nothing is fetched."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return []

    def respond(self, updates: dict[TopicIdPartition, dict], now_ms: float) -> FetchAnswer:
        return FetchAnswer(self.error_code, INVALID_SESSION_ID, {})


class SessionlessFetchContext:
    """A full fetch outside any session: everything asked is answered, no session."""

    def __init__(self, fetch_data: Mapping[TopicIdPartition, PartitionFetch]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        return list(self.fetch_data.items())

    def respond(self, updates: dict[TopicIdPartition, dict], now_ms: float) -> FetchAnswer:
        return FetchAnswer(0, INVALID_SESSION_ID, updates)


class FullFetchContext(SessionlessFetchContext):
    """A full fetch that asks for a session: answered in full, with a new session's id if
    the cache makes room for one."""

    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_data: Mapping[TopicIdPartition, PartitionFetch],
        uses_topic_ids: bool,
        privileged: bool,
    ) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged

    def respond(self, updates: dict[TopicIdPartition, dict], now_ms: float) -> FetchAnswer:
        def cached_partitions() -> dict[tuple[object, int], CachedPartition]:
            cached = {}
            for tp, answer in updates.items():
                fetch = self.fetch_data.get(tp) or PartitionFetch(-1, -1)
                cached[tp.session_key] = CachedPartition(
                    tp.topic, tp.topic_id, tp.partition, fetch,
                    high_watermark=answer.get("high_watermark", -1),
                    local_log_start_offset=answer.get("log_start_offset", -1),
                )  # fmt: skip
            return cached

        session_id = self.cache.maybe_create_session(
            now_ms, self.privileged, len(updates), self.uses_topic_ids, cached_partitions
        )
        return FetchAnswer(0, session_id, updates)


class IncrementalFetchContext:
    """A fetch in a session: fetches every partition of the session, answers the changed."""

    def __init__(
        self, session: FetchSession, request_epoch: int, topic_names: Mapping[uuid.UUID, str]
    ) -> None:
        self.session = session
        self.request_epoch = request_epoch
        self.topic_names = topic_names

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionFetch]]:
        listed = []
        for cached in self.session.partitions.values():
            if self.session.uses_topic_ids and cached.topic is None:
                # A topic id unknown when it was added may be known by now.
                cached.topic = self.topic_names.get(cached.topic_id)
            tp = TopicIdPartition(cached.topic_id, cached.topic, cached.partition)
            listed.append((tp, cached.request))
        return listed

    def respond(self, updates: dict[TopicIdPartition, dict], now_ms: float) -> FetchAnswer:
        session = self.session
        if session.epoch != next_epoch(self.request_epoch):
            # Another request of the session came in while this one was fetching.
            logger.info(
                "Incremental fetch session %d expected epoch %d, but got %d.  Possible "
                "duplicate request.", session.id, next_epoch(self.request_epoch), session.epoch,
            )  # fmt: skip
            return FetchAnswer(errors.InvalidFetchSessionEpochError.code, session.id, {})
        sent = {}
        for tp, answer in updates.items():
            cached = session.partitions.get(tp.session_key)
            if cached is None:  # forgotten by a later request meanwhile
                continue
            if cached.must_respond(answer, update=True):
                sent[tp] = answer
                if answer.get("records"):
                    # To the end: the next fetch reads the session's other partitions first.
                    session.partitions[tp.session_key] = session.partitions.pop(tp.session_key)
        logger.debug(
            "Incremental fetch context with session id %d returning %d partition(s)",
            session.id, len(sent),
        )  # fmt: skip
        return FetchAnswer(0, session.id, sent)


FetchContext = (
    SessionErrorContext | SessionlessFetchContext | FullFetchContext | IncrementalFetchContext
)


@attrs.define(eq=False)
class FetchManager:
    """Kafka's FetchManager: the context of each fetch, from its session id and epoch."""

    cache: FetchSessionCache

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        is_follower: bool,
        fetch_data: Mapping[TopicIdPartition, PartitionFetch],
        to_forget: Iterable[TopicIdPartition],
        topic_names: Mapping[uuid.UUID, str],
        now_ms: float,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if session_id != INVALID_SESSION_ID and self.cache.remove(session_id) is not None:
                logger.debug("Removed fetch session %d.", session_id)
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self.cache, fetch_data, version >= 13, is_follower)
        session = self.cache.get(session_id)
        if session is None:
            logger.debug("Session error for %d: no such session ID found.", session_id)
            return SessionErrorContext(errors.FetchSessionIdNotFoundError.code)
        if session.epoch != epoch:
            logger.debug(
                "Session error for %d: expected epoch %d, but got %d instead.",
                session_id, session.epoch, epoch,
            )  # fmt: skip
            return SessionErrorContext(errors.InvalidFetchSessionEpochError.code)
        if session.uses_topic_ids != (version >= 13):
            logger.debug(
                "Session error for %d: request version %d %s topic ids, the session %s.",
                session_id, version, "uses" if version >= 13 else "does not use",
                "does" if session.uses_topic_ids else "does not",
            )  # fmt: skip
            return SessionErrorContext(errors.FetchSessionTopicIdError.code)
        added, updated, removed = session.update(fetch_data, to_forget)
        if not session.partitions:
            logger.debug(
                "Created a new sessionless FetchContext and closing session id %d, epoch %d: "
                "after removing %d partition(s), there are no more partitions left.",
                session.id, session.epoch, len(removed),
            )  # fmt: skip
            self.cache.remove(session.id)
            return SessionlessFetchContext(fetch_data)
        self.cache.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        logger.debug(
            "Created a new incremental FetchContext for session id %d, epoch %d: added %d "
            "partition(s), updated %d partition(s), removed %d partition(s)",
            session.id, session.epoch, len(added), len(updated), len(removed),
        )  # fmt: skip
        return IncrementalFetchContext(session, epoch, topic_names)
