"""A batch damaged on disk after it was written (below the recovery point, so never checked
again): a fetch serves the intact batches before it, a fetch from it answers
CORRUPT_MESSAGE, and the consumer delivers those records, then raises CorruptRecordError."""

from __future__ import annotations

import struct

import pytest
import trio

from kcore.log import CorruptRecordError
from kcore.testing import open_cluster

BATCHES = 6
DAMAGED = 3  # the offset of the damaged batch (one record per batch)


def _flip_a_byte_of_batch(segment, offset: int) -> None:
    content = bytearray(segment.read_bytes())
    position = 0
    while True:
        base, length = struct.unpack_from(">qi", content, position)
        if base == offset:
            break
        position += length + 12
    content[position + length + 11] ^= 0xFF  # its last byte: a record's
    segment.write_bytes(bytes(content))


async def test_the_consumer_gets_the_records_before_a_corrupt_batch_then_the_error(
    autojump_clock, tmp_path
) -> None:
    async with open_cluster(brokers=1, seed=23, data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=1)
        async with cluster.producer() as producer:
            for i in range(BATCHES):
                await producer.send_and_wait("t", b"value-%d" % i, partition=0)
        [segment] = tmp_path.rglob("t-0/*.log")
        _flip_a_byte_of_batch(segment, DAMAGED)
        async with cluster.consumer() as consumer:
            consumer.assign([("t", 0)])
            records = []
            with trio.fail_after(30):
                while len(records) < DAMAGED:
                    records += await consumer.poll(timeout=1.0)
            assert [r.offset for r in records] == list(range(DAMAGED))
            with pytest.raises(CorruptRecordError, match=f"t-0 at offset {DAMAGED}"):
                with trio.fail_after(30):
                    while True:
                        assert await consumer.poll(timeout=1.0) == []
            consumer.seek(("t", 0), DAMAGED + 1)
            records = []
            with trio.fail_after(30):
                while len(records) < BATCHES - DAMAGED - 1:
                    records += await consumer.poll(timeout=1.0)
            assert [r.offset for r in records] == list(range(DAMAGED + 1, BATCHES))
