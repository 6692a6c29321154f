"""Entering and leaving a client's own nursery (the one its connections and background
tasks live in) without changing the exceptions the user's `async with` body raises."""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["exit_nursery"]


async def exit_nursery(
    stack: contextlib.AsyncExitStack, exc_type: Any, exc: Any, tb: Any
) -> bool | None:
    """`stack.__aexit__`, except that an exception of the `async with` body comes out as
    itself, not wrapped by the nursery in an ExceptionGroup (a user catching
    `NotEnoughReplicasError` around `async with Producer(...)` should see it)."""
    try:
        return await stack.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as group:
        if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
            return False  # re-raises `exc` unchanged
        raise
