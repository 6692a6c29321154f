"""The RPC server: dispatches requests by api key to async handlers, runs a connection's
requests concurrently (or one at a time), and answers them in the order they arrived."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

import trio

from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address, MessageConnection
from transport._envelope import (
    INVALID_REQUEST,
    NONE,
    UNKNOWN_SERVER_ERROR,
    Request,
    RpcError,
    encode_push,
    encode_response,
    parse_request,
)
from transport._errors import (
    ConnectionClosedError,
    FrameDecodeError,
    FrameTooLargeError,
    RemoteProtocolError,
    TruncatedFrameError,
)
from transport._writer import FrameWriter

__all__ = ["Handler", "RpcServer", "ServerConnection"]

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[object]]
ConnectionHook = Callable[["ServerConnection"], object]
_Work = tuple[int, Handler, Request]


class ServerConnection:
    """The server's side of one client connection."""

    def __init__(self, connection: MessageConnection, max_frame_bytes: int) -> None:
        self.connection = connection
        self.context: dict[str, object] = {}
        self.closed = trio.Event()
        self._max_frame_bytes = max_frame_bytes
        self._writer = FrameWriter(connection)
        self._work: deque[_Work] = deque()
        self._idle_workers = trio.lowlevel.ParkingLot()
        self._workers = 0
        self._reader_waiting = trio.lowlevel.ParkingLot()
        self._in_flight = 0  # requests received whose response is not written yet
        self._next_seq = 0
        self._next_to_send = 0
        self._finished: dict[int, bytes] = {}  # responses waiting for an earlier one

    def __repr__(self) -> str:
        return f"<ServerConnection from {self.peer_name}>"

    @property
    def peer_name(self) -> str:
        return self.connection.peer_name

    @property
    def peer_address(self) -> Address:
        return self.connection.peer_address

    def push(self, body: object) -> bool:
        """Queues `[-1, 0, body]` behind the responses already queued (never blocks).
        False, and nothing sent, when the connection is closed or closing."""
        if self._writer.closing or self.closed.is_set():
            return False
        self._writer.put(encode_push(body, self._max_frame_bytes))
        return True

    def close(self) -> None:
        """Closes the connection once what is queued has been sent; handlers still
        running are cancelled."""
        self._writer.close_after_flush()

    def _complete(self, seq: int, frame: bytes) -> None:
        """A response is ready: queue it, and any later ones that were waiting for it."""
        if seq != self._next_to_send:
            self._finished[seq] = frame
            return
        writer = self._writer
        writer.put(frame, counted=True)
        seq += 1
        finished = self._finished
        while finished:
            frame = finished.pop(seq, None)
            if frame is None:
                break
            writer.put(frame, counted=True)
            seq += 1
        self._next_to_send = seq

    def _written(self, count: int) -> None:
        self._in_flight -= count
        if self._reader_waiting:
            self._reader_waiting.unpark()


