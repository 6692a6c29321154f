"""The broker's logs on disk (Kafka's LogManager): one `topic-partition` directory per
replica under one of `log.dirs`, opened at start-up with recovery from the last recovery
point, the per-log-dir checkpoint files (high watermarks, recovery points, log start
offsets), and the two loops that keep them: the high-watermark checkpoint and log retention
(the replica manager runs them under its supervisor; the high watermarks and retention
settings are the replicas', so it passes them in).

An OSError from a log dir is reported to the `LogDirFailureChannel` passed in and raised as
KafkaStorageError; a loop goes on with the other dirs.

EMFILE / ENFILE (out of file descriptors) is not a disk failure, but Kafka 3.5 does not tell
them apart: every IOException from a log, "Too many open files" included, takes its log dir
offline, and a broker whose last dir is offline halts. kcore does the same (the broker stops
cleanly, its error naming the errno, rather than going on half able to write): a broker out
of descriptors cannot open segments, sockets or its ZooKeeper connection either, and the
cure is a higher limit (Kafka's documentation asks for 100 000). What kcore guarantees is
that nothing is lost or damaged on the way: a roll that cannot open the next segment's
files leaves the log as it was, so the restarted broker recovers every acknowledged record.
Descriptors are used per segment (its `.log` and `.index`), and segments roll by
`segment.bytes` and by `segment.ms` counted in record time (see `kcore.log`), so batches
stamped with old or zero timestamps do not roll a segment each."""

from __future__ import annotations

import logging
import pathlib
import random
import shutil
from collections.abc import Callable, Mapping

import attrs
import trio

from actors import Timer
from kcore import errors
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
from kcore.server.log_dir_failure import LogDirFailureChannel

logger = logging.getLogger("kcore.server.log_manager")


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


