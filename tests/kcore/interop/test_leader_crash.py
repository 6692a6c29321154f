"""A leader crash in the middle of producing with confluent-kafka (idempotent, acks=all,
min.insync.replicas=2): the producer carries on to the new leader, and every acknowledged
record is read back exactly once, by kafka-python (a second, independent client)."""

from __future__ import annotations

import pytest

from ._cluster import wait_for

TOPIC = "crash-mid-produce"
RECORDS = 2000


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory, require_external):
    """This module's own cluster: the test kills one of its brokers."""
    from ._cluster import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("crash-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


def _leader(admin, topic: str) -> int | None:
    """Partition 0's leader as the broker asked sees it; None while that broker's metadata
    does not show the partition yet (a new topic reaches each broker's cache in turn)."""
    partition = admin.list_topics(topic, timeout=30).topics[topic].partitions.get(0)
    return None if partition is None else partition.leader


def test_acknowledged_records_survive_a_leader_crash(kafka_cluster, require_client):
    require_client("confluent_kafka")
    require_client("kafka")
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    new_topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new_topic])[TOPIC].result(timeout=60)
    leader = wait_for(lambda: _leader(admin, TOPIC), f"a leader of {TOPIC}")
    producer = Producer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 120000,
        }
    )
    acknowledged: list[tuple[int, bytes]] = []
    failed: list = []

    def on_delivery(error, message):
        if error is not None:
            failed.append(error)
        else:
            acknowledged.append((message.offset(), message.value()))

    for i in range(RECORDS):
        producer.produce(TOPIC, value=f"r{i}".encode(), partition=0, on_delivery=on_delivery)
        producer.poll(0)
        if i == RECORDS // 4:
            # Some records acknowledged by the first leader, then it dies mid-stream.
            def first_acknowledged() -> bool:
                producer.poll(0.1)
                return len(acknowledged) > 100

            wait_for(first_acknowledged, "the first acknowledgements")
            kafka_cluster.brokers[leader].kill()
    assert producer.flush(120) == 0
    assert failed == []
    assert len(acknowledged) == RECORDS
    assert _leader(admin, TOPIC) != leader

    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=",".join(
            b.address for b in kafka_cluster.brokers.values() if b.broker_id != leader
        ),
        enable_auto_commit=False,
    )
    try:
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning()
        read: list[tuple[int, bytes]] = []

        def read_some():
            for records in consumer.poll(timeout_ms=500).values():
                read.extend((r.offset, r.value) for r in records)
            return len(read) >= RECORDS

        wait_for(read_some, f"{RECORDS} records after the crash")
    finally:
        consumer.close()
    # Exactly once: no record lost, none duplicated by the producer's retries.
    assert sorted(read) == sorted(acknowledged)
    assert sorted(value for _, value in read) == sorted(f"r{i}".encode() for i in range(RECORDS))


def test_leadership_returns_to_the_preferred_replica_on_request(kafka_cluster, require_client):
    """confluent-kafka's AdminClient.elect_leaders(PREFERRED) after a bounce: the restarted
    preferred replica leads again (auto rebalance would, but only every 300 s)."""
    require_client("confluent_kafka")
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    for broker in kafka_cluster.brokers.values():  # an earlier test may have killed one
        if broker.process is None or broker.process.poll() is not None:
            broker.start()
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    topic = "preferred-back"
    new_topic = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])
    admin.create_topics([new_topic])[topic].result(60)
    wait_for(lambda: _leader(admin, topic) == 1, "broker 1 to lead")
    kafka_cluster.brokers[1].kill()
    wait_for(lambda: _leader(admin, topic) in (2, 3), "leadership to leave broker 1")
    kafka_cluster.brokers[1].start()
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})

    def back_in_sync() -> bool:
        partition = admin.list_topics(topic, timeout=30).topics[topic].partitions[0]
        return 1 in partition.isrs

    wait_for(back_in_sync, "broker 1 back in the ISR")
    assert _leader(admin, topic) != 1
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    results = future.result(timeout=60)
    assert results[TopicPartition(topic, 0)] is None  # no error
    wait_for(lambda: _leader(admin, topic) == 1, "the preferred replica to lead again")
    # Asked again: nothing to do, and the client hears so.
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(60)
    assert "ELECTION_NOT_NEEDED" in str(again[TopicPartition(topic, 0)])
