"""failover, controller-failover and election-scaling: how long the cluster takes to heal
after a broker dies, on TCP loopback.

- failover: the broker leading the most partitions of a topic (10 / 100 / 1000 partitions,
  RF 3) is killed under a steady produce load; per partition it led, the window from the
  kill until a record sent to it is acknowledged (`unavailable` rows), and every ack of
  the load with its latency (`ack` rows, the timeline).
- controller-failover: the controller is killed with 1 000 / 10 000 partitions in the
  cluster; the time until a new controller is active (`elected`) and until every
  surviving broker has its metadata (`metadata_converged`), and the difference, the
  controller's own work (`failover_work`).
- election-scaling: a broker leading N partitions (N = 100 .. 10 000) dies and its
  ZooKeeper session is expired at once, so the figure is the election itself: the time
  until all N partitions are led again (`election` rows, one per N), to show how its cost
  grows with N.

A crash is noticed when the broker's ZooKeeper session expires (`SESSION_TIMEOUT_MS`,
lower in the quick suite): the first two figures include it; election-scaling does not.
"""

from __future__ import annotations

import attrs
import trio

from bench._clock import WallStamp
from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload
from bench.workloads._cluster import (
    SESSION_TIMEOUT_MS,
    create_topic,
    leaders,
    open_bench_cluster,
    wait_until_led,
)
from kcore.common import TopicPartition
from kcore.testing import poll_until

QUICK_SESSION_TIMEOUT_MS = 2000


@attrs.frozen
class FailoverParams:
    partition_counts: tuple[int, ...] = (10, 100, 1000)
    load_per_s: int = 200  # the steady produce load during the kill
    settle: float = 1.0  # seconds of load before the kill
    session_timeout_ms: int = SESSION_TIMEOUT_MS


# With thousands of partitions, brokers and controller in one Trio thread have stretches of
# work long enough to delay ZooKeeper heartbeats past a 6 s session (sessions then expire
# mid-measurement); Kafka's own default, 18 s, and more keep the large cases stable.
LARGE_SESSION_TIMEOUT_MS = 30000


@attrs.frozen
class ControllerFailoverParams:
    partition_counts: tuple[int, ...] = (1000, 10000)
    session_timeout_ms: int = LARGE_SESSION_TIMEOUT_MS


@attrs.frozen
class ElectionParams:
    partition_counts: tuple[int, ...] = (100, 1000, 3000, 10000)
    session_timeout_ms: int = LARGE_SESSION_TIMEOUT_MS  # the death is signalled at once


def _quick(options: WorkloadOptions) -> bool:
    return options.quick


@workload(
    "failover",
    "per partition, the window without acks after its leader is killed under load "
    "(10 / 100 / 1000 partitions)",
)
async def run_failover_workload(rows: RowWriter, options: WorkloadOptions) -> Summary:
    params = (
        FailoverParams((10,), 100, 0.3, QUICK_SESSION_TIMEOUT_MS)
        if _quick(options)
        else FailoverParams()
    )
    return await run_failover(rows, params)


@workload(
    "controller-failover",
    "time until a new controller is active and every broker has its metadata after the "
    "controller is killed (1k / 10k partitions)",
)
async def run_controller_failover_workload(rows: RowWriter, options: WorkloadOptions) -> Summary:
    params = (
        ControllerFailoverParams((100,), QUICK_SESSION_TIMEOUT_MS)
        if _quick(options)
        else ControllerFailoverParams()
    )
    return await run_controller_failover(rows, params)


@workload(
    "election-scaling",
    "time to elect new leaders for N partitions when their leader dies (N = 100 .. 10k)",
)
async def run_election_workload(rows: RowWriter, options: WorkloadOptions) -> Summary:
    params = (
        ElectionParams((50, 200), QUICK_SESSION_TIMEOUT_MS) if _quick(options) else ElectionParams()
    )
    return await run_election_scaling(rows, params)


# -- failover ------------------------------------------------------------------------------


async def run_failover(rows: RowWriter, params: FailoverParams) -> Summary:
    summary = []
    for count in params.partition_counts:
        async with open_bench_cluster(session_timeout_ms=params.session_timeout_ms) as cluster:
            summary.append(await _failover_case(rows, params, cluster, count))
    return summary


