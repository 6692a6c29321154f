"""The data directory: an append-only transaction log, fsynced per batch, and snapshots.

Files are named after zxids, in hex so that names sort as numbers: `snapshot.<zxid>` holds
the whole state as of that zxid; `log.<zxid>` holds the records from that zxid on. A new
log file starts after each snapshot. The newest `snap_retain_count` snapshots are kept
(ZooKeeper's `autopurge.snapRetainCount`), with every log file the oldest of them needs,
so that a damaged snapshot can be replaced by an older one and the logs after it.

Recovery loads the newest intact snapshot from which the logs reach at least as far as the
newest snapshot file (damaged or not), and returns the log records after it. A torn log
tail (a crash in the middle of an append) is cut off with a WARNING, so that later appends
follow intact records. Damage anywhere else would silently drop acknowledged writes, so
recovery refuses it with `CorruptDataError` (one line naming the file and offset), unless
told to `truncate_corrupt_log`: then the damaged log is cut there, the bytes dropped kept
aside in `<file>.corrupt`, and the later logs renamed `<file>.corrupt`.
"""

from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path
from typing import Any

import attrs

from zkstub._snapshot import is_snapshot_of
from zkstub._wal import decode_records, encode_record, is_torn_tail, iter_records

logger = logging.getLogger("zkstub.storage")

# ZooKeeper's autopurge.snapRetainCount: its default, and the least it accepts.
SNAP_RETAIN_COUNT = 3
CORRUPT_SUFFIX = ".corrupt"


class CorruptDataError(Exception):
    """The data directory cannot be recovered without losing acknowledged writes. The
    message is one line naming the file and the offset of the damage."""


def _zxid_of(path: Path) -> int:
    return int(path.name.split(".", 1)[1], 16)


def _files(data_dir: Path, prefix: str) -> list[Path]:
    found = []
    for path in data_dir.glob(f"{prefix}.*"):
        try:
            _zxid_of(path)
        except ValueError:
            continue  # e.g. a temporary file, or one set aside as corrupt
        found.append(path)
    return sorted(found, key=_zxid_of)


def _fsync_dir(data_dir: Path) -> None:
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_log_record(record: Any) -> bool:
    return isinstance(record, list) and len(record) >= 3 and isinstance(record[1], int)


def retained_count(snap_retain_count: int) -> int:
    """`snap_retain_count` as ZooKeeper takes autopurge.snapRetainCount: less than 3 is
    raised to 3, with a WARNING."""
    if snap_retain_count < SNAP_RETAIN_COUNT:
        logger.warning("Invalid autopurge.snapRetainCount: %s. Defaulting to %d",
                       snap_retain_count, SNAP_RETAIN_COUNT)  # fmt: skip
        return SNAP_RETAIN_COUNT
    return snap_retain_count


@attrs.frozen
class _Logged:
    """One intact log record, and where it is."""

    path: Path
    offset: int
    record: Any

    @property
    def zxid(self) -> int:
        return self.record[1]


@attrs.frozen
class Recovered:
    snapshot: Any  # the content of the snapshot recovery starts from, or None
    records: list[Any]  # log records after it, in order


def _cut_log(logs: list[Path], path: Path, offset: int) -> None:
    """Ends the log at `offset` of `path`: the bytes from there and the later log files are
    set aside (renamed `*.corrupt`), not deleted."""
    data = path.read_bytes()
    if offset < len(data):
        path.with_name(path.name + CORRUPT_SUFFIX).write_bytes(data[offset:])
        with path.open("r+b") as file:
            file.truncate(offset)
            os.fsync(file.fileno())
    for later in logs[logs.index(path) + 1 :]:
        later.rename(later.with_name(later.name + CORRUPT_SUFFIX))
    _fsync_dir(path.parent)


def _damaged_log(logs: list[Path], path: Path, offset: int, what: str, truncate: bool) -> None:
    if not truncate:
        raise CorruptDataError(
            f"{path} is corrupt at offset {offset} ({what}); refusing to start, since the "
            "records after it were acknowledged (--truncate-corrupt-log drops them)"
        )
    logger.warning(
        "%s is corrupt at offset %d (%s): dropping it and everything after it, as "
        "truncate-corrupt-log asks (the dropped bytes and later logs are kept as *%s)",
        path, offset, what, CORRUPT_SUFFIX,
    )  # fmt: skip
    _cut_log(logs, path, offset)


def _read_logs(directory: Path, truncate: bool) -> list[_Logged]:
    """Every intact record of the logs, in file order; cuts a torn tail off the last log
    that holds records; refuses (or, told to, cuts) damage anywhere else."""
    logs = _files(directory, "log")
    found: list[_Logged] = []
    for index, path in enumerate(logs):
        data = path.read_bytes()
        end = 0  # where the intact records stop
        for offset, record_end, record in iter_records(data):
            if not _is_log_record(record):
                _damaged_log(logs, path, offset, "a malformed record", truncate)
                return found
            found.append(_Logged(path, offset, record))
            end = record_end
        if end == len(data):
            continue
        records_follow = any(later.stat().st_size for later in logs[index + 1 :])
        if is_torn_tail(data, end) and not records_follow:
            logger.warning("%s: discarding a torn tail of %d bytes at offset %d (a crash "
                           "in the middle of an append)", path, len(data) - end, end)  # fmt: skip
            with path.open("r+b") as file:
                file.truncate(end)
                os.fsync(file.fileno())
            continue
        _damaged_log(logs, path, end, "a record fails its checksum", truncate)
        return found
    return found


