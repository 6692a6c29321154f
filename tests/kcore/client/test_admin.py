"""The admin client against a fake cluster."""

from __future__ import annotations

from collections import deque

import pytest
import trio

from kcore import errors
from kcore.client import Admin, Producer
from kcore.log import build_batch
from kcore.protocol.api_keys import ApiKey


async def test_create_topic_goes_to_the_controller(fake_cluster, client_args, autojump_clock):
    fake_cluster.controller_id = 2
    async with Admin(fake_cluster.bootstrap, **client_args) as admin:
        await admin.create_topic("t", 3, 2, config={"min.insync.replicas": "2"})
        desc = await admin.describe_topic("t")
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 for p in desc.partitions)
    ((broker, request),) = fake_cluster.requests_of(ApiKey.CREATE_TOPICS)
    assert broker == 2
    assert request.topics[0].num_partitions == 3
    assert request.topics[0].replication_factor == 2
    assert request.topics[0].configs == {"min.insync.replicas": "2"}


async def test_create_topic_retries_not_controller(fake_cluster, client_args, autojump_clock):
    fake_cluster.controller_id = 1

    def moved(broker_id: int, topic: str) -> int | None:
        if broker_id == 1:
            fake_cluster.controller_id = 3  # the controller moved before the request came
            return 41
        return None

    fake_cluster.create_hook = moved
    async with Admin(fake_cluster.bootstrap, **client_args) as admin:
        await admin.create_topic("t", 1)
    assert [b for b, _ in fake_cluster.requests_of(ApiKey.CREATE_TOPICS)] == [1, 3]
    assert "t" in fake_cluster.topics


async def test_create_existing_topic_raises(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    async with Admin(fake_cluster.bootstrap, **client_args) as admin:
        with pytest.raises(errors.TopicAlreadyExistsError, match="already exists"):
            await admin.create_topic("t", 1)


async def test_create_topic_waits_for_leaders(fake_cluster, client_args, autojump_clock):
    fake_cluster.leaderless_on_create = True
    async with trio.open_nursery() as nursery:

        async def elect_later() -> None:
            await trio.sleep(3)
            for p in fake_cluster.topics["t"]:
                p.leader = 1

        async with Admin(fake_cluster.bootstrap, **client_args) as admin:
            nursery.start_soon(elect_later)
            start = trio.current_time()
            await admin.create_topic("t", 2)
            assert trio.current_time() - start >= 3
        async with Producer(fake_cluster.bootstrap, **client_args) as producer:
            assert (await producer.send_and_wait("t", b"v", partition=1)).offset == 0


async def test_create_topic_times_out_without_leaders(fake_cluster, client_args, autojump_clock):
    fake_cluster.leaderless_on_create = True
    async with Admin(fake_cluster.bootstrap, **client_args) as admin:
        with pytest.raises(errors.RequestTimedOutError, match="within 2"):
            await admin.create_topic("t", 1, timeout=2)


async def test_describe_and_list_and_delete(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("a", 2, leaders=[2, 3])
    fake_cluster.add_topic("b", 1)
    admin = Admin(fake_cluster.bootstrap, **client_args)  # without `async with` too
    desc = await admin.describe_topic("a")
    assert desc.name == "a" and desc.topic_id == "id-a"
    assert [(p.partition, p.leader, p.replicas) for p in desc.partitions] == [
        (0, 2, (1, 2, 3)),
        (1, 3, (1, 2, 3)),
    ]
    assert await admin.list_topics() == ["a", "b"]
    cluster = await admin.describe_cluster()
    assert [b.node_id for b in cluster.brokers] == [1, 2, 3]
    assert cluster.controller_id == 1 and cluster.cluster_id == "fake-cluster"
    await admin.delete_topic("a")
    assert await admin.list_topics() == ["b"]
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        await admin.describe_topic("a")
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        await admin.delete_topic("a")


async def test_delete_records_goes_to_each_leader_and_retries_not_leader(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 2, leaders=[2, 3])
    for partition in (0, 1):
        for _ in range(5):
            fake_cluster.append("t", partition, build_batch([(0, None, b"v")]))
    # The leader moved after the client read its metadata: NOT_LEADER_OR_FOLLOWER, then
    # the client refreshes its metadata and asks again.
    fake_cluster.delete_records_errors[("t", 0)] = deque([6])
    async with Admin(fake_cluster.bootstrap, **client_args) as admin:
        assert await admin.delete_records({("t", 0): 3, ("t", 1): -1}) == {("t", 0): 3, ("t", 1): 5}
    sent = [(broker, [(p.partition, p.offset) for p in request.partitions])
            for broker, request in fake_cluster.requests_of(ApiKey.DELETE_RECORDS)]  # fmt: skip
    assert sent == [(2, [(0, 3)]), (3, [(1, -1)]), (2, [(0, 3)])]
    assert fake_cluster.partition("t", 0).log_start == 3