@attrs.frozen
class RetentionLimits:
    """What retention needs of a hosted replica: its topic's limits (-1 disables one) and
    its high watermark (nothing at or above it is deleted)."""

    retention_ms: int
    retention_bytes: int
    high_watermark: int


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

    def new_log(
        self, tp: TopicPartition, *, segment_bytes: int, segment_ms: int | None
    ) -> MemoryPartitionLog:
        log = MemoryPartitionLog(segment_bytes=segment_bytes, segment_ms=segment_ms)
        self.logs[tp] = log
        return log

    def write_checkpoint(
        self, log_dir: pathlib.Path, name: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        self.checkpoints[log_dir, name] = dict(offsets)


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
        # LogFlushStats' LogFlushRateAndTimeMs, handed to every log (the replica manager's).
        self.flush_timer: Timer | None = None

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
            for log in self.logs.values():
                log.flush_timer = self.flush_timer
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
                self.logs[tp].flush_timer = self.flush_timer
                self._dir_of[tp] = log_dir
                logger.info("loaded log %s: end offset %d", tp, self.logs[tp].log_end_offset)
        return high_watermarks

    def get_or_create_log(
        self, tp: TopicPartition, config: TopicConfig, log_dir_failures: LogDirFailureChannel
    ) -> PartitionLog | MemoryPartitionLog:
        log = self.logs.get(tp)
        if log is not None:
            log.segment_bytes = config.segment_bytes
            log.segment_ms = config.max_segment_ms
            log.flush_messages = config.flush_messages
            return log
        log_dir = self._least_loaded_dir()
        if self.memory is not None:
            log = self.memory.new_log(
                tp, segment_bytes=config.segment_bytes, segment_ms=config.max_segment_ms
            )
        else:
            with log_dir_failures.handling_io_errors(str(log_dir), "create the log of", tp):
                log = PartitionLog(
                    log_dir / partition_dir_name(tp),
                    segment_bytes=config.segment_bytes,
                    segment_ms=config.max_segment_ms,
                )
        log.flush_messages = config.flush_messages
        log.flush_timer = self.flush_timer
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

    def log_dir_of(self, tp: TopicPartition) -> str:
        """The log dir holding `tp`'s log (which must exist)."""
        return str(self._dir_of[tp])

    def delete_log(self, tp: TopicPartition, log_dir_failures: LogDirFailureChannel) -> None:
        log = self.logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        if log is None:
            return
        with log_dir_failures.handling_io_errors(str(log_dir), "delete the log of", tp):
            log.close()
            if self.memory is not None:
                self.memory.logs.pop(tp, None)
            else:
                shutil.rmtree(log.directory, ignore_errors=True)

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint_high_watermarks(
        self,
        high_watermarks: Mapping[TopicPartition, int],
        log_dir_failures: LogDirFailureChannel,
    ) -> None:
        self._write_per_dir(REPLICATION_OFFSET_CHECKPOINT, high_watermarks, log_dir_failures)

    def checkpoint_recovery_points(self, log_dir_failures: LogDirFailureChannel) -> None:
        self._write_per_dir(
            RECOVERY_POINT_OFFSET_CHECKPOINT,
            {tp: log.recovery_point for tp, log in self.logs.items()},
            log_dir_failures,
        )
        self._write_per_dir(
            LOG_START_OFFSET_CHECKPOINT,
            {tp: log.log_start_offset for tp, log in self.logs.items()},
            log_dir_failures,
        )

    def read_checkpoints(self, name: str) -> dict[TopicPartition, int]:
        """The offsets of every log dir's checkpoint file `name` (a damaged one reads as
        empty, with a warning)."""
        offsets: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            offsets |= self._read(log_dir, name)
        return offsets

    def write_checkpoints(
        self,
        name: str,
        offsets: Mapping[TopicPartition, int],
        log_dir_failures: LogDirFailureChannel,
    ) -> None:
        """Replaces each log dir's checkpoint file `name` by the offsets of its logs."""
        self._write_per_dir(name, offsets, log_dir_failures)

    def _write_per_dir(
        self,
        name: str,
        offsets: Mapping[TopicPartition, int],
        log_dir_failures: LogDirFailureChannel,
    ) -> None:
        """Writes one checkpoint file per log dir; a dir that fails is reported and skipped."""
        for log_dir in self.log_dirs:
            entries = {
                tp: offset for tp, offset in offsets.items() if self._dir_of.get(tp) == log_dir
            }
            try:
                with log_dir_failures.handling_io_errors(str(log_dir), f"write {name}"):
                    if self.memory is not None:
                        self.memory.write_checkpoint(log_dir, name, entries)
                    else:
                        self._checkpoint(log_dir, name).write(
                            {(tp.topic, tp.partition): offset for tp, offset in entries.items()}
                        )
            except errors.KafkaStorageError as error:
                logger.error("Not checkpointing %s: %s", name, error)

    def flush_all(self) -> int:
        return sum(log.flush() for log in self.logs.values())

    def close(
        self,
        high_watermarks: Mapping[TopicPartition, int],
        log_dir_failures: LogDirFailureChannel,
    ) -> None:
        """A clean shutdown: flush, close, and checkpoint so the next start skips recovery."""
        for tp in sorted(self.logs):
            try:
                with log_dir_failures.handling_io_errors(self.log_dir_of(tp), "close", tp):
                    self.logs[tp].close()
            except errors.KafkaStorageError as error:
                logger.error("Closing the log of %s failed: %s", tp, error)
        self.checkpoint_recovery_points(log_dir_failures)
        self.checkpoint_high_watermarks(high_watermarks, log_dir_failures)

    # -- the loops ---------------------------------------------------------------------------

    async def run_high_watermark_checkpoints(
        self,
        interval_ms: int,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]],
        log_dir_failures: LogDirFailureChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Every `interval_ms` (replica.high.watermark.checkpoint.interval.ms), writes the
        replicas' high watermarks, which a restarted broker starts its replicas from."""
        task_status.started()
        while True:
            await trio.sleep(interval_ms / 1000)
            self.checkpoint_high_watermarks(high_watermarks(), log_dir_failures)

    async def run_retention(
        self,
        interval_ms: int,
        wall_clock_ms: Callable[[], int],
        limits: Callable[[], Mapping[TopicPartition, RetentionLimits]],
        log_dir_failures: LogDirFailureChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Every `interval_ms` (log.retention.check.interval.ms), deletes the segments past
        their topic's retention in the logs `limits` names, in its order."""
        task_status.started()
        while True:
            await trio.sleep(interval_ms / 1000)
            now = wall_clock_ms()
            for tp, limit in limits().items():
                log = self.logs.get(tp)
                if log is None:
                    continue
                try:
                    with log_dir_failures.handling_io_errors(
                        self.log_dir_of(tp), "delete old segments of", tp
                    ):
                        log.delete_old_segments(
                            now, limit.retention_ms, limit.retention_bytes, limit.high_watermark
                        )
                except errors.KafkaStorageError as error:
                    logger.error("Retention of %s failed: %s", tp, error)
