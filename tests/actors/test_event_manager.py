"""EventManager: the behaviour of Kafka's ControllerEventManager (and its test suite)."""

import logging

import pytest
import trio

from actors import EventManager, EventPreemptedError, MetricsRegistry, QueuedEvent

QUEUE_TIME = "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs"
QUEUE_SIZE = "kafka.controller:type=ControllerEventManager,name=EventQueueSize"
TOPIC_CHANGE_TIMER = "kafka.controller:type=ControllerStats,name=TopicChangeRateAndTimeMs"


@pytest.fixture
def registry():
    return MetricsRegistry()


@pytest.fixture
async def start(nursery, registry, states):
    """start(processor, **kwargs) -> a running EventManager."""

    async def start_manager(processor, **kwargs):
        manager = EventManager(processor, idle_state=states["idle"], metrics=registry, **kwargs)
        await nursery.start(manager.run)
        return manager

    return start_manager


async def test_event_queue_time(autojump_clock, start, processor, registry, make_event, until):
    gate = trio.Event()
    processor.gate = gate

    async def half_a_second(event):
        await trio.sleep(0.5)

    processor.work = half_a_second
    manager = await start(processor)
    manager.put(make_event("a"))
    manager.put(make_event("b"))
    gate.set()
    await until(lambda: len(processor.processed) == 2)
    histogram = registry.get(QUEUE_TIME)
    assert histogram.count == 2
    assert histogram.min == pytest.approx(0.0)
    assert histogram.max == pytest.approx(500.0)


async def test_queue_time_histogram_cleared_when_idle(
    autojump_clock, start, processor, registry, make_event, until
):
    manager = await start(processor, queue_time_reset_after=0.001)
    manager.put(make_event("a"))
    manager.put(make_event("b"))
    await until(lambda: len(processor.processed) == 2)
    await until(lambda: registry.get(QUEUE_TIME).count == 0, timeout=1.0)


async def test_event_without_rate_metric_is_processed(
    autojump_clock, start, processor, registry, states, make_event, until
):
    manager = await start(processor)
    names_before = registry.names()
    manager.put(make_event("untimed", states["idle"]))
    await until(lambda: processor.processed == [make_event("untimed", states["idle"])])
    assert [n for n in registry.names() if n not in names_before] == []


@pytest.mark.parametrize("raises", [False, True], ids=["succeeds", "raises"])
async def test_state_and_timer_during_event(
    autojump_clock, start, processor, registry, states, make_event, until, raises, caplog
):
    gate = trio.Event()
    processor.gate = gate
    failures = []

    async def maybe_fail(event):
        if raises:
            failures.append(event)
            raise RuntimeError("processing failed")

    processor.work = maybe_fail
    manager = await start(processor)
    timer_before = registry.timer(TOPIC_CHANGE_TIMER).count
    manager.put(make_event("a", states["topic_change"]))
    await until(lambda: manager.state == states["topic_change"])
    gate.set()
    await until(lambda: manager.state == states["idle"])
    assert registry.timer(TOPIC_CHANGE_TIMER).count == timer_before + 1
    if raises:
        assert failures == [make_event("a", states["topic_change"])]
        assert "Uncaught error processing event" in caplog.text
        # The loop goes on after an error.
        processor.work = None
        manager.put(make_event("b"))
        await until(lambda: processor.processed == [make_event("b")])
    else:
        assert processor.processed == [make_event("a", states["topic_change"])]


async def test_clear_and_put_preempts_queued_events_in_order_on_callers_task(
    autojump_clock, start, processor, make_event, until
):
    gate = trio.Event()
    processor.gate = gate
    manager = await start(processor)
    running = manager.put(make_event("running"))
    await running.await_processing()
    queued = [manager.put(make_event(name)) for name in ("q1", "q2", "q3")]
    assert manager.queue_size == 3
    last = manager.clear_and_put(make_event("expire"))
    # Preempted at once, in queue order, on this task: before clear_and_put returned.
    assert processor.preempted == [make_event("q1"), make_event("q2"), make_event("q3")]
    assert processor.preempt_tasks == [trio.lowlevel.current_task()] * 3
    assert all(q.spent for q in queued)
    assert manager.queue_size == 1
    gate.set()
    await last.await_processing()
    await until(lambda: len(processor.processed) == 2)
    # The event being processed was not touched; the preempted ones never ran.
    assert processor.processed == [make_event("running"), make_event("expire")]


