"""The producer when some brokers answer metadata from a stale cache: a broker the controller
cannot reach still names the leader it last heard of. The client keeps the newest leader
epoch it has seen for each partition (Kafka's Metadata.updateLatestMetadata, KIP-320), so a
stale answer cannot send a retry back to a broker that already said it is not the leader."""

from __future__ import annotations

import random

import attrs
import pytest
import trio

import transport
from kcore.client import Producer
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)

from .conftest import FakeCluster


@attrs.define
class StaleCacheCluster(FakeCluster):
    # broker id -> (topic, partition) -> (leader, leader epoch) its metadata cache still holds
    stale_views: dict[int, dict[tuple[str, int], tuple[int, int]]] = attrs.field(factory=dict)
    # topic -> its id, when not the fake's usual "id-<topic>" (a recreated topic)
    topic_ids: dict[str, str] = attrs.field(factory=dict)
    # brokers whose cache is empty (restarted, not yet told anything by the controller)
    empty_caches: set[int] = attrs.field(factory=set)

    async def _metadata(self, broker_id: int, request: MetadataRequest) -> MetadataResponse:
        if broker_id in self.empty_caches:
            names = request.topics or ()
            return MetadataResponse((), -1, tuple(MetadataTopic(n, 3) for n in names), None)
        response = await super()._metadata(broker_id, request)
        view = self.stale_views.get(broker_id, {})
        topics = []
        for topic in response.topics:
            if topic.name in self.topic_ids:
                topic = attrs.evolve(topic, topic_id=self.topic_ids[topic.name])
            partitions = []
            for p in topic.partitions:
                stale = view.get((topic.name, p.partition))
                if stale is not None:
                    p = MetadataPartition(
                        p.partition, 0, stale[0], stale[1], p.replicas, p.isr, p.offline_replicas
                    )
                partitions.append(p)
            topics.append(attrs.evolve(topic, partitions=tuple(partitions)))
        return attrs.evolve(response, topics=tuple(topics))


@pytest.fixture
async def stale_cluster(nursery: trio.Nursery, autojump_clock: object) -> StaleCacheCluster:
    cluster = StaleCacheCluster(transport.SimNetwork(seed=7))
    await cluster.start(nursery)
    return cluster


async def test_a_stale_metadata_answer_does_not_send_retries_back_to_the_old_leader(
    stale_cluster: StaleCacheCluster,
):
    cluster = stale_cluster
    cluster.add_topic("t", 1, leaders=[1])
    async with Producer(
        cluster.bootstrap,
        network=cluster.network.node("client-1"),
        rng=random.Random(42),
        metadata_max_age_ms=100,  # many refreshes, each from a broker chosen at random
        # The brokers asked follow the seeded rng; idempotence's InitProducerId would draw
        # from it too.
        enable_idempotence=False,
    ) as producer:
        await producer.send_and_wait("t", b"v0")
        # The controller moves the leadership to broker 2 (leader epoch 1); broker 3 does
        # not hear of it (cut off from the controller) and keeps naming broker 1.
        cluster.move_leader("t", 0, 2)
        cluster.stale_views[3] = {("t", 0): (1, 0)}
        for i in range(1, 40):
            await producer.send_and_wait("t", f"v{i}".encode())
            await trio.sleep(0.05)
    produces = [broker for broker, _ in cluster.requests_of(ApiKey.PRODUCE)]
    metadata_from_stale_broker = [b for b, _ in cluster.requests_of(ApiKey.METADATA) if b == 3]
    assert metadata_from_stale_broker  # the producer did ask the stale broker
    # NOT_LEADER_OR_FOLLOWER from broker 1 after the move until the producer has heard of
    # leader epoch 1 (a refresh that broker 3 answers before that names broker 1 at the
    # epoch the producer knows, as it would to Kafka's client: which broker answers depends
    # on the tasks' order); once it has, every send goes to broker 2, though later
    # refreshes are answered by broker 3 too.
    moved = produces.index(2)
    assert produces[:moved] == [1] * moved and moved >= 2
    assert produces[moved:] == [2] * (len(produces) - moved)
    assert len(produces) == 40 + moved - 1  # each refusal by broker 1 cost one retry


async def test_a_recreated_topic_takes_the_new_leaders_although_their_epochs_are_lower(
    stale_cluster: StaleCacheCluster,
):
    cluster = stale_cluster
    cluster.add_topic("t", 1, leaders=[1])
    for _ in range(3):
        cluster.move_leader("t", 0, 1)  # leader epoch 3
    async with Producer(
        cluster.bootstrap, network=cluster.network.node("client-1"), rng=random.Random(42)
    ) as producer:
        await producer.send_and_wait("t", b"old")
        # Deleted and created again (another topic id): leader 2 at leader epoch 0.
        cluster.topics["t"] = [attrs.evolve(cluster.partition("t", 0), leader=2, leader_epoch=0)]
        cluster.topic_ids = {"t": "id-t-2"}
        meta = await producer.send_and_wait("t", b"new")
    assert meta.partition == 0
    assert [b for b, _ in cluster.requests_of(ApiKey.PRODUCE)][-1] == 2


async def test_an_answer_naming_no_broker_does_not_erase_what_the_producer_knows(
    stale_cluster: StaleCacheCluster,
):
    cluster = stale_cluster
    cluster.add_topic("t", 1, leaders=[1])
    cluster.move_leader("t", 0, 2)  # leader 2 at leader epoch 1
    async with Producer(
        cluster.bootstrap,
        network=cluster.network.node("client-1"),
        rng=random.Random(42),
        metadata_max_age_ms=100,
    ) as producer:
        await producer.send_and_wait("t", b"v0")
        # Broker 3 restarts and the controller has not filled its cache yet; broker 1
        # (cut off from the controller) still names the leader before the election.
        cluster.empty_caches.add(3)
        cluster.stale_views[1] = {("t", 0): (1, 0)}
        for i in range(1, 40):
            await producer.send_and_wait("t", f"v{i}".encode())
            await trio.sleep(0.05)
    assert [b for b, _ in cluster.requests_of(ApiKey.METADATA) if b == 3]  # it was asked
    assert {b for b, _ in cluster.requests_of(ApiKey.PRODUCE)} == {2}
