"""The producer against a fake cluster: offsets, batching, retries, ordering, errors."""

from __future__ import annotations

from collections import deque

import pytest
import trio

from kcore import errors
from kcore.client import ClientConfigError, InvalidPartitionError, Producer, RecordMetadata
from kcore.client._accumulator import record_size
from kcore.log import iter_batch_records
from kcore.protocol.api_keys import ApiKey


def values_in_log(cluster, topic, partition):
    return [r.value for r in iter_batch_records(cluster.partition(topic, partition).batches)]


async def test_send_returns_offsets_in_order(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        metas = [await producer.send_and_wait("t", f"v{i}".encode()) for i in range(3)]
    assert [(m.topic, m.partition, m.offset) for m in metas] == [("t", 0, i) for i in range(3)]
    assert values_in_log(fake_cluster, "t", 0) == [b"v0", b"v1", b"v2"]


async def test_concurrent_sends_share_one_batch(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    results: dict[int, RecordMetadata] = {}
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        await producer.send_and_wait("t", b"warm-up")  # metadata known: the next sends do not wait

        async def send(i: int) -> None:
            results[i] = await producer.send_and_wait("t", f"v{i}".encode(), partition=0)

        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(send, i)
    produce = fake_cluster.requests_of(ApiKey.PRODUCE)
    assert len(produce) == 2  # the warm-up, then one request for the ten
    assert sorted(m.offset for m in results.values()) == list(range(1, 11))
    # Each send got the offset its own record was written at.
    log = values_in_log(fake_cluster, "t", 0)
    assert all(log[m.offset] == f"v{i}".encode() for i, m in results.items())


async def test_not_leader_refreshes_metadata_and_retries_to_new_leader(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1, leaders=[1])
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        await producer.send_and_wait("t", b"a")
        fake_cluster.move_leader("t", 0, 2)  # the producer's metadata still says broker 1
        meta = await producer.send_and_wait("t", b"b")
    assert meta.offset == 1
    assert values_in_log(fake_cluster, "t", 0) == [b"a", b"b"]  # acked once, written once
    brokers = [broker for broker, _ in fake_cluster.requests_of(ApiKey.PRODUCE)]
    assert brokers == [1, 1, 2]


async def test_not_enough_replicas_retried_until_delivery_timeout(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([19] * 10_000)
    async with Producer(
        fake_cluster.bootstrap,
        delivery_timeout_ms=2000,
        request_timeout_ms=1000,
        retry_backoff_ms=100,
        **client_args,
    ) as producer:
        start = trio.current_time()
        with pytest.raises(errors.NotEnoughReplicasError, match="delivery_timeout_ms=2000"):
            await producer.send_and_wait("t", b"a")
        assert trio.current_time() - start == pytest.approx(2.0, abs=0.2)
    attempts = len(fake_cluster.requests_of(ApiKey.PRODUCE))
    assert 10 < attempts <= 21  # every ~100 ms for 2 s
    assert values_in_log(fake_cluster, "t", 0) == []


async def test_retries_setting_limits_attempts(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([19] * 10)
    async with Producer(fake_cluster.bootstrap, retries=2, **client_args) as producer:
        with pytest.raises(errors.NotEnoughReplicasError, match="retries=2 exhausted"):
            await producer.send_and_wait("t", b"a")
    assert len(fake_cluster.requests_of(ApiKey.PRODUCE)) == 3


async def test_order_kept_across_a_retry(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([20, 20])  # the first batch fails twice
    metas: dict[bytes, RecordMetadata] = {}
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        await producer.partitions_for("t")

        async def send(value: bytes) -> None:
            metas[value] = await producer.send_and_wait("t", value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, b"first")
            await trio.sleep(0.01)  # the first batch is in flight (and failing) ...
            nursery.start_soon(send, b"second")  # ... when the second record comes
    assert values_in_log(fake_cluster, "t", 0) == [b"first", b"second"]
    assert metas[b"first"].offset == 0 and metas[b"second"].offset == 1
    sent = [
        [data.records for data in message.partitions]
        for _, message in fake_cluster.requests_of(ApiKey.PRODUCE)
    ]
    assert len(sent) == 4  # first, first (retry), first (retry), second
    assert sent[0] == sent[1] == sent[2]


async def test_non_retriable_error_raised_at_once(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([10])  # MESSAGE_TOO_LARGE
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        with pytest.raises(errors.MessageTooLargeError):
            await producer.send_and_wait("t", b"a")
        assert (await producer.send_and_wait("t", b"b")).offset == 0
    assert len(fake_cluster.requests_of(ApiKey.PRODUCE)) == 2


async def test_unknown_topic_raises_after_max_block(fake_cluster, client_args, autojump_clock):
    async with Producer(fake_cluster.bootstrap, max_block_ms=1000, **client_args) as producer:
        start = trio.current_time()
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="max_block_ms=1000"):
            await producer.send_and_wait("nope", b"a")
        assert trio.current_time() - start == pytest.approx(1.0)


async def test_partition_out_of_range(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 2)
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        with pytest.raises(InvalidPartitionError, match="has 2 partition"):
            await producer.send_and_wait("t", b"a", partition=2)


async def test_keyed_records_follow_murmur2(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 12)
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        # toPositive(murmur2(b"foobar")) % 12 == 1357151166 % 12
        meta = await producer.send_and_wait("t", b"v", key=b"foobar")
    assert meta.partition == 1357151166 % 12


async def test_unkeyed_records_stick_to_one_partition_per_batch(
    fake_cluster, client_args, autojump_clock
):
    fake_cluster.add_topic("t", 4)
    value = b"x" * 89
    assert record_size(None, value) == 100  # as a DefaultRecord: 11 bytes of fields
    async with Producer(fake_cluster.bootstrap, batch_size=1000, **client_args) as producer:
        metas = [await producer.send_and_wait("t", value) for _ in range(30)]
    partitions = [m.partition for m in metas]
    runs = [partitions[i : i + 10] for i in range(0, 30, 10)]
    assert all(len(set(run)) == 1 for run in runs)  # ten records (1000 bytes) per partition
    assert runs[0][0] != runs[1][0] != runs[2][0]


async def test_acks_zero_returns_offset_minus_one(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    async with Producer(fake_cluster.bootstrap, acks=0, **client_args) as producer:
        meta = await producer.send_and_wait("t", b"a")
    assert meta.offset == -1
    ((_, request),) = fake_cluster.requests_of(ApiKey.PRODUCE)
    assert request.acks == 0


async def test_idempotence_stamps_producer_id_and_sequences(
    fake_cluster, client_args, autojump_clock
):
    from kcore.log import parse_header

    fake_cluster.add_topic("t", 1)
    async with Producer(fake_cluster.bootstrap, enable_idempotence=True, **client_args) as p:
        await p.send_and_wait("t", b"a")
        await p.send_and_wait("t", b"b")
    headers = [parse_header(b) for b in fake_cluster.partition("t", 0).batches]
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
        (1000, 0, 0),
        (1000, 0, 1),
    ]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_compression_type_compresses_each_batch(
    fake_cluster, client_args, autojump_clock, compression
):
    from kcore.log import iter_records, parse_header

    fake_cluster.add_topic("t", 1)
    values = [b"value %d " % i * 20 for i in range(50)]
    async with Producer(
        fake_cluster.bootstrap,
        compression_type=compression,
        enable_idempotence=True,
        linger_ms=100,
        **client_args,
    ) as producer:
        assert producer.compression_type == compression
        async with trio.open_nursery() as nursery:
            for value in values:
                nursery.start_soon(producer.send_and_wait, "t", value)
    batches = fake_cluster.partition("t", 0).batches
    assert {parse_header(b).compression for b in batches} == {compression}
    assert sorted(r.value for b in batches for r in iter_records(b)) == sorted(values)
    if compression != "none":
        assert sum(map(len, batches)) < sum(map(len, values)) // 4


async def test_flush_sends_lingering_records(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    metas = []
    async with Producer(fake_cluster.bootstrap, linger_ms=60_000, **client_args) as producer:
        await producer.partitions_for("t")
        async with trio.open_nursery() as nursery:

            async def send() -> None:
                metas.append(await producer.send_and_wait("t", b"a"))

            nursery.start_soon(send)
            nursery.start_soon(send)
            await trio.sleep(1)
            assert metas == []  # lingering
            start = trio.current_time()
            await producer.flush()
            assert trio.current_time() - start < 1
    assert sorted(m.offset for m in metas) == [0, 1]
    assert len(fake_cluster.requests_of(ApiKey.PRODUCE)) == 1


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"acks": "2"}, "acks"),
        ({"linger_ms": -1}, "linger_ms"),
        ({"batch_size": "big"}, "batch_size"),
        ({"retries": 1.5}, "retries"),
        ({"lingerms": 5}, "lingerms"),
        ({"enable_idempotence": True, "acks": 1}, "enable_idempotence"),
        ({"delivery_timeout_ms": 1000}, "delivery_timeout_ms"),
        ({"compression_type": "brotli"}, "compression_type"),
        ({"compression_type": "GZIP"}, "compression_type"),
        ({"compression_type": None}, "compression_type"),
    ],
)
def test_bad_settings_rejected_naming_the_setting(settings, named):
    import random

    import transport

    with pytest.raises(ClientConfigError, match=named):
        Producer([("h", 1)], network=transport.SimNetwork(0), rng=random.Random(0), **settings)


async def test_dead_leader_is_retried_on_the_new_leader(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1, leaders=[1])
    async with Producer(fake_cluster.bootstrap, **client_args) as producer:
        await producer.send_and_wait("t", b"a")
        fake_cluster.network.kill_node("broker-1")  # the leader's process dies ...
        fake_cluster.move_leader("t", 0, 2)  # ... and the controller elects broker 2
        meta = await producer.send_and_wait("t", b"b")
    assert meta.offset == 1
    assert values_in_log(fake_cluster, "t", 0) == [b"a", b"b"]


async def test_idempotent_retry_resends_the_same_batch(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([19])
    async with Producer(fake_cluster.bootstrap, enable_idempotence=True, **client_args) as p:
        assert (await p.send_and_wait("t", b"a")).offset == 0
    first, retry = (m.partitions[0].records for _, m in fake_cluster.requests_of(ApiKey.PRODUCE))
    assert first == retry  # same producer id, epoch and sequence: the broker can dedupe


async def test_error_in_the_body_comes_out_unwrapped(fake_cluster, client_args, autojump_clock):
    fake_cluster.add_topic("t", 1)
    fake_cluster.produce_errors[("t", 0)] = deque([10])
    with pytest.raises(errors.MessageTooLargeError):
        async with Producer(fake_cluster.bootstrap, **client_args) as producer:
            await producer.send_and_wait("t", b"a")


async def test_records_pending_when_the_body_fails_get_producer_closed(
    fake_cluster, client_args, autojump_clock
):
    from kcore.client import ProducerClosedError

    fake_cluster.add_topic("t", 1)
    outcome = []

    async def send(producer) -> None:
        try:
            await producer.send_and_wait("t", b"a")
        except ProducerClosedError as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        with pytest.raises(RuntimeError, match="boom"):
            async with Producer(fake_cluster.bootstrap, linger_ms=10_000, **client_args) as p:
                await p.partitions_for("t")
                nursery.start_soon(send, p)
                await trio.sleep(1)
                raise RuntimeError("boom")
    assert len(outcome) == 1
    assert fake_cluster.requests_of(ApiKey.PRODUCE) == []
