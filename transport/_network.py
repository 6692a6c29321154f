"""The interface both networks implement (real TCP and the seeded simulation)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from transport._connection import Address, MessageConnection

__all__ = ["ConnectionHandler", "Listener", "Network"]

ConnectionHandler = Callable[[MessageConnection], Awaitable[object]]


class Listener(Protocol):
    """What `serve` reports through `task_status.started`."""

    @property
    def address(self) -> Address:
        """The bound address (a real port when 0 was asked for)."""
        ...


class Network(Protocol):
    """How components open and accept connections; injected, never imported directly."""

    def node(self, name: str) -> Network:
        """This network as seen from node `name` (whose connections it opens and serves)."""
        ...

    async def serve(
        self,
        address: Address,
        handler: ConnectionHandler,
        *,
        task_status: trio.TaskStatus[Listener] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accepts connections on `address` until cancelled, running `await handler(conn)`
        in a new task for each; a failing handler closes its connection only."""
        ...

    async def connect(
        self,
        address: Address,
        *,
        timeout: float | None = None,
    ) -> MessageConnection:
        """A new connection to `address`; `ConnectError` naming it when that fails."""
        ...
