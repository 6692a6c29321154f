"""Broker start-up: over real TCP, and refusing a log dir that belongs to another cluster."""

import pytest
import trio

from kcore.log import InconsistentClusterIdError, check_meta_properties
from kcore.testing import open_cluster


async def test_a_tcp_cluster_elects_a_controller_and_registers_kafkas_layout():
    with trio.fail_after(30):
        async with open_cluster(brokers=2, seed=7, network="tcp") as cluster:
            controller = await cluster.wait_for_controller()
            assert cluster.controller_epoch() == 1
            assert controller in (1, 2)
            children = await cluster.zk.get_children("/")
            for path in ["brokers", "controller", "controller_epoch", "cluster", "config"]:
                assert path in children
            registration, stat = await cluster.zk.get("/brokers/ids/1")
            assert b'"endpoints":["PLAINTEXT://127.0.0.1:' in registration
            assert stat.ephemeralOwner == cluster.brokers[1].zk_client.session_id
            assert cluster.brokers[1].broker_epoch == stat.czxid


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def test_meta_properties_of_another_cluster_stops_the_broker(tmp_path, autojump_clock):
    # A log dir that a broker of another cluster wrote.
    check_meta_properties(tmp_path / "broker-1", 1, "some-other-cluster")
    with pytest.raises(BaseException) as raised:
        async with open_cluster(brokers=1, seed=8, data_dir=tmp_path):
            pass
    [error] = _leaves(raised.value)
    assert isinstance(error, InconsistentClusterIdError)
    assert "doesn't match stored clusterId some-other-cluster" in str(error)
