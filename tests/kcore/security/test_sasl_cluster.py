"""A cluster started as a user starts one, with only SASL_PLAINTEXT listeners (PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 enabled, brokers authenticating to each other with PLAIN):
confluent-kafka (librdkafka) produces and consumes with either mechanism, replicated to every
broker; a wrong password is refused with Kafka's authentication error; kcore's own clients
work with kafka-python's settings; confluent-kafka's AdminClient creates, describes and
deletes SCRAM users (AlterUserScramCredentials, DescribeUserScramCredentials)."""

from __future__ import annotations

import importlib.util
import random
import time

import pytest
import trio

import zkstub
from kcore import errors
from kcore.client import Admin, Consumer, Producer
from kcore.security.scram import new_credential
from kcore.zk_client import KafkaZkClient

from ..interop._cluster import start_cluster, wait_until_every_broker_knows

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory):
    settings = (
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n"
        "security.inter.broker.protocol=SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
    )
    cluster = start_cluster(
        tmp_path_factory.mktemp("sasl-cluster"),
        listener="SASL_PLAINTEXT",
        extra_config=settings,
        sasl_plain=("admin", "admin-secret"),
    )
    try:
        yield cluster
    finally:
        cluster.stop()


def _confluent(require_external):
    require_external(
        "confluent_kafka",
        importlib.util.find_spec("confluent_kafka") is not None,
        "pip install -e '.[kafka-clients]'",
    )
    import confluent_kafka

    return confluent_kafka


def _produce_and_consume(confluent_kafka, settings: dict, topic: str) -> list[bytes]:
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    delivered = []
    for i in range(5):
        producer.produce(topic, b"record-%d" % i, on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0
    assert delivered == [None] * 5
    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": f"{topic}-readers", "enable.auto.commit": False}
    )
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        values = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 5:
                break
    finally:
        consumer.close()
    return values


def test_confluent_kafka_with_plain_replicated_over_sasl_to_every_broker(
    sasl_cluster, require_external
):
    confluent_kafka = _confluent(require_external)
    from confluent_kafka.admin import AdminClient, NewTopic

    plain = {
        "bootstrap.servers": sasl_cluster.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    # min.insync.replicas=3: every acknowledged record is on all three brokers, which
    # replicate over their SASL listeners.
    topic = NewTopic("plain", 1, 3, config={"min.insync.replicas": "3"})
    admin = AdminClient(plain)  # kept: a collected client cancels its futures
    admin.create_topics([topic])["plain"].result(timeout=30)
    wait_until_every_broker_knows(sasl_cluster, "plain", 1)
    assert _produce_and_consume(confluent_kafka, plain, "plain") == [
        b"record-%d" % i for i in range(5)
    ]


def test_confluent_kafka_with_a_wrong_password_is_refused(sasl_cluster, require_external):
    confluent_kafka = _confluent(require_external)

    errors_seen = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": sasl_cluster.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "wrong-secret",
            "error_cb": errors_seen.append,
        }
    )
    for _ in range(100):  # error_cb is served by poll
        producer.poll(0.1)
        if errors_seen:
            break
    error = errors_seen[0]
    assert error.code() == confluent_kafka.KafkaError._AUTHENTICATION
    assert "Authentication failed: Invalid username or password" in error.str()
    assert "wrong-secret" not in error.str()


async def test_kcore_clients_authenticate_with_plain(sasl_cluster):
    plain = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    bootstrap = sasl_cluster.bootstrap_servers
    with trio.fail_after(30):
        async with Admin(bootstrap, **plain) as admin:
            await admin.create_topic("kcore-sasl", partitions=1, replication_factor=3)
        async with Producer(bootstrap, acks="all", **plain) as producer:
            for i in range(3):
                await producer.send_and_wait("kcore-sasl", b"v%d" % i, partition=0)
        async with Consumer(bootstrap, **plain) as consumer:
            consumer.assign([("kcore-sasl", 0)])
            consumer.seek_to_beginning()
            values = []
            while len(values) < 3:
                values.extend(r.value for r in await consumer.poll(timeout=1.0))
        assert values == [b"v0", b"v1", b"v2"]

        wrong = {**plain, "sasl_plain_password": "wrong-secret"}
        with pytest.raises(errors.KafkaError, match="Invalid username or password"):
            async with Admin(bootstrap, **wrong) as admin:
                await admin.list_topics()


async def test_confluent_kafka_with_scram_for_a_user_stored_as_kafka_stores_it(
    sasl_cluster, require_external
):
    """A SCRAM-SHA-256 user written where and as Kafka writes it (/config/users/bob, then a
    change notification, as Kafka's AdminZkClient does): brokers pick it up without a
    restart and librdkafka authenticates with it."""
    confluent_kafka = _confluent(require_external)
    credential = new_credential("SCRAM-SHA-256", "bob-secret", rng=random.Random(7))
    async with zkstub.connect(sasl_cluster.zookeeper_address) as zk:
        await KafkaZkClient(zk, clock=time.time).change_entity_configs(
            "users", "bob", {"SCRAM-SHA-256": credential.to_config()}
        )
    scram = {
        "bootstrap.servers": sasl_cluster.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }

    def produce_and_consume() -> list[bytes]:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(scram)
        # Every broker applies the notification on its own: retry until they all have.
        deadline = time.monotonic() + 60
        while True:
            try:
                admin.create_topics([NewTopic("scram", 1, 3)])["scram"].result(timeout=10)
                break
            except confluent_kafka.KafkaException:
                if time.monotonic() > deadline:
                    raise
        wait_until_every_broker_knows(sasl_cluster, "scram", 1)
        return _produce_and_consume(confluent_kafka, scram, "scram")

    values = await trio.to_thread.run_sync(produce_and_consume)
    assert values == [b"record-%d" % i for i in range(5)]


def test_confluent_kafkas_admin_manages_scram_users_that_then_log_in(
    sasl_cluster, require_external
):
    """Kafka's own admin calls (KIP-554), sent by librdkafka in Kafka's protocol: a user
    created with a SCRAM-SHA-512 credential (salted by the client) is described with its
    mechanism and iterations, logs in, and once deleted is described no more."""
    confluent_kafka = _confluent(require_external)
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    servers = sasl_cluster.bootstrap_servers
    admin = AdminClient(
        {
            "bootstrap.servers": servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    created = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("carol", info, b"carol-secret")]
    )
    created["carol"].result(timeout=30)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    everyone = admin.describe_user_scram_credentials().result(timeout=30)
    assert "carol" in everyone

    # Each broker applies the change notification on its own: each is asked in turn.
    for address in servers.split(","):
        carol = AdminClient(
            {
                "bootstrap.servers": address,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "carol",
                "sasl.password": "carol-secret",
            }
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                carol.list_topics(timeout=5)
                break
            except confluent_kafka.KafkaException:
                if time.monotonic() > deadline:
                    raise

    deleted = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]
    )
    deleted["carol"].result(timeout=30)
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=30)
    error = refused.value.args[0]
    assert error.code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
    assert "Attempt to describe a user credential that does not exist: carol" in error.str()
