"""The client's view of the cluster (pure data built from MetadataResponse), and the one
async function that refreshes it.

A refresh asks one broker: the known brokers first (starting at a random one, so clients
spread their metadata load), then the bootstrap servers, which matter when every broker
the client knew has moved or died. Refreshes are spaced by `retry_backoff_ms` (Kafka's
metadata refresh backoff) so a storm of NOT_LEADER errors cannot turn into a storm of
metadata requests.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterable, Mapping, Sequence

import attrs
import trio

from kcore import errors
from kcore.client._connections import Address, Connections
from kcore.common import NO_LEADER, TopicPartition
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import MetadataRequest, MetadataResponse

__all__ = [
    "BrokerInfo",
    "Cluster",
    "MetadataManager",
    "PartitionInfo",
    "TopicMetadata",
]

_TOPIC_DENIED = errors.TopicAuthorizationFailedError.code


@attrs.frozen
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> Address:
        return (self.host, self.port)


@attrs.frozen
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@attrs.frozen
class TopicMetadata:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionInfo, ...]  # sorted by partition id

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def available_partitions(self) -> tuple[int, ...]:
        return tuple(p.partition for p in self.partitions if p.leader != NO_LEADER)


@attrs.frozen
class Cluster:
    """One snapshot of the cluster as the client knows it."""

    brokers: dict[int, BrokerInfo] = attrs.field(factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topics: dict[str, TopicMetadata] = attrs.field(factory=dict)

    @classmethod
    def from_response(cls, response: MetadataResponse) -> tuple[Cluster, dict[str, int]]:
        """The cluster the response describes, and the error code of each topic the
        response reported an error for (e.g. UNKNOWN_TOPIC_OR_PARTITION)."""
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        topics = {}
        topic_errors = {}
        for topic in response.topics:
            if topic.error_code != 0:
                topic_errors[topic.name] = topic.error_code
                continue
            partitions = tuple(
                PartitionInfo(
                    p.partition,
                    # A leader the response does not list cannot be reached: treat as none.
                    p.leader if p.leader in brokers else NO_LEADER,
                    p.leader_epoch,
                    tuple(p.replicas),
                    tuple(p.isr),
                    tuple(p.offline_replicas),
                )
                for p in sorted(topic.partitions, key=lambda p: p.partition)
            )
            topics[topic.name] = TopicMetadata(topic.name, topic.topic_id, partitions)
        cluster = cls(brokers, response.controller_id, response.cluster_id, topics)
        return cluster, topic_errors

    def merged(self, newer: Cluster, requested: Iterable[str] | None) -> Cluster:
        """`newer` (an answer about `requested` topics, or all when None), keeping what we
        knew of topics it was not asked about, and of partitions it describes with an older
        leader epoch than we know (see `_newest_partitions`)."""
        topics = {}
        if requested is not None:
            asked = set(requested)
            topics = {name: t for name, t in self.topics.items() if name not in asked}
        for name, topic in newer.topics.items():
            known = self.topics.get(name)
            topics[name] = topic if known is None else _newest_partitions(known, topic)
        return attrs.evolve(newer, topics=topics)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        topic = self.topics.get(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            return None
        info = topic.partitions[tp.partition]
        return info if info.partition == tp.partition else None

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's node id, or None when there is none (or it is not reachable)."""
        info = self.partition(tp)
        if info is None or info.leader == NO_LEADER or info.leader not in self.brokers:
            return None
        return info.leader

    def leader_epoch(self, tp: TopicPartition) -> int:
        info = self.partition(tp)
        return -1 if info is None else info.leader_epoch

    def address_of(self, node_id: int) -> Address | None:
        broker = self.brokers.get(node_id)
        return None if broker is None else broker.address

    def without_leaders_older_than(self, epochs: Mapping[TopicPartition, int]) -> Cluster:
        """This view, except that a partition whose leader epoch is older than `epochs`
        says has no leader (and that epoch): a client that has seen a newer epoch than
        its metadata names must not go to the leader the metadata names."""
        topics = dict(self.topics)
        changed = False
        for tp, epoch in epochs.items():
            info = self.partition(tp)
            if info is None or info.leader_epoch >= epoch:
                continue
            topic = topics[tp.topic]
            partitions = list(topic.partitions)
            partitions[tp.partition] = attrs.evolve(info, leader=NO_LEADER, leader_epoch=epoch)
            topics[tp.topic] = attrs.evolve(topic, partitions=tuple(partitions))
            changed = True
        return attrs.evolve(self, topics=topics) if changed else self


