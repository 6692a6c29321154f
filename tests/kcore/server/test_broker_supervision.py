"""The broker's failure policy as a client and an operator see it: a request handler that
fails answers UNKNOWN_SERVER_ERROR and the connection serves its next request; a request
over socket.request.max.bytes closes its connection only; a log dir that fails stops the
broker cleanly (its registration goes at once, its leaderships move, and `run` says why);
a long-lived child that fails takes the broker down with its error."""

import errno
import random

import pytest
import trio

import actors
import transport
from kcore import errors
from kcore.common import TopicPartition
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kcore.server.broker import BrokerServer, BrokerState
from kcore.server.log_manager import MemoryLogStorage
from kcore.server.replica_manager import ReplicaManager
from kcore.testing import broker_node, open_cluster, poll_until
from kcore.wire import from_wire, to_wire

TP = TopicPartition("t", 0)


def _connect(cluster, broker_id=1):
    broker = cluster.brokers[broker_id]
    endpoint = broker.endpoints[0]
    return transport.open_rpc_connection(
        cluster.network.node("tester"), (endpoint.host, endpoint.port), client_id="tester"
    )


def _list_offsets():
    return to_wire(ListOffsetsRequest(-1, (ListOffsetsPartition("t", 0, LATEST_TIMESTAMP),)))


async def test_a_failing_request_handler_answers_unknown_server_error_and_the_broker_goes_on(
    autojump_clock, monkeypatch
):
    list_offsets = ReplicaManager.list_offsets
    calls = 0

    def fails_once(self, request):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("injected failure")
        return list_offsets(self, request)

    async with open_cluster(brokers=1, seed=41) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=1)
        monkeypatch.setattr(ReplicaManager, "list_offsets", fails_once)
        async with _connect(cluster) as connection:
            failed = await connection.request(ApiKey.LIST_OFFSETS, _list_offsets())
            served = await connection.request(ApiKey.LIST_OFFSETS, _list_offsets())
        assert failed.error_code == errors.UnknownServerError.code
        assert "injected failure" in failed.body["error_message"]
        assert served.error_code == 0
        [partition] = from_wire(ListOffsetsResponse, served.body).partitions
        assert (partition.error_code, partition.offset) == (0, 0)
        assert cluster.brokers[1].state is BrokerState.RUNNING


async def test_a_request_over_socket_request_max_bytes_closes_its_connection_only(
    autojump_clock,
):
    limit = 4096
    async with open_cluster(
        brokers=1, seed=42, broker_config={"socket.request.max.bytes": limit}
    ) as cluster:
        await cluster.wait_for_controller(timeout=30)
        # Just under and well over the limit (the envelope adds a few dozen bytes).
        small = to_wire(MetadataRequest(("a" * (limit - 200),)))
        large = to_wire(MetadataRequest(("a" * (2 * limit),)))
        async with _connect(cluster) as connection:
            with pytest.raises(transport.ConnectionClosedError):
                await connection.request(ApiKey.METADATA, large)
        async with _connect(cluster) as connection:
            response = await connection.request(ApiKey.METADATA, small)
        assert response.error_code == 0
        [topic] = from_wire(MetadataResponse, response.body).topics
        assert topic.error_code == errors.UnknownTopicOrPartitionError.code


def _fail_appends(storage: MemoryLogStorage, tp: TopicPartition) -> None:
    def append(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    storage.logs[tp].append = append


async def test_a_failed_log_dir_stops_the_broker_cleanly_and_its_leaderships_move(
    autojump_clock,
):
    async with open_cluster(brokers=2, seed=43, logs="memory") as cluster:
        storage = MemoryLogStorage()
        broker = _hand_started_broker(cluster, 3, log_storage=storage)
        stopped_by = []
        registered_once_stopped = []

        async def run_broker(task_status=trio.TASK_STATUS_IGNORED):
            try:
                await broker.run(task_status=task_status)
            except errors.KafkaStorageError as error:
                stopped_by.append(error)
                # The session was closed, not left to expire: its registration went with it.
                registered_once_stopped.append(await cluster.zk.exists("/brokers/ids/3"))

        async with trio.open_nursery() as nursery:
            await nursery.start(run_broker)
            await poll_until(lambda: 3 in cluster.brokers[1].metadata_cache.brokers, timeout=30)
            async with cluster.admin() as admin:
                await admin.create_topic("t", assignments={0: [3, 1]})
                async with cluster.producer(acks="all") as producer:
                    assert (await producer.send_and_wait("t", b"before", partition=0)).offset == 0
                    _fail_appends(storage, TP)
                    # Broker 3 answers KAFKA_STORAGE_ERROR (retriable) and stops; the
                    # producer finds the new leader and its send goes through.
                    assert (await producer.send_and_wait("t", b"after", partition=0)).offset == 1
                description = await admin.describe_topic("t")
        assert description.partitions[0].leader == 1
        [error] = stopped_by
        assert broker.state is BrokerState.NOT_RUNNING
        assert str(cluster.broker_config(3).log_dirs[0]) in str(error)
        assert "Input/output error" in str(error)
        assert registered_once_stopped == [None]


def _hand_started_broker(cluster, broker_id, **kwargs):
    """A broker run here rather than in the cluster, to see how its `run` ends."""
    return BrokerServer(
        cluster.broker_config(broker_id),
        cluster.network,
        random.Random(broker_id),
        clock=cluster.clock,
        node_name=broker_node(broker_id),
        **kwargs,
    )


async def test_a_child_that_fails_takes_the_broker_down_with_its_error(autojump_clock, monkeypatch):
    run = ReplicaManager.run
    fail = trio.Event()

    async def fails_in_broker_2(self, *, task_status=trio.TASK_STATUS_IGNORED):
        if self.broker_id != 2:
            return await run(self, task_status=task_status)
        task_status.started()
        await fail.wait()
        raise RuntimeError("a bug in the replica manager")

    monkeypatch.setattr(ReplicaManager, "run", fails_in_broker_2)
    async with open_cluster(brokers=1, seed=44) as cluster:
        broker = _hand_started_broker(cluster, 2)
        stopped_by = []

        async def run_broker(task_status=trio.TASK_STATUS_IGNORED):
            try:
                await broker.run(task_status=task_status)
            except actors.RestartIntensityError as error:
                stopped_by.append(error)

        async with trio.open_nursery() as nursery:
            await nursery.start(run_broker)
            fail.set()
        [error] = stopped_by
        assert "a bug in the replica manager" in str(error.__cause__)
        assert broker.state is BrokerState.NOT_RUNNING
        assert cluster.brokers[1].state is BrokerState.RUNNING
