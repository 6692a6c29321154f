"""The idempotent producer against real brokers (an embedded cluster, simulated network,
virtual time): a batch that expires after it was sent, its request or its answer held on a
blocked link, does not wedge its partition, and reading the log back shows every record
the producer acknowledged exactly once and the expired one at most once."""

from __future__ import annotations

import pytest
import trio

from kcore import errors
from kcore.common import TopicPartition
from kcore.embedded import broker_node
from kcore.log import parse_header
from kcore.testing import open_cluster


async def read_back(cluster, partition: int = 0) -> list[bytes]:
    async with cluster.consumer(auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("t", partition)])
        values: list[bytes] = []
        with trio.move_on_after(10):
            while True:
                values.extend(r.value for r in await consumer.poll(1.0))
    return values


def epochs_in_log(cluster, leader: int) -> list[tuple[int, int]]:
    log = cluster.brokers[leader].replica_manager.partition(TopicPartition("t", 0)).log
    return [
        (h.producer_epoch, h.base_sequence) for h in (parse_header(b) for b in log.read(0, 1 << 20))
    ]


@pytest.mark.parametrize("held", ["request", "answer"])
async def test_an_expired_sent_batch_does_not_wedge_the_partition(autojump_clock, held):
    async with open_cluster(brokers=1, seed=11, logs="memory") as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=1)
        async with cluster.producer(delivery_timeout_ms=3000, request_timeout_ms=1000) as p:
            assert p.enable_idempotence  # the default
            assert (await p.send_and_wait("t", b"x")).offset == 0
            me, broker = p._network.node_name, broker_node(1)
            link = (me, broker) if held == "request" else (broker, me)
            cluster.network.block(*link)
            with pytest.raises((errors.RequestTimedOutError, errors.NetworkError)):
                await p.send_and_wait("t", b"expired")
            cluster.network.heal()
            metas = [await p.send_and_wait("t", v) for v in (b"b", b"c")]
        values = await read_back(cluster)
        assert values.count(b"expired") <= 1
        assert [v for v in values if v != b"expired"] == [b"x", b"b", b"c"]
        assert [m.offset for m in metas] == [values.index(b"b"), values.index(b"c")]
        # "b" and "c" went in a newer epoch, from sequence 0.
        assert epochs_in_log(cluster, 1)[-2:] == [(1, 0), (1, 1)]


async def test_a_batch_the_broker_refuses_leaves_no_wedge(autojump_clock):
    # MESSAGE_TOO_LARGE after the batch took sequence 1: the broker never writes it, so
    # without the epoch bump every later batch would be out of order.
    async with open_cluster(brokers=1, seed=12, logs="memory") as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", 1, 1, config={"max.message.bytes": "2000"})
        async with cluster.producer() as p:
            await p.send_and_wait("t", b"x")
            with pytest.raises(errors.MessageTooLargeError):
                await p.send_and_wait("t", b"y" * 5000)
            metas = [await p.send_and_wait("t", v) for v in (b"b", b"c")]
        assert [m.offset for m in metas] == [1, 2]
        assert await read_back(cluster) == [b"x", b"b", b"c"]
        assert epochs_in_log(cluster, 1) == [(0, 0), (1, 0), (1, 1)]
