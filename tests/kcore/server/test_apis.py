"""KafkaApis with its collaborators stood in for: topic creation plans against the live
brokers the controller answers (asked, not read from its state) and writes through the
ZooKeeper client; a controller that resigned in between answers NOT_CONTROLLER."""

import random

import attrs

import transport
from kcore import errors
from kcore.config import KafkaConfig
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from kcore.server.apis import KafkaApis
from kcore.server.metadata_cache import MetadataCache
from kcore.wire import from_wire, to_wire


@attrs.define
class _Controller:
    live_brokers: list[int]
    resigned: bool = False  # after the handler checked `is_active`
    is_active: bool = True

    async def live_broker_ids(self) -> list[int]:
        if self.resigned:
            raise errors.NotControllerError("resigned")
        return list(self.live_brokers)


@attrs.define
class _ZkClient:
    topics: list[str] = attrs.field(factory=list)
    created: list[tuple] = attrs.field(factory=list)

    async def get_all_topics(self) -> list[str]:
        return list(self.topics)

    async def create_topic(self, name, topic_id, assignment, configs) -> None:
        self.created.append((name, topic_id, dict(assignment), dict(configs)))


def _apis(controller, zk_client):
    return KafkaApis(
        KafkaConfig.from_dict({"broker.id": 1, "zookeeper.connect": "unused:1"}),
        None,  # no request here reaches the replica manager
        MetadataCache(1),
        zk_client,
        controller,
        broker_epoch=lambda: 1,
        cluster_id="cluster",
        rng=random.Random(0),
        new_topic_id=lambda: "topic-id",
    )


async def _create(apis, topic, *, validate_only=False):
    message = CreateTopicsRequest((topic,), timeout_ms=0, validate_only=validate_only)
    request = transport.Request(ApiKey.CREATE_TOPICS, 0, 1, "test", to_wire(message), None)
    [result] = from_wire(CreateTopicsResponse, await apis.handle_create_topics(request)).topics
    return result


async def test_creation_plans_against_the_brokers_the_controller_answers():
    zk_client = _ZkClient()
    apis = _apis(_Controller([1, 2]), zk_client)
    result = await _create(apis, CreatableTopic("t", 1, 3), validate_only=True)
    assert result.error_code == errors.InvalidReplicationFactorError.code

    apis.controller.live_brokers = [1, 2, 3]
    result = await _create(apis, CreatableTopic("t", 1, 3), validate_only=True)
    assert result.error_code == 0
    assert zk_client.created == []  # validated only

    await _create(apis, CreatableTopic("t", 2, 1, configs={"retention.ms": "1000"}))
    [(name, topic_id, assignment, configs)] = zk_client.created
    assert (name, topic_id, configs) == ("t", "topic-id", {"retention.ms": "1000"})
    assert sorted(assignment) == [0, 1]
    assert all(len(replicas) == 1 and replicas[0] in (1, 2, 3) for replicas in assignment.values())


async def test_a_controller_that_resigned_meanwhile_answers_not_controller():
    zk_client = _ZkClient()
    apis = _apis(_Controller([1, 2, 3], resigned=True), zk_client)
    result = await _create(apis, CreatableTopic("t", 1, 1))
    assert result.error_code == errors.NotControllerError.code
    assert zk_client.created == []
