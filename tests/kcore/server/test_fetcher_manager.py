"""Which fetcher a partition goes to, reuse, idle shutdown, and what happens to a fetcher
that keeps failing (ReplicaFetcherManager). A fetcher restarted after one failure, its
follower catching up: test_replica_managers.py."""

import random

import pytest
import trio

import transport
from actors import RestartIntensityError
from kcore import fetcher_id
from kcore.common import TopicPartition
from kcore.server.fetcher import (
    FETCHER_MAX_RESTARTS,
    BrokerEndPoint,
    FetcherSettings,
    InitialFetchState,
    ReplicaFetcherManager,
)


class _NoReplicas:
    broker_id = 9

    def partition(self, tp):
        return None  # fetchers drop partitions they cannot find; fine for bookkeeping

    def broker_epoch(self):
        return 1

    def on_follower_append(self, partition):
        pass


def _state(leader_id, port=9092, epoch=1):
    return InitialFetchState(BrokerEndPoint(leader_id, f"broker-{leader_id}", port), epoch, 0)


async def test_fetchers_are_keyed_by_leader_and_fetcher_id_reused_and_shut_down_when_idle():
    network = transport.SimNetwork(1).node("broker-9")
    manager = ReplicaFetcherManager(
        _NoReplicas(), network, random.Random(1), FetcherSettings(), num_fetchers=2
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        a, b = TopicPartition("t", 0), TopicPartition("t", 1)
        assert fetcher_id("t", 0, 2) != fetcher_id("t", 1, 2)
        manager.add_fetcher_for_partitions({a: _state(1), b: _state(1)})
        assert sorted(manager.fetchers) == [(1, fetcher_id("t", 0, 2)), (1, fetcher_id("t", 1, 2))]
        first = manager.fetchers[1, fetcher_id("t", 0, 2)]
        manager.add_fetcher_for_partitions({a: _state(1, epoch=2)})
        assert manager.fetchers[1, fetcher_id("t", 0, 2)] is first  # same endpoint: reused
        assert first.partitions[a].current_leader_epoch == 2
        manager.add_fetcher_for_partitions({a: _state(1, port=9093, epoch=3)})
        assert manager.fetchers[1, fetcher_id("t", 0, 2)] is not first  # leader moved
        manager.remove_fetcher_for_partitions([a, b])
        manager.shutdown_idle_fetchers()
        assert manager.fetchers == {}
        nursery.cancel_scope.cancel()


class _BrokenReplicas(_NoReplicas):
    """Every look at a partition meets a bug."""

    def partition(self, tp):
        raise RuntimeError("injected fault")


async def test_a_fetcher_failing_again_and_again_is_given_up_on_and_that_escalates(
    autojump_clock,
):
    network = transport.SimNetwork(1).node("broker-9")
    settings = FetcherSettings(backoff_ms=100)
    manager = ReplicaFetcherManager(_BrokenReplicas(), network, random.Random(1), settings)
    manager.add_fetcher_for_partitions({TopicPartition("t", 0): _state(1)})
    start = trio.current_time()
    with pytest.raises(RestartIntensityError):
        await manager.run()  # its supervisor (the replica manager's) decides what next
    # Restarted after each failure, one backoff apart, until the limit.
    assert trio.current_time() - start == pytest.approx(FETCHER_MAX_RESTARTS * 0.1)
