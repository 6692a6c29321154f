"""Kafka's FetchSessionCache metrics (KIP-227 fetch sessions): how many sessions the broker
holds, the partitions they cache, and evictions, under the names the JMX exporter gives
them. A real client (kafka-python, which fetches in incremental sessions; librdkafka 2.x
sends sessionless fetches) against a broker whose /metrics is scraped over HTTP."""

from __future__ import annotations

import importlib.util
import random
import time
import urllib.request

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

import kcore
from actors import MetricsRegistry
from kcore.metrics import FetchSessionMetrics, exposition, prometheus_registry
from kcore.server.fetch_session import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    ZERO_UUID,
    FetchManager,
    FetchSessionCache,
    PartitionFetch,
    TopicIdPartition,
)

pytestmark = pytest.mark.timeout(120)

SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
PARTITIONS_CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"


def _samples(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def _scrape(address: tuple[str, int]) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=10) as r:
        return _samples(r.read().decode())


def _full_fetch(manager: FetchManager, topic: str, now_ms: float) -> int:
    """A consumer's first fetch of one partition, asking for a session: the session's id."""
    tp = TopicIdPartition(ZERO_UUID, topic, 0)
    context = manager.new_context(
        12, INVALID_SESSION_ID, INITIAL_EPOCH, False, {tp: PartitionFetch(0, 1024)}, [], {},
        now_ms,
    )  # fmt: skip
    return context.respond({tp: {"high_watermark": 0}}, now_ms).session_id


def test_sessions_cached_partitions_and_evictions_are_exported():
    registry = MetricsRegistry()
    metrics = FetchSessionMetrics(registry)
    # Published before any cache exists, as Kafka's are from the broker's start.
    assert _samples(exposition(prometheus_registry(registry)).decode()) == {
        SESSIONS: 0, PARTITIONS_CACHED: 0, EVICTIONS: 0,
    }  # fmt: skip
    cache = FetchSessionCache(1, random.Random(0), eviction_ms=1000)
    metrics.attach(cache)
    manager = FetchManager(cache)
    assert _full_fetch(manager, "a", now_ms=0) != INVALID_SESSION_ID
    # The only slot is taken by a session used just now: no room, nothing evicted.
    assert _full_fetch(manager, "b", now_ms=500) == INVALID_SESSION_ID
    # Unused for longer than eviction_ms: the stale session makes room.
    assert _full_fetch(manager, "c", now_ms=2000) != INVALID_SESSION_ID
    assert _samples(exposition(prometheus_registry(registry)).decode()) == {
        SESSIONS: 1, PARTITIONS_CACHED: 1, EVICTIONS: 1,
    }  # fmt: skip


def _consume(bootstrap: str, topic: str, count: int) -> int:
    """Reads `count` records of partitions 0 and 1 with kafka-python, then closes."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        read = 0
        deadline = time.monotonic() + 60
        while read < count and time.monotonic() < deadline:
            read += sum(len(records) for records in consumer.poll(timeout_ms=200).values())
        return read
    finally:
        consumer.close()


async def test_a_consumer_in_a_fetch_session_shows_on_the_brokers_metrics(require_external):
    require_external(
        "kafka-python",
        importlib.util.find_spec("kafka") is not None,
        "pip install -e '.[kafka-clients]' (./dev test does)",
    )
    config = {"http.listener": "http://127.0.0.1:0"}
    async with kcore.open_cluster(1, broker_config=config) as cluster:
        (address,) = cluster.http_addresses().values()
        before = await trio.to_thread.run_sync(_scrape, address)
        assert (before[SESSIONS], before[PARTITIONS_CACHED], before[EVICTIONS]) == (0, 0, 0)
        async with cluster.admin() as admin:
            await admin.create_topic("sessions", partitions=2, replication_factor=1)
        async with cluster.producer(acks="all") as producer:
            for n in range(10):
                await producer.send_and_wait("sessions", b"r-%d" % n, partition=n % 2)
        read = await trio.to_thread.run_sync(_consume, cluster.bootstrap_servers, "sessions", 10)
        assert read == 10
        after = await trio.to_thread.run_sync(_scrape, address)
    # One session, holding the consumer's two partitions; nothing needed evicting.
    assert (after[SESSIONS], after[PARTITIONS_CACHED], after[EVICTIONS]) == (1, 2, 0)
