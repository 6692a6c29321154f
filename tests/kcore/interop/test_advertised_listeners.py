"""`advertised.listeners`, as in Kafka: a broker registers the addresses it advertises (a
port 0 resolved to the port its listener bound), clients are sent to the advertised address
of the listener they reached, brokers reach each other at the advertised address of the
inter-broker listener; a value Kafka refuses is refused, naming the setting.

The cluster is embedded (in this process, real TCP on 127.0.0.1); confluent-kafka
(librdkafka) runs in a thread beside it."""

from __future__ import annotations

import json

import pytest
import trio

from kcore.config import ConfigError, KafkaConfig
from kcore.testing import open_cluster

pytestmark = pytest.mark.timeout(120)

# Two listeners on 127.0.0.1, both advertised by name as `localhost` (which the machine
# resolves to 127.0.0.1): a client given an address it was not told at start is sent there.
ADVERTISED = {
    "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
    "advertised.listeners": "EXTERNAL://localhost:0,PLAINTEXT://localhost:0",
}


async def test_clients_and_replicas_are_sent_to_the_advertised_addresses(
    tmp_path, confluent_kafka
) -> None:
    async with open_cluster(
        brokers=2, network="tcp", data_dir=tmp_path, broker_config=ADVERTISED
    ) as cluster:
        await cluster.wait_for_controller()
        bound = {
            broker_id: {e.listener_name: e.port for e in broker.endpoints}
            for broker_id, broker in cluster.brokers.items()
        }
        # ZooKeeper holds what is advertised, the bound ports filled in, the inter-broker
        # listener (the first of `listeners`) first.
        for broker_id in (1, 2):
            data, _ = await cluster.zk.get(f"/brokers/ids/{broker_id}")
            assert json.loads(data)["endpoints"] == [
                f"PLAINTEXT://localhost:{bound[broker_id]['PLAINTEXT']}",
                f"EXTERNAL://localhost:{bound[broker_id]['EXTERNAL']}",
            ]

        external = f"127.0.0.1:{bound[1]['EXTERNAL']}"
        stats: list[dict] = []

        def produce_and_consume() -> tuple[dict, list[bytes]]:
            from confluent_kafka.admin import AdminClient, NewTopic

            # IPv4: `localhost` may name ::1 first, where nothing listens.
            settings = {"bootstrap.servers": external, "broker.address.family": "v4"}
            admin = AdminClient(settings)
            admin.create_topics([NewTopic("orders", 1, 2, config={"min.insync.replicas": "2"})])[
                "orders"
            ].result(timeout=30)
            brokers = {
                b.id: (b.host, b.port) for b in admin.list_topics(timeout=30).brokers.values()
            }
            producer = confluent_kafka.Producer(
                {**settings, "acks": "all", "enable.idempotence": True,
                 "statistics.interval.ms": 100,
                 "stats_cb": lambda text: stats.append(json.loads(text))}
            )  # fmt: skip
            for i in range(5):
                producer.produce("orders", b"order-%d" % i)
            assert producer.flush(30) == 0
            producer.poll(0.3)  # a statistics report after the deliveries
            consumer = confluent_kafka.Consumer(
                {**settings, "group.id": "readers", "enable.auto.commit": False}
            )
            consumer.assign([confluent_kafka.TopicPartition("orders", 0, 0)])
            values = []
            try:
                while len(values) < 5:
                    message = consumer.poll(10)
                    assert message is not None and message.error() is None
                    values.append(message.value())
            finally:
                consumer.close()
            return brokers, values

        brokers, values = await trio.to_thread.run_sync(produce_and_consume)
        # Told the advertised address of the listener it reached (EXTERNAL), not the
        # address it bootstrapped with, nor another listener's port...
        assert brokers == {b: ("localhost", bound[b]["EXTERNAL"]) for b in (1, 2)}
        # ...and it connected there: librdkafka names each broker it talks to by address.
        up = {name for name, b in stats[-1]["brokers"].items() if b["state"] == "UP"}
        leader = (await cluster.admin().describe_topic("orders")).partitions[0].leader
        assert f"localhost:{bound[leader]['EXTERNAL']}/{leader}" in up
        assert values == [b"order-%d" % i for i in range(5)]  # min.insync.replicas=2
        # The follower fetches from the leader's advertised inter-broker address.
        follower = cluster.brokers[3 - leader]
        fetchers = follower.replica_manager.fetcher_manager.fetchers
        assert {(f.leader.host, f.leader.port) for f in fetchers.values()} == {
            ("localhost", bound[leader]["PLAINTEXT"])
        }


async def test_without_advertised_listeners_brokers_advertise_what_they_bound(tmp_path) -> None:
    async with open_cluster(brokers=1, network="tcp", data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller()
        (endpoint,) = cluster.brokers[1].endpoints
        data, _ = await cluster.zk.get("/brokers/ids/1")
        assert json.loads(data)["endpoints"] == [f"PLAINTEXT://127.0.0.1:{endpoint.port}"]


def _config(**settings: str) -> KafkaConfig:
    return KafkaConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "127.0.0.1:2181", "log.dirs": "/tmp/k", **settings}
    )


TWO_LISTENERS = {
    "listeners": "PLAINTEXT://:9092,EXTERNAL://:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:SSL,OTHER:PLAINTEXT",
}


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        # Kafka's KafkaConfig checks, with its words.
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address 0.0.0.0"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address 0.0.0.0"),
        (
            {**TWO_LISTENERS, "advertised.listeners": "PLAINTEXT://a:1,OTHER://a:2"},
            "must be equal to or a subset of the ones defined in listeners",
        ),
        (
            {**TWO_LISTENERS, "advertised.listeners": "EXTERNAL://a:9093"},
            "inter.broker.listener.name must be a listener name defined in advertised.listeners",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"},
            "each listener must have a different name",
        ),
        ({"advertised.listeners": "kafka.example.com:9092"}, "expected NAME://host:port"),
        ({"advertised.listeners": "NOPE://a:1"}, "no security protocol for listener name NOPE"),
    ],
)
def test_a_bad_advertised_listener_is_refused_naming_the_setting(
    settings: dict[str, str], why: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        _config(**settings)
    message = str(refused.value)
    assert why in message
    setting = "listeners" if "advertised.listeners" not in settings else "advertised.listeners"
    assert f"for configuration {setting}:" in message


def test_advertised_listeners_kafka_accepts_are_accepted() -> None:
    config = _config(
        **TWO_LISTENERS,
        # A subset (EXTERNAL is not advertised), in any order, another host and port.
        **{"advertised.listeners": "PLAINTEXT://kafka-1.example.com:19092"},
    )
    assert config.advertised_listeners == ["PLAINTEXT://kafka-1.example.com:19092"]
