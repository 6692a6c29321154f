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
- election-scaling: a broker leading N partitions (N = 100 .. 10 000, in topics of 100)
  dies; from the moment a ZooKeeper watch sees its registration deleted (when the
  controller learns of the death too) until every survivor's Metadata shows all N led by
  a survivor (`election` rows, one per N), to show how the election's cost grows with N.

A crash is noticed when the broker's ZooKeeper session expires (`SESSION_TIMEOUT_MS`,
lower in the quick suite): the first two figures include it; election-scaling does not.

Each runs on both clusters (bench/workloads/_cluster.py), each its own cases (names start
with `processes-` or `single-`); the quick suite runs the process cluster only. In the
process cluster a kill is a SIGKILL, and what the workloads see of the brokers is what a
client or ZooKeeper sees (Metadata answers, /controller); in the single-process one they
look at the brokers' own state, except election-scaling, which looks the same way in both.
"""

from __future__ import annotations

import contextlib
import logging

import attrs
import trio

from bench._clock import WallStamp
from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload
from bench.workloads._cluster import (
    CLUSTERS,
    SESSION_TIMEOUT_MS,
    check_clusters,
    create_topic,
    current_leaders,
    open_cluster_of,
    suite_clusters,
)
from bench.workloads._process_cluster import (
    METADATA_POLL_INTERVAL,
    ProcessCluster,
    open_metadata_look,
    watch_deregistration,
)
from kcore.client import NewTopic
from kcore.testing import poll_until

log = logging.getLogger("bench.failover")

QUICK_SESSION_TIMEOUT_MS = 2000


@attrs.frozen
class FailoverParams:
    partition_counts: tuple[int, ...] = (10, 100, 1000)
    load_per_s: int = 200  # the steady produce load during the kill
    settle: float = 1.0  # seconds of load before the kill
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    clusters: tuple[str, ...] = CLUSTERS


# With thousands of partitions, brokers and controller in one Trio thread have stretches of
# work long enough to delay ZooKeeper heartbeats past a 6 s session (sessions then expire
# mid-measurement); Kafka's own default, 18 s, and more keep the large cases stable.
LARGE_SESSION_TIMEOUT_MS = 30000


@attrs.frozen
class ControllerFailoverParams:
    partition_counts: tuple[int, ...] = (1000, 10000)
    session_timeout_ms: int = LARGE_SESSION_TIMEOUT_MS
    clusters: tuple[str, ...] = CLUSTERS


@attrs.frozen
class ElectionParams:
    partition_counts: tuple[int, ...] = (100, 1000, 3000, 10000)
    # The survivors' sessions: long, so busy brokers keep them (the death is signalled by
    # expiring the victim's session at once, or by its own short session).
    session_timeout_ms: int = LARGE_SESSION_TIMEOUT_MS
    # processes: how long the SIGKILLed victim goes unnoticed. 2 s makes a run quick, but
    # on a loaded machine a victim busy taking 1 000 leaderships lost its 2 s session.
    victim_session_ms: int = SESSION_TIMEOUT_MS
    clusters: tuple[str, ...] = CLUSTERS


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
    return await run_failover(rows, attrs.evolve(params, clusters=suite_clusters(options)))


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
    return await run_controller_failover(
        rows, attrs.evolve(params, clusters=suite_clusters(options))
    )


@workload(
    "election-scaling",
    "time to elect new leaders for N partitions when their leader dies (N = 100 .. 10k)",
)
async def run_election_workload(rows: RowWriter, options: WorkloadOptions) -> Summary:
    params = (
        # One count: each starts a cluster of its own (the full suite draws the curve).
        ElectionParams((200,), QUICK_SESSION_TIMEOUT_MS, QUICK_SESSION_TIMEOUT_MS)
        if _quick(options)
        else ElectionParams()
    )
    return await run_election_scaling(rows, attrs.evolve(params, clusters=suite_clusters(options)))


# -- failover ------------------------------------------------------------------------------


async def run_failover(rows: RowWriter, params: FailoverParams) -> Summary:
    check_clusters(params.clusters)
    summary = []
    for kind in params.clusters:
        for count in params.partition_counts:
            async with open_cluster_of(
                kind, session_timeout_ms=params.session_timeout_ms
            ) as cluster:
                summary.append(await _failover_case(rows, params, cluster, kind, count))
    return summary


async def _failover_case(rows, params, cluster, kind, count) -> dict[str, object]:
    topic = "failover"
    case = f"{kind}-partitions-{count}"
    case_params = {
        "cluster": kind,
        "partitions": count,
        "session_timeout_ms": params.session_timeout_ms,
        "load_per_s": params.load_per_s,
    }
    await create_topic(
        cluster, topic, count, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    stamp = WallStamp.now()
    led = await current_leaders(cluster, topic, count)
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
    check_clusters(params.clusters)
    summary = []
    for kind in params.clusters:
        for count in params.partition_counts:
            async with open_cluster_of(
                kind, session_timeout_ms=params.session_timeout_ms, logs="memory"
            ) as cluster:
                summary.append(await _controller_case(rows, params, cluster, kind, count))
    return summary


async def _controller_case(rows, params, cluster, kind, count) -> dict[str, object]:
    """single: the new controller as the brokers' controllers see it, convergence when
    every broker's metadata cache names it with its epoch. processes: the new controller
    as /controller names it (read every 5 ms), convergence when every survivor's Metadata
    answer names it (asked every 10 ms; Metadata carries no epoch)."""
    case = f"{kind}-partitions-{count}"
    case_params = {
        "cluster": kind,
        "partitions": count,
        "session_timeout_ms": params.session_timeout_ms,
    }
    await create_topic(cluster, "controller-failover", count, replication_factor=3)
    stamp = WallStamp.now()
    old = await cluster.wait_for_controller(timeout=60)
    if isinstance(cluster, ProcessCluster):
        old_epoch = await cluster.controller_epoch()
        killed_at = trio.current_time()
        await cluster.kill_broker(old)
        new, epoch, elected_at = await _new_controller(cluster, old)
        await _until_everyone_names(cluster, new)
    else:
        old_epoch = cluster.controller_epoch()
        killed_at = trio.current_time()
        await cluster.kill_broker(old)
        await poll_until(
            lambda: cluster.controller_id() not in (None, old), timeout=300, every=0.005
        )
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


async def _new_controller(cluster: ProcessCluster, old: int) -> tuple[int, int | None, float]:
    """Until /controller names a broker other than `old`: it, its epoch, and when."""
    with trio.fail_after(300):
        while True:
            new = await cluster.controller_id()
            if new not in (None, old):
                return new, await cluster.controller_epoch(), trio.current_time()
            await trio.sleep(0.005)


async def _until_everyone_names(cluster: ProcessCluster, controller: int) -> None:
    """Until every running broker's Metadata answer names `controller`."""
    pending = set(cluster.broker_ids)
    with trio.fail_after(300):
        while pending:
            for broker_id in sorted(pending):
                view = await cluster.metadata(broker_id, ())
                if view is not None and view.controller_id == controller:
                    pending.discard(broker_id)
            if pending:
                await trio.sleep(0.01)


