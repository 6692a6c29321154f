"""Kafka's ControllerEventManager in Trio: one task consumes one queue of events, so the
state those events touch needs no locks.

An event is anything with a `state` attribute (the ControllerState it runs in). The
processor decides what events mean: `await processor.process(event)` runs an event,
`processor.preempt(event)` (sync, must not block) answers an event that will never run, e.g.
with NOT_CONTROLLER for a preempted leader election.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from actors._metrics import Histogram, MetricsRegistry, Timer, metric_name

logger = logging.getLogger("actors.event_manager")

# Kafka's controller.event.queue.time.max.ms default is 300000: the queue-time histogram is
# cleared after that long without events, so an idle controller does not report old times.
DEFAULT_QUEUE_TIME_RESET_AFTER = 300.0


class EventProcessor(Protocol):
    async def process(self, event: Any) -> None: ...

    def preempt(self, event: Any) -> None: ...


class EventPreemptedError(Exception):
    """`await_processing` on an event that was preempted: it will never be processed."""


@attrs.define(eq=False)
class QueuedEvent:
    """An event in the queue. It is `spent` once processed or preempted, never both."""

    event: Any
    enqueue_time: float
    spent: bool = False
    preempted: bool = False
    processing_started: trio.Event = attrs.field(factory=trio.Event)
    _settled: trio.Event = attrs.field(factory=trio.Event, init=False)

    async def process(self, processor: EventProcessor) -> None:
        if self.spent:
            return
        self.spent = True
        self.processing_started.set()
        self._settled.set()
        await processor.process(self.event)

    def preempt(self, processor: EventProcessor) -> None:
        if self.spent:
            return
        self.spent = True
        self.preempted = True
        self._settled.set()
        processor.preempt(self.event)

    async def await_processing(self) -> None:
        """Returns once processing has started (not finished); raises EventPreemptedError if
        the event was preempted instead, rather than waiting forever."""
        await self._settled.wait()
        if self.preempted:
            raise EventPreemptedError(f"{self.event!r} was preempted and will not be processed")


class _Shutdown:
    """The sentinel `aclose` queues behind the preempted events (Kafka's
    ShutdownEventThread)."""

    state = None

    def __repr__(self) -> str:
        return "ShutdownEventThread"


_SHUTDOWN = _Shutdown()


def _rate_and_time_name(state: Any) -> str | None:
    """A state may name its timer (Kafka's `rateAndTimeMetricName`, None for no timer);
    otherwise `<StateName>RateAndTimeMs`."""
    if hasattr(state, "rate_and_time_metric_name"):
        return state.rate_and_time_metric_name
    return f"{getattr(state, 'name', state)}RateAndTimeMs"


@attrs.define(eq=False)
class EventManager:
    """`put` / `clear_and_put` from any task; `run` is the one consumer task
    (`await nursery.start(manager.run)`); `aclose` preempts what is queued and stops it."""

    processor: EventProcessor
    idle_state: Any = attrs.field(kw_only=True)
    clock: Callable[[], float] = attrs.field(default=trio.current_time, kw_only=True)
    metrics: MetricsRegistry | None = attrs.field(default=None, kw_only=True)
    metrics_group: str = attrs.field(default="kafka.controller", kw_only=True)
    queue_time_reset_after: float | None = attrs.field(
        default=DEFAULT_QUEUE_TIME_RESET_AFTER, kw_only=True
    )
    _state: Any = attrs.field(init=False)
    # A deque, not a memory channel: a channel hands an event straight to a waiting
    # consumer, out of clear_and_put's reach before the consumer has even run.
    _queue: collections.deque[QueuedEvent] = attrs.field(factory=collections.deque, init=False)
    _not_empty: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot, init=False)
    _running: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    _queue_time: Histogram = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._state = self.idle_state
        if self.metrics is None:
            self.metrics = MetricsRegistry(clock=self.clock)
        self._queue_time = self.metrics.histogram(self._name("EventQueueTimeMs"))
        self.metrics.gauge(self._name("EventQueueSize"), lambda: self.queue_size)

    def _name(self, name: str) -> str:
        return metric_name(self.metrics_group, "ControllerEventManager", name)

    def _state_timer(self, state: Any) -> Timer | None:
        name = _rate_and_time_name(state)
        if name is None:
            return None
        return self.metrics.timer(metric_name(self.metrics_group, "ControllerStats", name))

    @property
    def state(self) -> Any:
        """The state of the event being processed; `idle_state` between events."""
        return self._state

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def put(self, event: Any) -> QueuedEvent:
        """Queues an event; never blocks. After `aclose` the event is preempted at once, so
        whoever waits on it gets its preempt answer instead of silence."""
        queued = QueuedEvent(event, self.clock())
        if self._closed:
            queued.preempt(self.processor)
            return queued
        self._queue.append(queued)
        self._not_empty.unpark_all()
        return queued

    def clear_and_put(self, event: Any) -> QueuedEvent:
        """Preempts every queued event, in queue order, on the caller's task, then queues
        `event`. The event being processed (already dequeued) is not touched."""
        for queued in self._drain():
            queued.preempt(self.processor)
        return self.put(event)

    def _drain(self) -> list[QueuedEvent]:
        drained = list(self._queue)
        self._queue.clear()
        return drained

    async def _wait_not_empty(self) -> None:
        while not self._queue:
            await self._not_empty.park()

    async def _next(self) -> QueuedEvent:
        # A checkpoint on every turn so a busy queue cannot starve other tasks; it comes
        # before the pop so nothing separates taking an event from marking it spent.
        await trio.lowlevel.checkpoint()
        if not self._queue and self._queue_time.count and self.queue_time_reset_after:
            with trio.move_on_after(self.queue_time_reset_after):
                await self._wait_not_empty()
            if not self._queue:
                self._queue_time.clear()
        await self._wait_not_empty()
        return self._queue.popleft()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self._running:
            raise RuntimeError("EventManager.run is already running")
        self._running = True
        task_status.started()
        try:
            while not self._closed or self.queue_size:
                queued = await self._next()
                if queued.event is _SHUTDOWN:
                    break
                await self._process(queued)
        finally:
            self._running = False
            self._stopped.set()

    async def _process(self, queued: QueuedEvent) -> None:
        state = queued.event.state
        self._state = state
        self._queue_time.update((self.clock() - queued.enqueue_time) * 1000.0)
        timer = self._state_timer(state)
        start = self.clock()
        try:
            await queued.process(self.processor)
        except Exception:
            logger.exception("Uncaught error processing event %r", queued.event)
        finally:
            if timer is not None:
                timer.update_ms((self.clock() - start) * 1000.0)
            self._state = self.idle_state

    async def aclose(self) -> None:
        """Preempts every queued event, lets the event being processed finish, and stops
        `run`. Must not be called from inside `process` (it would wait for itself)."""
        if self._closed:
            if self._running:
                await self._stopped.wait()
            return
        self._closed = True
        for queued in self._drain():
            queued.preempt(self.processor)
        if self._running:
            self._queue.append(QueuedEvent(_SHUTDOWN, self.clock()))
            self._not_empty.unpark_all()
            await self._stopped.wait()
