"""Actors: a mailbox consumed by one task, `tell` to send, `ask` to send and await a reply."""

from __future__ import annotations

import logging
import math
from typing import Any

import attrs
import trio

logger = logging.getLogger("actors.actor")


class ActorStoppedError(Exception):
    """The actor is stopped (closed, or its supervisor gave up on it): nothing will answer."""


class AskTimeoutError(TimeoutError):
    """No reply to an `ask` within its timeout."""


@attrs.define(eq=False)
class _Reply:
    done: trio.Event = attrs.field(factory=trio.Event)
    value: Any = None
    error: BaseException | None = None

    def resolve(self, value: Any) -> None:
        if not self.done.is_set():
            self.value = value
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


@attrs.frozen
class _Envelope:
    message: Any
    reply: _Reply | None


class Actor:
    """Subclass and implement `async handle(message)`; its return value answers an `ask`.

    Run it with `await nursery.start(actor.run)` or under a supervisor. An exception from
    `handle` is raised to the asker of that message and crashes the actor (`run` raises),
    so a supervisor can restart it; the mailbox survives a restart and the message that
    crashed it is not retried. `on_start` runs at every (re)start: reset state there.
    """

    def __init__(self, *, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self._send, self._receive = trio.open_memory_channel[_Envelope](math.inf)
        self._stopped_because: BaseException | None = None
        self._running = False

    async def handle(self, message: Any) -> Any:
        raise NotImplementedError

    async def on_start(self) -> None:
        """Called at every (re)start, before the first message."""

    @property
    def stopped(self) -> bool:
        return self._stopped_because is not None

    @property
    def mailbox_size(self) -> int:
        return self._send.statistics().current_buffer_used

    def _check_alive(self) -> None:
        if self._stopped_because is not None:
            raise ActorStoppedError(
                f"actor {self.name} is stopped: {self._stopped_because}"
            ) from self._stopped_because

    def tell(self, message: Any) -> None:
        """Queues a message; never blocks. Raises ActorStoppedError if the actor is gone."""
        self._check_alive()
        self._send.send_nowait(_Envelope(message, None))

    async def ask(self, message: Any, *, timeout: float | None = None) -> Any:
        """Queues a message and returns the actor's reply (or raises its error).
        Raises AskTimeoutError after `timeout` seconds, ActorStoppedError if the actor is
        gone or stops before answering."""
        self._check_alive()
        reply = _Reply()
        self._send.send_nowait(_Envelope(message, reply))
        with trio.move_on_after(math.inf if timeout is None else timeout):
            await reply.done.wait()
        if not reply.done.is_set():
            raise AskTimeoutError(f"actor {self.name} did not answer {message!r} in {timeout}s")
        if reply.error is not None:
            raise reply.error
        return reply.value

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._check_alive()
        if self._running:
            raise RuntimeError(f"actor {self.name} is already running")
        self._running = True
        try:
            await self.on_start()
            task_status.started()
            async for envelope in self._receive:
                try:
                    result = await self.handle(envelope.message)
                except Exception as error:
                    if envelope.reply is not None:
                        envelope.reply.fail(error)
                    raise
                if envelope.reply is not None:
                    envelope.reply.resolve(result)
        finally:
            self._running = False

    def stop(self, reason: BaseException | None = None) -> None:
        """Stops the actor for good: `run` ends after the message in hand, queued and later
        asks fail with ActorStoppedError."""
        if self._stopped_because is not None:
            return
        self._stopped_because = reason or ActorStoppedError(f"actor {self.name} was stopped")
        self._send.close()
        while True:
            try:
                envelope = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            if envelope.reply is not None:
                error = ActorStoppedError(f"actor {self.name} stopped before answering")
                error.__cause__ = self._stopped_because
                envelope.reply.fail(error)

    async def aclose(self) -> None:
        self.stop()
