"""The authorizer on a simulated SASL cluster (virtual time): a user without ACLs is refused
produce, consume and a consumer group until an operator grants them; ACLs are stored in
ZooKeeper as Kafka stores them and reach every broker by their change notifications; a
control request forged by an authenticated user who is not a super user is refused with
CLUSTER_AUTHORIZATION_FAILED while the brokers' own control traffic (they are super users)
goes on; and without an authorizer the ACL apis answer SECURITY_DISABLED, as Kafka's do."""

from __future__ import annotations

import contextlib
import json
import random

import pytest
import trio

import transport
from kcore import errors
from kcore.common import TopicPartition
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
)
from kcore.protocol.data import FetchPartition, FetchRequest, FetchResponse
from kcore.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kcore.security.acl import AclOperation as Op
from kcore.security.sasl import SaslCredentials
from kcore.security.sasl_network import SaslNetwork
from kcore.testing import BROKER_PORT, broker_node, open_cluster
from kcore.wire import from_wire, to_wire

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret" user_mallory="mallory-secret";'
)
# One SASL listener; the brokers log in to each other as `admin`, the one super user.
SECURED = {
    "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
}
CLUSTER_DENIED = errors.ClusterAuthorizationFailedError.code
TOPIC_DENIED = errors.TopicAuthorizationFailedError.code


def as_user(name: str) -> dict:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": name,
        "sasl_plain_password": f"{name}-secret",
    }


def allow(principal: str, operation: Op, kind=ResourceType.TOPIC, name="orders", **pattern):
    return AclBinding(
        ResourcePattern(kind, name, pattern.get("pattern_type", PatternType.LITERAL)),
        AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
    )


