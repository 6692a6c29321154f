"""One-for-one supervision with a restart intensity limit (Erlang/OTP's, as Akka has it)."""

from __future__ import annotations

import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import trio

from actors._actor import Actor

logger = logging.getLogger("actors.supervisor")


class RestartIntensityError(Exception):
    """A child failed more than `max_restarts` times within `within` seconds: the
    supervisor gave up and this propagates to its owner (the child's last error is the
    `__cause__`)."""


ChildFn = Callable[..., Awaitable[Any]]


@attrs.define(eq=False)
class _RunStatus(trio.TaskStatus[Any]):
    """The `task_status` one run of a child gets: its `started(value)` goes to whoever still
    waits for the child, which is the caller of `Supervisor.start` until some run has
    started (a run that fails before `started()` leaves the caller waiting for the restart),
    and nobody after that."""

    waiting: trio.TaskStatus[Any]
    called: bool = False

    def started(self, value: Any = None) -> None:
        if self.called:
            raise RuntimeError("called 'started' twice on the same task status")
        self.called = True
        self.waiting.started(value)


@attrs.define(eq=False)
class Supervisor:
    max_restarts: int
    within: float
    restart_delay: float
    name: str
    _nursery: trio.Nursery
    _fatal: BaseException | None = None
    restarts: dict[str, int] = attrs.field(factory=dict)

    async def start(self, child: ChildFn | Actor, *args: Any, name: str | None = None) -> Any:
        """Starts a child like `nursery.start` and restarts it whenever it raises. An `Actor`
        runs its `run`. A child that returns normally is done and not restarted.

        Returns the value the child passes to `task_status.started()`. A child that fails
        before `started()` is restarted like any other and `start` waits on, returning what
        the restarted child passes; a restarted child's later `started()` calls go nowhere.
        If the child fails more often than the restart intensity allows before it starts,
        the supervisor gives up as it would on any child (every child is cancelled) and
        `start` raises RestartIntensityError (the child's last error is its `__cause__`),
        the same error the supervisor's block then raises."""
        fn, name = self._resolve(child, name)
        return await self._nursery.start(self._supervise, child, fn, args, name)

    def start_soon(self, child: ChildFn | Actor, *args: Any, name: str | None = None) -> None:
        fn, name = self._resolve(child, name)
        self._nursery.start_soon(self._supervise, child, fn, args, name)

    def _resolve(self, child: ChildFn | Actor, name: str | None) -> tuple[ChildFn, str]:
        if isinstance(child, Actor):
            return child.run, name or child.name
        return child, name or getattr(child, "__qualname__", repr(child))

    def cancel(self) -> None:
        """Stops every child (and the supervisor's block, if it waits on them)."""
        self._nursery.cancel_scope.cancel()

    async def _supervise(
        self,
        child: ChildFn | Actor,
        fn: ChildFn,
        args: tuple[Any, ...],
        name: str,
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        failures: collections.deque[float] = collections.deque()
        waiting = task_status
        while True:
            run_status = _RunStatus(waiting)
            try:
                await fn(*args, task_status=run_status)
                return
            except Exception as error:
                now = trio.current_time()
                failures.append(now)
                while failures and failures[0] <= now - self.within:
                    failures.popleft()
                self.restarts[name] = self.restarts.get(name, 0) + 1
                if len(failures) > self.max_restarts:
                    logger.error(
                        "%s: child %s failed %d times within %ss; giving up",
                        self.name, name, len(failures), self.within,
                    )  # fmt: skip
                    fatal = RestartIntensityError(
                        f"{self.name}: child {name} failed {len(failures)} times within "
                        f"{self.within}s (limit {self.max_restarts} restarts): {error!r}"
                    )
                    fatal.__cause__ = error
                    if isinstance(child, Actor):
                        child.stop(fatal)
                    if self._fatal is None:
                        self._fatal = fatal
                    self.cancel()
                    if waiting is not trio.TASK_STATUS_IGNORED and not run_status.called:
                        raise fatal from error  # out of `start`, which still waits
                    return
                logger.warning("%s: child %s failed, restarting: %r", self.name, name, error)
            if run_status.called:
                waiting = trio.TASK_STATUS_IGNORED
            if self.restart_delay:
                await trio.sleep(self.restart_delay)


@contextlib.asynccontextmanager
async def open_supervisor(
    *,
    max_restarts: int = 3,
    within: float = 5.0,
    restart_delay: float = 0.0,
    name: str = "supervisor",
) -> AsyncIterator[Supervisor]:
    """A nursery whose children are restarted one-for-one when they raise. More than
    `max_restarts` failures of one child within `within` seconds cancels every child and
    raises RestartIntensityError out of the `async with`. Like a nursery, the block waits for
    its children: `supervisor.cancel()` ends them."""
    if max_restarts < 0 or within <= 0:
        raise ValueError(f"bad restart intensity: max_restarts={max_restarts}, within={within}")
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(max_restarts, within, restart_delay, name, nursery)
        try:
            yield supervisor
        except RestartIntensityError as error:
            # `start` raised the supervisor's own give-up in the block: raised below, alone.
            if error is not supervisor._fatal:
                raise
    if supervisor._fatal is not None:
        raise supervisor._fatal
