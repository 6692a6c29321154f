"""`open_background_nursery`: the body's own error comes out as itself."""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel

from actors import open_background_nursery


class _BodyError(Exception):
    pass


class _TaskError(Exception):
    pass


async def test_a_body_error_comes_out_unwrapped_and_cancels_the_background_tasks() -> None:
    cancelled = False

    async def background() -> None:
        nonlocal cancelled
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled = True
            raise

    with pytest.raises(_BodyError, match="boom"):
        async with open_background_nursery() as nursery:
            nursery.start_soon(background)
            await trio.lowlevel.checkpoint()
            raise _BodyError("boom")
    assert cancelled


async def test_a_background_failure_still_comes_out_as_a_group() -> None:
    async def failing() -> None:
        raise _TaskError("task")

    with pytest.RaisesGroup(_TaskError):
        async with open_background_nursery() as nursery:
            nursery.start_soon(failing)
            await trio.sleep_forever()


async def test_a_body_error_alongside_a_task_failure_keeps_both() -> None:
    async def failing() -> None:
        raise _TaskError("task")

    with pytest.RaisesGroup(_TaskError, _BodyError):
        async with open_background_nursery() as nursery:
            nursery.start_soon(failing)
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                raise _BodyError("body") from None


async def test_a_clean_exit_waits_for_the_background_tasks(autojump_clock) -> None:
    finished = []

    async def task() -> None:
        await trio.sleep(1)
        finished.append(True)

    async with open_background_nursery() as nursery:
        nursery.start_soon(task)
    assert finished == [True]