class RpcServer:
    """Give `server.handle_connection` to `network.serve`.

    `handlers` maps api keys to `async def handler(request) -> body`; a handler answers an
    error by raising `RpcError`. Per connection, responses go out in the order requests
    arrived (Kafka's per-connection ordering). With `ordered=False` a connection's
    handlers run concurrently, at most `max_in_flight_per_connection` at once (reading
    pauses at the bound); with `ordered=True` they run one at a time in arrival order
    (ZooKeeper's per-session order). Bad input never takes the server down: an unknown api
    key gets an `INVALID_REQUEST` response, a malformed frame or envelope closes that
    connection with one log line naming the peer and the reason.
    """

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        name: str,
        ordered: bool = False,
        max_in_flight_per_connection: int = 128,
        on_connect: ConnectionHook | None = None,
        on_disconnect: ConnectionHook | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        if max_in_flight_per_connection < 1:
            raise ValueError(
                f"max_in_flight_per_connection must be >= 1, got {max_in_flight_per_connection}"
            )
        self.handlers = dict(handlers)
        self.name = name
        self.ordered = ordered
        self.max_in_flight_per_connection = max_in_flight_per_connection
        self.max_frame_bytes = max_frame_bytes
        self._on_connect = on_connect
        self._on_disconnect = on_disconnect
        self._max_workers = 1 if ordered else max_in_flight_per_connection

    def __repr__(self) -> str:
        return f"<RpcServer {self.name}>"

    async def handle_connection(self, conn: MessageConnection) -> None:
        conn.max_frame_bytes = self.max_frame_bytes
        client = ServerConnection(conn, self.max_frame_bytes)
        self._call_hook(self._on_connect, client)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop, client, nursery.cancel_scope)
                nursery.start_soon(self._read_loop, client, nursery)
        finally:
            client.closed.set()
            self._call_hook(self._on_disconnect, client)
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async def _write_loop(self, client: ServerConnection, scope: trio.CancelScope) -> None:
        try:
            await client._writer.run(client._written)
        except ConnectionClosedError as exc:
            log.debug(
                "%s: connection from %s closed while writing: %s", self.name, client.peer_name, exc
            )
        scope.cancel()

    async def _read_loop(self, client: ServerConnection, nursery: trio.Nursery) -> None:
        conn = client.connection
        limit = self.max_in_flight_per_connection
        try:
            while True:
                message = await conn.receive()
                self._dispatch(client, message, nursery)
                while client._in_flight >= limit:
                    await client._reader_waiting.park()
        except TruncatedFrameError as exc:
            self._reject(client, exc)
        except ConnectionClosedError as exc:
            log.debug("%s: %s", self.name, exc)
            nursery.cancel_scope.cancel()
        except (FrameTooLargeError, FrameDecodeError, RemoteProtocolError) as exc:
            self._reject(client, exc)

    def _reject(self, client: ServerConnection, exc: Exception) -> None:
        log.warning("%s: closing connection from %s: %s", self.name, client.peer_name, exc)
        client.close()

    def _dispatch(self, client: ServerConnection, message: object, nursery: trio.Nursery) -> None:
        api_key, api_version, correlation_id, client_id, body = parse_request(message)
        seq = client._next_seq
        client._next_seq += 1
        client._in_flight += 1
        handler = self.handlers.get(api_key)
        if handler is None:
            reason = f"unknown api key {api_key}"
            log.warning("%s: %s in a request from %s", self.name, reason, client.peer_name)
            client._complete(
                seq, encode_response(correlation_id, INVALID_REQUEST, {"error_message": reason})
            )
            return
        request = Request(api_key, api_version, correlation_id, client_id, body, client)
        client._work.append((seq, handler, request))
        # Hand the work to an idle worker, or start one; workers live as long as the
        # connection, so a steady stream of requests spawns no tasks.
        if not client._idle_workers.unpark() and client._workers < self._max_workers:
            client._workers += 1
            nursery.start_soon(self._worker, client)

    async def _worker(self, client: ServerConnection) -> None:
        work = client._work
        while True:
            while work:
                seq, handler, request = work.popleft()
                client._complete(seq, await self._answer(handler, request))
            await client._idle_workers.park()

    async def _answer(self, handler: Handler, request: Request) -> bytes:
        """The encoded response frame for `request`: the handler's body, its RpcError, or
        UNKNOWN_SERVER_ERROR when it fails or returns something that cannot be sent."""
        correlation_id = request.correlation_id
        try:
            body = await handler(request)
        except RpcError as exc:
            if exc.error_code == INVALID_REQUEST:
                log.warning(
                    "%s: invalid request (api key %d) from %s: %s",
                    self.name,
                    request.api_key,
                    request.connection.peer_name,
                    exc,
                )
            return self._encode(request, exc.error_code, exc.body)
        except Exception as exc:
            log.exception(
                "%s: handler for api key %d failed on a request from %s",
                self.name,
                request.api_key,
                request.connection.peer_name,
            )
            return encode_response(
                correlation_id,
                UNKNOWN_SERVER_ERROR,
                {"error_message": f"{type(exc).__name__}: {exc}"},
            )
        return self._encode(request, NONE, body)

    def _encode(self, request: Request, error_code: int, body: object) -> bytes:
        try:
            return encode_response(request.correlation_id, error_code, body, self.max_frame_bytes)
        except (TypeError, ValueError, OverflowError, FrameTooLargeError) as exc:
            reason = f"response to api key {request.api_key} cannot be sent: {exc}"
            log.error("%s: %s (request from %s)", self.name, reason, request.connection.peer_name)
            return encode_response(
                request.correlation_id, UNKNOWN_SERVER_ERROR, {"error_message": reason}
            )

    def _call_hook(self, hook: ConnectionHook | None, client: ServerConnection) -> None:
        if hook is None:
            return
        try:
            hook(client)
        except Exception:
            log.exception("%s: connection hook %r failed for %s", self.name, hook, client.peer_name)
