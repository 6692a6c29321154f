"""Logs and checkpoints survive a broker's restart, on disk and in a simulation's memory."""

import random

from kcore.common import TopicPartition
from kcore.config import TopicConfig
from kcore.log import build_batch, iter_batch_records
from kcore.server.log_manager import LogManager, MemoryLogStorage

TP = TopicPartition("t", 0)
CONFIG = TopicConfig.from_dict({})


def _values(log):
    return [r.value for r in iter_batch_records(log.read(0, 1 << 20))] if log.log_end_offset else []


def _append(manager, *values):
    log = manager.get_or_create_log(TP, CONFIG)
    log.append(build_batch([(0, None, v) for v in values]), 0)
    return log


def test_logs_and_high_watermarks_are_found_again_after_a_clean_restart(tmp_path):
    manager = LogManager([tmp_path / "a", tmp_path / "b"])
    _append(manager, b"x", b"y")
    manager.close({TP: 2})
    again = LogManager([tmp_path / "a", tmp_path / "b"])
    assert again.load_logs() == {TP: 2}
    assert _values(again.logs[TP]) == [b"x", b"y"]


def test_memory_logs_survive_a_process_crash_and_lose_unflushed_data_on_power_loss(tmp_path):
    disk = MemoryLogStorage()
    manager = LogManager([tmp_path], memory=disk)
    log = _append(manager, b"x")
    log.flush()
    _append(manager, b"y")
    manager.checkpoint_high_watermarks({TP: 1})
    disk.crash(random.Random(1))  # a kill: the OS keeps what was written
    restarted = LogManager([tmp_path], memory=disk)
    assert restarted.load_logs() == {TP: 1}
    assert _values(restarted.logs[TP]) == [b"x", b"y"]
    disk.crash(random.Random(1), power_loss=True)
    assert _values(LogManager([tmp_path], memory=disk).logs.get(TP) or disk.logs[TP]) == [b"x"]
    assert not list(tmp_path.iterdir())  # nothing touched the real disk
