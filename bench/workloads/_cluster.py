"""The cluster benchmarks measure: kcore's embedded cluster on real TCP loopback (brokers
and clients in this process, one Trio thread), wall-clock stamped, logs in a temp dir."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kcore.common import TopicPartition
from kcore.testing import EmbeddedCluster, open_cluster, poll_until

SESSION_TIMEOUT_MS = 6000  # how long a dead broker goes unnoticed (failover workloads)


@contextlib.asynccontextmanager
async def open_bench_cluster(
    brokers: int = 3,
    broker_config: Mapping[str, Any] | None = None,
    *,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    logs: str = "files",
) -> AsyncIterator[EmbeddedCluster]:
    """`logs="memory"` for the workloads that measure the controller, not the disk."""
    settings = {"zookeeper.session.timeout.ms": session_timeout_ms, **(broker_config or {})}
    # ZooKeeper allows session timeouts from 2 to 20 ticks.
    tick = min(2.0, session_timeout_ms / 1000 / 2)
    async with open_cluster(
        brokers,
        network="tcp",
        clock=time.time,
        broker_config=settings,
        tick_time=tick,
        logs=logs,
    ) as cluster:
        await cluster.wait_for_controller(timeout=60)
        yield cluster


async def create_topic(
    cluster: EmbeddedCluster, name: str, partitions: int, **settings: Any
) -> None:
    """Creates the topic and waits until a broker leads each of its partitions."""
    # Thousands of partitions take a while: allow minutes, not the usual 30 s.
    async with cluster.admin(request_timeout_ms=600_000) as admin:
        await admin.create_topic(name, partitions=partitions, timeout=600, **settings)
    await wait_until_led(cluster, name, partitions)


def leaders(cluster: EmbeddedCluster, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> the running broker that leads it (as the brokers themselves see it)."""
    led = {}
    for broker_id, broker in cluster.brokers.items():
        manager = broker.replica_manager
        if manager is None:
            continue
        for partition in range(partitions):
            replica = manager.partition(TopicPartition(topic, partition))
            if replica is not None and replica.is_leader:
                led[partition] = broker_id
    return led


async def wait_until_led(
    cluster: EmbeddedCluster,
    topic: str,
    partitions: int,
    *,
    not_by: int | None = None,
    timeout: float = 300.0,
) -> None:
    """Until every partition has a leader (other than `not_by`). Watching must cost the
    cluster little of the time being measured: while the first partition still waiting
    is not led, that is all a look checks (a broker takes leadership of a request's
    partitions in one step), and a partition found led is not looked at again."""
    pending = [TopicPartition(topic, p) for p in range(partitions)]

    def is_led(tp: TopicPartition, managers: list[Any]) -> bool:
        for manager in managers:
            replica = manager.partition(tp)
            if replica is not None and replica.is_leader:
                return True
        return False

    def all_led() -> bool:
        managers = [
            b.replica_manager
            for broker_id, b in cluster.brokers.items()
            if broker_id != not_by and b.replica_manager is not None
        ]
        if pending and not is_led(pending[0], managers):
            return False
        pending[:] = [tp for tp in pending if not is_led(tp, managers)]
        return not pending

    await poll_until(all_led, timeout=timeout, every=0.01)
