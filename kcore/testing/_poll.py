"""Waiting for a condition over many components' in-process state, where no single event
says it holds (a cluster converged, every partition led): poll it."""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["poll_until"]


async def poll_until(condition: Callable[[], bool], *, timeout: float, every: float = 0.05) -> None:
    """Returns once `condition()` holds, looking every `every` seconds (of Trio's clock:
    virtual under a MockClock); `trio.TooSlowError` after `timeout`."""
    with trio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 (no single event to wait for)
            await trio.sleep(every)