async def test_a_user_is_refused_until_granted_and_acls_live_in_zookeeper(autojump_clock):
    async with open_cluster(brokers=3, seed=11, logs="memory", broker_config=SECURED) as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin(**as_user("admin")) as admin:
            await admin.create_topic("orders", partitions=1, replication_factor=3)

            # No ACL: alice cannot even see the topic; her producer says so at once.
            async with cluster.producer(**as_user("alice")) as producer:
                with pytest.raises(errors.TopicAuthorizationFailedError):
                    await producer.send_and_wait("orders", b"v")
            # Describing is not writing: the produce itself is refused.
            await admin.create_acls([allow("User:alice", Op.DESCRIBE)])
            await _granted_everywhere(cluster, "User:alice", Op.DESCRIBE, "orders")
            async with cluster.producer(**as_user("alice"), retries=0) as producer:
                with pytest.raises(errors.TopicAuthorizationFailedError):
                    await producer.send_and_wait("orders", b"v")

            await admin.create_acls(
                [
                    allow("User:alice", Op.WRITE),
                    allow("User:alice", Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                          "kafka-cluster"),
                ]
            )  # fmt: skip
            await _granted_everywhere(cluster, "User:alice", Op.WRITE, "orders")
            async with cluster.producer(**as_user("alice"), acks="all") as producer:
                written = await producer.send_and_wait("orders", b"granted")
            assert written.offset == 0

            # Writing is not reading: her consumer is refused until READ is granted.
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await _consume(cluster, "alice", 1)
            await admin.create_acls(
                [allow("User:alice", Op.READ, name="ord", pattern_type=PatternType.PREFIXED)]
            )
            await _granted_everywhere(cluster, "User:alice", Op.READ, "orders")
            assert await _consume(cluster, "alice", 1) == [b"granted"]
            # In a group, the group must allow her too.
            with pytest.raises(errors.GroupAuthorizationFailedError):
                await _consume_in_group(cluster, "alice", "readers")
            await admin.create_acls([allow("User:alice", Op.READ, ResourceType.GROUP, "readers")])
            with trio.fail_after(30):
                while not all(
                    b.authorizer.authorize(
                        "User:alice", "h", Op.READ, ResourceType.GROUP, "readers"
                    )
                    for b in cluster.brokers.values()
                ):
                    await trio.sleep(0.05)
            assert await _consume_in_group(cluster, "alice", "readers") == [b"granted"]

            # As Kafka stores them, each change announced for the other brokers.
            data, _ = await cluster.zk.get("/kafka-acl/Topic/orders")
            assert json.loads(data) == {
                "version": 1,
                "acls": [
                    {"principal": "User:alice", "permissionType": "Allow", "operation": op,
                     "host": "*"}
                    for op in ("Write", "Describe")
                ],
            }  # fmt: skip
            data, _ = await cluster.zk.get("/kafka-acl-extended/prefixed/Topic/ord")
            assert json.loads(data)["acls"][0]["operation"] == "Read"
            changes = sorted(await cluster.zk.get_children("/kafka-acl-changes"))
            assert (await cluster.zk.get(f"/kafka-acl-changes/{changes[0]}"))[0] == (
                b"TOPIC:orders"
            )
            assert len(await cluster.zk.get_children("/kafka-acl-extended-changes")) == 1

            described = await admin.describe_acls(
                AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders",
                                                       PatternType.MATCH))
            )  # fmt: skip
            assert {(b.pattern.name, b.entry.operation) for b in described} == {
                ("orders", Op.WRITE), ("orders", Op.DESCRIBE), ("ord", Op.READ),
            }  # fmt: skip

            # Deleted, the grant is gone on every broker.
            deleted = await admin.delete_acls(
                [AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, None,
                                                        PatternType.PREFIXED))]
            )  # fmt: skip
            assert [b.entry.operation for b in deleted] == [Op.READ]
            await _granted_everywhere(cluster, "User:alice", Op.READ, "orders", granted=False)
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await _consume(cluster, "alice", 1)
            assert await cluster.zk.exists("/kafka-acl-extended/prefixed/Topic/ord") is None

        # A user who may not alter the cluster may not grant himself anything.
        async with cluster.admin(**as_user("mallory")) as admin:
            with pytest.raises(errors.ClusterAuthorizationFailedError):
                await admin.create_acls([allow("User:mallory", Op.ALL)])
            with pytest.raises(errors.ClusterAuthorizationFailedError):
                await admin.describe_acls()


async def _granted_everywhere(cluster, principal, operation, topic, *, granted=True) -> None:
    """Waits until every broker's authorizer decides as the ACLs now say (each applies the
    change notification on its own)."""
    with trio.fail_after(30):  # virtual seconds
        while any(
            broker.authorizer.authorize(
                principal, "127.0.0.1", operation, ResourceType.TOPIC, topic
            )
            != granted
            for broker in cluster.brokers.values()
        ):
            await trio.sleep(0.05)


