"""The producer's fast path: `send` queues a record and returns a handle; awaiting it, its
`on_delivery` callback and `send_and_wait` all tell the same outcome. Buffer room
(`buffer_memory`, `max_block_ms`) and closing, against the fake cluster."""

from __future__ import annotations

import gc
import logging
from collections import deque

import pytest
import trio

from kcore import errors
from kcore.client import (
    BufferExhaustedError,
    ClientConfigError,
    FutureRecordMetadata,
    Producer,
    ProducerClosedError,
    RecordMetadata,
)
from kcore.client._accumulator import ProducerBatch, record_size
from kcore.log import HEADER_SIZE, iter_batch_records
from kcore.protocol.api_keys import ApiKey

NOT_ENOUGH_REPLICAS = 19
MESSAGE_TOO_LARGE = 10


def values_in_log(cluster, topic, partition):
    return [r.value for r in iter_batch_records(cluster.partition(topic, partition).batches)]


def error_of(outcome) -> tuple[type, str]:
    return type(outcome), str(outcome)


async def test_handles_give_what_send_and_wait_gives(fake_cluster, client_args, autojump_clock):
    """Many records queued at once share batches; each handle still gives its own record's
    offset (the one the log holds its value at), the offset send_and_wait gets for the
    same record sent alone."""
    for topic in ("queued", "waited"):
        fake_cluster.add_topic(topic, 3)
    records = [(b"k%d" % (i % 7), b"value-%d" % i) for i in range(60)]
    settings = {
        # five records a batch: several batches per partition, each with several records
        "batch_size": HEADER_SIZE + 5 * record_size(b"k0", b"value-10"),
        "linger_ms": 5,
    }
    async with Producer(fake_cluster.bootstrap, **settings, **client_args) as producer:
        await producer.partitions_for("queued")
        handles = [await producer.send("queued", v, key=k) for k, v in records]
        assert all(isinstance(h, FutureRecordMetadata) for h in handles)
        queued = [await handle for handle in handles]
        waited = [await producer.send_and_wait("waited", v, key=k) for k, v in records]

    assert [(m.partition, m.offset) for m in queued] == [(m.partition, m.offset) for m in waited]
    for meta, (_, value) in zip(queued, records, strict=True):
        assert meta.topic == "queued"
        assert values_in_log(fake_cluster, "queued", meta.partition)[meta.offset] == value
    queued_batches = sum(len(p.batches) for p in fake_cluster.topics["queued"])
    assert 3 < queued_batches < len(records)  # shared batches, more than one per partition


@pytest.mark.parametrize(
    ("injected", "settings", "raised"),
    [
        ([MESSAGE_TOO_LARGE], {}, errors.MessageTooLargeError),  # not retriable
        ([NOT_ENOUGH_REPLICAS] * 2, {"retries": 1}, errors.NotEnoughReplicasError),  # exhausted
    ],
)
async def test_a_failed_batch_fails_each_handle_as_send_and_wait_fails(
    fake_cluster, client_args, autojump_clock, injected, settings, raised
):
    fake_cluster.add_topic("t", 2)
    async with Producer(
        fake_cluster.bootstrap, linger_ms=5, retry_backoff_ms=10, **settings, **client_args
    ) as producer:
        fake_cluster.produce_errors[("t", 1)] = deque(injected)
        with pytest.raises(raised) as waited:
            await producer.send_and_wait("t", b"alone", partition=1)

        fake_cluster.produce_errors[("t", 1)] = deque(injected)
        failing = [await producer.send("t", b"f%d" % i, partition=1) for i in range(3)]
        fine = [await producer.send("t", b"g%d" % i, partition=0) for i in range(3)]
        assert [(await h).offset for h in fine] == [0, 1, 2]
        for handle in failing:
            with pytest.raises(raised) as first:
                await handle
            with pytest.raises(raised) as second:
                await handle
            assert error_of(first.value) == error_of(second.value) == error_of(waited.value)
            assert first.value is not second.value  # each await raises its own
            assert error_of(handle.exception()) == error_of(waited.value)
    assert values_in_log(fake_cluster, "t", 1) == []


async def test_on_delivery_gets_each_records_metadata_or_error(
    fake_cluster, client_args, autojump_clock, caplog
):
    fake_cluster.add_topic("t", 2)
    fake_cluster.produce_errors[("t", 1)] = deque([MESSAGE_TOO_LARGE])
    delivered: list[tuple[bytes, RecordMetadata | None, BaseException | None]] = []

    def on_delivery_of(value: bytes):
        def on_delivery(metadata, error) -> None:
            delivered.append((value, metadata, error))
            if value == b"p0-1":
                raise ValueError("a broken callback")

        return on_delivery

    async with Producer(fake_cluster.bootstrap, linger_ms=5, **client_args) as producer:
        await producer.partitions_for("t")
        handles = {}
        for i in range(4):
            for partition in (0, 1):
                value = b"p%d-%d" % (partition, i)
                handles[value] = await producer.send(
                    "t", value, partition=partition, on_delivery=on_delivery_of(value)
                )
        assert delivered == []  # nothing is called before the batches are answered
        await producer.flush()
        # The broken callback neither stopped the others nor the producer.
        assert (await producer.send_and_wait("t", b"after", partition=0)).offset == 4

    assert sorted(value for value, _, _ in delivered) == sorted(handles)
    for value, metadata, error in delivered:
        if value.startswith(b"p0"):
            assert error is None and metadata == await handles[value]
        else:
            assert metadata is None and isinstance(error, errors.MessageTooLargeError)
            assert error_of(error) == error_of(handles[value].exception())
    # Per partition, in send order.
    for prefix in (b"p0", b"p1"):
        assert [v for v, _, _ in delivered if v.startswith(prefix)] == [
            v for v in handles if v.startswith(prefix)
        ]
    assert "a broken callback" in caplog.text
    assert [r.levelno for r in caplog.records if "delivery callback" in r.getMessage()] == [
        logging.ERROR
    ]


