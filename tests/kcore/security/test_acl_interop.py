"""Kafka's own admin client manages kcore's ACLs: confluent-kafka's AdminClient (librdkafka)
creates, describes and deletes ACLs (CreateAcls, DescribeAcls, DeleteAcls) on a SASL
cluster of broker processes configured as a Kafka operator configures one
(`authorizer.class.name=kafka.security.authorizer.AclAuthorizer`, `super.users`), and a
user's produce is refused until an ACL allows it and again once the ACL is deleted."""

from __future__ import annotations

import importlib.util
import time

import pytest

from ..interop._cluster import start_cluster, wait_until_every_broker_knows

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory):
    settings = (
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n"
        "security.inter.broker.protocol=SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
        "super.users=User:admin\n"
    )
    cluster = start_cluster(
        tmp_path_factory.mktemp("acl-cluster"),
        broker_count=2,
        listener="SASL_PLAINTEXT",
        extra_config=settings,
        sasl_plain=("admin", "admin-secret"),
    )
    try:
        yield cluster
    finally:
        cluster.stop()


def _settings(cluster, user: str) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def _produce(confluent_kafka, settings: dict, topic: str) -> object:
    """The delivery error of one record (None: delivered)."""
    producer = confluent_kafka.Producer({**settings, "acks": "all", "message.timeout.ms": 10000})
    delivered = []
    producer.produce(topic, b"v", on_delivery=lambda error, _message: delivered.append(error))
    producer.flush(30)
    return delivered[0]


def test_confluent_kafkas_admin_manages_acls_that_the_brokers_enforce(
    secured_cluster, require_external
):
    require_external(
        "confluent_kafka",
        importlib.util.find_spec("confluent_kafka") is not None,
        "pip install -e '.[kafka-clients]'",
    )
    import confluent_kafka
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(_settings(secured_cluster, "admin"))
    admin.create_topics([NewTopic("secured", 1, 2)])["secured"].result(timeout=30)
    wait_until_every_broker_knows(secured_cluster, "secured", 1)
    alice = _settings(secured_cluster, "alice")

    refused = _produce(confluent_kafka, alice, "secured")
    assert refused is not None
    assert refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED

    bindings = [
        AclBinding(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "sec", ResourcePatternType.PREFIXED, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "readers", ResourcePatternType.LITERAL, "User:alice",
                   "*", AclOperation.READ, AclPermissionType.ALLOW),
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        assert future.result(timeout=30) is None
    alices = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                              None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    described = admin.describe_acls(alices).result(timeout=30)
    assert sorted(described, key=str) == sorted(bindings, key=str)

    # Every broker's authorizer follows the change notifications: alice's produce goes
    # through (whichever broker leads the partition) once they have.
    deadline = time.monotonic() + 30
    while (error := _produce(confluent_kafka, alice, "secured")) is not None:
        assert error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert time.monotonic() < deadline, "the WRITE ACL never reached the leader"
        time.sleep(0.2)

    deleted = admin.delete_acls([alices])[alices].result(timeout=30)
    assert sorted(deleted, key=str) == sorted(bindings, key=str)
    assert admin.describe_acls(alices).result(timeout=30) == []
    deadline = time.monotonic() + 30
    while (error := _produce(confluent_kafka, alice, "secured")) is None:
        assert time.monotonic() < deadline, "the deleted ACL still allows alice"
        time.sleep(0.2)
    assert error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
