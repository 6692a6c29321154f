"""The Fetch handler of Kafka's protocol (kcore.server.kafka_apis), request by request as a
client sees it: bodies go through the codec both ways at the version asked, the broker's
replica manager is a stand-in holding each partition's high watermark and records. Topic
ids (v13+), sessions (KIP-227) through the handler, and the authorizer's checks, which need
the session's partitions."""

from __future__ import annotations

import random
import uuid

import attrs
import trio

import transport
from kcore.protocol import kafka as codec
from kcore.protocol.control import UpdateMetadataPartitionState, UpdateMetadataRequest
from kcore.protocol.data import FetchPartitionResponse, FetchResponse
from kcore.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kcore.security.acl import AclOperation as Op
from kcore.server.kafka_apis import KafkaProtocolApis, topic_id_string
from kcore.server.metadata_cache import MetadataCache

FOO_ID, BAR_ID, NEW_FOO_ID = uuid.UUID(int=11), uuid.UUID(int=22), uuid.UUID(int=33)
UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID, TOPIC_DENIED = 100, 103, 29
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71


@attrs.define
class FakeConfig:
    slots: int = 1000
    auto_create_topics_enable: bool = False

    def get(self, name):
        assert name == "max.incremental.fetch.session.cache.slots"
        return self.slots


@attrs.define
class FakeReplicaManager:
    """Each partition's (high watermark, records); records are read once (as a consumer
    whose offset moves on reads them once)."""

    logs: dict = attrs.field(factory=dict)
    asked: list = attrs.field(factory=list)
    waits: list = attrs.field(factory=list)

    async def fetch_messages(self, request):
        self.asked.append([(p.topic, p.partition) for p in request.partitions])
        self.waits.append(request.max_wait_ms)
        answers = []
        for p in request.partitions:
            if (p.topic, p.partition) not in self.logs:
                answers.append(FetchPartitionResponse(p.topic, p.partition, 3))
                continue
            hw, records = self.logs[(p.topic, p.partition)]
            self.logs[(p.topic, p.partition)] = (hw, b"")
            answers.append(FetchPartitionResponse(p.topic, p.partition, 0, hw, 0, records))
        return FetchResponse(tuple(answers))


@attrs.define
class FakeApis:
    metadata_cache: MetadataCache
    replica_manager: FakeReplicaManager
    config: FakeConfig = attrs.field(factory=FakeConfig)
    rng: random.Random = attrs.field(factory=lambda: random.Random(3))
    authorizer: AclAuthorizer | None = None


@attrs.define
class FakeConnection:
    context: dict = attrs.field(factory=lambda: {"principal": "User:alice"})
    peer_address: tuple = ("10.0.0.7", 50000)
    peer_name: str = "10.0.0.7:50000"


def broker(authorizer=None) -> tuple[KafkaProtocolApis, FakeApis]:
    cache = MetadataCache(1)
    topic_ids = {"foo": topic_id_string(FOO_ID), "bar": topic_id_string(BAR_ID)}
    states = tuple(
        UpdateMetadataPartitionState(name, partition, 1, 1, 0, (1,), 0, (1,))
        for name in topic_ids
        for partition in (0, 1)
    )
    cache.update(UpdateMetadataRequest(1, 1, 0, states, (), topic_ids=topic_ids))
    logs = {(t, p): (10, b"") for t in ("foo", "bar") for p in (0, 1)}
    apis = FakeApis(cache, FakeReplicaManager(logs), authorizer=authorizer)
    return KafkaProtocolApis(apis), apis  # type: ignore[arg-type]


def topic(key, partitions, version):
    parts = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1000} for p in partitions]
    return {"topic_id" if version >= 13 else "topic": key, "partitions": parts}


async def fetch(kafka_apis, version, topics=(), *, session_id=0, epoch=-1, forget=(), **extra):
    body = {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [topic(key, parts, version) for key, parts in topics],
        "forgotten_topics_data": [
            {"topic_id" if version >= 13 else "topic": key, "partitions": list(parts)}
            for key, parts in forget
        ],
        **extra,
    }  # fmt: skip
    _, decoded = codec.decode_request(codec.encode_request(1, version, 5, "t", body)[4:])
    request = transport.Request(1, version, 5, "t", decoded, connection=FakeConnection())
    answer = await kafka_apis.handle_fetch(request)
    _, response = codec.decode_response(
        1, version, codec.encode_response(1, version, 5, answer)[4:]
    )
    return response


