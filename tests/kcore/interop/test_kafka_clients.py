"""Kafka clients nobody here wrote, against `kcore broker` processes through Kafka's own
protocol: metadata, topic admin, produce (idempotent, acks=all, every compression codec) and
consume by assignment, each record read back as it was written."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import uuid

import pytest

from ._cluster import wait_for, wait_until_every_broker_knows


def _new_topic() -> str:
    return f"interop-{uuid.uuid4().hex[:8]}"


def _create_topic(cluster, name: str, partitions: int = 3, replication_factor: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor)])
    futures[name].result(timeout=60)
    wait_until_every_broker_knows(cluster, name, partitions)


def _consume_all(cluster, topic: str, partitions: int, expected: int) -> list:
    """Every record of `topic`, read by assignment from offset 0 with confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "unused",  # librdkafka requires one; assign() never joins a group
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list = []

        def read_some():
            # Everything that arrived, not one record per call: wait_for pauses between calls.
            for message in consumer.consume(num_messages=expected, timeout=0.5):
                assert message.error() is None, message.error()
                records.append(message)
            return len(records) >= expected

        wait_for(read_some, f"{expected} records of {topic}")
        return records
    finally:
        consumer.close()


def test_confluent_kafka_sees_the_cluster_and_manages_topics(kafka_cluster, require_client):
    require_client("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=4, replication_factor=2)
    metadata = admin.list_topics(topic, timeout=30)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert {str(b) for b in metadata.brokers.values()} == {
        f"{address}/{broker_id}"
        for broker_id, address in ((b.broker_id, b.address) for b in kafka_cluster.brokers.values())
    }
    assert metadata.controller_id in (1, 2, 3)
    partitions = metadata.topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2, 3]
    for partition in partitions.values():
        assert len(partition.replicas) == 2
        assert partition.leader in partition.replicas
        assert sorted(partition.isrs) == sorted(partition.replicas)
    admin.delete_topics([topic])[topic].result(timeout=60)
    wait_for(lambda: topic not in admin.list_topics(timeout=30).topics, f"{topic} to be deleted")


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_idempotent_records_read_back_exactly(
    kafka_cluster, require_client, compression
):
    require_client("confluent_kafka")
    from confluent_kafka import Producer

    topic = _new_topic()
    _create_topic(kafka_cluster, topic)
    producer = Producer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": compression,
            "linger.ms": 5,
        }
    )
    acknowledged = []

    def on_delivery(error, message):
        assert error is None, error
        acknowledged.append((message.partition(), message.offset(), message.value()))

    for i in range(300):
        producer.produce(
            topic,
            key=f"k{i % 7}".encode(),
            value=f"value-{i}".encode(),
            headers=[("n", str(i).encode()), ("empty", None)],
            on_delivery=on_delivery,
        )
    assert producer.flush(60) == 0
    assert len(acknowledged) == 300
    records = _consume_all(kafka_cluster, topic, 3, 300)
    assert sorted((m.partition(), m.offset(), m.value()) for m in records) == sorted(acknowledged)
    first = min(records, key=lambda m: int(m.value().split(b"-")[1]))
    assert first.key() == b"k0"
    assert first.headers() == [("n", b"0"), ("empty", None)]


def test_kcat_lists_produces_and_consumes(kafka_cluster, require_client, kcat):
    require_client("confluent_kafka")
    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=1)
    bootstrap = kafka_cluster.bootstrap_servers
    listing = subprocess.run(
        [kcat, "-b", bootstrap, "-L", "-J", "-t", topic],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    metadata = json.loads(listing.stdout)
    assert sorted(b["id"] for b in metadata["brokers"]) == [1, 2, 3]
    (described,) = metadata["topics"]
    assert described["topic"] == topic and len(described["partitions"]) == 1
    lines = "".join(f"line {i}\n" for i in range(50))
    subprocess.run(
        [kcat, "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-X", "acks=all"],
        input=lines.encode(), check=True, timeout=60,
    )  # fmt: skip
    consumed = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%o %s\n"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    assert consumed.stdout.decode() == "".join(f"{i} line {i}\n" for i in range(50))


def test_kafka_python_produces_and_consumes_by_assignment(kafka_cluster, require_client):
    require_client("kafka")
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = _new_topic()
    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])
    finally:
        admin.close()
    wait_until_every_broker_knows(kafka_cluster, topic, 2)
    producer = KafkaProducer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all", compression_type="gzip"
    )
    futures = [producer.send(topic, value=f"kp-{i}".encode(), partition=i % 2) for i in range(40)]
    producer.flush(60)
    offsets = sorted((f.get(30).partition, f.get(30).offset) for f in futures)
    producer.close()
    assert offsets == sorted([(0, i) for i in range(20)] + [(1, i) for i in range(20)])
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, enable_auto_commit=False
    )
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        values: list[bytes] = []

        def read_some():
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            return len(values) >= 40

        wait_for(read_some, "40 records through kafka-python")
        assert sorted(values) == sorted(f"kp-{i}".encode() for i in range(40))
    finally:
        consumer.close()


