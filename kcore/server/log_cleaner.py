"""The broker's log cleaner (Kafka's LogCleaner threads and LogCleanerManager): compacts the
logs of topics with `cleanup.policy=compact`, one log at a time per cleaner, the dirtiest
first, and records in each log dir's `cleaner-offset-checkpoint` how far each log is clean.

What to clean and what to keep is decided in `kcore.log` (`_cleaner`, sans-IO); the log reads
and swaps its segments (`PartitionLog.clean`). This shell picks the log, paces the work and
keeps the checkpoints:

- `log.cleaner.threads` cleaners run as tasks, each with an offset map of its share of
  `log.cleaner.dedupe.buffer.size` (Kafka's SkimpyOffsetMap slots at
  `log.cleaner.io.buffer.load.factor`); two never clean the same log. A cleaner that finds
  nothing to clean waits `log.cleaner.backoff.ms`. Their reads and writes together are held
  to `log.cleaner.io.max.bytes.per.second` (Kafka's Throttler); between batches a cleaner
  lets the broker's other tasks run.
- The replicas to consider and their high watermarks come from the replica manager, read
  at every choice, so a topic config change (cleanup.policy, the ratios and lags) counts at
  the next one. A log truncated below its checkpoint (the segment the checkpoint ends in was
  cut or replaced), deleted or recreated is cleaned again from its start.
- A clean the log changed under (truncated, deleted) is abandoned; a log whose clean failed
  otherwise (a corrupt batch) is left alone from then on, as Kafka marks it uncleanable; an
  OSError takes the log dir offline like any other log I/O.

Retention of `compact,delete` topics stays with the log manager's retention loop.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from kcore import errors
from kcore.common import TopicPartition
from kcore.config import TopicConfig
from kcore.log import (
    CLEANER_OFFSET_CHECKPOINT,
    CleaningAbortedError,
    LogToClean,
    OffsetMap,
    cleanable_offsets,
    filthiest,
    log_to_clean,
    max_compaction_delay,
    offset_map_capacity,
)
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager

logger = logging.getLogger("kcore.server.log_cleaner")

# How much a cleaner reads and writes between two chances for other tasks to run.
_YIELD_EVERY_BYTES = 256 * 1024
# Kafka's Throttler checks its rate at most every 300 ms.
_THROTTLE_CHECK_INTERVAL = 0.3


@attrs.frozen
class CleanerSettings:
    """The broker's log.cleaner.* settings, as the cleaner uses them."""

    threads: int = 1
    backoff_ms: int = 15000
    offset_map_capacity: int = offset_map_capacity(128 * 1024 * 1024, 1, 0.9)
    max_io_bytes_per_second: float = sys.float_info.max  # Java's Double.MAX_VALUE

    @classmethod
    def from_config(cls, config: Any) -> CleanerSettings:
        return cls(
            threads=config.log_cleaner_threads,
            backoff_ms=config.log_cleaner_backoff_ms,
            offset_map_capacity=offset_map_capacity(
                config.log_cleaner_dedupe_buffer_size,
                config.log_cleaner_threads,
                config.log_cleaner_io_buffer_load_factor,
            ),
            max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        )


@attrs.frozen
class CompactedReplica:
    """What the cleaner needs of a hosted replica of a compacted topic: the topic's config
    and the replica's high watermark (nothing at or above it is cleaned: without
    transactions it is the last stable offset)."""

    config: TopicConfig
    high_watermark: int


@attrs.define
class Throttler:
    """Kafka's Throttler, over Trio's clock: once an interval of at least 300 ms has passed,
    or the bytes observed would take longer than that at `rate` per second, sleeps for as
    long as the bytes came faster than `rate` allows. (Kafka checks only after 300 ms; the
    second trigger also holds a burst of synchronous work to the rate, since a cleaner's
    work between two sleeps takes no time on a simulation's clock.)"""

    rate: float
    _observed: float = attrs.field(default=0.0, init=False)
    _period_start: float | None = attrs.field(default=None, init=False)

    async def maybe_throttle(self, observed: float) -> None:
        now = trio.current_time()
        if self._period_start is None:
            self._period_start = now
        self._observed += observed
        elapsed = now - self._period_start
        owed = self._observed / self.rate - elapsed
        if elapsed > _THROTTLE_CHECK_INTERVAL or owed > _THROTTLE_CHECK_INTERVAL:
            if owed > 0:
                await trio.sleep(owed)
            self._period_start = trio.current_time()
            self._observed = 0.0


@attrs.frozen
class _CleanMark:
    """Where a log's checkpoint ends, as the log was when it was last set: the segment
    holding the offset before the checkpoint and that segment's size. A truncation below the
    checkpoint cuts or removes that segment."""

    log: Any
    segment: Any
    size: int


