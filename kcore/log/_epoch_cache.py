"""Leader epoch -> start offset cache (Kafka's LeaderEpochFileCache), optionally persisted
to a `leader-epoch-checkpoint` file that is rewritten atomically on every change."""

from __future__ import annotations

import bisect
import logging
import pathlib
from collections.abc import Iterable

from kcore.log._checkpoint import format_checkpoint, read_checkpoint, write_atomically

logger = logging.getLogger("kcore.log.epoch_cache")

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def _parse_epoch_entry(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError(fields)
    return int(fields[0]), int(fields[1])


class LeaderEpochCache:
    """Entries `(epoch, start_offset)` strictly increasing in both fields."""

    def __init__(self, checkpoint_path: pathlib.Path | str | None = None) -> None:
        self._path = None if checkpoint_path is None else pathlib.Path(checkpoint_path)
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # The checkpoint could not be read: the log must `rebuild` the cache from its batches.
        self.rebuild_needed = False
        if self._path is not None:
            try:
                for epoch, start_offset in read_checkpoint(self._path, _parse_epoch_entry):
                    self._assign(epoch, start_offset)
            except ValueError as error:  # malformed, not UTF-8, a negative entry
                logger.warning(
                    "Leader epoch checkpoint %s is corrupt (%s); rebuilding the partition's "
                    "leader epoch cache from its log",
                    self._path,
                    error,
                )
                self._epochs.clear()
                self._offsets.clear()
                self.rebuild_needed = True

    # -- queries ---------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def previous_epoch(self) -> int | None:
        """The epoch of the entry before the latest one (Kafka's previousEpoch)."""
        return self._epochs[-2] if len(self._epochs) > 1 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the leader that wrote `offset`, or None when it precedes every entry."""
        index = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[index] if index >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """The largest epoch <= `requested_epoch` and the start offset of the first epoch
        after it (the LEO for the latest epoch); UNDEFINED results when unknown."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # The data of earlier epochs is gone; the follower should start from here.
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # -- updates ---------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that `epoch` starts at `start_offset`. A repeat of the latest epoch at a
        later offset changes nothing; an entry that breaks monotonicity removes the entries
        it conflicts with (Kafka's truncation of non-monotonic entries)."""
        if self._assign(epoch, start_offset):
            self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Removes the entries starting at or after `end_offset`."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._offsets, end_offset)
        del self._epochs[keep:], self._offsets[keep:]
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Removes the entries wholly before `start_offset`; the epoch covering it is kept,
        moved to start there."""
        if start_offset < 0 or not self._offsets or self._offsets[0] >= start_offset:
            return
        covering = bisect.bisect_right(self._offsets, start_offset) - 1
        del self._epochs[:covering], self._offsets[:covering]
        self._offsets[0] = start_offset
        self._write()

    def rebuild(self, batch_epochs: Iterable[tuple[int, int]]) -> None:
        """Replaces the entries by those of the log's batches, `(partition leader epoch, base
        offset)` in offset order (a batch without an epoch, -1, is skipped), and rewrites
        the checkpoint."""
        self._epochs.clear()
        self._offsets.clear()
        for epoch, base_offset in batch_epochs:
            if epoch >= 0:
                self._assign(epoch, base_offset)
        self.rebuild_needed = False
        self._write()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._offsets.clear()
            self._write()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(
                f"invalid leader epoch entry (epoch={epoch}, start_offset={start_offset})"
            )
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._offsets.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            logger.warning(
                "new epoch entry (%d, %d) truncated conflicting entries %s",
                epoch,
                start_offset,
                removed[::-1],
            )
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def _write(self) -> None:
        if self._path is not None:
            lines = (f"{epoch} {offset}" for epoch, offset in self.entries())
            write_atomically(self._path, format_checkpoint(lines))