def test_aiokafka_produces_and_consumes_by_assignment(kafka_cluster, require_client):
    require_client("aiokafka")
    require_client("confluent_kafka")
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=1)
    bootstrap = kafka_cluster.bootstrap_servers

    async def round_trip() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, compression_type="lz4"
        )
        await producer.start()
        try:
            for i in range(30):
                await producer.send_and_wait(topic, f"aio-{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            values: list[bytes] = []
            async with asyncio.timeout(60):
                while len(values) < 30:
                    batches = await consumer.getmany(timeout_ms=500)
                    values.extend(r.value for rs in batches.values() for r in rs)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(round_trip()) == [f"aio-{i}".encode() for i in range(30)]


def _kafka_request(api_key: int, api_version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"raw-socket"
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id))
    frame = header + client_id + body
    return struct.pack(">i", len(frame)) + frame


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            assert chunk, "the broker closed the connection instead of answering"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_an_unsupported_request_is_answered_not_dropped(kafka_cluster):
    host, port = kafka_cluster.brokers[1].address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        # ApiVersions v99: answered at v0 with UNSUPPORTED_VERSION and the versions it has.
        sock.sendall(_kafka_request(18, 99, 1, b""))
        response = _read_frame(sock)
        correlation_id, error_code = struct.unpack_from(">ih", response)
        assert (correlation_id, error_code) == (1, 35)
        # Produce at a version past any schema (a future client): UNSUPPORTED_VERSION, and
        # the connection still serves the next request.
        sock.sendall(_kafka_request(0, 1000, 2, b""))
        correlation_id, error_code = struct.unpack_from(">ih", _read_frame(sock))
        assert (correlation_id, error_code) == (2, 35)
        sock.sendall(_kafka_request(18, 0, 3, b""))
        correlation_id, error_code = struct.unpack_from(">ih", _read_frame(sock))
        assert (correlation_id, error_code) == (3, 0)


def test_confluent_kafka_describes_topic_and_broker_configs(kafka_cluster, require_client):
    require_client("confluent_kafka")
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = _new_topic()
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000"})])
    created[topic].result(timeout=60)
    # Any broker may answer; one that has not heard of the topic yet says it does not exist.
    wait_until_every_broker_knows(kafka_cluster, topic, 1)
    described = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic), ConfigResource("broker", "2")]
    )
    configs = {resource.name: future.result(timeout=60) for resource, future in described.items()}
    retention = configs[topic]["retention.ms"]
    assert retention.value == "3600000" and not retention.is_default
    assert retention.source == 1  # DYNAMIC_TOPIC_CONFIG: the topic's own override
    assert configs[topic]["min.insync.replicas"].value == "1"
    assert configs["2"]["broker.id"].value == "2" and configs["2"]["broker.id"].is_read_only


