"""A nursery owned by an async context manager, for the background tasks it runs while the
caller's `async with` body runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["open_background_nursery"]


@asynccontextmanager
async def open_background_nursery() -> AsyncIterator[trio.Nursery]:
    """`trio.open_nursery()`, except that an exception raised by the body comes out as
    itself rather than wrapped in an ExceptionGroup when it is the only one. A caller of
    `async with open_client(...)` who writes `except ConnectError` around a request
    should catch it; that the client keeps a nursery is not theirs to know. Failures of
    the background tasks still come out as a group."""
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as error:
                body_error = error
                raise
    except BaseExceptionGroup as group:
        if body_error is None or list(group.exceptions) != [body_error]:
            raise
    else:
        return
    # Outside the handler, so the group does not become the body error's __context__.
    raise body_error
