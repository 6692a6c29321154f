"""Kafka's checkpoint text files: a version line, a count line, then one entry per line,
always replaced atomically (temp file, fsync, rename, fsync of the directory)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"  # where each compacted log is clean to
CHECKPOINT_VERSION = 0

Entry = TypeVar("Entry")


def write_atomically(path: pathlib.Path, text: str) -> None:
    """Replaces `path` by `text` so that a crash leaves either the old or the new file.

    Through file descriptors and string paths, not a buffered file object and pathlib: a
    leader writes a partition's leader-epoch checkpoint on every election (as Kafka's
    LeaderEpochFileCache.assign does), and for 10 000 partitions the object layers were
    half of the cost."""
    target = os.fspath(path)
    temporary = target + ".tmp"
    remaining = memoryview(text.encode("utf-8"))
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while remaining:
            remaining = remaining[os.write(fd, remaining) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)
    directory = os.open(os.path.dirname(target) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def format_checkpoint(lines: Iterable[str]) -> str:
    lines = list(lines)
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines])


def read_checkpoint(path: pathlib.Path, parse: Callable[[list[str]], Entry]) -> list[Entry]:
    """The entries of a checkpoint file (none when it does not exist); a malformed file is a
    ValueError naming the file and the line."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 2:
        raise ValueError(f"malformed checkpoint {path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"unrecognized version {lines[0]!r} of checkpoint {path}")
    try:
        expected = int(lines[1])
    except ValueError:
        raise ValueError(f"malformed count line {lines[1]!r} in checkpoint {path}") from None
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        try:
            entries.append(parse(line.split()))
        except (ValueError, IndexError):
            raise ValueError(f"malformed line {number} {line!r} in checkpoint {path}") from None
    if len(entries) != expected:
        raise ValueError(f"checkpoint {path} announces {expected} entries, holds {len(entries)}")
    return entries


def _parse_offset_entry(fields: list[str]) -> tuple[tuple[str, int], int]:
    if len(fields) != 3:
        raise ValueError(fields)
    return (fields[0], int(fields[1])), int(fields[2])


class OffsetCheckpointFile:
    """`topic partition offset` lines: the replication (HW), recovery-point and
    log-start-offset checkpoints of a log dir."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = pathlib.Path(path)

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = (
            f"{topic} {partition} {offsets[topic, partition]}"
            for topic, partition in sorted(offsets)
        )
        write_atomically(self.path, format_checkpoint(lines))

    def read(self) -> dict[tuple[str, int], int]:
        return dict(read_checkpoint(self.path, _parse_offset_entry))
