"""The data directory: an append-only transaction log, fsynced per batch, and snapshots.

Files are named after zxids, in hex so that names sort as numbers: `snapshot.<zxid>` holds
the whole state as of that zxid; `log.<zxid>` holds the records from that zxid on. A new
log file starts after each snapshot, and files older than the newest snapshot are removed.
Recovery loads the newest intact snapshot and returns the log records after it, cutting a
torn tail off the log (a crash mid-append) so that later appends follow intact records.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import attrs

from zkstub._wal import decode_records, encode_record

logger = logging.getLogger("zkstub.storage")


def _zxid_of(path: Path) -> int:
    return int(path.name.split(".", 1)[1], 16)


def _files(data_dir: Path, prefix: str) -> list[Path]:
    found = []
    for path in data_dir.glob(f"{prefix}.*"):
        try:
            _zxid_of(path)
        except ValueError:
            continue  # e.g. a temporary file
        found.append(path)
    return sorted(found, key=_zxid_of)


def _fsync_dir(data_dir: Path) -> None:
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@attrs.frozen
class Recovered:
    snapshot: Any  # the newest intact snapshot's content, or None
    records: list[Any]  # log records after it, in order


@attrs.define(eq=False)
class Storage:
    data_dir: Path
    _log: Any = None  # the open log file
    _pending: list[bytes] = attrs.field(factory=list)
    records_since_snapshot: int = 0

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str]) -> tuple[Storage, Recovered]:
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        snapshot, snapshot_zxid = None, -1
        for path in reversed(_files(directory, "snapshot")):
            records, _ = decode_records(path.read_bytes())
            if len(records) == 1:
                snapshot, snapshot_zxid = records[0], _zxid_of(path)
                break
            logger.error("ignoring corrupt snapshot %s", path)
        records: list[Any] = []
        logs = _files(directory, "log")
        for index, path in enumerate(logs):
            data = path.read_bytes()
            found, intact = decode_records(data)
            records += [r for r in found if r[1] > snapshot_zxid]
            if intact < len(data):
                logger.warning(
                    "%s: discarding a torn tail of %d bytes after %d intact records",
                    path, len(data) - intact, len(found),
                )  # fmt: skip
                with path.open("r+b") as file:
                    file.truncate(intact)
                    os.fsync(file.fileno())
                for later in logs[index + 1 :]:
                    # Records after a hole cannot be replayed in order: keep them aside.
                    logger.error("setting aside %s, which follows a torn log", later)
                    later.rename(later.with_name(later.name + ".corrupt"))
                break
        storage = cls(directory)
        next_zxid = max([snapshot_zxid, *(r[1] for r in records)]) + 1
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
        and removes the files the snapshot makes obsolete."""
        self.flush()
        final = self.data_dir / f"snapshot.{zxid:016x}"
        temporary = final.with_name(final.name + ".tmp")
        with temporary.open("wb") as file:
            file.write(encode_record(content))
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(final)
        self._open_log(self.data_dir / f"log.{zxid + 1:016x}")
        for path in _files(self.data_dir, "snapshot"):
            if _zxid_of(path) < zxid:
                path.unlink()
        for path in _files(self.data_dir, "log"):
            if _zxid_of(path) <= zxid:
                path.unlink()
        self.records_since_snapshot = 0

    def close(self) -> None:
        self.flush()
        if self._log is not None:
            self._log.close()
            self._log = None