def _reach(records: list[_Logged], zxid: int) -> int:
    """The last zxid the records replay to, contiguously, from the state as of `zxid`."""
    for logged in records:
        if logged.zxid <= zxid:
            continue
        if logged.zxid != zxid + 1:
            break
        zxid += 1
    return zxid


def _read_snapshot(path: Path) -> tuple[Any, int]:
    """(content, -1) of an intact snapshot file; (None, offset of the damage) otherwise."""
    data = path.read_bytes()
    found, end = decode_records(data)
    if len(found) == 1 and end == len(data) and is_snapshot_of(found[0], _zxid_of(path)):
        return found[0], -1
    return None, (end if end < len(data) else 0)


def _choose_snapshot(directory: Path, records: list[_Logged]) -> tuple[Any, int]:
    """(content, zxid) of the newest intact snapshot (None, 0 for the empty tree) that the
    records carry at least as far as the newest snapshot file: a damaged snapshot still
    proves that the state reached its zxid, and starting short of it would lose writes."""
    snapshots = _files(directory, "snapshot")
    newest = _zxid_of(snapshots[-1]) if snapshots else 0
    damaged: list[tuple[Path, int]] = []
    for path in reversed(snapshots):
        content, damage = _read_snapshot(path)
        if content is None:
            logger.error("%s is corrupt at offset %d; trying an older snapshot", path, damage)
            damaged.append((path, damage))
            continue
        zxid = _zxid_of(path)
        if _reach(records, zxid) >= newest:
            break
        logger.error("%s is intact, but the logs after it end before zxid 0x%x", path, newest)
    else:
        content, zxid = None, 0
        if _reach(records, 0) < newest:
            path, damage = damaged[0]
            raise CorruptDataError(
                f"{path} is corrupt at offset {damage}, and no older snapshot with the logs "
                "after it remains; refusing to start"
            )
    for path, _ in damaged:
        logger.warning("recovered from %s; setting aside the corrupt %s",
                       f"snapshot.{zxid:016x}" if content else "the logs", path)  # fmt: skip
        path.rename(path.with_name(path.name + CORRUPT_SUFFIX))
    return content, zxid


@attrs.define(eq=False)
class Storage:
    data_dir: Path
    snap_retain_count: int = SNAP_RETAIN_COUNT
    _log: Any = None  # the open log file
    _pending: list[bytes] = attrs.field(factory=list)
    records_since_snapshot: int = 0

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        *,
        truncate_corrupt_log: bool = False,
        snap_retain_count: int = SNAP_RETAIN_COUNT,
    ) -> tuple[Storage, Recovered]:
        """Recovers the data directory (raising CorruptDataError if it cannot without
        losing acknowledged writes) and opens a new log file for appends."""
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        retain = retained_count(snap_retain_count)
        logged = _read_logs(directory, truncate_corrupt_log)
        snapshot, snapshot_zxid = _choose_snapshot(directory, logged)
        records: list[Any] = []
        for entry in logged:
            if entry.zxid <= snapshot_zxid:
                continue
            if entry.zxid != snapshot_zxid + len(records) + 1:
                expected = snapshot_zxid + len(records) + 1
                what = f"zxid 0x{entry.zxid:x} where 0x{expected:x} was due"
                _damaged_log(_files(directory, "log"), entry.path, entry.offset, what,
                             truncate_corrupt_log)  # fmt: skip
                break
            records.append(entry.record)
        storage = cls(directory, snap_retain_count=retain)
        next_zxid = snapshot_zxid + len(records) + 1
        # Appends go to a fresh file named after the next zxid (empty ones are harmless).
        storage._open_log(directory / f"log.{next_zxid:016x}")
        return storage, Recovered(snapshot, records)

    def _open_log(self, path: Path) -> None:
        if self._log is not None:
            self._log.close()
        self._log = path.open("ab")
        _fsync_dir(self.data_dir)

    def append(self, record: Any) -> None:
        """Buffers a record; it is durable once `flush` returns."""
        self._pending.append(encode_record(record))
        self.records_since_snapshot += 1

    @property
    def dirty(self) -> bool:
        return bool(self._pending)

    def flush(self) -> None:
        """Writes the buffered records and fsyncs them: one fsync per batch."""
        if not self._pending:
            return
        self._log.write(b"".join(self._pending))
        self._pending.clear()
        self._log.flush()
        os.fsync(self._log.fileno())

    def write_snapshot(self, zxid: int, content: Any) -> None:
        """Writes the state as of `zxid` (everything logged so far), starts a new log file
        and purges what the retained snapshots no longer need."""
        self.flush()
        final = self.data_dir / f"snapshot.{zxid:016x}"
        temporary = final.with_name(final.name + ".tmp")
        with temporary.open("wb") as file:
            file.write(encode_record(content))
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(final)
        self._open_log(self.data_dir / f"log.{zxid + 1:016x}")
        self._purge()
        self.records_since_snapshot = 0

    def _purge(self) -> None:
        """Keeps the newest `snap_retain_count` snapshots and the logs holding any record
        after the oldest of them (as ZooKeeper's PurgeTxnLog does)."""
        snapshots = _files(self.data_dir, "snapshot")
        kept = snapshots[-self.snap_retain_count :]
        for path in snapshots[: -self.snap_retain_count]:
            path.unlink()
        oldest = _zxid_of(kept[0])
        logs = _files(self.data_dir, "log")
        # A log file holds the zxids from its name up to the next file's name.
        for path, following in itertools.pairwise(logs):
            if _zxid_of(following) <= oldest + 1:
                path.unlink()

    def close(self) -> None:
        self.flush()
        if self._log is not None:
            self._log.close()
            self._log = None
