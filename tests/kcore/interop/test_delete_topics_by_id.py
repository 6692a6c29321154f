"""DeleteTopics v6+ naming topics by id alone (KIP-516), as Kafka 3.5 answers it on a cluster
with an authorizer: the id is resolved to the topic's name, and the name authorized (DESCRIBE
to be told the name, DELETE to delete it); an id no topic has is UNKNOWN_TOPIC_ID; a topic
named both ways is an INVALID_REQUEST.

The cluster is embedded (in this process, real TCP on 127.0.0.1); the requests are raw, in
Kafka's encoding, from a SASL/PLAIN user whose ACLs say what it may do."""

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

from ._secured import SECURED

pytestmark = pytest.mark.timeout(120)

UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED = 3, 29
INVALID_REQUEST, UNKNOWN_TOPIC_ID = 42, 100


class KafkaConnection:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.correlation_id = 0

    async def request(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation_id += 1
        await self.stream.send_all(
            codec.encode_request(api_key, version, self.correlation_id, "raw", body)
        )
        data = bytearray()
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the broker closed the connection"
            data += chunk
        correlation_id, answer = codec.decode_response(api_key, version, bytes(data[4:]))
        assert correlation_id == self.correlation_id
        return answer


async def _connect(broker, listener: str) -> KafkaConnection:
    (endpoint,) = [e for e in broker.endpoints if e.listener_name == listener]
    return KafkaConnection(await trio.open_tcp_stream(endpoint.host, endpoint.port))


async def test_topics_named_by_id_are_resolved_then_authorized_by_name(tmp_path) -> None:
    async with open_cluster(
        brokers=1, network="tcp", data_dir=tmp_path, broker_config=SECURED
    ) as cluster:
        await cluster.wait_for_controller()
        broker = cluster.brokers[1]
        alice = "User:alice"
        granted = [("mine", AclOperation.DELETE), ("seen", AclOperation.DESCRIBE)]
        async with cluster.admin() as admin:
            for topic in ("mine", "seen", "hidden"):
                await admin.create_topic(topic, partitions=1, replication_factor=1)
            await admin.create_acls(
                AclBinding(
                    ResourcePattern(ResourceType.TOPIC, topic),
                    AccessControlEntry(alice, "*", operation, AclPermissionType.ALLOW),
                )
                for topic, operation in granted
            )
        while not all(
            broker.authorizer.authorize(alice, "127.0.0.1", operation, ResourceType.TOPIC, topic)
            for topic, operation in granted
        ):  # the broker loads ACLs from their change notification
            await trio.sleep(0.01)

        super_user = await _connect(broker, "PLAINTEXT")
        described = await super_user.request(
            3, 12, {"topics": None, "allow_auto_topic_creation": False}
        )
        ids = {t["name"]: t["topic_id"] for t in described["topics"]}
        assert set(ids) == {"mine", "seen", "hidden"}
        nobodys = uuid.UUID(int=12345)

        as_alice = await _connect(broker, "SASL_PLAINTEXT")
        await as_alice.request(17, 1, {"mechanism": "PLAIN"})
        authenticated = await as_alice.request(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})
        assert authenticated["error_code"] == 0

        both = await as_alice.request(
            20, 6, {"topics": [{"name": "mine", "topic_id": ids["mine"]}], "timeout_ms": 30000}
        )
        assert [r["error_code"] for r in both["responses"]] == [INVALID_REQUEST]

        by_id = [{"name": None, "topic_id": ids[t]} for t in ("mine", "seen", "hidden")]
        deleted = await as_alice.request(
            20,
            6,
            {
                "topics": [
                    *by_id,
                    {"name": None, "topic_id": nobodys},
                    {"name": "hidden", "topic_id": uuid.UUID(int=0)},
                ],
                "timeout_ms": 30000,
            },
        )
        answered = sorted(
            (str(r["name"]), r["topic_id"], r["error_code"]) for r in deleted["responses"]
        )
        assert answered == sorted(
            [
                ("mine", ids["mine"], 0),  # DELETE granted: deleted
                ("seen", ids["seen"], TOPIC_AUTHORIZATION_FAILED),  # described, not deleted
                ("None", ids["hidden"], TOPIC_AUTHORIZATION_FAILED),  # its name not told
                ("None", nobodys, UNKNOWN_TOPIC_ID),
                ("hidden", uuid.UUID(int=0), TOPIC_AUTHORIZATION_FAILED),  # by name, as ever
            ]
        )
        with trio.fail_after(30):
            while True:
                left = await super_user.request(
                    3, 12, {"topics": None, "allow_auto_topic_creation": False}
                )
                if {t["name"] for t in left["topics"]} == {"seen", "hidden"}:
                    break
                await trio.sleep(0.05)
