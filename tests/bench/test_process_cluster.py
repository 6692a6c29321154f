"""The benchmarks' process cluster: zkstub and each broker an OS process. A SIGKILLed broker's
death is seen through ZooKeeper and its partitions through Metadata as a client sees
them; a child that dies unasked ends the block with an error naming it; nothing outlives
the block."""

import os
import signal

import pytest
import trio

from bench.workloads import WorkloadOptions, e2e_latency, produce
from bench.workloads._process_cluster import ChildDied, open_process_cluster


def _alive(pid: int) -> bool:
    """Whether `pid` is still a process (reaped children are not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_killed_broker_is_seen_gone_and_its_partitions_led_by_the_survivor():
    async with open_process_cluster(2, session_timeout_ms=2000) as cluster:
        pids = [cluster.pid(b) for b in cluster.broker_ids]
        controller = await cluster.wait_for_controller()
        victim = next(b for b in cluster.broker_ids if b != controller)
        async with cluster.admin() as admin:
            await admin.create_topic("t", assignments={p: [victim, controller] for p in range(4)})
        await cluster.wait_until_led("t", 4)
        assert set((await cluster.leaders("t", 4)).values()) == {victim}
        async with cluster.producer(acks="all") as producer:
            await producer.send_and_wait("t", b"before", partition=0)
        deleted = await cluster.watch_deregistration(victim)
        await cluster.kill_broker(victim)
        gone_at = await deleted.wait(timeout=60)
        led = await cluster.wait_until_led("t", 4, not_by=victim, timeout=60)
        assert led.not_yet_at <= led.seen_at and gone_at <= led.seen_at
        assert await cluster.leaders("t", 4) == {p: controller for p in range(4)}
        assert cluster.broker_ids == [controller]
        assert cluster.cpu_seconds()[f"broker-{controller}"] > 0
    assert not any(_alive(pid) for pid in pids)


async def test_a_broker_that_fails_to_start_is_named_with_its_stderr():
    with pytest.raises(ChildDied, match=r"broker 1 .*no\.such\.setting"):
        async with open_process_cluster(1, {"no.such.setting": "1"}):
            pytest.fail("the cluster should not start")


async def test_a_child_that_dies_unasked_ends_the_block_and_the_rest_are_reaped():
    with pytest.raises(ChildDied, match=r"zkstub died \(exit status -9\)") as raised:
        async with open_process_cluster(1) as cluster:
            broker_pid = cluster.pid(1)
            os.kill(cluster._zookeeper.process.pid, signal.SIGKILL)
            await trio.sleep_forever()  # until the death is noticed: the block is cancelled
    assert raised.value.name == "zkstub"
    assert not _alive(broker_pid)


def test_the_full_suite_measures_both_clusters_the_quick_one_the_process_cluster():
    for params_for in (produce.params_for, e2e_latency.params_for):
        assert params_for(WorkloadOptions(suite="full")).clusters == ("processes", "single")
        assert params_for(WorkloadOptions(suite="quick")).clusters == ("processes",)
        chosen = WorkloadOptions(suite="quick", clusters=("single",))
        assert params_for(chosen).clusters == ("single",)
    with pytest.raises(ValueError, match="clusters must be some of"):
        WorkloadOptions(clusters=("threads",))