# -- election scaling ----------------------------------------------------------------------

# The N partitions are spread over topics of this many: a broker's Metadata answer about
# 10 000 partitions costs it ~0.1 s of CPU, so the look that waits for the new leaders
# asks about a few small topics at a time instead (see MetadataLook.wait_until_led).
ELECTION_TOPIC_PARTITIONS = 100


async def run_election_scaling(rows: RowWriter, params: ElectionParams) -> Summary:
    check_clusters(params.clusters)
    summary = []
    for kind in params.clusters:
        for count in params.partition_counts:
            summary.append(await _election_case(rows, params, kind, count))
    return summary


def election_topics(count: int) -> dict[str, int]:
    """Topic -> partitions: `count` partitions in topics of ELECTION_TOPIC_PARTITIONS."""
    sizes = [ELECTION_TOPIC_PARTITIONS] * (count // ELECTION_TOPIC_PARTITIONS)
    if count % ELECTION_TOPIC_PARTITIONS:
        sizes.append(count % ELECTION_TOPIC_PARTITIONS)
    return {f"election-{index}": size for index, size in enumerate(sizes)}


async def _election_case(rows, params: ElectionParams, kind: str, count: int) -> dict[str, object]:
    """A broker other than the controller, first in every assignment, leads all `count`
    partitions and is killed. Timed from the moment a ZooKeeper watch sees its
    registration deleted (when the controller learns of the death too) until every
    survivor's Metadata shows every partition led by a survivor.

    single: the victim's session is expired right after the kill (the death noticed at
    once). processes: the victim is SIGKILLed with a short session (`victim_session_ms`),
    the others keep a long one (stable while busy); it starts after the others, so it is
    never the controller."""
    case = f"{kind}-leader-dies-{count}"
    victim = 3
    process_options = {}
    if kind == "processes":
        process_options = {
            "per_broker_config": {
                victim: {"zookeeper.session.timeout.ms": params.victim_session_ms}
            },
            "start_late": (victim,),
        }
    async with open_cluster_of(
        kind, session_timeout_ms=params.session_timeout_ms, logs="memory", **process_options
    ) as cluster:
        controller = await cluster.wait_for_controller(timeout=60)
        if kind == "single":
            victim = max(b for b in cluster.brokers if b != controller)
        others = sorted(b for b in (1, 2, 3) if b != victim)
        assert controller != victim, f"the victim {victim} must not be the controller"
        topics = election_topics(count)
        async with cluster.admin(request_timeout_ms=600_000) as admin:
            await admin.create_topics(
                [
                    NewTopic(name, assignments={p: [victim, *others] for p in range(size)})
                    for name, size in topics.items()
                ],
                timeout=600,
            )
        async with _look(cluster) as (look, addresses):
            await look.wait_until_led(addresses(), topics, timeout=600)
            await _until_led_by(cluster, topics, victim)
            await look.wait_until_led(addresses(), topics, timeout=600)
            stamp = WallStamp.now()
            deleted = await watch_deregistration(cluster.zk, victim)
            if kind == "single":
                session = cluster.brokers[victim].zk_client.session_id
                await cluster.kill_broker(victim)
                await cluster.zk_server.expire_session(session)  # noticed now
            else:
                await cluster.kill_broker(victim)  # noticed when its session expires
            began = await deleted.wait(timeout=params.session_timeout_ms / 1000 + 60)
            seen = await look.wait_until_led(addresses(), topics, not_by=victim, timeout=600)
    elapsed = seen.seen_at - began
    case_params = {
        "partitions": count,
        "cluster": kind,
        "topics": len(topics),
        "poll_interval_ms": round(METADATA_POLL_INTERVAL * 1000),
    }
    rows.write(
        case=case, op="election", params=case_params, start_time=stamp(began),
        latency_ns=round(elapsed * 1e9), count=count,
    )  # fmt: skip
    return {
        "case": case,
        "seconds": round(elapsed, 3),
        "per_partition_ms": round(elapsed / count * 1000, 3),
        # The election ended after the last answer that did not show it was asked for.
        "not_before_s": round(max(0.0, seen.not_yet_at - began), 3),
        "metadata_polls": seen.polls,
    }


async def _until_led_by(cluster, topics: dict[str, int], victim: int) -> None:
    """Until `victim` leads every partition. It does once they are created, unless its
    session expired meanwhile (a short one, on a busy machine): then preferred-leader
    elections bring them back once it is in sync again."""
    with trio.fail_after(300):  # TooSlowError: see the warnings logged meanwhile
        while True:
            led = [await current_leaders(cluster, name, size) for name, size in topics.items()]
            leaders_seen = {b for by_partition in led for b in by_partition.values()}
            if leaders_seen == {victim} and sum(map(len, led)) == sum(topics.values()):
                return
            log.warning("election: %s lead too, not only %d: electing preferred leaders",
                        sorted(leaders_seen - {victim}), victim)  # fmt: skip
            async with cluster.admin(request_timeout_ms=600_000) as admin:
                await admin.elect_leaders(None, timeout=120)  # per-partition errors: retried
            await trio.sleep(0.5)  # a follower back in sync takes a fetch or two


@contextlib.asynccontextmanager
async def _look(cluster):
    """A MetadataLook at the cluster, and a function giving the running brokers' addresses."""
    if isinstance(cluster, ProcessCluster):
        yield cluster.look, lambda: dict(cluster.addresses)
        return
    async with open_metadata_look(cluster.network) as look:
        yield (
            look,
            lambda: {
                broker_id: (b.endpoints[0].host, b.endpoints[0].port)
                for broker_id, b in cluster.brokers.items()
                if b.endpoints
            },
        )


__all__ = [
    "ControllerFailoverParams",
    "ElectionParams",
    "FailoverParams",
    "run_controller_failover",
    "run_election_scaling",
    "run_failover",
]
