"""The clusters the benchmarks measure, on real TCP loopback, logs in a temp dir:

- `"processes"` (the default): zkstub and each broker an OS process of its own, as users
  deploy (bench/workloads/_process_cluster.py); the workload's clients in its process;
- `"single"`: kcore's embedded cluster, brokers and clients all in this process's one Trio
  thread (`open_bench_cluster`), so every figure is the whole cluster on one core.

`open_cluster_of(kind, ...)` opens either; `create_topic` and `current_leaders` work on
both."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from bench.workloads import CLUSTERS, WorkloadOptions
from bench.workloads._process_cluster import ProcessCluster, open_process_cluster
from kcore.broker_process import YOUNG_GENERATION_OBJECTS
from kcore.common import TopicPartition
from kcore.testing import EmbeddedCluster, open_cluster, poll_until

SESSION_TIMEOUT_MS = 6000  # how long a dead broker goes unnoticed (failover workloads)
# The quick suite measures the default cluster only: a second cluster would add its
# start-up and every case again (the full suite runs both).
QUICK_CLUSTERS = ("processes",)


def suite_clusters(options: WorkloadOptions) -> tuple[str, ...]:
    """The clusters a workload runs on: the options' choice, else the suite's."""
    if options.clusters is not None:
        return options.clusters
    return QUICK_CLUSTERS if options.quick else CLUSTERS


def check_clusters(kinds: tuple[str, ...]) -> None:
    unknown = [kind for kind in kinds if kind not in CLUSTERS]
    if unknown or not kinds:
        raise ValueError(f"clusters must be some of {CLUSTERS}, not {kinds!r}")


@contextlib.asynccontextmanager
async def open_cluster_of(
    kind: str,
    brokers: int = 3,
    broker_config: Mapping[str, Any] | None = None,
    *,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    logs: str = "files",
    **process_options: Any,
) -> AsyncIterator[EmbeddedCluster | ProcessCluster]:
    """The cluster `kind` names (see CLUSTERS), entered once it has a controller that
    knows every broker. `logs="memory"`: the embedded cluster keeps logs in memory, the
    process cluster its temp dir on tmpfs. `process_options` go to `open_process_cluster`
    (e.g. `start_late`, `per_broker_config`); the embedded cluster takes none."""
    check_clusters((kind,))
    if kind == "single":
        if process_options:
            raise ValueError(f"the single-process cluster takes no {sorted(process_options)}")
        async with open_bench_cluster(
            brokers, broker_config, session_timeout_ms=session_timeout_ms, logs=logs
        ) as cluster:
            yield cluster
        return
    async with open_process_cluster(
        brokers,
        broker_config,
        session_timeout_ms=session_timeout_ms,
        storage="memory" if logs == "memory" else "disk",
        **process_options,
    ) as cluster:
        yield cluster


@contextlib.asynccontextmanager
async def open_bench_cluster(
    brokers: int = 3,
    broker_config: Mapping[str, Any] | None = None,
    *,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    logs: str = "files",
) -> AsyncIterator[EmbeddedCluster]:
    """`logs="memory"` for the workloads that measure the controller, not the disk. While it
    runs, the collector's young generation is what a `kcore broker` process sets, so both
    clusters run the brokers under the same collector."""
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
        with _young_generation(YOUNG_GENERATION_OBJECTS):
            await cluster.wait_for_controller(timeout=60)
            yield cluster


@contextlib.contextmanager
def _young_generation(objects: int) -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.set_threshold(objects, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


async def create_topic(
    cluster: EmbeddedCluster | ProcessCluster, name: str, partitions: int, **settings: Any
) -> None:
    """Creates the topic and waits until a broker leads each of its partitions (in a
    process cluster: until every broker's Metadata says so)."""
    # Thousands of partitions take a while: allow minutes, not the usual 30 s.
    async with cluster.admin(request_timeout_ms=600_000) as admin:
        await admin.create_topic(name, partitions=partitions, timeout=600, **settings)
    if isinstance(cluster, ProcessCluster):
        await cluster.wait_until_led(name, partitions)
    else:
        await wait_until_led(cluster, name, partitions)


async def current_leaders(
    cluster: EmbeddedCluster | ProcessCluster, topic: str, partitions: int
) -> dict[int, int]:
    """Partition -> its leader: as the brokers see it (embedded), as a broker's Metadata
    answers (processes)."""
    if isinstance(cluster, ProcessCluster):
        return await cluster.leaders(topic, partitions)
    return leaders(cluster, topic, partitions)


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
