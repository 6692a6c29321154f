"""The RPC client side of one connection: pipelined requests matched by correlation id."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import outcome
import trio

import actors
from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address, MessageConnection
from transport._envelope import (
    MAX_CORRELATION_ID,
    PUSH_CORRELATION_ID,
    Response,
    encode_request,
    parse_response,
)
from transport._errors import ConnectionClosedError, RequestTimeoutError, TransportError
from transport._network import Network
from transport._writer import FrameWriter

__all__ = ["PushCallback", "RpcConnection", "open_rpc_connection"]

log = logging.getLogger(__name__)

PushCallback = Callable[[object], object]


class RpcConnection:
    """Requests over one connection. Many may be in flight; each waits for the response
    with its correlation id, at most its timeout. When the connection dies, every pending
    request fails with `ConnectionClosedError`, and so does every later one.

    A server answers a connection's requests in order, so a request that is never answered
    holds back every response behind it. With `close_on_timeout=True` a timed-out request
    closes the connection (what Kafka's clients do), failing the others at once.

    Build it with `open_rpc_connection` (or `RpcConnection(...)` + `nursery.start(conn.run)`).
    """

    def __init__(
        self,
        connection: MessageConnection,
        *,
        client_id: str,
        on_push: PushCallback | None = None,
        request_timeout: float = 30.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        close_on_timeout: bool = False,
    ) -> None:
        connection.max_frame_bytes = max_frame_bytes
        self.close_on_timeout = close_on_timeout
        self.connection = connection
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.closed = trio.Event()  # set as soon as the connection is known dead
        self._finished = trio.Event()  # set once run() has closed the underlying connection
        self._on_push = on_push
        self._max_frame_bytes = max_frame_bytes
        self._writer = FrameWriter(connection)
        self._pending: dict[int, trio.lowlevel.Task] = {}
        self._next_correlation_id = 0
        self._failure: str | None = None
        self._scope = trio.CancelScope()
        self._running = False

    def __repr__(self) -> str:
        return f"<RpcConnection {self.client_id} -> {self.peer_name}>"

    @property
    def peer_name(self) -> str:
        return self.connection.peer_name

    @property
    def peer_address(self) -> Address:
        return self.connection.peer_address

    @property
    def is_usable(self) -> bool:
        return self._failure is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def request(
        self,
        api_key: int,
        body: object,
        *,
        api_version: int = 0,
        timeout: float | None = None,
    ) -> Response:
        """Sends one request and returns its `Response(error_code, body)`.

        `RequestTimeoutError` after `timeout` (default: the connection's request_timeout)
        seconds without a response; `ConnectionClosedError` if the connection dies first.
        """
        if self._failure is not None:
            await trio.lowlevel.checkpoint()
            raise ConnectionClosedError(self._failure)
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (
            0 if correlation_id == MAX_CORRELATION_ID else correlation_id + 1
        )
        frame = encode_request(
            api_key, api_version, correlation_id, self.client_id, body, self._max_frame_bytes
        )
        limit = self.request_timeout if timeout is None else timeout
        pending = self._pending
        pending[correlation_id] = trio.lowlevel.current_task()
        self._writer.put(frame)

        def abort(_: object) -> trio.lowlevel.Abort:
            pending.pop(correlation_id, None)
            return trio.lowlevel.Abort.SUCCEEDED

        with trio.move_on_after(limit):
            return await trio.lowlevel.wait_task_rescheduled(abort)
        reason = (
            f"no response from {self.peer_name} to api key {api_key} "
            f"(correlation id {correlation_id}) within {limit}s"
        )
        if self.close_on_timeout:
            self._fail(reason)
        raise RequestTimeoutError(reason)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The connection's reader and writer; returns once the connection is closed."""
        self._running = True
        try:
            with self._scope:
                task_status.started()
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._write_loop)
                        nursery.start_soon(self._read_loop)
                finally:
                    self._fail("connection closed")
        finally:
            # Also when an outer scope cancels us: `aclose` waits for `_finished`.
            with trio.CancelScope(shield=True):
                await self.connection.aclose()
            self._finished.set()

    async def aclose(self) -> None:
        """Closes the connection; pending requests fail with `ConnectionClosedError`."""
        self._fail("closed by the client")
        if not self._running:
            await self.connection.aclose()
            self._finished.set()
        await self._finished.wait()

    async def _write_loop(self) -> None:
        try:
            await self._writer.run()
        except ConnectionClosedError as exc:
            self._fail(str(exc))

    async def _read_loop(self) -> None:
        receive = self.connection.receive
        pending = self._pending
        try:
            while True:
                correlation_id, error_code, body = parse_response(await receive())
                if correlation_id == PUSH_CORRELATION_ID:
                    self._deliver_push(body)
                    continue
                task = pending.pop(correlation_id, None)
                if task is None:
                    log.debug(
                        "%s: response %d from %s came after its request gave up",
                        self.client_id,
                        correlation_id,
                        self.peer_name,
                    )
                    continue
                trio.lowlevel.reschedule(task, outcome.Value(Response(error_code, body)))
        except ConnectionClosedError as exc:
            self._fail(str(exc))
        except TransportError as exc:
            log.warning("%s: closing connection to %s: %s", self.client_id, self.peer_name, exc)
            self._fail(f"closed after a protocol error from {self.peer_name}: {exc}")

    def _deliver_push(self, body: object) -> None:
        if self._on_push is None:
            return
        try:
            self._on_push(body)
        except Exception:
            log.exception("%s: push callback failed", self.client_id)

    def _fail(self, reason: str) -> None:
        """Marks the connection dead (once) and fails every pending request."""
        if self._failure is None:
            self._failure = f"connection to {self.peer_name} lost: {reason}"
            log.debug("%s: %s", self.client_id, self._failure)
            self.closed.set()
        pending = list(self._pending.values())
        self._pending.clear()
        for task in pending:
            trio.lowlevel.reschedule(task, outcome.Error(ConnectionClosedError(self._failure)))
        self._scope.cancel()


@asynccontextmanager
async def open_rpc_connection(
    network: Network,
    address: Address,
    *,
    client_id: str,
    on_push: PushCallback | None = None,
    request_timeout: float = 30.0,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    close_on_timeout: bool = False,
    connect_timeout: float | None = None,
) -> AsyncIterator[RpcConnection]:
    """One RPC connection to `address` (no reconnect): `ConnectError` if it cannot be
    opened; closed on exit."""
    connection = await network.connect(address, timeout=connect_timeout)
    rpc = RpcConnection(
        connection,
        client_id=client_id,
        on_push=on_push,
        request_timeout=request_timeout,
        max_frame_bytes=max_frame_bytes,
        close_on_timeout=close_on_timeout,
    )
    async with actors.open_background_nursery() as nursery:
        await nursery.start(rpc.run)
        try:
            yield rpc
        finally:
            with trio.CancelScope(shield=True):
                await rpc.aclose()
