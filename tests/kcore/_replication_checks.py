"""What replication tests look at: each replica's records, the partition's state znode, and
waits for conditions (under virtual time they cost no real time)."""

from __future__ import annotations

import json

import trio

from kcore.common import TopicPartition
from kcore.log import iter_batch_records


def replica_records(broker, tp: TopicPartition) -> list[tuple[int, bytes]] | None:
    """(offset, value) of every record in the broker's replica of `tp`, or None."""
    partition = broker.replica_manager.partition(tp) if broker.replica_manager else None
    if partition is None:
        return None
    log = partition.log
    batches = log.read(log.log_start_offset, 1 << 30) if log.log_end_offset else []
    return [(r.offset, r.value) for r in iter_batch_records(batches)]


def committed_records(broker, tp: TopicPartition) -> list[tuple[int, bytes]]:
    """The records below the broker's high watermark."""
    partition = broker.replica_manager.partition(tp)
    return [(o, v) for o, v in replica_records(broker, tp) if o < partition.high_watermark]


async def partition_state(cluster, tp: TopicPartition) -> dict:
    data, stat = await cluster.zk.get(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state")
    state = json.loads(data)
    state["zk_version"] = stat.version
    return state


async def wait_for(predicate, timeout: float, poll: float = 0.05):
    """Polls an async or sync predicate until it returns something truthy; returns it."""
    with trio.fail_after(timeout):
        while True:
            value = predicate()
            if hasattr(value, "__await__"):
                value = await value
            if value:
                return value
            await trio.sleep(poll)


async def wait_for_identical_replicas(cluster, tp: TopicPartition, replicas, timeout=60.0):
    """Waits until every listed replica holds the same records, all of them committed (HW
    at the log end everywhere); returns those records."""

    def snapshot(broker_id):
        broker = cluster.brokers.get(broker_id)
        records = replica_records(broker, tp) if broker else None
        if records is None:
            return None
        partition = broker.replica_manager.partition(tp)
        return tuple(records), partition.high_watermark, partition.log_end_offset

    def same():
        views = [snapshot(b) for b in replicas]
        if any(v is None for v in views) or len(set(views)) != 1:
            return False
        _, hw, leo = views[0]
        return hw == leo

    await wait_for(same, timeout)
    return replica_records(cluster.brokers[replicas[0]], tp)
