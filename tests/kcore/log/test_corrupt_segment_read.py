"""Corruption in a segment below the recovery point (not re-validated at start-up, as in
Kafka) reaches a read: the intact batches before it are served, and a read from the damaged
batch itself raises CorruptRecordError naming it."""

from __future__ import annotations

import struct

import pytest

from kcore.log import CorruptRecordError, PartitionLog, build_batch, iter_batch_records

BATCHES = 12


def _write_log(directory) -> int:
    log = PartitionLog(directory, segment_bytes=500)
    for i in range(BATCHES):
        log.append(build_batch([(i, None, b"value-%02d" % i)] * 2), leader_epoch=0)
    assert len(log.segment_base_offsets()) > 2
    log.close()
    return log.log_end_offset


def _offsets(batches) -> list[int]:
    return [record.offset for record in iter_batch_records(batches)]


def _damage(directory, offset: int, *, field_at: int, data: bytes) -> None:
    """Overwrites bytes of the batch holding `offset` in the oldest segment."""
    [oldest, *_] = sorted(directory.glob("*.log"))
    content = bytearray(oldest.read_bytes())
    position = 0
    while True:
        base, length = struct.unpack_from(">qi", content, position)
        if base <= offset < base + 2:
            break
        position += length + 12
    content[position + field_at : position + field_at + len(data)] = data
    oldest.write_bytes(bytes(content))


@pytest.mark.parametrize(
    ("field_at", "data"),
    [(70, b"\xff"), (8, struct.pack(">i", 3))],
    ids=["flipped record byte", "impossible length"],
)
def test_a_read_serves_the_intact_batches_before_a_corrupt_one(tmp_path, field_at, data):
    end = _write_log(tmp_path)
    _damage(tmp_path, 4, field_at=field_at, data=data)
    log = PartitionLog(tmp_path, segment_bytes=500, recovery_point=end)  # a clean start
    assert _offsets(log.read(0, 1 << 20)) == [0, 1, 2, 3]
    assert _offsets(log.read(2, 1 << 20)) == [2, 3]
    with pytest.raises(CorruptRecordError, match=r"offsets? 4\b"):
        log.read(4, 1 << 20)
    log.close()