async def _consume(cluster, user: str, count: int) -> list[bytes]:
    async with cluster.consumer(**as_user(user)) as consumer:
        consumer.assign([("orders", 0)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        with trio.fail_after(30):
            while len(values) < count:
                values.extend(r.value for r in await consumer.poll(timeout=1.0))
        return values


async def _consume_in_group(cluster, user: str, group: str) -> list[bytes]:
    async with cluster.consumer(**as_user(user), group_id=group) as consumer:
        consumer.subscribe(["orders"])
        values: list[bytes] = []
        with trio.fail_after(60):
            while not values:
                values.extend(r.value for r in await consumer.poll(timeout=1.0))
        await consumer.commit()
        return values


@contextlib.asynccontextmanager
async def _connection_as(cluster, user: str, broker_id: int):
    """A msgpack connection to a broker, authenticated as `user` (who anyone could be)."""
    network = SaslNetwork(
        cluster.network.node(f"client-{user}"),
        SaslCredentials("PLAIN", user, f"{user}-secret"),
        random.Random(0),
    )
    async with transport.open_rpc_connection(
        network, (broker_node(broker_id), BROKER_PORT), client_id=user
    ) as connection:
        yield connection


async def _send(connection, api_key, request, response_type):
    response = await connection.request(api_key, to_wire(request))
    assert response.error_code == 0
    return from_wire(response_type, response.body)


async def test_control_requests_from_a_user_who_is_not_a_super_user_are_refused(autojump_clock):
    async with open_cluster(brokers=3, seed=12, logs="memory", broker_config=SECURED) as cluster:
        controller = await cluster.wait_for_controller()
        async with cluster.admin(**as_user("admin")) as admin:
            await admin.create_topic("orders", partitions=1, replication_factor=3)
            await admin.create_acls([allow("User:mallory", Op.ALL)])  # on the topic only
        async with cluster.producer(**as_user("admin"), acks="all") as producer:
            await producer.send_and_wait("orders", b"acknowledged", partition=0)
        data, _ = await cluster.zk.get("/controller_epoch")
        epoch = int(data)
        victim = next(b for b in sorted(cluster.brokers) if b != controller)
        _, stat = await cluster.zk.get(f"/brokers/ids/{victim}")

        async with _connection_as(cluster, "mallory", victim) as mallory:
            stop = StopReplicaRequest(
                controller, epoch, stat.czxid,
                (StopReplicaPartitionState("orders", 0, 2**31 - 1, True),),
            )  # fmt: skip
            answer = await _send(mallory, ApiKey.STOP_REPLICA, stop, StopReplicaResponse)
            assert answer.error_code == CLUSTER_DENIED
            lead = LeaderAndIsrRequest(
                controller, epoch, stat.czxid,
                (LeaderAndIsrPartitionState("orders", 0, epoch, victim, 99, (victim,), 99,
                                            (victim,)),),
                (LiveLeader(99, "attacker.example", 9092),),
            )  # fmt: skip
            answer = await _send(mallory, ApiKey.LEADER_AND_ISR, lead, LeaderAndIsrResponse)
            assert answer.error_code == CLUSTER_DENIED
            # Nor may she fetch as a replica (ALL on the topic is not ClusterAction).
            fetch = FetchRequest(
                victim, -1, 0, 1, 1 << 20, (FetchPartition("orders", 0, 0, 1 << 20),)
            )
            answer = await _send(mallory, ApiKey.FETCH, fetch, FetchResponse)
            assert [p.error_code for p in answer.partitions] == [TOPIC_DENIED]

        # Nothing moved, and the cluster's own control traffic goes on: a topic created now
        # is led and served, and the data is all there.
        assert (
            cluster.brokers[victim].replica_manager.partition(TopicPartition("orders", 0))
            is not None
        )
        async with cluster.admin(**as_user("admin")) as admin:
            await admin.create_topic("after", partitions=3, replication_factor=3)
        async with cluster.producer(**as_user("admin"), acks="all") as producer:
            for partition in range(3):
                await producer.send_and_wait("after", b"v", partition=partition)
        async with cluster.consumer(**as_user("mallory")) as consumer:
            consumer.assign([("orders", 0)])
            consumer.seek_to_beginning()
            with trio.fail_after(30):
                records = []
                while not records:
                    records = await consumer.poll(timeout=1.0)
            assert [r.value for r in records] == [b"acknowledged"]

        # A broker (re)started reads every ACL from ZooKeeper before serving.
        restarted = await cluster.restart_broker(victim)
        mallory_on_orders = restarted.authorizer.acls[ResourcePattern(ResourceType.TOPIC, "orders")]
        assert {e.principal for e in mallory_on_orders} == {"User:mallory"}


async def test_without_an_authorizer_the_acl_apis_answer_security_disabled(autojump_clock):
    async with open_cluster(brokers=1, seed=13, logs="memory") as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            with pytest.raises(errors.SecurityDisabledError):
                await admin.describe_acls()
            with pytest.raises(errors.SecurityDisabledError):
                await admin.create_acls([allow("User:alice", Op.READ)])