async def test_send_with_room_queues_without_yielding(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        await producer.partitions_for("t")
        with trio.CancelScope() as scope:
            scope.cancel()
            handle = await producer.send("t", b"a")  # no checkpoint: not cancelled
        assert not scope.cancelled_caught
        assert not handle.done()
        with pytest.raises(RuntimeError, match="not acknowledged yet"):
            handle.result()
        await producer.flush()
        assert handle.done() and handle.result().offset == 0


async def test_cancelling_an_await_does_not_withdraw_the_record(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        handle = await producer.send("t", b"a")
        with trio.move_on_after(0) as scope:
            await handle
        assert scope.cancelled_caught
        assert (await handle).offset == 0
    assert values_in_log(fake_cluster, "t", 0) == [b"a"]


async def test_handles_never_awaited_neither_warn_nor_keep_their_batches(
    fake_cluster, client_args, autojump_clock, recwarn
):
    fake_cluster.add_topic("t", 2)
    async with Producer(fake_cluster.bootstrap, batch_size=1000, **client_args) as producer:
        kept = [await producer.send("t", b"x" * 100) for _ in range(50)]
        for _ in range(50):
            await producer.send("t", b"y" * 100)
        await producer.flush()
        gc.collect()
        # A kept handle holds its record's outcome, not its batch and the batch's records.
        assert [obj for obj in gc.get_objects() if isinstance(obj, ProducerBatch)] == []
    assert all(handle.done() for handle in kept)
    assert sum(len(values_in_log(fake_cluster, "t", p)) for p in (0, 1)) == 100
    del kept
    gc.collect()
    assert [w for w in recwarn.list if issubclass(w.category, RuntimeWarning)] == []


async def test_closing_on_an_error_fails_pending_handles_and_callbacks(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    called = []
    with pytest.raises(RuntimeError, match="boom"):
        async with Producer(fake_cluster.bootstrap, linger_ms=10_000, **client_args) as producer:
            await producer.partitions_for("t")
            handles = [
                await producer.send("t", b"a", on_delivery=lambda *outcome: called.append(outcome))
                for _ in range(2)
            ]
            raise RuntimeError("boom")
    for handle in handles:
        with pytest.raises(ProducerClosedError):
            await handle
    assert [(meta, type(error)) for meta, error in called] == [(None, ProducerClosedError)] * 2
    assert fake_cluster.requests_of(ApiKey.PRODUCE) == []
    with pytest.raises(ProducerClosedError):
        await producer.send("t", b"late")


def _two_records_buffer(value: bytes) -> int:
    """A buffer_memory that holds one batch of two records of `value`, not three."""
    return HEADER_SIZE + 2 * record_size(None, value)


async def test_send_waits_for_buffer_room_until_earlier_records_are_answered(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    # The first batch is refused twice (retriable) before it is written.
    fake_cluster.produce_errors[("t", 0)] = deque([NOT_ENOUGH_REPLICAS] * 2)
    async with Producer(
        fake_cluster.bootstrap,
        buffer_memory=_two_records_buffer(b"v0"),
        retry_backoff_ms=100,
        **client_args,
    ) as producer:
        await producer.partitions_for("t")
        first = [await producer.send("t", b"v%d" % i) for i in range(2)]
        start = trio.current_time()
        third = await producer.send("t", b"v2")  # waits: the buffer is full
        assert trio.current_time() > start
        assert all(h.done() for h in first)  # room came from the first batch's answer
        assert [(await h).offset for h in (*first, third)] == [0, 1, 2]
    assert values_in_log(fake_cluster, "t", 0) == [b"v0", b"v1", b"v2"]


async def test_send_fails_when_the_buffer_stays_full_for_max_block_ms(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([NOT_ENOUGH_REPLICAS] * 15)  # ~1.5 s
    async with Producer(
        fake_cluster.bootstrap,
        buffer_memory=_two_records_buffer(b"v0"),
        max_block_ms=1000,
        retry_backoff_ms=100,
        **client_args,
    ) as producer:
        await producer.partitions_for("t")
        first = [await producer.send("t", b"v%d" % i) for i in range(2)]
        start = trio.current_time()
        with pytest.raises(BufferExhaustedError, match="max blocking time 1000 ms") as raised:
            await producer.send("t", b"v2")
        assert isinstance(raised.value, errors.RequestTimedOutError)  # Kafka's TimeoutException
        assert trio.current_time() - start == pytest.approx(1.0, abs=0.1)
        assert [(await h).offset for h in first] == [0, 1]
        with pytest.raises(errors.MessageTooLargeError, match="buffer_memory"):
            await producer.send("t", b"x" * 100)  # could never fit
    assert values_in_log(fake_cluster, "t", 0) == [b"v0", b"v1"]


def test_buffer_memory_must_be_positive():
    import random

    import transport

    with pytest.raises(ClientConfigError, match="buffer_memory"):
        Producer([("h", 1)], network=transport.SimNetwork(0), rng=random.Random(0), buffer_memory=0)