def test_confluent_kafka_adds_partitions_that_take_records(kafka_cluster, require_client):
    require_client("confluent_kafka")
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=1, replication_factor=2)
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=60)
    wait_until_every_broker_knows(kafka_cluster, topic, 3)
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2]
    assert all(len(p.replicas) == 2 and p.leader in p.replicas for p in partitions.values())
    fewer = admin.create_partitions([NewPartitions(topic, 2)])[topic]
    with pytest.raises(Exception, match=r"higher than the requested"):
        fewer.result(timeout=60)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    delivered = []

    def on_delivery(error, message):
        delivered.append((error, message.partition()))

    producer.produce(topic, b"to the new partition", partition=2, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert delivered == [(None, 2)]


def test_confluent_kafka_deletes_records_on_every_replica(kafka_cluster, require_client):
    require_client("confluent_kafka")
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    (future,) = admin.delete_records([TopicPartition(topic, 0, 4)]).values()
    # Answered once every replica's log starts at 4: the low watermark.
    assert future.result(timeout=60).low_watermark == 4
    consumer = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "unused",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        assert (low, high) == (4, 10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        read: list = []

        def read_some():
            read.extend(m.offset() for m in consumer.consume(num_messages=10, timeout=0.5))
            return len(read) >= 6

        wait_for(read_some, "the records left after the deletion")
        assert read == [4, 5, 6, 7, 8, 9]
    finally:
        consumer.close()


def test_confluent_kafka_alters_topic_configs_that_brokers_then_enforce(
    kafka_cluster, require_client
):
    require_client("confluent_kafka")
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=1, replication_factor=3)
    producer = Producer(
        # No retries: the broker's NOT_ENOUGH_REPLICAS reaches the callback as it is.
        {"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all", "retries": 0}
    )  # fmt: skip

    def produce_one() -> str:
        outcome = []

        def on_delivery(error, _message):
            outcome.append("ok" if error is None else str(error))

        producer.produce(topic, b"x", on_delivery=on_delivery)
        producer.flush(10)
        return outcome[0]

    def alter(op, value=None):
        entry = ConfigEntry("min.insync.replicas", value, incremental_operation=op)
        resource = ConfigResource("topic", topic, incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=60)

    assert produce_one() == "ok"
    # More in-sync replicas than the topic has: acks=all is refused once brokers reload.
    alter(AlterConfigOpType.SET, "4")
    wait_for(lambda: "NOT_ENOUGH_REPLICAS" in produce_one(), "min.insync.replicas=4 to apply")
    described = admin.describe_configs([ConfigResource("topic", topic)])
    (config,) = [future.result(timeout=60) for future in described.values()]
    assert config["min.insync.replicas"].value == "4"
    alter(AlterConfigOpType.DELETE)
    wait_for(lambda: produce_one() == "ok", "the default min.insync.replicas to apply again")
    bad = ConfigResource(
        "topic", topic, incremental_configs=[ConfigEntry("no.such.config", "1",
                                                         incremental_operation=AlterConfigOpType.SET)]
    )  # fmt: skip
    with pytest.raises(Exception, match=r"no\.such\.config"):
        for future in admin.incremental_alter_configs([bad]).values():
            future.result(timeout=60)


def test_a_producer_creates_its_topic_on_first_use(kafka_cluster, require_client, kcat):
    """auto.create.topics.enable (Kafka's default): kcat produces to a topic nobody created;
    the broker creates it with num.partitions and default.replication.factor."""
    require_client("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    topic = _new_topic()
    bootstrap = kafka_cluster.bootstrap_servers
    subprocess.run(
        [kcat, "-b", bootstrap, "-P", "-t", topic, "-X", "acks=all"],
        input=b"first\nsecond\n", check=True, timeout=60,
    )  # fmt: skip
    consumed = subprocess.run(
        [kcat, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    assert consumed.stdout == b"first\nsecond\n"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    assert sorted(partitions) == [0] and len(partitions[0].replicas) == 1


def test_offsets_for_times_find_records_by_timestamp(kafka_cluster, require_client):
    """ListOffsets by timestamp (KIP-79): confluent-kafka's offsets_for_times."""
    require_client("confluent_kafka")
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = _new_topic()
    _create_topic(kafka_cluster, topic, partitions=1, replication_factor=1)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    for i, stamp in enumerate([1_000, 2_000, 3_000, 4_000]):
        producer.produce(topic, f"r{i}".encode(), partition=0, timestamp=stamp)
        producer.flush(30)  # one batch per record: the lookup crosses batches
    consumer = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "unused",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        found = [
            consumer.offsets_for_times([TopicPartition(topic, 0, stamp)], timeout=30)[0].offset
            for stamp in (1_500, 3_000, 9_000)
        ]
        assert found == [1, 2, -1]  # -1: no record that late (END)
    finally:
        consumer.close()
