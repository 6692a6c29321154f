"""A corrupt `leader-epoch-checkpoint` costs only a rebuild of that partition's leader epoch
cache from its log (every batch carries its leader epoch), with a WARNING naming the file;
the broker's other logs load as usual."""

from __future__ import annotations

import logging

import pytest

from kcore.common import TopicPartition
from kcore.config import TopicConfig
from kcore.log import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache, build_batch
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager

CONFIG = TopicConfig.from_dict({})
DAMAGED = TopicPartition("t", 0)
INTACT = TopicPartition("t", 1)


def _write_logs(log_dir) -> dict[TopicPartition, list[tuple[int, int]]]:
    """Two partitions whose leaders changed (epochs 0, 2, 5); their epoch cache entries."""
    manager = LogManager([log_dir])
    failures = LogDirFailureChannel()
    entries = {}
    for tp in (DAMAGED, INTACT):
        log = manager.get_or_create_log(tp, CONFIG, failures)
        for epoch in (0, 0, 2, 5, 5):
            log.append(build_batch([(0, None, b"v"), (0, None, b"w")]), leader_epoch=epoch)
        entries[tp] = log.epoch_cache.entries()
    manager.close({DAMAGED: 10, INTACT: 10}, failures)
    assert entries[DAMAGED] == [(0, 0), (2, 4), (5, 6)]
    return entries


@pytest.mark.parametrize(
    "damage",
    [
        b"0\n3\n0 0\n2 4\n5 \xff\xfe\n",  # a flipped byte: not UTF-8
        b"0\n3\n0 0\n2 4\n",  # torn: fewer entries than announced
        b"\x00" * 40,  # zeroed
        b"7\n1\n0 0\n",  # an unknown version
        b"0\n1\n-3 0\n",  # a negative epoch
    ],
)
def test_a_corrupt_leader_epoch_checkpoint_is_rebuilt_from_the_log(tmp_path, caplog, damage):
    entries = _write_logs(tmp_path)
    checkpoint = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    checkpoint.write_bytes(damage)
    manager = LogManager([tmp_path])
    with caplog.at_level(logging.WARNING, logger="kcore.log"):
        assert manager.load_logs() == {DAMAGED: 10, INTACT: 10}
    assert sorted(manager.logs) == [DAMAGED, INTACT]
    assert manager.logs[DAMAGED].epoch_cache.entries() == entries[DAMAGED]
    assert manager.logs[INTACT].epoch_cache.entries() == entries[INTACT]
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert str(checkpoint) in warning.getMessage()
    # Rewritten: the next start reads it without a word.
    caplog.clear()
    assert LeaderEpochCache(checkpoint).entries() == entries[DAMAGED]
    assert not caplog.records