@attrs.define(eq=False)
class LogCleaner:
    log_manager: LogManager
    settings: CleanerSettings
    wall_clock_ms: Callable[[], int]
    log_dir_failures: LogDirFailureChannel
    # Kafka's cleaner checkpoints: each compacted log is clean below this offset.
    checkpoints: dict[TopicPartition, int] = attrs.field(factory=dict, init=False)
    _marks: dict[TopicPartition, _CleanMark] = attrs.field(factory=dict, init=False)
    _in_progress: set[TopicPartition] = attrs.field(factory=set, init=False)
    _uncleanable: dict[TopicPartition, Any] = attrs.field(factory=dict, init=False)
    _throttler: Throttler = attrs.field(init=False)
    _cleaners: trio.CancelScope | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._throttler = Throttler(self.settings.max_io_bytes_per_second)

    async def run(
        self,
        compacted_replicas: Callable[[], Mapping[TopicPartition, CompactedReplica]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Reads the checkpoints, then runs the cleaners until cancelled (`reconfigure`
        starts them again)."""
        self.load_checkpoints()
        task_status.started()
        while True:
            async with trio.open_nursery() as nursery:
                self._cleaners = nursery.cancel_scope
                for _ in range(self.settings.threads):
                    nursery.start_soon(self._run_cleaner, compacted_replicas)

    def reconfigure(self, settings: CleanerSettings) -> None:
        """Kafka's LogCleaner.reconfigure (log.cleaner.* changed at run time): the cleaners
        stop, abandoning a clean in progress as a shutdown does (its log stays as it was),
        and start again with the new settings."""
        logger.info("Reconfiguring the log cleaner: %s", settings)
        self.settings = settings
        self._throttler.rate = settings.max_io_bytes_per_second
        if self._cleaners is not None:
            self._cleaners.cancel()

    async def _run_cleaner(
        self, compacted_replicas: Callable[[], Mapping[TopicPartition, CompactedReplica]]
    ) -> None:
        while True:
            if not await self.clean_filthiest_log(compacted_replicas()):
                await trio.sleep(self.settings.backoff_ms / 1000)

    # -- checkpoints --------------------------------------------------------------------------

    def load_checkpoints(self) -> None:
        self.checkpoints = self.log_manager.read_checkpoints(CLEANER_OFFSET_CHECKPOINT)
        for tp, offset in self.checkpoints.items():
            log = self.log_manager.logs.get(tp)
            if log is not None:
                self._mark(tp, log, offset)

    def _set_checkpoint(self, tp: TopicPartition, log: Any, offset: int) -> None:
        self.checkpoints[tp] = offset
        self._mark(tp, log, offset)

    def _write_checkpoints(self) -> None:
        """Writes the checkpoints of the logs still here (a deleted log's entry goes, as
        Kafka's updateCheckpoints removes it)."""
        logs = self.log_manager.logs
        self.checkpoints = {tp: o for tp, o in self.checkpoints.items() if tp in logs}
        self.log_manager.write_checkpoints(
            CLEANER_OFFSET_CHECKPOINT, self.checkpoints, self.log_dir_failures
        )

    def _mark(self, tp: TopicPartition, log: Any, offset: int) -> None:
        below = [s for s in log.cleaner_segments() if s.base_offset < offset]
        segment = below[-1].handle if below else None
        self._marks[tp] = _CleanMark(log, segment, segment.size if segment else 0)

    def _checkpoint_of(self, tp: TopicPartition, log: Any) -> int | None:
        """The log's checkpoint, None (clean it from its start) when the log is not the one
        it was taken from or was cut below it."""
        offset = self.checkpoints.get(tp)
        mark = self._marks.get(tp)
        if offset is None or mark is None:
            return offset
        if mark.log is not log:
            return None
        if mark.segment is not None:
            present = any(s.handle is mark.segment for s in log.cleaner_segments())
            if not present or mark.segment.size != mark.size:
                return None
        return offset

    # -- choosing ------------------------------------------------------------------------------

    def grab_filthiest_log(
        self, replicas: Mapping[TopicPartition, CompactedReplica], now_ms: int
    ) -> LogToClean | None:
        """Kafka's grabFilthiestCompactedLog: of the compacted logs no cleaner is on, the
        one to clean next, now marked in progress (None: nothing is dirty enough)."""
        candidates = []
        reset = False
        for tp in sorted(replicas):
            log = self.log_manager.logs.get(tp)
            if tp in self._in_progress or log is None or self._uncleanable.get(tp) is log:
                continue
            config, high_watermark = replicas[tp].config, replicas[tp].high_watermark
            segments = log.cleaner_segments()
            offsets = cleanable_offsets(
                segments,
                log_start_offset=log.log_start_offset,
                log_end_offset=log.log_end_offset,
                checkpoint=self._checkpoint_of(tp, log),
                last_stable_offset=high_watermark,
                min_compaction_lag_ms=config.min_compaction_lag_ms,
                now_ms=now_ms,
            )
            if offsets.first_dirty_offset != self.checkpoints.get(tp):
                if tp in self.checkpoints:
                    logger.warning(
                        "Resetting the first dirty offset of %s to its log start offset %d: "
                        "the checkpointed offset %d no longer fits the log",
                        tp,
                        offsets.first_dirty_offset,
                        self.checkpoints[tp],
                    )
                self._set_checkpoint(tp, log, offsets.first_dirty_offset)
                reset = True
            delay = max_compaction_delay(
                segments,
                offsets.first_dirty_offset,
                max_compaction_lag_ms=config.max_compaction_lag_ms,
                now_ms=now_ms,
            )
            candidates.append(
                log_to_clean(
                    tp,
                    segments,
                    offsets,
                    needs_compaction_now=delay > 0,
                    min_cleanable_ratio=config.min_cleanable_dirty_ratio,
                )
            )
        if reset:
            with contextlib.suppress(errors.KafkaStorageError):
                self._write_checkpoints()
        chosen = filthiest(candidates)
        if chosen is not None:
            self._in_progress.add(chosen.key)
        return chosen

    # -- cleaning ------------------------------------------------------------------------------

    async def clean_filthiest_log(
        self, replicas: Mapping[TopicPartition, CompactedReplica]
    ) -> bool:
        """Cleans the dirtiest compacted log, if one is dirty enough; whether a log's clean
        point moved (if not, nothing is to be done before the cleaner's backoff)."""
        chosen = self.grab_filthiest_log(replicas, self.wall_clock_ms())
        if chosen is None:
            return False
        tp = chosen.key
        try:
            end_offset = await self._clean(tp, chosen, replicas[tp].config)
        finally:
            self._in_progress.discard(tp)
        return end_offset > chosen.first_dirty_offset

    async def _clean(self, tp: TopicPartition, chosen: LogToClean, config: TopicConfig) -> int:
        """Cleans the log; the offset it is now clean to."""
        log = self.log_manager.logs[tp]
        now_ms = self.wall_clock_ms()
        offset_map = OffsetMap(self.settings.offset_map_capacity)
        logger.info(
            "Cleaning log %s (dirty section [%d, %d), %.1f%% dirty)",
            tp,
            chosen.first_dirty_offset,
            chosen.first_uncleanable_offset,
            100 * chosen.cleanable_ratio,
        )
        steps = log.clean(
            offset_map,
            first_dirty_offset=chosen.first_dirty_offset,
            first_uncleanable_offset=chosen.first_uncleanable_offset,
            now_ms=now_ms,
            delete_retention_ms=config.delete_retention_ms,
        )
        done = False
        try:
            with (
                contextlib.closing(steps),
                self.log_dir_failures.handling_io_errors(
                    self.log_manager.log_dir_of(tp), "clean the log of", tp
                ),
            ):
                unpaced = 0
                for size in steps:
                    unpaced += size
                    if unpaced >= _YIELD_EVERY_BYTES:
                        await self._pace(unpaced)
                        unpaced = 0
                    if self.log_manager.logs.get(tp) is not log:
                        raise CleaningAbortedError(f"the log of {tp} was deleted")
                await self._pace(unpaced)
                done = True
        except CleaningAbortedError as error:
            logger.info("Cleaning of %s aborted: %s", tp, error)
        except errors.KafkaStorageError as error:
            logger.error("Cleaning of %s failed: %s", tp, error)
        except Exception:
            logger.exception("Cleaning of %s failed; it will not be cleaned again", tp)
            self._uncleanable[tp] = log
        if self.log_manager.logs.get(tp) is not log:
            return chosen.first_dirty_offset
        end_offset = offset_map.latest_offset + 1 if done else chosen.first_dirty_offset
        end_offset = max(end_offset, chosen.first_dirty_offset)
        self._set_checkpoint(tp, log, end_offset)
        with contextlib.suppress(errors.KafkaStorageError):
            self._write_checkpoints()
        if done:
            logger.info("Cleaned log %s up to offset %d (%d keys)", tp, end_offset, len(offset_map))
        return end_offset

    async def _pace(self, observed: int) -> None:
        """Lets other tasks run, and holds the cleaners to their I/O rate."""
        await trio.lowlevel.checkpoint()
        await self._throttler.maybe_throttle(observed)
