"""Helpers for tests and simulations built on the actor runtime.

`pinned_scheduler(seed)` turns on Trio's deterministic scheduling (DESIGN.md section 2):
each batch of runnable tasks is sorted by task creation order and shuffled with a generator
seeded here. Use it around `trio.run(...)` with a `MockClock(autojump_threshold=0)`; other
orders (deadline ties, hash-ordered sets) are up to the code under test to keep seeded.

`poll_until(condition)` waits for a condition over state that no single event announces (a
cluster converged, every partition led), polling under Trio's clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import trio

__all__ = ["DEFAULT_POLL_TIMEOUT", "pinned_scheduler", "poll_until"]

DEFAULT_POLL_TIMEOUT = 30.0


async def poll_until(
    condition: Callable[[], object],
    *,
    timeout: float = DEFAULT_POLL_TIMEOUT,
    every: float = 0.05,
) -> None:
    """Returns once `condition()` is true, looking every `every` seconds of Trio's clock
    (virtual under a MockClock, so a long wait costs no real time); `trio.TooSlowError`
    after `timeout` seconds. Wait on an event instead where one says the condition holds."""
    with trio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 (no single event to wait for)
            await trio.sleep(every)


@contextlib.contextmanager
def pinned_scheduler(seed: int) -> Iterator[None]:
    run_module = trio._core._run
    if not hasattr(run_module, "_ALLOW_DETERMINISTIC_SCHEDULING") or not hasattr(run_module, "_r"):
        raise RuntimeError(f"trio {trio.__version__} has no deterministic scheduling hook")
    saved = run_module._ALLOW_DETERMINISTIC_SCHEDULING, run_module._r.getstate()
    run_module._ALLOW_DETERMINISTIC_SCHEDULING = True
    run_module._r.seed(seed)
    try:
        yield
    finally:
        run_module._ALLOW_DETERMINISTIC_SCHEDULING = saved[0]
        run_module._r.setstate(saved[1])