def partitions_of(response, version):
    key = "topic_id" if version >= 13 else "topic"
    return {
        (t[key], p["partition_index"]): (p["error_code"], p["high_watermark"], p["records"])
        for t in response["responses"]
        for p in t["partitions"]
    }


async def test_v13_names_topics_by_id_and_an_unknown_id_is_answered_unknown_topic_id():
    kafka_apis, apis = broker()
    apis.replica_manager.logs[("foo", 0)] = (10, b"records")
    unknown = uuid.UUID(int=99)
    for version in (13, 15):
        response = await fetch(kafka_apis, version, [(FOO_ID, [0]), (unknown, [0, 1])])
        assert response["error_code"] == 0 and response["session_id"] == 0
        assert partitions_of(response, version) == {
            (FOO_ID, 0): (0, 10, b"records" if version == 13 else b""),
            (unknown, 0): (UNKNOWN_TOPIC_ID, -1, b""),
            (unknown, 1): (UNKNOWN_TOPIC_ID, -1, b""),
        }
    # The replica manager read the known topic only, by name.
    assert apis.replica_manager.asked == [[("foo", 0)], [("foo", 0)]]


async def test_a_recreated_topic_old_id_unknown_or_inconsistent_in_a_session():
    kafka_apis, apis = broker()
    opened = await fetch(kafka_apis, 13, [(FOO_ID, [0])], epoch=0)
    session_id = opened["session_id"]
    assert session_id != 0
    # foo is deleted and made again: same name, a new id.
    apis.metadata_cache.topic_ids["foo"] = topic_id_string(NEW_FOO_ID)
    stale = await fetch(kafka_apis, 13, [(FOO_ID, [1])])
    assert partitions_of(stale, 13) == {(FOO_ID, 1): (UNKNOWN_TOPIC_ID, -1, b"")}
    # The session still holds foo-0 under the old id, its name known: the name's topic is
    # another one now (Kafka's INCONSISTENT_TOPIC_ID from the log's id).
    answer = await fetch(kafka_apis, 13, session_id=session_id, epoch=1)
    assert partitions_of(answer, 13) == {(FOO_ID, 0): (INCONSISTENT_TOPIC_ID, -1, b"")}
    renewed = await fetch(kafka_apis, 13, [(NEW_FOO_ID, [0])])
    assert partitions_of(renewed, 13) == {(NEW_FOO_ID, 0): (0, 10, b"")}


async def test_a_session_through_the_handler_answers_only_what_changed():
    kafka_apis, apis = broker()
    logs = apis.replica_manager.logs
    full = await fetch(kafka_apis, 12, [("foo", [0, 1]), ("bar", [0])], epoch=0)
    session_id = full["session_id"]
    assert session_id != 0 and len(partitions_of(full, 12)) == 3
    nothing = await fetch(kafka_apis, 12, session_id=session_id, epoch=1)
    assert (nothing["error_code"], nothing["session_id"], nothing["responses"]) == (
        0, session_id, [],
    )  # fmt: skip
    # The session's partitions are all read, only the changed one sent.
    assert sorted(apis.replica_manager.asked[-1]) == [("bar", 0), ("foo", 0), ("foo", 1)]
    logs[("foo", 1)] = (12, b"new")
    changed = await fetch(kafka_apis, 12, session_id=session_id, epoch=2)
    assert partitions_of(changed, 12) == {("foo", 1): (0, 12, b"new")}
    # Forget bar-0, add bar-1: bar-1 is new to the session, so it is sent.
    moved = await fetch(
        kafka_apis, 12, [("bar", [1])], session_id=session_id, epoch=3, forget=[("bar", [0])]
    )
    assert partitions_of(moved, 12) == {("bar", 1): (0, 10, b"")}
    assert ("bar", 0) not in apis.replica_manager.asked[-1]
    # Out of step: the epoch was 4, an unknown id.
    replayed = await fetch(kafka_apis, 12, session_id=session_id, epoch=3)
    assert (replayed["error_code"], replayed["session_id"], replayed["responses"]) == (
        INVALID_FETCH_SESSION_EPOCH, 0, [],
    )  # fmt: skip
    gone = await fetch(kafka_apis, 12, session_id=session_id + 1, epoch=1)
    assert gone["error_code"] == FETCH_SESSION_ID_NOT_FOUND
    # A sessionless fetch (librdkafka's and aiokafka's) is answered in full, as ever.
    plain = await fetch(kafka_apis, 11, [("foo", [0])])
    assert plain["session_id"] == 0 and partitions_of(plain, 11) == {("foo", 0): (0, 10, b"")}


