"""The idempotent producer after a sequence gap (Kafka's Sender / TransactionManager,
KIP-360): a batch that fails for good after it was sent does not wedge its partition; the
producer bumps its epoch, the partition's sequences restart at 0, later records go through,
and nothing is written twice.

Against a fake cluster whose partitions apply the broker's real producer-state rules
(`kcore.log._producer_state`), with per-attempt actions: answer an error, write and lose
the answer, or lose the request."""

from __future__ import annotations

import random
from collections import deque

import attrs
import pytest
import trio

import transport
from kcore import errors
from kcore.client import Producer
from kcore.log import iter_batch_records, parse_header, split_batches
from kcore.log._producer_state import ProducerStateManager
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)

from .conftest import FakeCluster

WRITE_AND_LOSE_ANSWER = "write-and-lose-answer"  # the broker writes; its answer never comes
LOSE_REQUEST = "lose-request"  # the request never reaches the broker


@attrs.define
class SequenceCheckingCluster(FakeCluster):
    # (topic, partition) -> what the next produce attempts for it meet, in order
    actions: dict[tuple[str, int], deque[object]] = attrs.field(factory=dict)
    states: dict[tuple[str, int], ProducerStateManager] = attrs.field(factory=dict)
    # the (producer id, epoch) the next InitProducerId answers give, in order
    producer_ids: deque[tuple[int, int]] = attrs.field(factory=deque)

    async def _produce(self, broker_id: int, request: ProduceRequest) -> ProduceResponse:
        answers, lose = [], False
        for data in request.partitions:
            key = (data.topic, data.partition)
            queued = self.actions.get(key)
            action = queued.popleft() if queued else None
            if action == LOSE_REQUEST:
                lose = True
                continue
            if isinstance(action, int):
                answers.append(ProducePartitionResponse(*key, action))
                continue
            answers.append(self._append_checked(key, data.records))
            lose = lose or action == WRITE_AND_LOSE_ANSWER
        if lose:
            await trio.sleep_forever()
        return ProduceResponse(tuple(answers))

    def _append_checked(self, key: tuple[str, int], records: bytes) -> ProducePartitionResponse:
        state = self.states.setdefault(key, ProducerStateManager())
        ((header, _),) = split_batches(records)
        try:
            duplicate = state.check(header)
        except errors.KafkaError as exc:
            return ProducePartitionResponse(*key, exc.code, error_message=str(exc))
        if duplicate is not None:
            return ProducePartitionResponse(*key, 0, duplicate[0])
        base = self.append(*key, records)
        state.update(parse_header(self.partition(*key).batches[-1]))
        return ProducePartitionResponse(*key, 0, base)

    async def _init_producer_id(
        self, broker_id: int, request: InitProducerIdRequest
    ) -> InitProducerIdResponse:
        if self.producer_ids:
            return InitProducerIdResponse(0, *self.producer_ids.popleft())
        return await super()._init_producer_id(broker_id, request)


@pytest.fixture
async def cluster(nursery: trio.Nursery, autojump_clock: object) -> SequenceCheckingCluster:
    cluster = SequenceCheckingCluster(transport.SimNetwork(seed=7))
    await cluster.start(nursery)
    cluster.add_topic("t", 2)
    return cluster


@pytest.fixture
def client_args(cluster: SequenceCheckingCluster) -> dict[str, object]:
    return {"network": cluster.network.node("client-1"), "rng": random.Random(42)}


def producer(cluster: SequenceCheckingCluster, client_args, **settings) -> Producer:
    settings = {
        "delivery_timeout_ms": 3000,
        "request_timeout_ms": 1000,
        "retry_backoff_ms": 100,
        **settings,
    }
    return Producer(cluster.bootstrap, **client_args, **settings)


def written(cluster: SequenceCheckingCluster, partition: int = 0) -> list[bytes]:
    return [r.value for r in iter_batch_records(cluster.partition("t", partition).batches)]


def stamps(cluster: SequenceCheckingCluster, partition: int = 0) -> list[tuple[int, int, int]]:
    """(producer id, epoch, base sequence) of each batch in the log."""
    headers = [parse_header(b) for b in cluster.partition("t", partition).batches]
    return [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers]


async def test_idempotence_is_on_by_default(cluster, client_args):
    async with Producer(cluster.bootstrap, **client_args) as p:
        assert p.enable_idempotence
        await p.send_and_wait("t", b"a", partition=0)
    assert stamps(cluster) == [(1000, 0, 0)]