async def test_event_is_processed_or_preempted_never_both(make_event, processor):
    first = QueuedEvent(make_event("a"), 0.0)
    first.preempt(processor)
    await first.process(processor)
    assert (processor.preempted, processor.processed) == ([make_event("a")], [])

    second = QueuedEvent(make_event("b"), 0.0)
    await second.process(processor)
    second.preempt(processor)
    assert (processor.preempted, processor.processed) == ([make_event("a")], [make_event("b")])


async def test_clear_and_put_wins_the_race_with_the_consumer(
    autojump_clock, start, processor, make_event, until
):
    """Put then clear_and_put with no checkpoint between: the consumer never saw the first
    event, so it is preempted, not processed."""
    manager = await start(processor)
    first = manager.put(make_event("first"))
    manager.clear_and_put(make_event("second"))
    await until(lambda: len(processor.processed) == 1)
    assert first.spent
    assert processor.preempted == [make_event("first")]
    assert processor.processed == [make_event("second")]
    with pytest.raises(EventPreemptedError):
        await first.await_processing()


async def test_await_processing_returns_when_processing_starts(
    autojump_clock, start, processor, states, make_event
):
    gate = trio.Event()
    processor.gate = gate
    manager = await start(processor)
    queued = manager.put(make_event("slow", states["isr_change"]))
    await queued.await_processing()
    # Started, not finished: the manager is in the event's state and nothing is done yet.
    assert manager.state == states["isr_change"]
    assert processor.processed == []
    gate.set()


async def test_aclose_preempts_queued_events_and_waits_for_the_running_one(
    autojump_clock, nursery, registry, processor, states, make_event
):
    gate = trio.Event()
    processor.gate = gate
    manager = EventManager(processor, idle_state=states["idle"], metrics=registry)
    run_done = trio.Event()

    async def run_then_note():
        await manager.run()
        run_done.set()

    nursery.start_soon(run_then_note)
    running = manager.put(make_event("running"))
    await running.await_processing()
    manager.put(make_event("q1"))
    manager.put(make_event("q2"))
    closed = trio.Event()

    async def close():
        await manager.aclose()
        closed.set()

    nursery.start_soon(close)
    await trio.testing.wait_all_tasks_blocked()
    assert processor.preempted == [make_event("q1"), make_event("q2")]
    assert not closed.is_set()  # the running event still holds it
    gate.set()
    await closed.wait()
    await run_done.wait()
    assert processor.processed == [make_event("running")]
    late = manager.put(make_event("late"))
    assert late.spent and processor.preempted[-1] == make_event("late")


async def test_aclose_before_run_preempts_and_run_returns(processor, states, make_event):
    manager = EventManager(processor, idle_state=states["idle"])
    manager.put(make_event("q1"))
    await manager.aclose()
    await manager.run()
    assert processor.preempted == [make_event("q1")]
    assert processor.processed == []


async def test_queue_size_gauge(processor, registry, states, make_event):
    manager = EventManager(processor, idle_state=states["idle"], metrics=registry)
    manager.put(make_event("a"))
    manager.put(make_event("b"))
    assert registry.get(QUEUE_SIZE).value == 2


async def test_processing_error_is_logged_with_the_event(
    autojump_clock, start, processor, make_event, until, caplog
):
    async def fail(event):
        raise ValueError("bad event")

    processor.work = fail
    manager = await start(processor)
    with caplog.at_level(logging.ERROR, logger="actors.event_manager"):
        manager.put(make_event("boom"))
        await until(lambda: "boom" in caplog.text)
    assert "ValueError: bad event" in caplog.text
