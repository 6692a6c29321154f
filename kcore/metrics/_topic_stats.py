"""Kafka's BrokerTopicMetrics (`kafka.server:type=BrokerTopicMetrics`), per topic and for all
topics: what the replica manager appended for producers and read for fetchers. Counters
only (Kafka's meters; Prometheus takes the rates), bumped where the replica manager
already walks a request's partitions.

As in Kafka (ReplicaManager.appendToLocalLog / readFromLocalLog), a partition's produce or
fetch counts as failed only for errors a healthy cluster does not answer every day: an
unknown partition, a moved leader, a too-large batch, an offset out of range and their
kin are answers, not failures.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from actors import Counter, MetricsRegistry, metric_name
from kcore.metrics._requests import note_error_codes, note_fetch_origin

_GROUP = "kafka.server"
_TYPE = "BrokerTopicMetrics"

# Kafka's "known exceptions" that do not mark FailedProduceRequestsPerSec: CORRUPT_MESSAGE,
# UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE,
# RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR.
_EXPECTED_PRODUCE_ERRORS = frozenset({2, 3, 6, 10, 18, 56})
# ...and FailedFetchRequestsPerSec: OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION,
# NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH,
# UNKNOWN_LEADER_EPOCH, INCONSISTENT_TOPIC_ID.
_EXPECTED_FETCH_ERRORS = frozenset({1, 3, 6, 9, 56, 74, 75, 110})
# The batch was refused for its size: its bytes count as rejected (BytesRejectedPerSec).
_TOO_LARGE = frozenset({10, 18})

# Kafka's per-topic meters (created together, so a dashboard sees zeros, not gaps).
TOPIC_METERS = (
    "MessagesInPerSec", "BytesInPerSec", "BytesOutPerSec", "BytesRejectedPerSec",
    "TotalProduceRequestsPerSec", "TotalFetchRequestsPerSec",
    "FailedProduceRequestsPerSec", "FailedFetchRequestsPerSec",
)  # fmt: skip
# Only for all topics together, as in Kafka.
ALL_TOPICS_METERS = ("ReplicationBytesOutPerSec",)


@attrs.define
class _Meters:
    messages_in: Counter
    bytes_in: Counter
    bytes_out: Counter
    bytes_rejected: Counter
    total_produce: Counter
    total_fetch: Counter
    failed_produce: Counter
    failed_fetch: Counter


@attrs.define(eq=False)
class BrokerTopicStats:
    registry: MetricsRegistry
    _topics: dict[str, _Meters] = attrs.field(factory=dict, init=False)
    _all: _Meters = attrs.field(init=False)
    _replication_bytes_out: Counter = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._all = self._meters_named({})
        self._replication_bytes_out = self.registry.counter(
            metric_name(_GROUP, _TYPE, "ReplicationBytesOutPerSec")
        )

    def _meters_named(self, tags: dict[str, str]) -> _Meters:
        return _Meters(
            *(self.registry.counter(metric_name(_GROUP, _TYPE, n, **tags)) for n in TOPIC_METERS)
        )

    def _meters(self, topic: str) -> _Meters:
        meters = self._topics.get(topic)
        if meters is None:
            meters = self._topics[topic] = self._meters_named({"topic": topic})
        return meters

    def record_append(
        self, topic: str, error_code: int, size_bytes: int, messages: int = 0
    ) -> None:
        """One partition of a produce: appended (`messages` records), or refused."""
        for meters in (self._meters(topic), self._all):
            meters.total_produce.inc()
            if error_code == 0:
                meters.messages_in.inc(messages)
                meters.bytes_in.inc(size_bytes)
            else:
                if error_code not in _EXPECTED_PRODUCE_ERRORS:
                    meters.failed_produce.inc()
                if error_code in _TOO_LARGE:
                    meters.bytes_rejected.inc(size_bytes)

    def record_produce_response(self, error_codes: Iterable[int]) -> None:
        """The produce's answer, partition by partition (for its RequestMetrics)."""
        note_error_codes(error_codes)

    def record_fetch(self, from_follower: bool, answers: Iterable[object]) -> None:
        """A fetch's answer (`FetchPartitionResponse`s): one fetch per partition, its bytes
        out (a follower's count as replication)."""
        note_fetch_origin(from_follower)
        codes = []
        for answer in answers:
            code: int = answer.error_code  # type: ignore[attr-defined]
            size = len(answer.records)  # type: ignore[attr-defined]
            codes.append(code)
            for meters in (self._meters(answer.topic), self._all):  # type: ignore[attr-defined]
                meters.total_fetch.inc()
                if code and code not in _EXPECTED_FETCH_ERRORS:
                    meters.failed_fetch.inc()
                if not from_follower:
                    meters.bytes_out.inc(size)
            if from_follower:
                self._replication_bytes_out.inc(size)
        note_error_codes(codes)

    def remove_topic(self, topic: str) -> None:
        """The topic's partitions are all gone from this broker: its meters go too."""
        if self._topics.pop(topic, None) is not None:
            for name in TOPIC_METERS:
                self.registry.remove(metric_name(_GROUP, _TYPE, name, topic=topic))