async def test_a_batch_never_written_then_expired_does_not_wedge_the_partition(
    cluster, client_args
):
    async with producer(cluster, client_args) as p:
        assert (await p.send_and_wait("t", b"x", partition=0)).offset == 0
        cluster.actions[("t", 0)] = deque([LOSE_REQUEST] * 100)
        with pytest.raises((errors.RequestTimedOutError, errors.NetworkError)):
            await p.send_and_wait("t", b"lost", partition=0)  # sequence 1, never written
        cluster.actions.clear()
        # Without the epoch bump this would be sequence 2 after 0: out of order, forever.
        metas = [await p.send_and_wait("t", v, partition=0) for v in (b"b", b"c")]
    assert [m.offset for m in metas] == [1, 2]
    assert written(cluster) == [b"x", b"b", b"c"]
    assert stamps(cluster) == [(1000, 0, 0), (1000, 1, 0), (1000, 1, 1)]


async def test_a_batch_written_but_unacknowledged_then_expired_is_not_written_twice(
    cluster, client_args
):
    async with producer(cluster, client_args) as p:
        await p.send_and_wait("t", b"x", partition=0)
        # Written at the first attempt; every answer lost until the delivery timeout.
        cluster.actions[("t", 0)] = deque([WRITE_AND_LOSE_ANSWER] * 100)
        with pytest.raises((errors.RequestTimedOutError, errors.NetworkError)):
            await p.send_and_wait("t", b"a", partition=0)  # the outcome is unknown to the producer
        cluster.actions.clear()
        metas = [await p.send_and_wait("t", v, partition=0) for v in (b"b", b"c")]
    assert [m.offset for m in metas] == [2, 3]
    assert written(cluster) == [b"x", b"a", b"b", b"c"]  # "a" once, never resent
    assert stamps(cluster) == [(1000, 0, 0), (1000, 0, 1), (1000, 1, 0), (1000, 1, 1)]


async def test_a_retry_after_a_lost_answer_gets_the_original_offset(cluster, client_args):
    async with producer(cluster, client_args, delivery_timeout_ms=10_000) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([WRITE_AND_LOSE_ANSWER, WRITE_AND_LOSE_ANSWER])
        meta = await p.send_and_wait("t", b"a", partition=0)  # third attempt: a duplicate
        assert meta.offset == 1
        assert (await p.send_and_wait("t", b"b", partition=0)).offset == 2
    assert written(cluster) == [b"x", b"a", b"b"]
    assert stamps(cluster) == [(1000, 0, 0), (1000, 0, 1), (1000, 0, 2)]  # no bump


async def test_a_later_batch_queued_behind_an_expiring_one_goes_in_the_new_epoch(
    cluster, client_args
):
    outcomes: dict[bytes, object] = {}
    async with producer(cluster, client_args) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([LOSE_REQUEST] * 3)

        async def send(value: bytes) -> None:
            try:
                outcomes[value] = (await p.send_and_wait("t", value, partition=0)).offset
            except errors.KafkaError as exc:
                outcomes[value] = type(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, b"a")
            await trio.sleep(0.5)  # "a" in flight, lost
            nursery.start_soon(send, b"b")  # queued behind it
            await trio.sleep(2.6)  # "a" expires in the queue while retrying; then "b" goes
    assert outcomes[b"a"] in (errors.RequestTimedOutError, errors.NetworkError)
    assert outcomes[b"b"] == 1
    assert written(cluster) == [b"x", b"b"]
    assert stamps(cluster) == [(1000, 0, 0), (1000, 1, 0)]


async def test_retries_exhausted_does_not_wedge_the_partition(cluster, client_args):
    async with producer(cluster, client_args, retries=2) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([19, 19, 19])  # NOT_ENOUGH_REPLICAS
        with pytest.raises(errors.NotEnoughReplicasError, match="retries=2 exhausted"):
            await p.send_and_wait("t", b"a", partition=0)
        assert (await p.send_and_wait("t", b"b", partition=0)).offset == 1
    assert stamps(cluster) == [(1000, 0, 0), (1000, 1, 0)]


async def test_a_non_retriable_failure_bumps_the_epoch(cluster, client_args):
    async with producer(cluster, client_args) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([10])  # MESSAGE_TOO_LARGE
        with pytest.raises(errors.MessageTooLargeError):
            await p.send_and_wait("t", b"a", partition=0)
        await p.send_and_wait("t", b"b", partition=0)
    assert written(cluster) == [b"x", b"b"]
    assert stamps(cluster) == [(1000, 0, 0), (1000, 1, 0)]