async def test_fetch_sessions_wait_for_data_like_sessionless_fetches():
    # An incremental fetch with nothing new long-polls (the replica manager's purgatory)
    # rather than answering at once: the handler passes max_wait_ms on.
    kafka_apis, apis = broker()
    session_id = (await fetch(kafka_apis, 12, [("foo", [0])], epoch=0))["session_id"]
    await fetch(kafka_apis, 12, session_id=session_id, epoch=1, max_wait_ms=500)
    assert apis.replica_manager.waits == [0, 500]


def _authorizer(*grants) -> AclAuthorizer:
    authorizer = AclAuthorizer(frozenset())
    for kind, name, operation in grants:
        pattern = ResourcePattern(kind, name, PatternType.LITERAL)
        entry = AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW)
        authorizer.set_acls(pattern, authorizer.acls.get(pattern, frozenset()) | {entry})
    return authorizer


async def test_a_consumer_needs_read_on_each_topic_of_its_session():
    authorizer = _authorizer((ResourceType.TOPIC, "foo", Op.READ))
    kafka_apis, apis = broker(authorizer)
    full = await fetch(kafka_apis, 13, [(FOO_ID, [0]), (BAR_ID, [0])], epoch=0)
    assert partitions_of(full, 13) == {
        (FOO_ID, 0): (0, 10, b""), (BAR_ID, 0): (TOPIC_DENIED, -1, b""),
    }  # fmt: skip
    assert apis.replica_manager.asked == [[("foo", 0)]]
    # READ on foo revoked: the next incremental fetch, naming nothing, is refused it.
    authorizer.set_acls(
        ResourcePattern(ResourceType.TOPIC, "foo", PatternType.LITERAL), frozenset()
    )
    answer = await fetch(kafka_apis, 13, session_id=full["session_id"], epoch=1)
    assert partitions_of(answer, 13) == {
        (FOO_ID, 0): (TOPIC_DENIED, -1, b""), (BAR_ID, 0): (TOPIC_DENIED, -1, b""),
    }  # fmt: skip


async def test_a_replica_fetch_needs_cluster_action_v15_replica_state_included():
    kafka_apis, _ = broker(_authorizer((ResourceType.TOPIC, "foo", Op.READ)))
    as_replica = {"replica_state": {"replica_id": 2, "replica_epoch": 5}}
    refused = await fetch(kafka_apis, 15, [(FOO_ID, [0])], **as_replica)
    assert partitions_of(refused, 15) == {(FOO_ID, 0): (TOPIC_DENIED, -1, b"")}
    refused = await fetch(kafka_apis, 12, [("foo", [0])], replica_id=2)
    assert partitions_of(refused, 12) == {("foo", 0): (TOPIC_DENIED, -1, b"")}
    broker_acl = _authorizer((ResourceType.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))
    kafka_apis, _ = broker(broker_acl)
    served = await fetch(kafka_apis, 15, [(FOO_ID, [0])], **as_replica)
    assert partitions_of(served, 15) == {(FOO_ID, 0): (0, 10, b"")}


async def test_the_session_cache_is_sized_by_its_setting():
    kafka_apis, apis = broker()
    apis.config.slots = 0
    full = await fetch(kafka_apis, 12, [("foo", [0])], epoch=0)
    assert full["session_id"] == 0 and partitions_of(full, 12) == {("foo", 0): (0, 10, b"")}


async def test_session_times_come_from_trios_clock(autojump_clock):
    kafka_apis, _ = broker()
    session_id = (await fetch(kafka_apis, 12, [("foo", [0])], epoch=0))["session_id"]
    await trio.sleep(30)
    await fetch(kafka_apis, 12, session_id=session_id, epoch=1)
    session = kafka_apis.fetch_manager.cache.get(session_id)
    assert session.last_used_ms - session.creation_ms == 30_000
