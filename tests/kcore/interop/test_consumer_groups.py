"""Consumer groups as Kafka clients use them: librdkafka's consumer (confluent-kafka) joins a
group on kcore's brokers, shares the partitions with the group's other members, commits, and
a member that comes later starts where the group left off."""

from __future__ import annotations

import uuid

from ._cluster import wait_for
from .test_kafka_clients import _create_topic


def _consumer(cluster, group: str, **settings):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            **settings,
        }
    )


def _produce(cluster, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for index, value in enumerate(values):
        producer.produce(topic, value, partition=index % 4)
    assert producer.flush(60) == 0


def test_a_group_shares_partitions_and_resumes_from_its_commits(kafka_cluster, require_client):
    require_client("confluent_kafka")
    topic, group = f"groups-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic, partitions=4)
    members = [_consumer(kafka_cluster, group), _consumer(kafka_cluster, group)]
    read: dict[int, list] = {0: [], 1: []}

    def consume_each() -> None:
        for index, member in enumerate(members):
            for message in member.consume(num_messages=100, timeout=0.2):
                assert message.error() is None, message.error()
                read[index].append(message)

    try:
        for member in members:
            member.subscribe([topic])

        # The records come once the two members share the partitions: a member that joins
        # first may hold every partition for a generation, and what it read of a partition
        # that then moves, uncommitted, is read again by the other (as in Kafka).
        def both_assigned() -> bool:
            consume_each()
            assigned = [{tp.partition for tp in member.assignment()} for member in members]
            return all(assigned) and not (assigned[0] & assigned[1])

        wait_for(both_assigned, "two members to split the topic")
        first = [f"first-{i}".encode() for i in range(40)]
        _produce(kafka_cluster, topic, first)

        def everything_read() -> bool:
            consume_each()
            return sum(len(messages) for messages in read.values()) >= len(first)

        wait_for(everything_read, "the two members to read the topic")
        assignments = [{tp.partition for tp in member.assignment()} for member in members]
        assert assignments[0] | assignments[1] == {0, 1, 2, 3}
        values = sorted(m.value() for messages in read.values() for m in messages)
        assert values == sorted(first)  # each record once: no partition was read twice
        for index, member in enumerate(members):  # each read only its own partitions
            assert {m.partition() for m in read[index]} <= assignments[index]
            member.commit(asynchronous=False)
    finally:
        for member in members:
            member.close()

    second = [f"second-{i}".encode() for i in range(20)]
    _produce(kafka_cluster, topic, second)
    later = _consumer(kafka_cluster, group)
    got: list = []
    try:
        later.subscribe([topic])

        def read_the_rest() -> bool:
            for message in later.consume(num_messages=100, timeout=0.2):
                assert message.error() is None, message.error()
                got.append(message.value())
            return len(got) >= len(second)

        wait_for(read_the_rest, "a later member to read what came after the commits")
        assert sorted(got) == sorted(second)  # nothing committed is read again
    finally:
        later.close()


def test_admin_lists_and_describes_a_group_and_its_committed_offsets(kafka_cluster, require_client):
    require_client("confluent_kafka")
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic, group = f"groups-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic, partitions=4)
    _produce(kafka_cluster, topic, [f"v{i}".encode() for i in range(8)])
    member = _consumer(kafka_cluster, group, **{"client.id": "reader"})
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    try:
        member.subscribe([topic])
        read: list = []

        def everything_read() -> bool:
            read.extend(member.consume(num_messages=100, timeout=0.2))
            return len(read) >= 8

        wait_for(everything_read, "the member to read the topic")
        member.commit(asynchronous=False)
        listed = admin.list_consumer_groups().result(timeout=30)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.state.name == "STABLE"
        assert [m.client_id for m in described.members] == ["reader"]
        assigned = {tp.partition for tp in described.members[0].assignment.topic_partitions}
        assert assigned == {0, 1, 2, 3}
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(4)])
        offsets = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {
            0: 2,
            1: 2,
            2: 2,
            3: 2,
        }
    finally:
        member.close()
    wait_for(
        lambda: (
            admin.describe_consumer_groups([group])[group].result(timeout=30).state.name == "EMPTY"
        ),
        "the group to be empty once its member left",
    )
    deleted = admin.delete_consumer_groups([group])
    deleted[group].result(timeout=30)
    listed = admin.list_consumer_groups().result(timeout=30)
    assert group not in {g.group_id for g in listed.valid}


def test_kafka_python_and_aiokafka_consume_in_groups(kafka_cluster, require_client):
    """Two more independent clients' group protocols: kafka-python's (threads) and
    aiokafka's (asyncio), each reading a topic as a one-member group and committing."""
    require_client("kafka")
    require_client("aiokafka")
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer
    from kafka.errors import CommitFailedError, RebalanceInProgressError

    topic = f"groups-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka_cluster, topic, partitions=4)
    values = [f"v{i}".encode() for i in range(16)]
    _produce(kafka_cluster, topic, values)

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, group_id="kafka-python",
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    try:
        # Subscribed before its metadata names the topic, kafka-python joins, assigns itself
        # nothing ("No partition metadata"), rejoins once the metadata comes, and in some
        # full-suite runs then went silent, no fetch and no heartbeat, until the group
        # dropped it: join once the topic is known, as its own examples do.
        wait_for(lambda: consumer.partitions_for_topic(topic), "kafka-python's metadata to name it")
        consumer.subscribe([topic])
        read: list[bytes] = []

        def kafka_python_read() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                read.extend(r.value for r in records)
            return len(read) >= len(values)

        wait_for(kafka_python_read, "kafka-python's group member to read the topic")
        assert sorted(read) == sorted(values)

        def committed_everything() -> bool:
            # kafka-python refuses a commit while its member rejoins (seen once in a loaded
            # CI run, the cause not logged) and tells its users to poll, then commit again;
            # after a rejoin the member reads again from what is committed, so the commit
            # counts once the positions are back at the end.
            consumer.poll(timeout_ms=200)
            try:
                consumer.commit()
            except (RebalanceInProgressError, CommitFailedError):
                return False
            committed = [consumer.committed(tp) for tp in consumer.assignment()]
            return sum(offset or 0 for offset in committed) == len(values)

        wait_for(committed_everything, "kafka-python's member to commit what it read")
    finally:
        consumer.close()

    async def aiokafka_read() -> list[bytes]:
        member = AIOKafkaConsumer(
            topic, bootstrap_servers=kafka_cluster.bootstrap_servers, group_id="aiokafka",
            auto_offset_reset="earliest", enable_auto_commit=False,
        )  # fmt: skip
        await member.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(60):
                while len(got) < len(values):
                    batches = await member.getmany(timeout_ms=200)
                    got += [r.value for records in batches.values() for r in records]
            await member.commit()
            return got
        finally:
            await member.stop()

    assert sorted(asyncio.run(aiokafka_read())) == sorted(values)
