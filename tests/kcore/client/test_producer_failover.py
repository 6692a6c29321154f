"""A producer under load when a partition leader dies: its records wait for the new
leader, and find it as soon as the cluster has elected it (simulated network, virtual
time, so the bounds below are the protocol's, not the machine's)."""

from __future__ import annotations

import trio

from kcore.testing import open_cluster

SESSION_S = 6.0
BROKER = {
    "zookeeper.session.timeout.ms": int(SESSION_S * 1000),
    "offsets.topic.replication.factor": 3,
}


async def test_a_dead_leaders_partitions_take_records_again_soon_after_its_session_expires(
    autojump_clock,
):
    async with open_cluster(brokers=3, seed=31, broker_config=BROKER, logs="memory") as cluster:
        controller = await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic(
                "t", partitions=30, replication_factor=3, config={"min.insync.replicas": "2"}
            )
            described = await admin.describe_topic("t")
        leaders = {p.partition: p.leader for p in described.partitions}
        victim = next(b for b in sorted(set(leaders.values())) if b != controller)
        affected = sorted(p for p, leader in leaders.items() if leader == victim)
        windows = []
        async with cluster.producer(acks="all", linger_ms=5) as producer:
            async with trio.open_nursery() as nursery:
                stop = trio.Event()

                async def load() -> None:
                    # Requests in flight to every leader when it dies, as under real load.
                    number = 0
                    while not stop.is_set():
                        await producer.send("t", b"load", partition=number % 30)
                        number += 1
                        await trio.sleep(0.005)

                async def probe(partition: int, since: float) -> None:
                    await producer.send_and_wait("t", b"probe", partition=partition)
                    windows.append(trio.current_time() - since)

                nursery.start_soon(load)
                await trio.sleep(1.0)
                killed_at = trio.current_time()
                await cluster.kill_broker(victim)
                async with trio.open_nursery() as probes:
                    for partition in affected:
                        probes.start_soon(probe, partition, killed_at)
                stop.set()
    assert len(windows) == len(affected) > 0
    # Not before the session expires (nothing elects a new leader earlier), and then
    # within a second: neither queued behind attempts to reach the dead broker nor
    # behind produce requests parked on the survivors.
    assert SESSION_S - 1 <= min(windows) and max(windows) <= SESSION_S + 1
