"""Fixtures and hooks shared by the whole suite."""

import os
import signal
import threading

import pytest
import pytest_timeout
import trio

# After a timeout, how long a Trio run gets to unwind before the process is ended.
TRIO_UNWIND_GRACE = 15.0


class TimedOutError(Exception):
    """A test ran past its pytest-timeout limit; Trio cancelled every task of its run."""


@pytest.fixture(scope="session")
def require_external():
    """`require(what, available, hint)`: skip a test whose external part (ZooKeeper, Java,
    PySpark) is missing, except under CI, where a missing part is a failure: CI must run
    every test, not quietly skip the ones that prove conformance."""

    def require(what: str, available: bool, hint: str) -> None:
        if available:
            return
        message = f"{what} is not available: {hint}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so this test must run, not skip)")
        pytest.skip(message)

    return require


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout's signal method, made safe for Trio.

    Its SIGALRM handler raises wherever the main thread is; inside a Trio run that is often
    Trio's own scheduler, which leaves the run half-torn (a TrioInternalError, then "run()
    from inside a run()" in every later test). Here, when the alarm finds a Trio run on the
    main thread, it has Trio crash that run the orderly way (a system task raises: every task
    is cancelled and `trio.run` raises), reporting where each task was waiting; outside Trio
    it is pytest-timeout's own handling. If the run has not ended `TRIO_UNWIND_GRACE` seconds
    later (or the alarm could not run), the thread method's stack dump and exit end it."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None

    def on_alarm(signum, frame):
        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:  # no Trio run on this thread
            token = None
        if token is None:
            pytest_timeout.timeout_sigalrm(item, settings)
        elif settings.disable_debugger_detection or not pytest_timeout.is_debugging():
            token.run_sync_soon(_crash_trio_run, settings.timeout)

    backstop = threading.Timer(
        settings.timeout + TRIO_UNWIND_GRACE, pytest_timeout.timeout_timer, (item, settings)
    )
    backstop.daemon = True

    def cancel():
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        backstop.cancel()

    item.cancel_timeout = cancel
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    backstop.start()
    return True


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A run crashed by the timeout fails the test with the timeout's own message, not as
    the TrioInternalError it reaches pytest as."""
    try:
        return (yield)
    except trio.TrioInternalError as error:
        timeout = _find_timeout(error)
        if timeout is None:
            raise
    pytest.fail(str(timeout), pytrace=False)


def _find_timeout(error: BaseException | None) -> TimedOutError | None:
    if error is None or isinstance(error, TimedOutError):
        return error
    for inner in getattr(error, "exceptions", ()):
        if (found := _find_timeout(inner)) is not None:
            return found
    return _find_timeout(error.__cause__)


def _crash_trio_run(timeout: float) -> None:
    where = "\n".join(_task_stacks(trio.lowlevel.current_root_task()))
    error = TimedOutError(
        f"Timeout (>{timeout}s) from pytest-timeout; where each task was waiting:\n{where}"
    )

    async def raise_timeout() -> None:
        raise error

    trio.lowlevel.spawn_system_task(raise_timeout, name="pytest-timeout")


def _task_stacks(task: trio.lowlevel.Task | None, depth: int = 0) -> list[str]:
    if task is None:
        return []
    indent = "  " * depth
    lines = [f"{indent}task {task.name}:"]
    for frame, lineno in task.iter_await_frames():
        if frame.f_globals.get("__name__", "").startswith("trio._core"):
            continue
        code = frame.f_code
        lines.append(f"{indent}  {code.co_filename}:{lineno} in {code.co_name}")
    for nursery in task.child_nurseries:
        for child in sorted(nursery.child_tasks, key=lambda child: child.name):
            lines.extend(_task_stacks(child, depth + 1))
    return lines
