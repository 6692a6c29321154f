"""Logs and checkpoints survive a broker's restart, on disk and in a simulation's memory."""

import errno
import random

import trio

from kcore.common import TopicPartition
from kcore.config import TopicConfig
from kcore.log import build_batch, iter_batch_records
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager, MemoryLogStorage, RetentionLimits
from kcore.testing import poll_until

TP = TopicPartition("t", 0)
CONFIG = TopicConfig.from_dict({})


def _values(log):
    return [r.value for r in iter_batch_records(log.read(0, 1 << 20))] if log.log_end_offset else []


def _append(manager, *values):
    log = manager.get_or_create_log(TP, CONFIG, LogDirFailureChannel())
    log.append(build_batch([(0, None, v) for v in values]), 0)
    return log


def test_logs_and_high_watermarks_are_found_again_after_a_clean_restart(tmp_path):
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    _append(manager, b"x", b"y")
    manager.close({TP: 2}, LogDirFailureChannel())
    again = LogManager([tmp_path / "a", tmp_path / "b"])
    assert again.load_logs() == {TP: 2}
    assert _values(again.logs[TP]) == [b"x", b"y"]


def test_memory_logs_survive_a_process_crash_and_lose_unflushed_data_on_power_loss(tmp_path):
    disk = MemoryLogStorage()
    manager = LogManager([tmp_path], memory=disk)
    log = _append(manager, b"x")
    log.flush()
    _append(manager, b"y")
    manager.checkpoint_high_watermarks({TP: 1}, LogDirFailureChannel())
    disk.crash(random.Random(1))  # a kill: the OS keeps what was written
    restarted = LogManager([tmp_path], memory=disk)
    assert restarted.load_logs() == {TP: 1}
    assert _values(restarted.logs[TP]) == [b"x", b"y"]
    disk.crash(random.Random(1), power_loss=True)
    assert _values(LogManager([tmp_path], memory=disk).logs.get(TP) or disk.logs[TP]) == [b"x"]
    assert not list(tmp_path.iterdir())  # nothing touched the real disk


class _UnwritableCheckpoints(MemoryLogStorage):
    def __init__(self):
        super().__init__()
        self.attempts = 0

    def write_checkpoint(self, log_dir, name, offsets):
        self.attempts += 1
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_checkpoint_that_cannot_be_written_takes_its_log_dir_offline(tmp_path):
    disk = _UnwritableCheckpoints()
    manager = LogManager([tmp_path], memory=disk)
    _append(manager, b"x")
    failures = LogDirFailureChannel()
    manager.checkpoint_high_watermarks({TP: 1}, failures)  # reported, not raised
    log_dir, cause = failures.failure
    assert log_dir == str(tmp_path) and cause.errno == errno.ENOSPC
    manager.checkpoint_high_watermarks({TP: 1}, failures)
    assert disk.attempts == 1  # an offline dir is not written again


async def test_high_watermarks_are_checkpointed_periodically(tmp_path, autojump_clock):
    disk = MemoryLogStorage()
    manager = LogManager([tmp_path], memory=disk)
    _append(manager, b"x", b"y")
    high_watermark = {TP: 1}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            manager.run_high_watermark_checkpoints,
            5000,
            lambda: high_watermark,
            LogDirFailureChannel(),
        )
        await poll_until(
            lambda: LogManager([tmp_path], memory=disk).load_logs() == {TP: 1}, timeout=6
        )
        high_watermark = {TP: 2}
        await poll_until(
            lambda: LogManager([tmp_path], memory=disk).load_logs() == {TP: 2}, timeout=6
        )
        nursery.cancel_scope.cancel()


async def test_retention_deletes_the_segments_past_their_limits_below_the_hw(
    tmp_path, autojump_clock
):
    manager = LogManager([tmp_path], memory=MemoryLogStorage())
    config = TopicConfig.from_dict({"segment.bytes": "14"})  # a segment per batch
    log = manager.get_or_create_log(TP, config, LogDirFailureChannel())
    for value in (b"a", b"b", b"c"):
        log.append(build_batch([(0, None, value)]), 0)
    limits = {TP: RetentionLimits(retention_ms=-1, retention_bytes=0, high_watermark=2)}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            manager.run_retention, 1000, lambda: 0, lambda: limits, LogDirFailureChannel()
        )
        await poll_until(lambda: log.log_start_offset == 2, timeout=2)
        nursery.cancel_scope.cancel()
    remaining = iter_batch_records(log.read(log.log_start_offset, 1 << 20))
    assert [r.value for r in remaining] == [b"c"]  # nothing at or above the HW is deleted