async def _failover_case(rows, params, cluster, count) -> dict[str, object]:
    topic = "failover"
    case = f"partitions-{count}"
    case_params = {
        "partitions": count,
        "session_timeout_ms": params.session_timeout_ms,
        "load_per_s": params.load_per_s,
    }
    await create_topic(
        cluster, topic, count, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    stamp = WallStamp.now()
    led = leaders(cluster, topic, count)
    victim = max(sorted(set(led.values())), key=lambda b: sum(v == b for v in led.values()))
    affected = sorted(p for p, b in led.items() if b == victim)
    windows: list[float] = []
    async with cluster.producer(acks="all", linger_ms=5, delivery_timeout_ms=120_000) as producer:

        async def send(partition: int, began: float, op: str, since: float) -> None:
            try:
                await producer.send_and_wait(topic, b"failover", partition=partition)
                outcome = "ok"
            except Exception as error:  # recorded in the row
                outcome = type(error).__name__
            done = trio.current_time()
            if op == "unavailable":
                windows.append(done - since)
            rows.write(
                case=case, op=op, params=case_params, start_time=stamp(began),
                latency_ns=round((done - since) * 1e9), nbytes=8, outcome=outcome,
            )  # fmt: skip

        async with trio.open_nursery() as nursery:
            stop = trio.Event()

            async def load() -> None:
                number = 0
                while not stop.is_set():
                    began = trio.current_time()
                    nursery.start_soon(send, number % count, began, "ack", began)
                    number += 1
                    await trio.sleep(1 / params.load_per_s)

            nursery.start_soon(load)
            await trio.sleep(params.settle)
            killed_at = trio.current_time()
            await cluster.kill_broker(victim)
            async with trio.open_nursery() as probes:
                for partition in affected:
                    probes.start_soon(send, partition, killed_at, "unavailable", killed_at)
            stop.set()
    windows.sort()
    return {
        "case": case,
        "partitions_moved": len(affected),
        "median_window_s": round(windows[len(windows) // 2], 2),
        "max_window_s": round(windows[-1], 2),
    }


# -- controller failover -------------------------------------------------------------------


async def run_controller_failover(rows: RowWriter, params: ControllerFailoverParams) -> Summary:
    summary = []
    for count in params.partition_counts:
        async with open_bench_cluster(
            session_timeout_ms=params.session_timeout_ms, logs="memory"
        ) as cluster:
            summary.append(await _controller_case(rows, params, cluster, count))
    return summary


async def _controller_case(rows, params, cluster, count) -> dict[str, object]:
    case = f"partitions-{count}"
    case_params = {"partitions": count, "session_timeout_ms": params.session_timeout_ms}
    await create_topic(cluster, "controller-failover", count, replication_factor=3)
    stamp = WallStamp.now()
    old = await cluster.wait_for_controller(timeout=60)
    old_epoch = cluster.controller_epoch()
    killed_at = trio.current_time()
    await cluster.kill_broker(old)
    await poll_until(lambda: cluster.controller_id() not in (None, old), timeout=300, every=0.005)
    elected_at = trio.current_time()
    new = cluster.controller_id()
    epoch = cluster.brokers[new].controller.epoch
    await poll_until(
        lambda: all(
            b.metadata_cache.controller_id == new and b.metadata_cache.controller_epoch == epoch
            for b in cluster.brokers.values()
        ),
        timeout=300,
        every=0.005,
    )
    converged_at = trio.current_time()
    for op, since, until in (
        ("elected", killed_at, elected_at),
        ("metadata_converged", killed_at, converged_at),
        ("failover_work", elected_at, converged_at),
    ):
        rows.write(
            case=case, op=op, params=case_params, start_time=stamp(since),
            latency_ns=round((until - since) * 1e9),
        )  # fmt: skip
    return {
        "case": case,
        "epochs": f"{old_epoch}->{epoch}",
        "elected_s": round(elected_at - killed_at, 2),
        "converged_s": round(converged_at - killed_at, 2),
        "failover_work_s": round(converged_at - elected_at, 3),
    }


# -- election scaling ----------------------------------------------------------------------


async def run_election_scaling(rows: RowWriter, params: ElectionParams) -> Summary:
    summary = []
    for count in params.partition_counts:
        async with open_bench_cluster(
            session_timeout_ms=params.session_timeout_ms, logs="memory"
        ) as cluster:
            summary.append(await _election_case(rows, cluster, count))
    return summary


async def _election_case(rows, cluster, count) -> dict[str, object]:
    topic = "election"
    case = f"leader-dies-{count}"
    case_params = {"partitions": count}
    # A broker other than the controller first in every assignment: it leads them all,
    # and its death costs an election, not a controller failover too.
    controller = await cluster.wait_for_controller(timeout=60)
    victim, *others = sorted(cluster.brokers, key=lambda b: b == controller)
    async with cluster.admin(request_timeout_ms=600_000) as admin:
        await admin.create_topic(
            topic,
            assignments={p: [victim, *others] for p in range(count)},
            config={},
            timeout=600,
        )
    await wait_until_led(cluster, topic, count)
    led = leaders(cluster, topic, count)
    assert set(led.values()) == {victim}, f"{victim} should lead them all: {set(led.values())}"
    stamp = WallStamp.now()
    session = cluster.brokers[victim].zk_client.session_id
    await cluster.kill_broker(victim)
    began = trio.current_time()
    await cluster.zk_server.expire_session(session)  # noticed now, not a timeout later
    await wait_until_led(cluster, topic, count, not_by=victim)
    elapsed = trio.current_time() - began
    rows.write(
        case=case, op="election", params=case_params, start_time=stamp(began),
        latency_ns=round(elapsed * 1e9), count=count,
    )  # fmt: skip
    assert all(
        cluster.brokers[b].replica_manager.partition(TopicPartition(topic, p)).is_leader
        for p, b in leaders(cluster, topic, count).items()
    )
    return {
        "case": case,
        "seconds": round(elapsed, 3),
        "per_partition_ms": round(elapsed / count * 1000, 3),
    }


__all__ = [
    "ControllerFailoverParams",
    "ElectionParams",
    "FailoverParams",
    "run_controller_failover",
    "run_election_scaling",
    "run_failover",
]