async def test_out_of_order_sequence_bumps_and_resends_the_refused_batch_at_zero(
    cluster, client_args
):
    async with producer(cluster, client_args) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([45])  # e.g. the leader lost the producer's state
        assert (await p.send_and_wait("t", b"a", partition=0)).offset == 1
        assert (await p.send_and_wait("t", b"b", partition=0)).offset == 2
    sent = [
        parse_header(m.partitions[0].records).producer_epoch
        for _, m in cluster.requests_of(ApiKey.PRODUCE)
    ]
    assert sent == [0, 0, 1, 1]  # "a" refused at epoch 0, resent at epoch 1
    assert stamps(cluster) == [(1000, 0, 0), (1000, 1, 0), (1000, 1, 1)]


async def test_unknown_producer_id_bumps_and_retries(cluster, client_args):
    async with producer(cluster, client_args) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([59])  # UNKNOWN_PRODUCER_ID (log start offset -1)
        assert (await p.send_and_wait("t", b"a", partition=0)).offset == 1
    # Without a log start offset in the answer Kafka retries without a bump.
    assert stamps(cluster) == [(1000, 0, 0), (1000, 0, 1)]


async def test_duplicate_sequence_is_a_success_at_an_unknown_offset(cluster, client_args):
    async with producer(cluster, client_args) as p:
        cluster.actions[("t", 0)] = deque([46])
        assert (await p.send_and_wait("t", b"a", partition=0)).offset == -1
        await p.send_and_wait("t", b"b", partition=0)
    assert len(cluster.requests_of(ApiKey.PRODUCE)) == 2  # not retried
    assert stamps(cluster) == [(1000, 0, 1)]  # "b" follows "a"'s sequence: no bump


async def test_a_retry_on_another_partition_keeps_its_old_epoch(cluster, client_args):
    async with producer(cluster, client_args, delivery_timeout_ms=10_000) as p:
        await p.send_and_wait("t", b"x0", partition=0)
        await p.send_and_wait("t", b"x1", partition=1)
        cluster.actions[("t", 1)] = deque([WRITE_AND_LOSE_ANSWER])  # retried after 1 s
        cluster.actions[("t", 0)] = deque([10])
        results = {}

        async def send(partition: int, value: bytes) -> None:
            try:
                results[value] = (await p.send_and_wait("t", value, partition=partition)).offset
            except errors.KafkaError as exc:
                results[value] = type(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, 1, b"a1")
            await trio.sleep(0.1)
            nursery.start_soon(send, 0, b"a0")  # fails: the epoch goes to 1 meanwhile
        assert results == {b"a0": errors.MessageTooLargeError, b"a1": 1}
        await p.send_and_wait("t", b"b1", partition=1)
    attempts = [
        m.partitions[0].records
        for _, m in cluster.requests_of(ApiKey.PRODUCE)
        if m.partitions[0].partition == 1
    ]
    assert attempts[1] == attempts[2]  # the retry of "a1": the same bytes, epoch 0
    assert written(cluster, 1) == [b"x1", b"a1", b"b1"]
    assert stamps(cluster, 1) == [(1000, 0, 0), (1000, 0, 1), (1000, 1, 0)]


async def test_an_exhausted_epoch_gets_a_new_producer_id(cluster, client_args):
    cluster.producer_ids.extend([(500, 32767), (501, 0)])
    async with producer(cluster, client_args) as p:
        await p.send_and_wait("t", b"x", partition=0)
        cluster.actions[("t", 0)] = deque([10])
        with pytest.raises(errors.MessageTooLargeError):
            await p.send_and_wait("t", b"a", partition=0)
        await p.send_and_wait("t", b"b", partition=0)
    assert len(cluster.requests_of(ApiKey.INIT_PRODUCER_ID)) == 2
    assert stamps(cluster) == [(500, 32767, 0), (501, 0, 0)]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"acks": 1}, "acks"),
        ({"acks": 0}, "acks"),
        ({"retries": 0}, "retries"),
        ({"max_in_flight_requests_per_connection": 6}, "max_in_flight_requests_per_connection"),
    ],
)
def test_explicit_idempotence_refuses_conflicting_settings_and_default_gives_way(settings, named):
    from kcore.client import ClientConfigError

    def make(**extra):
        return Producer([("h", 1)], network=transport.SimNetwork(0), rng=random.Random(0), **extra)

    with pytest.raises(ClientConfigError, match=named):
        make(enable_idempotence=True, **settings)
    assert not make(**settings).enable_idempotence  # only defaulted: quietly off
    assert make().enable_idempotence
    assert not make(enable_idempotence=False).enable_idempotence
