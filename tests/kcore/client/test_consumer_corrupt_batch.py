"""A fetched corrupt batch: the consumer delivers the intact records before it, then raises
CorruptRecordError naming the partition and offset; seeking past it goes on."""

from __future__ import annotations

import sys

import pytest
import trio

from kcore.client import Consumer
from kcore.log import CorruptRecordError, build_batch, parse_header


def _append(cluster, values, *, corrupt=False):
    base = cluster.append("t", 0, build_batch([(1000, None, v) for v in values]))
    if corrupt:
        stored = bytearray(cluster.partition("t", 0).batches[-1])
        stored[-1] ^= 0xFF  # a flipped bit in the records: the CRC32C no longer matches
        cluster.partition("t", 0).batches[-1] = bytes(stored)
    return base


async def test_records_before_a_corrupt_batch_come_first_then_the_error(
    fake_cluster, client_args, autojump_clock, monkeypatch
):
    # The fake cluster serves what it stores, unchecked (as a broker that does not validate).
    fake_module = sys.modules[type(fake_cluster).__module__]
    monkeypatch.setattr(fake_module, "split_batches", lambda batch: [(parse_header(batch), batch)])
    fake_cluster.add_topic("t", 1)
    _append(fake_cluster, [b"a", b"b"])
    _append(fake_cluster, [b"c"])
    bad = _append(fake_cluster, [b"d", b"e"], corrupt=True)
    _append(fake_cluster, [b"f"])
    async with Consumer(fake_cluster.bootstrap, **client_args) as consumer:
        consumer.assign([("t", 0)])
        records = []
        with trio.fail_after(10):
            while len(records) < 3:
                records += await consumer.poll(timeout=1.0)
        assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c")]
        with pytest.raises(CorruptRecordError, match=rf"t-0 at offset {bad}"):
            with trio.fail_after(10):
                while True:
                    assert await consumer.poll(timeout=1.0) == []
        consumer.seek(("t", 0), bad + 2)
        [record] = await consumer.poll(timeout=1.0)
        assert (record.offset, record.value) == (bad + 2, b"f")
