"""Kafka's zookeeper.set.acl in kcore's ZooKeeper client: nodes created with ZkData's
default ACLs, as the identity the client authenticated with (digest here, where Kafka
uses SASL)."""

import random

import pytest

import transport
import zkstub
from kcore.config import ConfigError, KafkaConfig
from kcore.testing import open_cluster
from kcore.zk_client import default_acls, open_kafka_zk_client

BROKER_CREDENTIAL = "kafka:broker-secret"
BROKER = zkstub.ACL(zkstub.Perms.ALL, "digest", zkstub.digest(BROKER_CREDENTIAL))
EVERYONE_READS = zkstub.ACL(zkstub.Perms.READ, "world", "anyone")


def _connect(network, **security):
    return open_kafka_zk_client(
        "zk:2181", session_timeout=6.0, connect_timeout=6.0, network=network,
        rng=random.Random(0), clock=lambda: 0.0, **security,
    )  # fmt: skip


def test_default_acls_are_kafkas():
    assert default_acls(False, "/brokers/ids") == zkstub.OPEN_ACL_UNSAFE
    assert default_acls(True, "/brokers/ids") == (*zkstub.CREATOR_ALL_ACL, EVERYONE_READS)
    assert default_acls(True, "/config/users/alice") == zkstub.CREATOR_ALL_ACL
    assert default_acls(True, "/config/brokers") == zkstub.CREATOR_ALL_ACL
    assert default_acls(True, "/consumers") == zkstub.OPEN_ACL_UNSAFE


async def test_secure_nodes_are_read_by_all_and_written_by_the_broker_only(autojump_clock):
    network = transport.SimNetwork(0)
    async with (
        zkstub.open_server(network=network.node("zk"), address=("zk", 2181)) as server,
        server.connect_local() as outsider,
        _connect(
            network.node("b1"), secure_acls=True, digest_credential=BROKER_CREDENTIAL
        ) as kafka_zk,  # fmt: skip
    ):
        await kafka_zk.create_top_level_paths()
        await kafka_zk.create_topic("t", "id-t", {0: [1]}, {"retention.ms": "1"})
        await kafka_zk.change_user_configs("alice", {"SCRAM-SHA-256": "secret"})
        assert await kafka_zk.read_topic_configs("t") == {"retention.ms": "1"}

        acl, _ = await outsider.get_acl("/brokers/topics/t")
        assert set(acl) == {zkstub.ACL(zkstub.Perms.ALL, "digest", "kafka:x"), EVERYONE_READS}
        assert (await outsider.get_acl("/brokers"))[0] == acl  # a parent made on the way
        assert (await outsider.get("/brokers/topics/t"))[0]
        with pytest.raises(zkstub.NoAuthError):
            await outsider.set("/brokers/topics/t", b"{}")
        with pytest.raises(zkstub.NoAuthError):
            await outsider.delete("/brokers/topics/t")
        with pytest.raises(zkstub.NoAuthError):  # credentials: only the broker reads them
            await outsider.get("/config/users/alice")
        assert (await outsider.get_acl("/consumers"))[0] == zkstub.OPEN_ACL_UNSAFE


async def test_secure_acls_need_a_credential(autojump_clock):
    network = transport.SimNetwork(0)
    async with zkstub.open_server(network=network.node("zk"), address=("zk", 2181)):
        with pytest.raises(ValueError, match=r"zookeeper\.set\.acl"):
            async with _connect(network.node("b1"), secure_acls=True):
                pass


def test_a_broker_config_asking_for_acls_names_its_identity():
    base = {"broker.id": 1, "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/unused"}
    with pytest.raises(ConfigError, match=r"kcore\.zookeeper\.digest\.credential"):
        KafkaConfig.from_dict({**base, "zookeeper.set.acl": "true"})
    config = KafkaConfig.from_dict(
        {**base, "zookeeper.set.acl": "true", "kcore.zookeeper.digest.credential": "k:pw"}
    )
    assert "pw" not in repr(config.get("kcore.zookeeper.digest.credential"))


async def test_a_cluster_with_zookeeper_acls_elects_replicates_and_fails_over(autojump_clock):
    """Brokers that create their znodes with Kafka's ACLs, as one digest identity: the
    controller, the ISR writes and a controller failover work; someone else with a
    ZooKeeper client reads the cluster's state but cannot change it."""
    settings = {"zookeeper.set.acl": "true", "kcore.zookeeper.digest.credential": BROKER_CREDENTIAL}
    async with open_cluster(brokers=3, seed=42, broker_config=settings) as cluster:
        controller = await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
        async with cluster.producer(acks="all") as producer:
            for i in range(5):
                await producer.send_and_wait("t", b"v%d" % i, partition=0)
        await cluster.stop_broker(controller)
        assert await cluster.wait_for_controller() != controller
        async with cluster.admin() as admin:
            await admin.create_topic("u", partitions=1, replication_factor=2)
        tree = cluster.zk_server.tree
        for path in ("/brokers/topics/t", "/brokers/topics/t/partitions/0/state", "/controller"):
            assert tree.nodes[path].acl == (BROKER, EVERYONE_READS), path
        async with cluster.zk_server.connect_local() as outsider:
            data, _ = await outsider.get("/brokers/topics/t")
            assert b"partitions" in data
            with pytest.raises(zkstub.NoAuthError):
                await outsider.set("/brokers/topics/t", b"{}")
            with pytest.raises(zkstub.NoAuthError):  # DELETE is the parent's to give
                await outsider.delete("/brokers/topics/t/partitions/0/state")
