"""The authorizer at the door, api by api, as Kafka 3.5's KafkaApis answers (no network: the
guarded handlers are called with requests as the codecs decode them): what is refused is
answered with Kafka's error where Kafka puts it, what is allowed reaches the handler
without what was refused, and an api kcore checks nothing for is a super user's only."""

from __future__ import annotations

import attrs
import pytest

import transport
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import LeaderAndIsrRequest, LeaderAndIsrResponse
from kcore.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kcore.security.acl import AclOperation as Op
from kcore.security.request_authorization import RequestAuthorization
from kcore.wire import from_wire, to_wire

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED = 29, 30, 31


@attrs.define
class FakeConnection:
    context: dict
    peer_address: tuple = ("10.0.0.7", 50000)
    peer_name: str = "10.0.0.7:50000"


@attrs.define
class Recorder:
    """A handler that records the bodies it is given and answers `answer(body)`."""

    answer: object
    bodies: list = attrs.field(factory=list)

    async def __call__(self, request):
        self.bodies.append(request.body)
        return self.answer(request.body) if callable(self.answer) else self.answer


def authorization(*grants, topics=("orders", "audit"), auto_create=True, super_users=()):
    authorizer = AclAuthorizer(frozenset(super_users))
    for kind, name, operation in grants:
        pattern = ResourcePattern(kind, name, PatternType.LITERAL)
        entry = AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW)
        authorizer.set_acls(pattern, authorizer.acls.get(pattern, frozenset()) | {entry})
    return RequestAuthorization(
        authorizer, topic_exists=lambda t: t in topics, auto_create_topics=lambda: auto_create
    )


async def call(guarded, api_key, body, *, version=9, principal="User:alice"):
    request = transport.Request(
        api_key, version, 1, "client", body, connection=FakeConnection({"principal": principal})
    )
    return await guarded[api_key](request)


def metadata_answer(body):
    names = ["orders", "audit"] if body["topics"] is None else [t["name"] for t in body["topics"]]
    return {"topics": [{"name": n, "error_code": 0, "partitions": []} for n in names]}


async def test_metadata_hides_or_refuses_topics_not_described_and_creations_not_allowed():
    authz = authorization(
        (ResourceType.TOPIC, "orders", Op.WRITE),  # implies DESCRIBE
        (ResourceType.TOPIC, "new", Op.DESCRIBE),
        (ResourceType.TOPIC, "newer", Op.CREATE),
        (ResourceType.TOPIC, "newer", Op.DESCRIBE),  # CREATE does not imply DESCRIBE
    )
    handler = Recorder(metadata_answer)
    guarded = authz.guard({ApiKey.METADATA: handler}, kafka_protocol=True)

    every = await call(guarded, ApiKey.METADATA, {"topics": None})
    assert [t["name"] for t in every["topics"]] == ["orders"]  # audit left out

    asked = [{"name": n, "topic_id": None} for n in ("orders", "audit", "new", "newer")]
    named = await call(guarded, ApiKey.METADATA, {"topics": asked})
    # Only what may be described and, not existing, created reaches the handler (which
    # would auto-create it).
    assert [t["name"] for t in handler.bodies[-1]["topics"]] == ["orders", "newer"]
    assert {t["name"]: t["error_code"] for t in named["topics"]} == {
        "orders": 0, "newer": 0, "audit": TOPIC_DENIED, "new": TOPIC_DENIED,
    }  # fmt: skip


async def test_produce_serves_the_allowed_topics_and_refuses_the_others_per_partition():
    def answer(body):
        return {
            "responses": [
                {"name": t["name"], "partition_responses": [{"index": 0, "error_code": 0}]}
                for t in body["topic_data"]
            ],
            "throttle_time_ms": 0,
        }

    handler = Recorder(answer)
    guarded = authorization((ResourceType.TOPIC, "orders", Op.WRITE)).guard(
        {ApiKey.PRODUCE: handler}, kafka_protocol=True
    )
    data = [
        {"name": name, "partition_data": [{"index": p, "records": b"x"} for p in (0, 1)]}
        for name in ("orders", "audit")
    ]
    response = await call(
        guarded, ApiKey.PRODUCE, {"acks": -1, "timeout_ms": 1, "topic_data": data}
    )
    assert [t["name"] for t in handler.bodies[0]["topic_data"]] == ["orders"]
    refused = next(t for t in response["responses"] if t["name"] == "audit")
    assert [(p["index"], p["error_code"]) for p in refused["partition_responses"]] == [
        (0, TOPIC_DENIED), (1, TOPIC_DENIED),
    ]  # fmt: skip
    # acks=0: nothing is answered, refused or not.
    assert (
        await call(guarded, ApiKey.PRODUCE, {"acks": 0, "timeout_ms": 1, "topic_data": data[1:]})
        is None
    )


async def test_a_kafka_fetch_is_checked_by_its_handler_not_at_the_door():
    # A fetch in a session reads partitions its request does not name: the Fetch handler
    # checks READ / ClusterAction against its session (tests/kcore/server/test_kafka_fetch.py).
    handler = Recorder(lambda body: {"responses": [], "error_code": 0})
    body = {"replica_id": 2, "max_wait_ms": 0, "min_bytes": 1, "session_id": 0, "topics": [
        {"topic": "orders", "partitions": [{"partition": 0, "fetch_offset": 0,
                                            "partition_max_bytes": 100}]}]}  # fmt: skip
    guarded = authorization().guard({ApiKey.FETCH: handler}, kafka_protocol=True)
    await call(guarded, ApiKey.FETCH, body)
    assert handler.bodies == [body]


