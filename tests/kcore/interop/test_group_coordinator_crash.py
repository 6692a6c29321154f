"""The broker coordinating a consumer group crashes: the group moves to the new leader of its
`__consumer_offsets` partition, which loads it from its replica of the log, and a member that
joins there starts from the offsets committed before the crash."""

from __future__ import annotations

import uuid

import pytest

from ._cluster import wait_for
from .test_consumer_groups import _consumer, _produce
from .test_kafka_clients import _create_topic


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory, require_external):
    """This module's own cluster: the test kills one of its brokers."""
    from ._cluster import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("coordinator-crash-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


def _read(consumer, count: int, what: str) -> list[bytes]:
    values: list[bytes] = []

    def enough() -> bool:
        for message in consumer.consume(num_messages=100, timeout=0.2):
            assert message.error() is None, message.error()
            values.append(message.value())
        return len(values) >= count

    wait_for(enough, what, timeout=90)
    return values


def test_committed_offsets_survive_the_coordinators_crash(kafka_cluster, require_client):
    require_client("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    topic, group = f"crash-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic, partitions=4)
    before = [f"before-{i}".encode() for i in range(20)]
    _produce(kafka_cluster, topic, before)
    first = _consumer(kafka_cluster, group)
    try:
        first.subscribe([topic])
        assert sorted(_read(first, len(before), "the first member's records")) == sorted(before)
        first.commit(asynchronous=False)
    finally:
        first.close()

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    coordinator = admin.describe_consumer_groups([group])[group].result(timeout=30).coordinator
    kafka_cluster.brokers[coordinator.id].kill()

    after = [f"after-{i}".encode() for i in range(12)]
    _produce(kafka_cluster, topic, after)
    second = _consumer(kafka_cluster, group)
    try:
        second.subscribe([topic])
        got = _read(second, len(after), "a member on the new coordinator")
        assert sorted(got) == sorted(after)  # from the committed offsets, nothing again
    finally:
        second.close()
    moved = admin.describe_consumer_groups([group])[group].result(timeout=30).coordinator
    assert moved.id != coordinator.id
