"""kcore as a Trio application uses it: `kcore.open_broker`, `kcore.open_cluster` and the
clients, with real TCP and fresh randomness by default, ready when entered and stopped
cleanly on exit."""

import random

import pytest
import trio

import kcore
import transport
import zkstub
from kcore.config import ConfigError, KafkaConfig


def test_the_surface() -> None:
    assert sorted(kcore.__all__) == [
        "Admin",
        "Cluster",
        "Consumer",
        "EmbeddedBroker",
        "Producer",
        "fetcher_id",
        "open_broker",
        "open_cluster",
    ]
    for name in kcore.__all__:
        assert getattr(kcore, name) is not None


async def _consume(consumer: kcore.Consumer, count: int) -> list:
    records: list = []
    while len(records) < count:
        records += await consumer.poll(timeout=1.0)
    return records


async def test_one_broker_over_real_tcp_needs_no_network_nor_rng(tmp_path) -> None:
    async with zkstub.open_server(transport.TcpNetwork()) as zookeeper:
        zk_connect = f"127.0.0.1:{zookeeper.address[1]}"
        settings = {
            "broker.id": 1,
            "zookeeper.connect": zk_connect,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "logs"),
            # The controller answers a lone broker's controlled shutdown with its partitions
            # still led there (Kafka leaves out unreplicated ones), so it retries: briefly.
            "controlled.shutdown.retry.backoff.ms": 100,
        }
        with trio.fail_after(60):
            async with kcore.open_broker(settings) as broker:
                assert broker.broker_id == 1 and broker.cluster_id
                host, port = broker.address
                assert host == "127.0.0.1" and port != 0
                assert broker.bootstrap_servers == f"127.0.0.1:{port}"
                assert [e.port for e in broker.endpoints] == [port]
                async with kcore.Admin(broker.bootstrap_servers) as admin:
                    await admin.create_topic("t", partitions=1, replication_factor=1)
                async with kcore.Producer(broker.bootstrap_servers) as producer:
                    sent = await producer.send_and_wait("t", b"hello")
                async with kcore.Consumer([broker.address]) as consumer:
                    consumer.assign([("t", 0)])
                    [record] = await _consume(consumer, 1)
            assert (sent.offset, record.value) == (0, b"hello")
            # A clean shutdown closed its session: the registration went at once.
            async with zkstub.connect(zk_connect) as zk:
                assert await zk.exists("/brokers/ids/1") is None


async def test_a_broker_takes_a_kafka_config_and_joins_a_cluster(autojump_clock) -> None:
    network = transport.SimNetwork(5)
    async with kcore.open_cluster(2, network=network, rng=random.Random(5)) as cluster:
        config = KafkaConfig.from_dict(
            {
                "broker.id": 3,
                "zookeeper.connect": cluster.zk_connect,
                "listeners": "PLAINTEXT://broker-3:9092",
                "log.dirs": str(cluster.data_dir / "broker-3"),
            }
        )
        async with kcore.open_broker(config, network=network, rng=random.Random(6)) as broker:
            assert broker.address == ("broker-3", 9092)
            await cluster.wait_for_controller()
            async with cluster.admin() as admin:
                await admin.create_topic("t", partitions=1, replication_factor=3)
                description = await admin.describe_topic("t")
        assert sorted(description.partitions[0].replicas) == [1, 2, 3]


async def test_a_cluster_is_ready_when_entered(autojump_clock) -> None:
    async with kcore.open_cluster(
        3, network=transport.SimNetwork(1), rng=random.Random(1)
    ) as cluster:
        assert sorted(cluster.brokers) == [1, 2, 3]
        # No waiting for a controller: a topic may use every broker at once.
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=3, replication_factor=3)
        async with cluster.producer(acks="all") as producer:
            sent = [await producer.send_and_wait("t", b"v%d" % i, partition=i) for i in range(3)]
        async with cluster.consumer() as consumer:
            consumer.assign([("t", p) for p in range(3)])
            records = await _consume(consumer, 3)
    assert [m.offset for m in sent] == [0, 0, 0]
    assert sorted(r.value for r in records) == [b"v0", b"v1", b"v2"]


async def test_a_cluster_opened_again_on_its_data_dir_keeps_its_records(
    autojump_clock, tmp_path
) -> None:
    async with kcore.open_cluster(
        3, data_dir=tmp_path, network=transport.SimNetwork(2), rng=random.Random(2)
    ) as cluster:
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=3)
        async with cluster.producer(acks="all") as producer:
            for i in range(3):
                await producer.send_and_wait("t", b"v%d" % i)
        first_id = cluster.brokers[1].cluster_id
    async with kcore.open_cluster(
        3, data_dir=tmp_path, network=transport.SimNetwork(3), rng=random.Random(3)
    ) as cluster:
        assert cluster.brokers[1].cluster_id == first_id
        async with cluster.consumer() as consumer:
            consumer.assign([("t", 0)])
            records = await _consume(consumer, 3)
    assert [(r.offset, r.value) for r in records] == [(0, b"v0"), (1, b"v1"), (2, b"v2")]


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ({"log.flush.interval.ms": "1000"}, "log.flush.interval.ms=1000"),
    ],
)
async def test_a_cluster_refuses_to_start_with_a_setting_it_cannot_honour(
    autojump_clock, setting, shown
) -> None:
    with pytest.raises(ConfigError, match=f"^{shown} is not supported yet"):
        async with kcore.open_cluster(
            1, broker_config=setting, network=transport.SimNetwork(0), rng=random.Random(0)
        ):
            pass


async def test_a_broker_refuses_a_tls_listener_without_its_key_and_certificate(tmp_path) -> None:
    settings = {
        "broker.id": 1,
        "zookeeper.connect": "127.0.0.1:1",
        "listeners": "SSL://127.0.0.1:0",
        "log.dirs": str(tmp_path),
    }
    with pytest.raises(ConfigError, match=r"TLS listener needs its key and certificate"):
        async with kcore.open_broker(settings):
            pass