def _newest_partitions(known: TopicMetadata, answer: TopicMetadata) -> TopicMetadata:
    """`answer`, except that a partition it describes with an older leader epoch than
    `known` keeps what `known` says (Kafka's Metadata.updateLatestMetadata, KIP-320).

    Any broker answers a metadata request from its own cache, and the cache of a broker
    the controller cannot reach keeps the leader it last heard of: without this rule a
    client that asks such a broker goes back to the old leader, and a producer retrying
    after NOT_LEADER_OR_FOLLOWER alternates between the old and the new leader, as each
    refresh asks another broker. A recreated topic (another topic id) starts afresh."""
    if known.topic_id is not None and answer.topic_id is not None:
        if known.topic_id != answer.topic_id:
            return answer
    older = {p.partition: p for p in known.partitions}
    partitions = []
    for info in answer.partitions:
        previous = older.get(info.partition)
        # An answer without an epoch (-1) is taken as it is, as Kafka does.
        stale = previous is not None and 0 <= info.leader_epoch < previous.leader_epoch
        partitions.append(previous if stale else info)
    return attrs.evolve(answer, partitions=tuple(partitions))


class MetadataManager:
    """Holds the current `Cluster` and refreshes it over `connections`."""

    def __init__(
        self,
        connections: Connections,
        bootstrap: Sequence[Address],
        *,
        rng: random.Random,
        retry_backoff: float,
        request_timeout: float,
        logger: logging.Logger,
    ) -> None:
        self.cluster = Cluster()
        self.topic_errors: dict[str, int] = {}
        self.updated = trio.Event()  # replaced after each refresh: wait for the next one
        self._connections = connections
        self._bootstrap = tuple(bootstrap)
        self._rng = rng
        self._retry_backoff = retry_backoff
        self._request_timeout = request_timeout
        self._log = logger
        self._lock = trio.Lock()
        self._last_refresh = -math.inf
        # Leader epochs learnt elsewhere than from metadata (a committed offset's) for
        # partitions the metadata does not describe yet. Once it does, the epoch lives in
        # the view itself (a leaderless entry at that epoch, which merges keep until an
        # answer as new): Kafka's Metadata.lastSeenLeaderEpochs.
        self._epochs_awaiting_metadata: dict[TopicPartition, int] = {}

    def update_last_seen_epoch_if_newer(self, tp: TopicPartition, epoch: int) -> bool:
        """Notes that `tp` has had a leader at `epoch` (e.g. the epoch a committed offset
        was written in); True when that is newer than the metadata's, which then names no
        leader for `tp` until an answer from a broker that knows that epoch (Kafka's
        Metadata.updateLastSeenEpochIfNewer, KIP-320). Without it, a client that reads
        its metadata from a broker cut off from the controller fetches from the leader
        that broker last heard of, at an old epoch: a deposed leader whose log may be
        shorter than the committed offset, which then looks out of range and is reset."""
        if epoch < 0 or epoch <= max(
            self.cluster.leader_epoch(tp), self._epochs_awaiting_metadata.get(tp, -1)
        ):
            return False
        if self.cluster.partition(tp) is None:
            self._epochs_awaiting_metadata[tp] = epoch
        else:
            self.cluster = self.cluster.without_leaders_older_than({tp: epoch})
        return True

    def raise_if_unauthorized(self, topics: Iterable[str]) -> None:
        """`TopicAuthorizationFailedError` when the last answer about any of `topics` was
        TOPIC_AUTHORIZATION_FAILED: as Kafka's clients, a caller gives up at once rather
        than waiting for metadata that will not come."""
        denied = sorted({name for name in topics if self.topic_errors.get(name) == _TOPIC_DENIED})
        if denied:
            # Kafka's TopicAuthorizationException message, and the broker's answer.
            raise errors.TopicAuthorizationFailedError(
                f"Not authorized to access topics: [{', '.join(denied)}] "
                "(the brokers answered TOPIC_AUTHORIZATION_FAILED)"
            )

    def _candidates(self) -> list[Address]:
        known = [b.address for _, b in sorted(self.cluster.brokers.items())]
        if known:
            start = self._rng.randrange(len(known))
            known = known[start:] + known[:start]
        candidates = known + [a for a in self._bootstrap if a not in known]
        # Kafka's leastLoadedNode: brokers whose last connection attempt failed go last (a
        # dead leader would hold the refresh for its reconnect backoff), then the fewest
        # requests in flight first. A broker answers a connection's requests in order, so
        # a Metadata request behind an acks=all produce parked until the ISR shrinks waits
        # as long: after a leader died, that was the session timeout, and the refresh is
        # what finds the new leader. (A stable sort: the random rotation breaks ties.)
        connections = self._connections
        return sorted(
            candidates,
            key=lambda address: (
                connections.backing_off_until(address) != -math.inf,
                connections.in_flight(address),
            ),
        )

    async def refresh(self, topics: Iterable[str] | None) -> Cluster:
        """Asks a broker about `topics` (None: every topic), merges the answer and returns
        the new view; `NetworkError` when no broker answers. Concurrent refreshes run one
        at a time, each at least `retry_backoff` after the previous one."""
        requested = None if topics is None else tuple(sorted(set(topics)))
        async with self._lock:
            await trio.sleep_until(self._last_refresh + self._retry_backoff)
            try:
                response = await self._ask_any(requested)
            finally:
                self._last_refresh = trio.current_time()
            newer, topic_errors = Cluster.from_response(response)
            cluster = self.cluster.merged(newer, requested)
            described = {
                tp: epoch
                for tp, epoch in self._epochs_awaiting_metadata.items()
                if cluster.partition(tp) is not None
            }
            self.cluster = cluster.without_leaders_older_than(described)
            for tp in described:
                del self._epochs_awaiting_metadata[tp]
            if requested is None:
                self.topic_errors = topic_errors
            else:
                for name in requested:
                    self.topic_errors.pop(name, None)
                self.topic_errors.update(topic_errors)
            updated, self.updated = self.updated, trio.Event()
            updated.set()
            return self.cluster

    async def _ask_any(self, topics: tuple[str, ...] | None) -> MetadataResponse:
        failures = []
        for address in self._candidates():
            try:
                response = await self._connections.request(
                    address,
                    ApiKey.METADATA,
                    MetadataRequest(topics),
                    MetadataResponse,
                    timeout=self._request_timeout,
                )
            except errors.KafkaError as exc:
                self._log.debug("metadata request to %s:%d failed: %s", *address, exc)
                failures.append(f"{address[0]}:{address[1]}: {exc}")
                continue
            if not response.brokers:
                # A broker whose cache the controller has not filled yet (just started, or
                # cut off from the controller) knows no broker and no topic: taking its
                # answer would forget every leader we know. Kafka's NetworkClient ignores
                # such an answer too ("Ignoring empty metadata response").
                self._log.debug("metadata answer from %s:%d names no broker: ignored", *address)
                failures.append(f"{address[0]}:{address[1]}: its answer named no broker")
                continue
            return response
        raise errors.NetworkError(
            "no broker answered a metadata request (" + "; ".join(failures) + ")"
        )
