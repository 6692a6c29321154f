"""The authorized-operations fields (KIP-430): what a client may do with a topic, a group or
the cluster, asked through Metadata (v8+), DescribeGroups (v3+) and DescribeCluster, answered
as Kafka answers them: the operations the authorizer allows the principal (Kafka's
AclOperation codes as bits), every operation of the resource's type without an authorizer,
and -2^31 when not asked. confluent-kafka's AdminClient (librdkafka) asks; a raw client
checks Metadata's cluster field (v8-v10), which librdkafka no longer asks for.

The clusters are embedded (in this process, real TCP on 127.0.0.1)."""

from __future__ import annotations

import struct
import uuid

import pytest
import trio

from kcore.protocol import kafka as codec
from kcore.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from kcore.testing import open_cluster

from ._secured import SECURED as SECURED_CLUSTER

pytestmark = pytest.mark.timeout(120)

SMALL_OFFSETS_TOPIC = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1}
SECURED = {**SECURED_CLUSTER, **SMALL_OFFSETS_TOPIC}
TOPIC_OPERATIONS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER",
                    "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}  # fmt: skip
CLUSTER_OPERATIONS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                      "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}  # fmt: skip
GROUP_OPERATIONS = {"READ", "DESCRIBE", "DELETE"}


def _described(confluent_kafka, bootstrap: dict, topic: str, group: str, *, asked: bool):
    """(cluster, topic, group) authorized operations as confluent-kafka reports them: names,
    or None when the broker said they were not asked for."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(bootstrap)
    options = {"include_authorized_operations": asked, "request_timeout": 30}
    cluster = admin.describe_cluster(**options).result()
    topics = admin.describe_topics(confluent_kafka.TopicCollection([topic]), **options)
    groups = admin.describe_consumer_groups([group], **options)

    def names(operations):
        return None if operations is None else {operation.name for operation in operations}

    return (
        names(cluster.authorized_operations),
        names(topics[topic].result().authorized_operations),
        names(groups[group].result().authorized_operations),
    )


async def test_the_authorizer_says_what_the_principal_may_do(tmp_path, confluent_kafka) -> None:
    async with open_cluster(
        brokers=1, network="tcp", data_dir=tmp_path, broker_config=SECURED
    ) as cluster:
        await cluster.wait_for_controller()
        alice = "User:alice"
        granted = [
            (ResourceType.TOPIC, "orders", AclOperation.READ),  # DESCRIBE with it
            (ResourceType.GROUP, "billing", AclOperation.DESCRIBE),
            (ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE),
            (ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
        ]
        async with cluster.admin() as admin:
            await admin.create_topic("orders", partitions=1, replication_factor=1)
            await admin.create_acls(
                AclBinding(
                    ResourcePattern(kind, name),
                    AccessControlEntry(alice, "*", operation, AclPermissionType.ALLOW),
                )
                for kind, name, operation in granted
            )
        authorizer = cluster.brokers[1].authorizer
        while not all(
            authorizer.authorize(alice, "127.0.0.1", operation, kind, name)
            for kind, name, operation in granted
        ):  # the broker loads ACLs from their change notification
            await trio.sleep(0.01)
        (sasl,) = [e for e in cluster.brokers[1].endpoints if e.listener_name == "SASL_PLAINTEXT"]
        as_alice = {
            "bootstrap.servers": f"{sasl.host}:{sasl.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        asked = await trio.to_thread.run_sync(
            lambda: _described(confluent_kafka, as_alice, "orders", "billing", asked=True)
        )
        assert asked == (
            {"DESCRIBE", "IDEMPOTENT_WRITE"},
            {"READ", "DESCRIBE"},
            {"DESCRIBE"},
        )
        not_asked = await trio.to_thread.run_sync(
            lambda: _described(confluent_kafka, as_alice, "orders", "billing", asked=False)
        )
        assert not_asked == (None, None, None)


async def test_without_an_authorizer_every_operation_is_allowed(tmp_path, confluent_kafka) -> None:
    async with open_cluster(
        brokers=1, network="tcp", data_dir=tmp_path, broker_config=SMALL_OFFSETS_TOPIC
    ) as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            await admin.create_topic("orders", partitions=1, replication_factor=1)
        bootstrap = {"bootstrap.servers": cluster.bootstrap_servers}
        asked = await trio.to_thread.run_sync(
            lambda: _described(confluent_kafka, bootstrap, "orders", "billing", asked=True)
        )
        assert asked == (CLUSTER_OPERATIONS, TOPIC_OPERATIONS, GROUP_OPERATIONS)

        # Metadata v10 carries the cluster's too (v11 dropped it for DescribeCluster's).
        host, port = cluster.bootstrap()[0]
        stream = await trio.open_tcp_stream(host, port)
        asked_for = {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}],
                     "allow_auto_topic_creation": False}  # fmt: skip
        answers = {}
        for correlation_id, include in enumerate((True, False)):
            body = {**asked_for, "include_cluster_authorized_operations": include,
                    "include_topic_authorized_operations": include}  # fmt: skip
            await stream.send_all(codec.encode_request(3, 10, correlation_id, "raw", body))
            answers[include] = codec.decode_response(3, 10, await _frame(stream))[1]
        assert _operations(answers[True]["cluster_authorized_operations"]) == CLUSTER_OPERATIONS
        (topic,) = answers[True]["topics"]
        assert _operations(topic["topic_authorized_operations"]) == TOPIC_OPERATIONS
        assert answers[False]["cluster_authorized_operations"] == -(2**31)
        assert answers[False]["topics"][0]["topic_authorized_operations"] == -(2**31)


def _operations(bits: int) -> set[str]:
    return {operation.name for operation in AclOperation if bits & (1 << operation)}


async def _frame(stream: trio.SocketStream) -> bytes:
    data = bytearray()
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = await stream.receive_some(65536)
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data[4:])
