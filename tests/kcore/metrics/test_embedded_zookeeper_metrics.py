"""An embedded cluster's zkstub serves /metrics too when asked (`kcore.open_cluster`'s
`zookeeper_http_listener`, as the brokers' `http.listener`): ZooKeeper's Prometheus names,
scraped over HTTP, with the numbers the cluster's work leaves in ZooKeeper."""

from __future__ import annotations

import urllib.request

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

import kcore


def _scrape(address: tuple[str, int]) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_an_embedded_clusters_zookeeper_serves_its_metrics():
    async with kcore.open_cluster(1, zookeeper_http_listener="http://127.0.0.1:0") as cluster:
        address = cluster.zookeeper_http_address
        assert address is not None and address[0] == "127.0.0.1" and address[1] > 0
        before = await trio.to_thread.run_sync(_scrape, address)
        # Two sessions (the broker's and the cluster's own client); the broker's
        # registration and /controller are the ephemerals.
        assert before["global_sessions"] == 2
        assert before["ephemerals_count"] == 2
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=2, replication_factor=1)
        after = await trio.to_thread.run_sync(_scrape, address)
    # The topic's znodes: /brokers/topics/t, its partitions, and each one's state.
    assert after["znode_count"] >= before["znode_count"] + 6


async def test_without_the_option_nothing_is_served():
    async with kcore.open_cluster(1) as cluster:
        assert cluster.zookeeper_http_address is None


async def test_the_option_is_checked_before_anything_starts():
    with pytest.raises(ValueError, match=r"zookeeper_http_listener: .*http://host:port"):
        async with kcore.open_cluster(1, zookeeper_http_listener="127.0.0.1:0"):
            pass
    with pytest.raises(ValueError, match="is not embedded"):
        async with kcore.open_cluster(
            1, zookeeper_connect="127.0.0.1:1", zookeeper_http_listener="http://127.0.0.1:0"
        ):
            pass
