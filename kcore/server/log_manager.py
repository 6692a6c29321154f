"""The broker's logs on disk (Kafka's LogManager): one `topic-partition` directory per
replica under one of `log.dirs`, opened at start-up with recovery from the last recovery
point, and the per-log-dir checkpoint files (high watermarks, recovery points, log start
offsets). Synchronous: the replica manager calls it from its tasks."""

from __future__ import annotations

import logging
import pathlib
import random
import shutil
from collections.abc import Mapping

from kcore.common import TopicPartition
from kcore.config import TopicConfig
from kcore.log import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    MemoryPartitionLog,
    OffsetCheckpointFile,
    PartitionLog,
)

logger = logging.getLogger("kcore.server.log_manager")


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class MemoryLogStorage:
    """A broker's disk in a simulation: in-memory logs and checkpoints that outlive the
    broker's incarnations. `crash` is what a kill does to them."""

    def __init__(self) -> None:
        self.logs: dict[TopicPartition, MemoryPartitionLog] = {}
        self.checkpoints: dict[tuple[pathlib.Path, str], dict[TopicPartition, int]] = {}

    def crash(
        self, rng: random.Random, *, power_loss: bool = False, torn_tail: bool = False
    ) -> None:
        """A process crash keeps every byte written (the OS has them) and only makes the next
        start recover; a power loss also drops what was not fsynced, a torn tail keeping any
        prefix of it."""
        for tp in sorted(self.logs):
            log = self.logs[tp]
            if power_loss:
                log.crash(rng, torn_tail=torn_tail)
            else:
                log.recover()


class LogManager:
    def __init__(
        self, log_dirs: list[str] | list[pathlib.Path], memory: MemoryLogStorage | None = None
    ) -> None:
        self.log_dirs = [pathlib.Path(d) for d in log_dirs]
        self.memory = memory
        if memory is None:
            for log_dir in self.log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
        self.logs: dict[TopicPartition, PartitionLog | MemoryPartitionLog] = {}
        self._dir_of: dict[TopicPartition, pathlib.Path] = {}

    def _checkpoint(self, log_dir: pathlib.Path, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log_dir / name)

    def _read(self, log_dir: pathlib.Path, name: str) -> dict[TopicPartition, int]:
        if self.memory is not None:
            return dict(self.memory.checkpoints.get((log_dir, name), {}))
        try:
            entries = self._checkpoint(log_dir, name).read()
        except ValueError as error:
            # A damaged checkpoint only costs a longer recovery; Kafka logs and goes on.
            logger.warning("ignoring %s: %s", name, error)
            return {}
        return {TopicPartition(topic, p): offset for (topic, p), offset in entries.items()}

    def load_logs(self) -> dict[TopicPartition, int]:
        """Opens every log found (recovering each from its recovery point) and returns the
        checkpointed high watermarks."""
        high_watermarks: dict[TopicPartition, int] = {}
        if self.memory is not None:
            for log_dir in self.log_dirs:
                high_watermarks |= self._read(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            self.logs = dict(self.memory.logs)
            self._dir_of = dict.fromkeys(self.logs, self.log_dirs[0])
            return high_watermarks
        for log_dir in self.log_dirs:
            recovery_points = self._read(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT)
            start_offsets = self._read(log_dir, LOG_START_OFFSET_CHECKPOINT)
            high_watermarks |= self._read(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            for child in sorted(log_dir.iterdir()):
                tp = parse_partition_dir_name(child.name) if child.is_dir() else None
                if tp is None or tp in self.logs:
                    continue
                self.logs[tp] = PartitionLog(
                    child,
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                )
                self._dir_of[tp] = log_dir
                logger.info("loaded log %s: end offset %d", tp, self.logs[tp].log_end_offset)
        return high_watermarks

    def get_or_create_log(
        self, tp: TopicPartition, config: TopicConfig
    ) -> PartitionLog | MemoryPartitionLog:
        log = self.logs.get(tp)
        if log is not None:
            log.segment_bytes = config.segment_bytes
            log.segment_ms = config.segment_ms
            log.flush_messages = config.flush_messages
            return log
        log_dir = self._least_loaded_dir()
        if self.memory is not None:
            log = MemoryPartitionLog(
                segment_bytes=config.segment_bytes, segment_ms=config.segment_ms
            )
            self.memory.logs[tp] = log
        else:
            log = PartitionLog(
                log_dir / partition_dir_name(tp),
                segment_bytes=config.segment_bytes,
                segment_ms=config.segment_ms,
            )
        log.flush_messages = config.flush_messages
        self.logs[tp] = log
        self._dir_of[tp] = log_dir
        logger.info("created log %s in %s", tp, log_dir)
        return log

    def _least_loaded_dir(self) -> pathlib.Path:
        if len(self.log_dirs) == 1:  # (counting every log per new one made creating
            return self.log_dirs[0]  # 10 000 partitions quadratic)
        counts = {d: 0 for d in self.log_dirs}
        for log_dir in self._dir_of.values():
            counts[log_dir] += 1
        return min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def delete_log(self, tp: TopicPartition) -> None:
        log = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        if log is not None:
            log.close()
            if self.memory is not None:
                self.memory.logs.pop(tp, None)
            else:
                shutil.rmtree(log.directory, ignore_errors=True)

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self._write_per_dir(REPLICATION_OFFSET_CHECKPOINT, high_watermarks)

    def checkpoint_recovery_points(self) -> None:
        self._write_per_dir(
            RECOVERY_POINT_OFFSET_CHECKPOINT,
            {tp: log.recovery_point for tp, log in self.logs.items()},
        )
        self._write_per_dir(
            LOG_START_OFFSET_CHECKPOINT,
            {tp: log.log_start_offset for tp, log in self.logs.items()},
        )

    def _write_per_dir(self, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        for log_dir in self.log_dirs:
            entries = {
                (tp.topic, tp.partition): offset
                for tp, offset in offsets.items()
                if self._dir_of.get(tp) == log_dir
            }
            if self.memory is not None:
                self.memory.checkpoints[log_dir, name] = {
                    TopicPartition(t, p): o for (t, p), o in entries.items()
                }
            else:
                self._checkpoint(log_dir, name).write(entries)

    def flush_all(self) -> int:
        return sum(log.flush() for log in self.logs.values())

    def close(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """A clean shutdown: flush, close, and checkpoint so the next start skips recovery."""
        for log in self.logs.values():
            log.close()
        self.checkpoint_recovery_points()
        self.checkpoint_high_watermarks(high_watermarks)
