"""The broker's log cleaner over a log manager (virtual time): it compacts the dirtiest log
first, checkpoints how far each log is clean in Kafka's file, starts over on a truncated
log, leaves a log it cannot clean alone, backs off, and holds to its I/O rate."""

import pytest
import trio

from kcore.common import TopicPartition
from kcore.config import ConfigError, KafkaConfig, TopicConfig
from kcore.log import CLEANER_OFFSET_CHECKPOINT, build_batch, iter_batch_records
from kcore.server.log_cleaner import CleanerSettings, CompactedReplica, LogCleaner, Throttler
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager, MemoryLogStorage
from kcore.testing import poll_until

A, B = TopicPartition("a", 0), TopicPartition("b", 0)
COMPACTED = TopicConfig.from_dict(
    {"cleanup.policy": "compact", "segment.bytes": "400", "min.cleanable.dirty.ratio": "0.1"}
)


def write(log, rounds, keys=4, start=0):
    for r in range(start, start + rounds):
        for k in range(keys):
            log.append(build_batch([(0, f"k{k}".encode(), f"v{r}".encode())]), 0)


def values(log):
    rows = iter_batch_records(log.read(log.log_start_offset, 1 << 20))
    return [(r.key, r.value) for r in rows]


def replicas(manager, *tps, config=COMPACTED):
    return {tp: CompactedReplica(config, manager.logs[tp].log_end_offset) for tp in tps}


def new_cleaner(manager, **settings):
    return LogCleaner(manager, CleanerSettings(**settings), lambda: 1_000, LogDirFailureChannel())


def open_logs(manager, *tps):
    return [manager.get_or_create_log(tp, COMPACTED, LogDirFailureChannel()) for tp in tps]


async def test_a_compacted_log_is_cleaned_and_its_checkpoint_written(tmp_path, autojump_clock):
    manager = LogManager([tmp_path])
    (log,) = open_logs(manager, A)
    write(log, 10)
    active_base = log.segment_base_offsets()[-1]
    cleaner = new_cleaner(manager, backoff_ms=1000)
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run, lambda: replicas(manager, A))
        await poll_until(lambda: cleaner.checkpoints.get(A) == active_base, timeout=10)
        nursery.cancel_scope.cancel()
    below = [row for row in values(log)][: -(log.log_end_offset - active_base)]
    assert len(below) == len({key for key, _ in below})  # each key once below the active
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n1\na 0 {active_base}\n"  # Kafka's format
    # A restarted cleaner reads where it left off: nothing more to clean.
    again = new_cleaner(LogManager([tmp_path]))
    again.load_checkpoints()
    assert again.checkpoints == {A: active_base}
    log.close()


