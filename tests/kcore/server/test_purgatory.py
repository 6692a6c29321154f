"""The purgatory: a waiting request completes when a partition it watches moves and it
finds itself done, or answers at its deadline; and what waits for produce and fetch."""

import attrs
import trio

from kcore.common import TopicPartition
from kcore.protocol.data import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    ProducePartitionResponse,
)
from kcore.server.purgatory import (
    DelayedFetch,
    DelayedOperationPurgatory,
    DelayedProduce,
)

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7


@attrs.define
class _Flag:
    """Done once `done` is set; counts its checks and expirations; `checked` is set at the
    next check."""

    keys: list[TopicPartition]
    done: bool = False
    checks: int = 0
    expired: int = 0
    checked: trio.Event = attrs.field(factory=trio.Event)

    def try_complete(self) -> bool:
        self.checks += 1
        self.checked.set()
        self.checked = trio.Event()
        return self.done

    def on_expiration(self) -> None:
        self.expired += 1


async def test_an_operation_done_at_once_does_not_wait(autojump_clock):
    purgatory = DelayedOperationPurgatory("test")
    operation = _Flag([A], done=True)
    assert await purgatory.try_complete_else_watch(operation, trio.current_time() + 10)
    assert (operation.checks, operation.expired, purgatory.watched(A)) == (1, 0, 0)


async def test_an_operation_completes_when_a_watched_key_moves_and_it_is_done(autojump_clock):
    purgatory = DelayedOperationPurgatory("test")
    operation = _Flag([A, B])
    start = trio.current_time()
    results = []

    async def wait():
        results.append(await purgatory.try_complete_else_watch(operation, start + 10))

    async with trio.open_nursery() as nursery:
        checked = operation.checked
        nursery.start_soon(wait)
        await checked.wait()  # checked once, not done: watching both keys
        assert purgatory.watched(A) == purgatory.watched(B) == 1
        checked = operation.checked
        purgatory.check_and_complete(B)  # moved, but not done yet: it waits again
        await checked.wait()
        assert results == [] and operation.checks == 2
        operation.done = True
        purgatory.check_and_complete(A)
    assert results == [True]
    assert trio.current_time() == start  # at once, not at the deadline
    assert (operation.expired, purgatory.watched(A), purgatory.watched(B)) == (0, 0, 0)


async def test_an_operation_not_done_by_its_deadline_expires_once(autojump_clock):
    purgatory = DelayedOperationPurgatory("test")
    operation = _Flag([A])
    start = trio.current_time()
    assert not await purgatory.try_complete_else_watch(operation, start + 3)
    assert trio.current_time() == start + 3
    assert (operation.checks, operation.expired, purgatory.watched(A)) == (1, 1, 0)


@attrs.define
class _Replica:
    """A leader whose HW the test moves."""

    high_watermark: int = 0
    is_leader: bool = True

    def check_enough_replicas_reach_offset(self, required_offset, min_insync_replicas):
        if not self.is_leader:
            return True, NOT_LEADER_OR_FOLLOWER
        return self.high_watermark >= required_offset, 0


def _produce(replicas):
    pending = {tp: (replica, 5, 2) for tp, replica in replicas.items()}
    answers = {tp: ProducePartitionResponse(tp.topic, tp.partition, 0, 4) for tp in replicas}
    return DelayedProduce(pending, answers, replicas.get)


def test_a_delayed_produce_is_done_when_every_high_watermark_passed_its_batch():
    replicas = {A: _Replica(), B: _Replica()}
    produce = _produce(replicas)
    assert not produce.try_complete() and produce.keys == [A, B]
    replicas[A].high_watermark = 5
    assert not produce.try_complete() and produce.keys == [B]  # A answered already
    replicas[B].high_watermark = 7
    assert produce.try_complete()
    assert [(a.error_code, a.base_offset) for a in produce.answers.values()] == [(0, 4), (0, 4)]


def test_a_delayed_produce_answers_not_leader_once_leadership_moved_and_times_out_the_rest():
    replicas = {A: _Replica(), B: _Replica()}
    produce = _produce(replicas)
    del replicas[A]  # deleted or replaced: this broker no longer hosts that replica
    assert not produce.try_complete()
    produce.on_expiration()
    assert produce.answers[A].error_code == NOT_LEADER_OR_FOLLOWER
    assert (produce.answers[B].error_code, produce.answers[B].base_offset) == (
        REQUEST_TIMED_OUT,
        -1,
    )


def _fetch(min_bytes, max_wait_ms=500):
    asks = (FetchPartition("t", 0, 0, 1 << 20),)
    return FetchRequest(-1, -1, max_wait_ms, min_bytes, 1 << 20, asks)


def test_a_delayed_fetch_is_done_once_min_bytes_can_be_read():
    available = [b""]

    def read(request):
        records = available[0]
        return (FetchPartitionResponse("t", 0, 0, records=records),), len(records), False

    fetch = DelayedFetch(_fetch(min_bytes=3), read)
    assert not fetch.try_complete() and fetch.keys == [A]
    available[0] = b"abc"
    assert fetch.try_complete()
    assert fetch.response.partitions[0].records == b"abc"


def test_a_delayed_fetch_answers_what_it_reads_at_its_deadline_or_at_once_without_wait():
    def read(request):
        return (FetchPartitionResponse("t", 0, 0, records=b"a"),), 1, False

    fetch = DelayedFetch(_fetch(min_bytes=3), read)
    assert not fetch.try_complete()
    fetch.on_expiration()
    assert fetch.response.partitions[0].records == b"a"
    assert DelayedFetch(_fetch(min_bytes=3, max_wait_ms=0), read).try_complete()