async def test_offsets_for_leader_epoch_is_any_topic_for_brokers_described_ones_for_others():
    handler = Recorder(lambda body: {"throttle_time_ms": 0, "topics": [
        {"topic": t["topic"], "partitions": [{"partition": 0, "error_code": 0}]}
        for t in body["topics"]]})  # fmt: skip
    topics = [{"topic": n, "partitions": [{"partition": 0, "leader_epoch": 1}]}
              for n in ("orders", "audit")]  # fmt: skip
    consumer = authorization((ResourceType.TOPIC, "orders", Op.READ))
    guarded = consumer.guard({ApiKey.OFFSET_FOR_LEADER_EPOCH: handler}, kafka_protocol=True)
    # Version 2 (librdkafka's) has no replica id: the topics decide, as since KIP-320.
    answer = await call(guarded, ApiKey.OFFSET_FOR_LEADER_EPOCH, {"topics": topics}, version=2)
    assert {t["topic"]: t["partitions"][0]["error_code"] for t in answer["topics"]} == {
        "orders": 0, "audit": TOPIC_DENIED,
    }  # fmt: skip
    broker = authorization((ResourceType.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))
    guarded = broker.guard({ApiKey.OFFSET_FOR_LEADER_EPOCH: handler}, kafka_protocol=True)
    answer = await call(guarded, ApiKey.OFFSET_FOR_LEADER_EPOCH, {"topics": topics}, version=2)
    assert [t["partitions"][0]["error_code"] for t in answer["topics"]] == [0, 0]


async def test_group_requests_need_the_group_and_commits_the_topics_too():
    authz = authorization(
        (ResourceType.GROUP, "readers", Op.READ), (ResourceType.TOPIC, "orders", Op.READ)
    )
    join = Recorder({"error_code": 0})
    commit = Recorder(lambda body: {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": 0, "error_code": 0}]}
        for t in body["topics"]]})  # fmt: skip
    describe = Recorder(lambda body: {"throttle_time_ms": 0, "groups": [
        {"group_id": g, "error_code": 0} for g in body["groups"]]})  # fmt: skip
    guarded = authz.guard({11: join, 8: commit, 15: describe}, kafka_protocol=False)
    refused = await call(guarded, 11, {"group_id": "writers"}, version=5)
    assert refused["error_code"] == GROUP_DENIED
    assert refused["members"] == [] and "leader" in refused  # a whole JoinGroup answer
    assert join.bodies == []
    assert (await call(guarded, 11, {"group_id": "readers"}, version=5)) == {"error_code": 0}

    topics = [{"name": n, "partitions": [{"partition_index": 0}]} for n in ("orders", "audit")]
    answer = await call(guarded, 8, {"group_id": "readers", "topics": topics}, version=8)
    assert {t["name"]: t["partitions"][0]["error_code"] for t in answer["topics"]} == {
        "orders": 0, "audit": TOPIC_DENIED,
    }  # fmt: skip
    answer = await call(guarded, 8, {"group_id": "writers", "topics": topics}, version=8)
    assert {t["partitions"][0]["error_code"] for t in answer["topics"]} == {GROUP_DENIED}

    described = await call(guarded, 15, {"groups": ["readers", "writers"]}, version=5)
    assert {g["group_id"]: g["error_code"] for g in described["groups"]} == {
        "readers": 0, "writers": GROUP_DENIED,
    }  # fmt: skip


async def test_control_requests_are_for_cluster_action_holders_only():
    handler = Recorder(to_wire(LeaderAndIsrResponse(0)))
    request = to_wire(LeaderAndIsrRequest(1, 5, 100, (), ()))
    authz = authorization(
        (ResourceType.TOPIC, "orders", Op.ALL), super_users=("User:CN=broker1,O=kcore",)
    )
    guarded = authz.guard({ApiKey.LEADER_AND_ISR: handler}, kafka_protocol=False)
    refused = await call(guarded, ApiKey.LEADER_AND_ISR, request)
    assert from_wire(LeaderAndIsrResponse, refused).error_code == CLUSTER_DENIED
    assert handler.bodies == []
    served = await call(
        guarded, ApiKey.LEADER_AND_ISR, request, principal="User:CN=broker1,O=kcore"
    )
    assert from_wire(LeaderAndIsrResponse, served).error_code == 0


@pytest.mark.parametrize("kafka_protocol", [True, False])
async def test_an_api_without_checks_is_for_super_users_only(kafka_protocol):
    handler = Recorder({"error_code": 0})
    authz = authorization(super_users=("User:admin",))
    # DescribeCluster (60) is one Kafka does not check; 99 stands for one kcore adds later.
    guarded = authz.guard({99: handler, 60: handler}, kafka_protocol=kafka_protocol)
    assert await call(guarded, 60, {}, version=0) == {"error_code": 0}
    assert await call(guarded, 99, {}, principal="User:admin") == {"error_code": 0}
    with pytest.raises(transport.RpcError) as refused:
        await call(guarded, 99, {})
    assert refused.value.error_code == CLUSTER_DENIED
