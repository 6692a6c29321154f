"""Fetches as real clients send them: kafka-python through an incremental fetch session
(KIP-227, seen in the broker's fetch-session log), librdkafka with topic ids (Fetch v13+,
seen in its protocol debug log). An embedded one-broker cluster on TCP in this process, so
the broker's log records can be read; the clients run in threads."""

from __future__ import annotations

import logging
import re
import time

import pytest
import trio

from kcore.testing import open_cluster

pytestmark = pytest.mark.timeout(120)


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def fetch_session_log():
    logger = logging.getLogger("kcore.server.fetch_session")
    collected, level = Collected(), logger.level
    logger.addHandler(collected)
    logger.setLevel(logging.DEBUG)
    try:
        yield collected.messages
    finally:
        logger.removeHandler(collected)
        logger.setLevel(level)


async def _cluster_with_records(tmp_path, topic: str, count: int):
    cluster_cm = open_cluster(brokers=1, network="tcp", data_dir=tmp_path)
    cluster = await cluster_cm.__aenter__()
    try:
        await cluster.wait_for_controller()
        await cluster.admin().create_topic(topic, partitions=2, replication_factor=1)
        await _produce(cluster, topic, range(count))
    except BaseException:
        await cluster_cm.__aexit__(None, None, None)
        raise
    return cluster_cm, cluster


async def _produce(cluster, topic: str, numbers) -> None:
    async with cluster.producer(acks="all") as producer:
        for i in numbers:
            await producer.send_and_wait(topic, f"r-{i}".encode(), partition=i % 2)


def _read(poll, values: list[bytes], until: int) -> None:
    deadline = time.monotonic() + 60
    while len(values) < until:
        assert time.monotonic() < deadline, f"read {len(values)} of {until} records"
        poll(values)


async def test_kafka_python_consumes_through_an_incremental_fetch_session(
    tmp_path, require_client, fetch_session_log
):
    require_client("kafka")
    from kafka import KafkaConsumer, TopicPartition

    cluster_cm, cluster = await _cluster_with_records(tmp_path, "sessions", 10)
    try:
        # Never on Trio's thread: kafka-python blocks while it bootstraps.
        consumer = await trio.to_thread.run_sync(
            lambda: KafkaConsumer(
                bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                fetch_max_wait_ms=100,
            )
        )  # fmt: skip
        values: list[bytes] = []

        def poll(values: list[bytes]) -> None:
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)

        try:
            consumer.assign([TopicPartition("sessions", 0), TopicPartition("sessions", 1)])
            await trio.to_thread.run_sync(consumer.seek_to_beginning)
            await trio.to_thread.run_sync(_read, poll, values, 10)
            # Then new records in one partition at a time: an incremental response carries
            # that partition only.
            await _produce(cluster, "sessions", range(10, 20, 2))
            await trio.to_thread.run_sync(_read, poll, values, 15)
            await _produce(cluster, "sessions", range(11, 20, 2))
            await trio.to_thread.run_sync(_read, poll, values, 20)
        finally:
            await trio.to_thread.run_sync(consumer.close)
    finally:
        await cluster_cm.__aexit__(None, None, None)
    # Every record once, each partition in order.
    assert sorted(values) == sorted(f"r-{i}".encode() for i in range(20))
    for parity in (0, 1):
        mine = [int(v[2:]) for v in values if int(v[2:]) % 2 == parity]
        assert mine == sorted(mine)
    # The broker handed out a session and kafka-python went on in it incrementally.
    created = [m for m in fetch_session_log if m.startswith("Created fetch session")]
    assert created
    incremental = [
        int(found.group(1))
        for m in fetch_session_log
        if (found := re.match(r"Created a new incremental FetchContext for session id (\d+)", m))
    ]
    assert len(incremental) >= 2 and set(incremental) <= {
        int(re.search(r"id=(\d+)", m).group(1))  # type: ignore[union-attr]
        for m in created
    }
    assert any(
        re.match(r"Incremental fetch context with session id \d+ returning 1 partition", m)
        for m in fetch_session_log
    )


async def test_librdkafka_fetches_by_topic_id(tmp_path, require_client):
    require_client("confluent_kafka")
    from confluent_kafka import Consumer, TopicPartition

    cluster_cm, cluster = await _cluster_with_records(tmp_path, "by-id", 10)
    protocol_log = Collected()
    client_logger = logging.getLogger("test.librdkafka")
    client_logger.addHandler(protocol_log)
    client_logger.setLevel(logging.DEBUG)
    try:
        consumer = Consumer({  # connects in its own threads
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": "by-id",
            "enable.auto.commit": False, "debug": "protocol", "logger": client_logger,
        })  # fmt: skip
        values: list[bytes] = []

        def poll(values: list[bytes]) -> None:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())

        try:
            consumer.assign([TopicPartition("by-id", 0, 0), TopicPartition("by-id", 1, 0)])
            await trio.to_thread.run_sync(_read, poll, values, 10)
        finally:
            await trio.to_thread.run_sync(consumer.close)
    finally:
        client_logger.removeHandler(protocol_log)
        await cluster_cm.__aexit__(None, None, None)
    assert sorted(values) == sorted(f"r-{i}".encode() for i in range(10))
    versions = {
        int(found.group(1))
        for m in protocol_log.messages
        if (found := re.search(r"Sent FetchRequest \(v(\d+)", m))
    }
    assert versions and min(versions) >= 13, versions