async def test_the_dirtiest_log_is_cleaned_first_and_a_clean_enough_one_waits(tmp_path):
    manager = LogManager([tmp_path], memory=MemoryLogStorage())
    a, b = open_logs(manager, A, B)
    write(a, 8)
    write(b, 8)
    cleaner = new_cleaner(manager)
    assert await cleaner.clean_filthiest_log(replicas(manager, A, B))
    # b is now the dirtier (a is clean up to its active segment)
    assert cleaner.grab_filthiest_log(replicas(manager, A, B), 0).key == B
    strict = TopicConfig.from_dict({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1"})
    cleaner = new_cleaner(manager)
    assert cleaner.grab_filthiest_log(replicas(manager, B, config=strict), 0) is None


async def test_a_log_truncated_below_its_checkpoint_is_cleaned_again_from_its_start(tmp_path):
    manager = LogManager([tmp_path], memory=MemoryLogStorage())
    (log,) = open_logs(manager, A)
    write(log, 8)
    cleaner = new_cleaner(manager)
    await cleaner.clean_filthiest_log(replicas(manager, A))
    clean_to = cleaner.checkpoints[A]
    log.truncate_to(clean_to - 3)  # a follower truncating below what was cleaned ...
    write(log, 8, start=8)  # ... and fetching again past it
    chosen = cleaner.grab_filthiest_log(replicas(manager, A), 0)
    assert chosen.first_dirty_offset == 0 and cleaner.checkpoints[A] == 0


async def test_a_log_that_cannot_be_cleaned_is_left_alone_and_the_others_are_not(tmp_path):
    manager = LogManager([tmp_path], memory=MemoryLogStorage())
    a, b = open_logs(manager, A, B)
    write(a, 8)
    write(b, 6)
    a._segments[1].store.data[70] ^= 0xFF  # a damaged batch in a segment to clean
    cleaner = new_cleaner(manager)
    assert not await cleaner.clean_filthiest_log(replicas(manager, A, B))  # a: no progress
    assert await cleaner.clean_filthiest_log(replicas(manager, A, B))  # b
    assert cleaner.checkpoints[B] == b.segment_base_offsets()[-1]
    assert cleaner.grab_filthiest_log(replicas(manager, A, B), 0) is None
    assert cleaner.checkpoints[A] == 0


async def test_a_cleaner_with_nothing_to_clean_waits_its_backoff(tmp_path, autojump_clock):
    manager = LogManager([tmp_path], memory=MemoryLogStorage())
    (log,) = open_logs(manager, A)
    write(log, 6)
    cleaner = new_cleaner(manager, backoff_ms=15_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run, lambda: replicas(manager, A))
        await poll_until(lambda: cleaner.checkpoints.get(A, 0) > 0, timeout=5)
        first_clean = cleaner.checkpoints[A]
        write(log, 6, start=6)
        start = trio.current_time()
        await poll_until(lambda: cleaner.checkpoints[A] > first_clean, timeout=30)
        waited = trio.current_time() - start
        nursery.cancel_scope.cancel()
    assert 14 <= waited <= 16  # the next look came after log.cleaner.backoff.ms


async def test_the_throttler_holds_reads_and_writes_to_the_configured_rate(autojump_clock):
    throttler = Throttler(rate=1000)
    start = trio.current_time()
    for _ in range(10):
        await throttler.maybe_throttle(500)
    assert trio.current_time() - start == pytest.approx(5.0, abs=0.5)
    unthrottled = Throttler(rate=float("inf"))
    start = trio.current_time()
    await unthrottled.maybe_throttle(10**12)
    assert trio.current_time() == start


def test_the_cleaner_settings_come_from_kafkas_names():
    config = KafkaConfig.from_dict(
        {
            "broker.id": 1,
            "zookeeper.connect": "zk:2181",
            "log.cleaner.threads": 2,
            "log.cleaner.dedupe.buffer.size": 48 * 1024 * 1024,
            "log.cleaner.io.buffer.load.factor": 0.5,
            "log.cleaner.backoff.ms": 100,
            "log.cleaner.io.max.bytes.per.second": 1e6,
        }
    )
    settings = CleanerSettings.from_config(config)
    assert settings == CleanerSettings(2, 100, 24 * 1024 * 1024 // 24 // 2, 1e6)
    defaults = KafkaConfig.from_dict({"broker.id": 1, "zookeeper.connect": "zk:2181"})
    assert CleanerSettings.from_config(defaults) == CleanerSettings()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"log.cleaner.dedupe.buffer.size": 1024 * 1024}, "at least 1MB per cleaner thread"),
        ({"log.cleaner.threads": 0}, "log.cleaner.threads"),
        ({"log.cleaner.io.buffer.load.factor": 0}, "offset map is too small"),
        ({"log.cleaner.io.max.bytes.per.second": 0}, "log.cleaner.io.max.bytes.per.second"),
    ],
)
def test_cleaner_settings_that_cannot_work_are_refused_at_start_up(settings, message):
    with pytest.raises(ConfigError, match=message):
        KafkaConfig.from_dict({"broker.id": 1, "zookeeper.connect": "zk:2181", **settings})


def test_compacted_topic_settings_have_kafkas_names_defaults_and_checks():
    broker = KafkaConfig.from_dict(
        {"broker.id": 1, "zookeeper.connect": "zk", "log.cleaner.delete.retention.ms": 5}
    )
    topic = TopicConfig.from_dict({"cleanup.policy": "compact,delete"}, broker)
    assert (topic.compact, topic.delete) == (True, True)
    assert topic.delete_retention_ms == 5 and topic.min_cleanable_dirty_ratio == 0.5
    assert (topic.min_compaction_lag_ms, topic.max_compaction_lag_ms) == (0, 2**63 - 1)
    # The active segment is never cleaned: a compacted log rolls by the maximum lag too.
    lagged = {"cleanup.policy": "compact", "max.compaction.lag.ms": "1000"}
    assert TopicConfig.from_dict(lagged).max_segment_ms == 1000
    assert TopicConfig.from_dict({"max.compaction.lag.ms": "1000"}).max_segment_ms == 604800000
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction"):
        TopicConfig.from_dict({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(ConfigError, match=r"min\.cleanable\.dirty\.ratio"):
        TopicConfig.from_dict({"min.cleanable.dirty.ratio": "1.5"})
