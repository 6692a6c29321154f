"""A simulated cluster's metrics, as a Kafka operator reads them: records produced show in
the leader's BrokerTopicMetrics, one broker is the active controller, and a broker's death
shows as under-replicated and offline partitions (simulated network, virtual time)."""

from kcore.common import TopicPartition
from kcore.metrics import exposition, prometheus_registry
from kcore.testing import open_cluster, poll_until

RECORDS = 10
TP = TopicPartition("t", 0)


def _value(broker, name):
    """A gauge's value or a counter's count; None when the broker has no such metric."""
    metric = broker.metrics.get(name)
    if metric is None:
        return None
    return metric.value if hasattr(metric, "value") else metric.count


def _server(type_, name, **tags):
    tags_text = "".join(f",{key}={value}" for key, value in sorted(tags.items()))
    return f"kafka.server:type={type_},name={name}{tags_text}"


ACTIVE_CONTROLLER = "kafka.controller:type=KafkaController,name=ActiveControllerCount"
OFFLINE_PARTITIONS = "kafka.controller:type=KafkaController,name=OfflinePartitionsCount"
UNDER_REPLICATED = _server("ReplicaManager", "UnderReplicatedPartitions")
MESSAGES_IN = _server("BrokerTopicMetrics", "MessagesInPerSec", topic="t")


def _active_controllers(cluster):
    return [b for b in sorted(cluster.brokers) if _value(cluster.brokers[b], ACTIVE_CONTROLLER)]


async def test_metrics_follow_produce_and_a_broker_death(autojump_clock):
    async with open_cluster(3) as cluster:
        controller = await cluster.wait_for_controller(timeout=30)
        leader, victim = [b for b in (1, 2, 3) if b != controller]
        async with cluster.admin() as admin:
            await admin.create_topic("t", assignments={0: [leader, victim, controller]})
            await admin.create_topic("solo", assignments={0: [victim]})
        brokers = cluster.brokers
        led = lambda: (p := brokers[leader].replica_manager.partition(TP)) and p.is_leader  # noqa: E731
        await poll_until(led)
        async with cluster.producer(acks="all") as producer:
            for n in range(RECORDS):
                await producer.send_and_wait("t", b"record-%d" % n, partition=0)

        # BrokerTopicMetrics: the leader appended every record; nobody else did.
        assert _value(brokers[leader], MESSAGES_IN) == RECORDS
        assert [_value(brokers[b], MESSAGES_IN) or 0 for b in (victim, controller)] == [0, 0]
        assert _value(brokers[leader], _server("BrokerTopicMetrics", "BytesInPerSec")) > 0
        # RequestMetrics: every produce timed; acks=all ones waited for the followers, and
        # that wait is their RemoteTimeMs.
        produce = "kafka.network:type=RequestMetrics,name={},request=Produce"
        assert brokers[leader].metrics.get(produce.format("TotalTimeMs")).count == RECORDS
        assert brokers[leader].metrics.get(produce.format("RemoteTimeMs")).total > 0
        # Replication settles: the leader's ISR is whole.
        await poll_until(lambda: _value(brokers[leader], UNDER_REPLICATED) == 0)
        assert _value(brokers[leader], _server("ReplicaManager", "LeaderCount")) == 1
        assert _value(brokers[victim], _server("ReplicaManager", "PartitionCount")) == 2
        assert _active_controllers(cluster) == [controller]
        assert _value(brokers[controller], OFFLINE_PARTITIONS) == 0

        await cluster.kill_broker(victim)
        # "solo" had its only replica there: offline once the controller sees the death.
        await poll_until(lambda: _value(brokers[controller], OFFLINE_PARTITIONS) == 1, timeout=60)
        # "t" lost a follower, which the controller takes out of the ISR.
        await poll_until(lambda: _value(brokers[leader], UNDER_REPLICATED) == 1, timeout=60)
        assert _active_controllers(cluster) == [controller]

        # The same numbers under the Prometheus names a Kafka dashboard queries.
        text = exposition(prometheus_registry(brokers[leader].metrics)).decode()
        assert f'kafka_server_brokertopicmetrics_messagesin_total{{topic="t"}} {RECORDS}.0' in text
        assert "kafka_server_replicamanager_underreplicatedpartitions 1.0" in text

        # A ZooKeeper session expiry is metered, and the session comes back.
        await cluster.expire_session(leader)
        state = _server("SessionExpireListener", "SessionState", state="{}")
        expires = _server("SessionExpireListener", "ZooKeeperExpiresPerSec")
        await poll_until(lambda: _value(brokers[leader], expires) == 1, timeout=60)
        await poll_until(lambda: _value(brokers[leader], state.format("CONNECTED")) == 1)
        assert _value(brokers[leader], state.format("EXPIRED")) == 0
