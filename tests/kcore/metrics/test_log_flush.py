"""LogFlushStats' LogFlushRateAndTimeMs: every segment flush (its fsyncs) counts, once per
segment flushed, and a broker exports it as the JMX exporter names it."""

from actors import MetricsRegistry
from kcore.log import PartitionLog, build_batch
from kcore.metrics import (
    LOG_FLUSH_RATE_AND_TIME_MS,
    exposition,
    log_flush_timer,
    prometheus_registry,
)
from kcore.testing import open_cluster, poll_until


def _batch(count=1):
    return build_batch([(0, None, b"v%d" % n) for n in range(count)])


async def test_each_segment_flushed_counts_once(tmp_path, autojump_clock):
    registry = MetricsRegistry()
    log = PartitionLog(tmp_path / "t-0")
    log.flush_timer = log_flush_timer(registry)
    timer = registry.get(LOG_FLUSH_RATE_AND_TIME_MS)
    try:
        log.append(_batch(2), leader_epoch=0)
        assert timer.count == 0  # appends are not flushes (flush.messages is unset)
        assert log.flush() == 1
        assert timer.count == 1
        assert log.flush() == 0  # nothing dirty: no fsync, nothing counted
        assert timer.count == 1
        log.append(_batch(), leader_epoch=0)
        log.roll()  # the rolled segment is made durable first: one flush
        assert timer.count == 2
        assert timer.histogram.min >= 0.0
        text = exposition(prometheus_registry(registry)).decode()
    finally:
        log.close()
    assert "kafka_log_logflushstats_logflushrateandtimems_count 2.0" in text
    assert 'kafka_log_logflushstats_logflushrateandtimems{quantile="0.99"}' in text


async def test_a_broker_counts_the_flushes_its_logs_make(autojump_clock):
    async with open_cluster(brokers=1, seed=5) as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            # Kafka's flush.messages=1: every append is fsynced.
            await admin.create_topic("t", 1, 1, config={"flush.messages": "1"})
        registry = cluster.brokers[1].metrics
        before = registry.get(LOG_FLUSH_RATE_AND_TIME_MS).count
        async with cluster.producer(acks=1) as producer:
            for n in range(3):
                await producer.send_and_wait("t", b"v%d" % n, partition=0)
        await poll_until(lambda: registry.get(LOG_FLUSH_RATE_AND_TIME_MS).count == before + 3)
