"""Requests that wait for a partition to move (Kafka's DelayedOperationPurgatory, with its
DelayedProduce and DelayedFetch).

A delayed operation checks itself without waiting (`try_complete`, sans-IO); while it is not
complete, the task that asked waits in the purgatory, watching its keys (partitions), until
`check_and_complete(key)` is called for one of them (the partition's log end, high watermark
or leadership moved) or its deadline passes. Then it checks again, on its own task; at the
deadline it `on_expiration`s. The replica manager calls `check_and_complete` wherever a
partition moves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import attrs
import trio

from kcore import errors
from kcore.common import TopicPartition
from kcore.metrics import note_remote_time
from kcore.protocol.data import (
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ProducePartitionResponse,
)
from kcore.server.partition import Partition


class DelayedOperation(Protocol):
    @property
    def keys(self) -> Sequence[TopicPartition]:
        """The partitions whose moves may complete it (read each time it goes to wait)."""
        ...

    def try_complete(self) -> bool:
        """Checks whether it is done (and records its result if so); never waits."""
        ...

    def on_expiration(self) -> None:
        """Its deadline passed before it completed: records the answer for that case."""
        ...


@attrs.define(eq=False)
class _Watcher:
    woken: trio.Event = attrs.field(factory=trio.Event)


@attrs.define(eq=False)
class DelayedOperationPurgatory:
    name: str
    _watchers: dict[TopicPartition, dict[_Watcher, None]] = attrs.field(factory=dict, init=False)

    async def try_complete_else_watch(self, operation: DelayedOperation, deadline: float) -> bool:
        """Waits until the operation completes (True) or the deadline (Trio's clock) passes
        (False, after `on_expiration`)."""
        while not operation.try_complete():
            watcher = _Watcher()
            keys = list(operation.keys)
            for key in keys:
                self._watchers.setdefault(key, {})[watcher] = None
            waiting_since = trio.current_time()
            try:
                with trio.move_on_at(deadline):
                    await watcher.woken.wait()
                    continue
            finally:
                self._unwatch(watcher, keys)
                # The request's RemoteTimeMs (Kafka's time in purgatory).
                note_remote_time(trio.current_time() - waiting_since)
            operation.on_expiration()
            return False
        return True

    def _unwatch(self, watcher: _Watcher, keys: list[TopicPartition]) -> None:
        for key in keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(watcher, None)
                if not watchers:
                    del self._watchers[key]

    def check_and_complete(self, key: TopicPartition) -> None:
        """`key` moved: every operation watching it checks itself again."""
        for watcher in self._watchers.pop(key, ()):
            watcher.woken.set()

    def watched(self, key: TopicPartition) -> int:
        """How many operations wait on `key` (Kafka's purgatory size, per key)."""
        return len(self._watchers.get(key, ()))

    @property
    def watched_count(self) -> int:
        """Kafka's PurgatorySize: the watch entries, an operation once per key it waits on."""
        return sum(len(watchers) for watchers in self._watchers.values())

    @property
    def delayed_count(self) -> int:
        """Kafka's NumDelayedOperations: the operations waiting."""
        return len({watcher for watchers in self._watchers.values() for watcher in watchers})


@attrs.define(eq=False)
class DelayedProduce:
    """An acks=all produce: each partition is done when its high watermark passes the batch,
    or leadership is lost; what is not done at the timeout answers REQUEST_TIMED_OUT.

    `pending` maps each waiting partition to (its replica, the offset after its batch,
    min.insync.replicas); `answers` holds every partition's answer and is updated in place.
    """

    pending: dict[TopicPartition, tuple[Partition, int, int]]
    answers: dict[TopicPartition, ProducePartitionResponse]
    hosted_partition: Callable[[TopicPartition], Partition | None]

    @property
    def keys(self) -> list[TopicPartition]:
        return sorted(self.pending)

    def try_complete(self) -> bool:
        for tp in sorted(self.pending):
            partition, required, min_isr = self.pending[tp]
            if self.hosted_partition(tp) is not partition:
                done, code = True, errors.NotLeaderOrFollowerError.code
            else:
                done, code = partition.check_enough_replicas_reach_offset(required, min_isr)
            if done:
                del self.pending[tp]
                if code:
                    self.answers[tp] = attrs.evolve(
                        self.answers[tp], error_code=code, base_offset=-1
                    )
        return not self.pending

    def on_expiration(self) -> None:
        for tp in self.pending:
            self.answers[tp] = attrs.evolve(
                self.answers[tp],
                error_code=errors.RequestTimedOutError.code,
                base_offset=-1,
                error_message="the high watermark did not reach the batch in time",
            )


@attrs.define(eq=False)
class DelayedDeleteRecords:
    """A DeleteRecords request: each partition is done once its low watermark (the least log
    start offset of its live replicas) reaches the offset asked for, or leadership is lost;
    what is not done at the timeout answers REQUEST_TIMED_OUT.

    `pending` maps each waiting partition to (its replica, the offset required); `answers`
    maps every partition to (low watermark, error code) and is updated in place."""

    pending: dict[TopicPartition, tuple[Partition, int]]
    answers: dict[TopicPartition, tuple[int, int]]
    hosted_partition: Callable[[TopicPartition], Partition | None]
    live_brokers: Callable[[], Collection[int]]

    @property
    def keys(self) -> list[TopicPartition]:
        return sorted(self.pending)

    def try_complete(self) -> bool:
        live = self.live_brokers()
        for tp in sorted(self.pending):
            partition, required = self.pending[tp]
            if self.hosted_partition(tp) is not partition or not partition.is_leader:
                self.answers[tp] = (-1, errors.NotLeaderOrFollowerError.code)
            else:
                low_watermark = partition.low_watermark(live)
                if low_watermark < required:
                    continue
                self.answers[tp] = (low_watermark, 0)
            del self.pending[tp]
        return not self.pending

    def on_expiration(self) -> None:
        for tp in self.pending:
            self.answers[tp] = (-1, errors.RequestTimedOutError.code)


FetchRead = tuple[tuple[FetchPartitionResponse, ...], int, bool]


@attrs.define(eq=False)
class DelayedFetch:
    """A fetch (long poll): done once `min_bytes` can be read or a partition fails; at the
    deadline it answers with what it reads then. `read` reads every partition of the
    request: (answers, bytes read, whether a partition failed)."""

    request: FetchRequest
    read: Callable[[FetchRequest], FetchRead]
    response: FetchResponse | None = None
    # After the first read, a wake-up asks this first (Kafka's DelayedFetch.tryComplete
    # compares offsets, it does not read): whether a partition has something new to read
    # or fails. A parked fetch is woken by every move of its partitions, most of which
    # (an append under a consumer's fetch, the HW under a follower's) give it nothing.
    may_read: Callable[[FetchRequest], bool] | None = attrs.field(default=None, kw_only=True)
    _read_once: bool = attrs.field(default=False, init=False)

    @property
    def keys(self) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition) for p in self.request.partitions]

    def try_complete(self) -> bool:
        if self._read_once and self.may_read is not None and not self.may_read(self.request):
            return False
        self._read_once = True
        answers, size, failed = self.read(self.request)
        request = self.request
        if (
            size >= request.min_bytes
            or failed
            or request.max_wait_ms == 0
            or not request.partitions
        ):
            self.response = FetchResponse(answers)
            return True
        return False

    def on_expiration(self) -> None:
        answers, _, _ = self.read(self.request)
        self.response = FetchResponse(answers)
