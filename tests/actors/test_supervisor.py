"""Supervision: one-for-one restarts and the restart intensity limit."""

import pytest
import trio

from actors import Actor, RestartIntensityError, open_supervisor


async def test_failed_child_is_restarted_until_it_succeeds(autojump_clock):
    runs = []

    async def flaky(task_status=trio.TASK_STATUS_IGNORED):
        runs.append(trio.current_time())
        task_status.started()
        if len(runs) < 3:
            raise ConnectionError("transient")

    async with open_supervisor(max_restarts=3, within=10) as supervisor:
        await supervisor.start(flaky, name="flaky")
    assert len(runs) == 3
    assert supervisor.restarts == {"flaky": 2}


async def test_too_many_failures_within_the_window_propagate(autojump_clock):
    sibling_cancelled = trio.Event()

    async def always_fails(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        await trio.sleep(1)
        raise ConnectionError("down for good")

    async def sibling(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            sibling_cancelled.set()

    with pytest.raises(RestartIntensityError, match="failed 3 times within 10") as raised:
        async with open_supervisor(max_restarts=2, within=10, name="sup") as supervisor:
            await supervisor.start(sibling)
            await supervisor.start(always_fails, name="fails")
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert sibling_cancelled.is_set()


async def test_failures_spread_beyond_the_window_do_not_add_up(autojump_clock):
    runs = []

    async def fails_every_six_seconds(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        runs.append(1)
        if len(runs) == 6:
            return
        await trio.sleep(6)
        raise ConnectionError("again")

    async with open_supervisor(max_restarts=1, within=5) as supervisor:
        await supervisor.start(fails_every_six_seconds, name="slow-failer")
    assert supervisor.restarts == {"slow-failer": 5}


async def test_child_failing_before_started_is_restarted_and_start_returns(autojump_clock):
    runs = []

    async def fails_first_before_started(task_status=trio.TASK_STATUS_IGNORED):
        runs.append(trio.current_time())
        if len(runs) < 3:
            raise ConnectionError("not ready yet")
        task_status.started(f"ready after {len(runs)} runs")
        await trio.sleep_forever()

    async with open_supervisor(max_restarts=3, within=10, restart_delay=1) as supervisor:
        assert await supervisor.start(fails_first_before_started, name="late") == (
            "ready after 3 runs"
        )
        supervisor.cancel()
    assert runs == [0, 1, 2]
    assert supervisor.restarts == {"late": 2}


async def test_child_never_starting_within_the_intensity_makes_start_raise(autojump_clock):
    runs = []
    sibling_cancelled = trio.Event()

    async def never_starts(task_status=trio.TASK_STATUS_IGNORED):
        runs.append(1)
        raise ConnectionError("cannot start")

    async def sibling(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            sibling_cancelled.set()

    with pytest.raises(RestartIntensityError, match="failed 3 times within 10") as from_block:
        async with open_supervisor(max_restarts=2, within=10) as supervisor:
            await supervisor.start(sibling)
            with pytest.raises(RestartIntensityError) as from_start:
                await supervisor.start(never_starts, name="never")
    assert from_start.value is from_block.value
    assert isinstance(from_start.value.__cause__, ConnectionError)
    assert len(runs) == 3
    assert sibling_cancelled.is_set()


async def test_start_error_left_uncaught_leaves_the_block_as_itself(autojump_clock):
    async def never_starts(task_status=trio.TASK_STATUS_IGNORED):
        raise ConnectionError("cannot start")

    with pytest.raises(RestartIntensityError) as raised:
        async with open_supervisor(max_restarts=1, within=10) as supervisor:
            await supervisor.start(never_starts)
    assert isinstance(raised.value.__cause__, ConnectionError)


async def test_child_failing_after_started_is_restarted_without_a_second_start(autojump_clock):
    runs = []
    restarted = trio.Event()

    async def fails_once_after_started(task_status=trio.TASK_STATUS_IGNORED):
        runs.append(1)
        task_status.started(f"run {len(runs)}")
        if len(runs) == 1:
            await trio.sleep(1)
            raise ConnectionError("lost it")
        restarted.set()
        await trio.sleep_forever()

    async with open_supervisor(max_restarts=3, within=10) as supervisor:
        assert await supervisor.start(fails_once_after_started, name="once") == "run 1"
        await restarted.wait()
        supervisor.cancel()
    assert supervisor.restarts == {"once": 1}


async def test_a_child_calling_started_twice_in_one_run_is_an_error(autojump_clock):
    async def starts_twice(task_status=trio.TASK_STATUS_IGNORED):
        task_status.started()
        task_status.started()

    with pytest.raises(RestartIntensityError) as raised:
        async with open_supervisor(max_restarts=0, within=10) as supervisor:
            await supervisor.start(starts_twice)
            await trio.sleep_forever()
    assert "called 'started' twice" in str(raised.value.__cause__)


class Greeter(Actor):
    async def on_start(self):
        self.starts = getattr(self, "starts", 0) + 1

    async def handle(self, message):
        if message == "crash":
            raise RuntimeError("crashed on purpose")
        return f"hello {message} (start {self.starts})"


async def test_supervised_actor_restarts_with_its_mailbox(autojump_clock):
    greeter = Greeter(name="greeter")
    async with open_supervisor(max_restarts=3, within=10) as supervisor:
        await supervisor.start(greeter)
        greeter.tell("crash")
        assert await greeter.ask("ann") == "hello ann (start 2)"
        supervisor.cancel()


async def test_actor_given_up_on_is_stopped(autojump_clock):
    greeter = Greeter(name="greeter")
    with pytest.raises(RestartIntensityError):
        async with open_supervisor(max_restarts=0, within=10) as supervisor:
            await supervisor.start(greeter)
            with pytest.raises(RuntimeError):
                await greeter.ask("crash")
            await trio.sleep_forever()
    assert greeter.stopped


async def test_bad_intensity_is_refused():
    with pytest.raises(ValueError, match="max_restarts=-1"):
        async with open_supervisor(max_restarts=-1):
            pass
