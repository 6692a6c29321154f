"""The RPC server: dispatches requests by api key to async handlers, runs a connection's
requests concurrently (or one at a time), and answers them in the order they arrived."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import attrs
import trio

from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address, MessageConnection
from transport._envelope import (
    INVALID_REQUEST,
    NONE,
    UNKNOWN_SERVER_ERROR,
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

__all__ = [
    "FrameProtocol",
    "Handler",
    "Request",
    "RequestTiming",
    "RpcServer",
    "ServerConnection",
]

log = logging.getLogger(__name__)


class _QueuedBytes:
    """A server's bytes of requests received and not yet answered (Kafka's
    queued.max.request.bytes memory pool), shared by its connections; a bound of 0 or less
    is none. A connection stops reading while the bound is reached, except for its first
    request in flight (so no connection waits on another's answer for ever)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: set[_Pipeline] = set()

    @property
    def exhausted(self) -> bool:
        return 0 < self.limit <= self.used

    def release(self, size: int) -> None:
        self.used -= size
        if self.waiting and not self.exhausted:
            for pipeline in list(self.waiting):
                pipeline.reader_waiting.unpark_all()


class ServerConnection:
    """The server's side of one client connection, as handlers and connection hooks see it:
    who the peer is, `context` for what the application keeps per connection, `push`,
    `close`, and `closed` (set once the connection is gone)."""

    def __init__(
        self, connection: MessageConnection, writer: FrameWriter, *, max_frame_bytes: int
    ) -> None:
        self.connection = connection
        self.context: dict[str, object] = {}
        self.closed = trio.Event()
        self.speaks_foreign_protocol = False  # set by its first frame (RpcServer)
        # Set by `close_after_answer`: the connection closes once the next answer is sent.
        self.closing_after_answer = False
        self._writer = writer
        self._max_frame_bytes = max_frame_bytes

    def __repr__(self) -> str:
        return f"<ServerConnection from {self.peer_name}>"

    @property
    def peer_name(self) -> str:
        return self.connection.peer_name

    @property
    def peer_address(self) -> Address:
        return self.connection.peer_address

    @property
    def peer_certificate(self) -> bytes | None:
        """The DER certificate the peer presented in the TLS handshake; None when it
        presented none, or the connection is not TLS."""
        return getattr(self.connection, "peer_certificate", None)

    def push(self, body: object) -> bool:
        """Queues `[-1, 0, body]` behind the responses already queued (never blocks).
        False, and nothing sent, when the connection is closed or closing."""
        if self._writer.closing or self.closed.is_set() or self.speaks_foreign_protocol:
            return False  # a connection speaking a second protocol has no msgpack pushes
        self._writer.put(encode_push(body, self._max_frame_bytes))
        return True

    def close(self) -> None:
        """Closes the connection once what is queued has been sent; handlers still
        running are cancelled."""
        self._writer.close_after_flush()

    def close_after_answer(self) -> None:
        """Closes the connection once the answer to the request being handled has been
        sent (a refusal the peer must read before the connection goes: Kafka's failed
        authentication, say); requests after it are not read."""
        self.closing_after_answer = True


@attrs.define
class RequestTiming:
    """When the server read a request, started its handler, had its answer and had written
    it (Trio's clock, seconds): what a broker's RequestQueueTimeMs and ResponseSendTimeMs
    are made of. `on_sent`, if a handler sets it, is called once `sent` is known (also for a
    request that gets no response: once the responses before it are written); never if the
    connection goes first."""

    received: float
    started: float | None = None
    answered: float | None = None
    sent: float | None = None
    on_sent: Callable[[RequestTiming], None] | None = None

    @property
    def queued_seconds(self) -> float | None:
        """From being read off the connection to its handler's start."""
        return None if self.started is None else self.started - self.received

    @property
    def sending_seconds(self) -> float | None:
        """From the handler's answer to the response written (waiting for earlier
        responses of the connection included: they leave in arrival order)."""
        if self.sent is None or self.answered is None:
            return None
        return self.sent - self.answered


@attrs.frozen
class Request:
    """A request as its handler gets it: the envelope's fields, the connection it came on
    (to push to, close, or keep per-connection state in), and its `timing` (None for a
    request made up outside a server)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: object
    connection: ServerConnection = attrs.field(repr=False)
    timing: RequestTiming | None = attrs.field(default=None, eq=False, repr=False)


Handler = Callable[[Request], Awaitable[object]]


# A second protocol an RpcServer speaks on the same port (Kafka's binary protocol, for one):
# same 4-byte size framing, told apart from kcore's msgpack envelope by the first frame.
class FrameProtocol(Protocol):
    """What `RpcServer(foreign_protocol=...)` needs of a second protocol. Its requests run
    through the same pipeline as msgpack ones (concurrency bound, queued-bytes bound,
    responses in arrival order); only decoding, dispatch and encoding are its own."""

    name: str
    handlers: Mapping[int, Handler]

    def claims(self, first_frame_body: bytes) -> bool:
        """True when a connection's first frame is this protocol's, not a msgpack envelope."""
        ...

    def parse_request(self, frame_body: bytes) -> tuple[int, int, int, str | None, object]:
        """`(api_key, api_version, correlation_id, client_id, body)`; raises
        `RemoteProtocolError` for a frame that cannot be answered (the connection closes)."""
        ...

    def encode_response(self, request: Request, body: object) -> bytes | None:
        """The whole response frame (size prefix included) for the handler's `body`; None
        when the request gets no response (Kafka's Produce with acks=0)."""
        ...

    def encode_error(self, request: Request, error_code: int, message: str) -> bytes | None:
        """The response frame when the handler raised `RpcError(error_code, message)`,
        failed (UNKNOWN_SERVER_ERROR), or there is no handler for the api key
        (UNSUPPORTED_VERSION, 35)."""
        ...


ConnectionHook = Callable[[ServerConnection], object]
# The request's sequence number, its handler, the request, and the protocol that encodes its
# answer (None: kcore's msgpack envelope).
_Work = tuple[int, Handler, Request, "FrameProtocol | None"]
UNSUPPORTED_VERSION = 35  # Kafka's code, what a second protocol answers for an unknown api


class _Pipeline:
    """The server's bookkeeping for one connection's requests between arrival and answer:
    a sequence number per request so responses leave in arrival order, the count in flight
    (reading pauses at the bound), and the queue the connection's workers take work from."""

    def __init__(self, client: ServerConnection, writer: FrameWriter, queued: _QueuedBytes) -> None:
        self.client = client
        self.queued = queued
        self.sizes: deque[int] = deque()  # per request in flight, in arrival order
        self.writer = writer
        self.work: deque[_Work] = deque()
        self.idle_workers = trio.lowlevel.ParkingLot()
        self.workers = 0
        self.reader_waiting = trio.lowlevel.ParkingLot()
        self.in_flight = 0  # requests received whose response is not written yet
        self._next_seq = 0
        self._next_to_send = 0
        # Responses waiting for an earlier one, with their requests' timings.
        self._finished: dict[int, tuple[bytes, RequestTiming | None]] = {}
        self._unsent: deque[RequestTiming | None] = deque()  # in the writer, in order

    def admit(self, size: int) -> int:
        """A request of about `size` bytes arrived: its sequence number."""
        seq = self._next_seq
        self._next_seq += 1
        self.in_flight += 1
        self.sizes.append(size)
        self.queued.used += size
        return seq

    def complete(self, seq: int, frame: bytes, timing: RequestTiming | None = None) -> None:
        """A response is ready: queue it, and any later ones that were waiting for it. An
        empty frame (a request that gets no answer) still goes through the writer, so the
        request counts as answered once everything before it is written."""
        if timing is not None:
            timing.answered = trio.current_time()
        if seq != self._next_to_send:
            self._finished[seq] = (frame, timing)
            return
        writer = self.writer
        writer.put(frame, counted=True)
        self._unsent.append(timing)
        seq += 1
        finished = self._finished
        while finished:
            waiting = finished.pop(seq, None)
            if waiting is None:
                break
            writer.put(waiting[0], counted=True)
            self._unsent.append(waiting[1])
            seq += 1
        self._next_to_send = seq
        if self.client.closing_after_answer:
            writer.close_after_flush()

    def written(self, count: int) -> None:
        self.in_flight -= count
        # Responses are written in arrival order: these are the oldest requests'.
        self.queued.release(sum(self.sizes.popleft() for _ in range(count)))
        if self.reader_waiting:
            self.reader_waiting.unpark()
        now = trio.current_time()
        for _ in range(count):
            timing = self._unsent.popleft()
            if timing is not None:
                timing.sent = now
                if timing.on_sent is not None:
                    try:
                        timing.on_sent(timing)
                    except Exception:
                        log.exception("on_sent failed for a request from %s", self.client.peer_name)


class RpcServer:
    """Give `server.handle_connection` to `network.serve`.

    `handlers` maps api keys to `async def handler(request) -> body`; a handler answers an
    error by raising `RpcError`. Per connection, responses go out in the order requests
    arrived (Kafka's per-connection ordering). With `ordered=False` a connection's
    handlers run concurrently, at most `max_in_flight_per_connection` at once (reading
    pauses at the bound); with `ordered=True` they run one at a time in arrival order
    (ZooKeeper's per-session order). `max_queued_bytes` (above 0; default none) bounds the
    bytes of requests received and not yet answered across all connections, as Kafka's
    queued.max.request.bytes does: past it, connections stop reading (backpressure), each
    keeping one request in flight. Bad input never takes the server down: an unknown api
    key gets an `INVALID_REQUEST` response, a malformed frame or envelope closes that
    connection with one log line naming the peer and the reason.

    With `foreign_protocol`, a connection whose first frame that protocol claims speaks it
    for its whole life: its frames are parsed, dispatched to the protocol's own handlers and
    answered in its encoding, through the same pipeline (bounds, ordering) as msgpack ones.
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
        max_queued_bytes: int = -1,
        foreign_protocol: FrameProtocol | None = None,
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
        self._queued = _QueuedBytes(max_queued_bytes)
        self.foreign_protocol = foreign_protocol

    def __repr__(self) -> str:
        return f"<RpcServer {self.name}>"

    @property
    def queued_request_bytes(self) -> int:
        """About the bytes of the requests received and not yet answered, all connections."""
        return self._queued.used

    async def handle_connection(self, conn: MessageConnection) -> None:
        conn.max_frame_bytes = self.max_frame_bytes
        if self.foreign_protocol is not None:
            conn.claims_raw = self.foreign_protocol.claims
        writer = FrameWriter(conn)
        client = ServerConnection(conn, writer, max_frame_bytes=self.max_frame_bytes)
        pipeline = _Pipeline(client, writer, self._queued)
        self._call_hook(self._on_connect, client)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop, pipeline, nursery.cancel_scope)
                nursery.start_soon(self._read_loop, pipeline, nursery)
        finally:
            self._queued.waiting.discard(pipeline)
            self._queued.release(sum(pipeline.sizes))  # requests that will not be answered
            pipeline.sizes.clear()
            client.closed.set()
            self._call_hook(self._on_disconnect, client)
            with trio.CancelScope(shield=True):
                await conn.aclose()

    async def _write_loop(self, pipeline: _Pipeline, scope: trio.CancelScope) -> None:
        try:
            await pipeline.writer.run(pipeline.written)
        except ConnectionClosedError as exc:
            log.debug(
                "%s: connection from %s closed while writing: %s",
                self.name,
                pipeline.client.peer_name,
                exc,
            )
        scope.cancel()

    async def _read_loop(self, pipeline: _Pipeline, nursery: trio.Nursery) -> None:
        client = pipeline.client
        conn = client.connection
        limit = self.max_in_flight_per_connection
        foreign = self.foreign_protocol is not None
        try:
            while True:
                message = await conn.receive()
                if foreign and conn.raw:
                    self._dispatch_foreign(pipeline, message, nursery)  # type: ignore[arg-type]
                else:
                    self._dispatch(pipeline, message, nursery)
                while pipeline.in_flight >= limit or (
                    self._queued.exhausted and pipeline.in_flight > 0
                ):
                    self._queued.waiting.add(pipeline)
                    try:
                        await pipeline.reader_waiting.park()
                    finally:
                        self._queued.waiting.discard(pipeline)
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

    def _dispatch(self, pipeline: _Pipeline, message: object, nursery: trio.Nursery) -> None:
        api_key, api_version, correlation_id, client_id, body = parse_request(message)
        # The frame's size, as Kafka's memory pool counts a request's received bytes.
        seq = pipeline.admit(pipeline.client.connection.last_frame_bytes)
        handler = self.handlers.get(api_key)
        if handler is None:
            reason = f"unknown api key {api_key}"
            log.warning("%s: %s in a request from %s", self.name, reason, pipeline.client.peer_name)
            pipeline.complete(
                seq, encode_response(correlation_id, INVALID_REQUEST, {"error_message": reason})
            )
            return
        request = Request(
            api_key, api_version, correlation_id, client_id, body, pipeline.client,
            RequestTiming(trio.current_time()),
        )  # fmt: skip
        self._enqueue(pipeline, (seq, handler, request, None), nursery)

    def _dispatch_foreign(self, pipeline: _Pipeline, frame: bytes, nursery: trio.Nursery) -> None:
        protocol = self.foreign_protocol
        assert protocol is not None  # only a connection it claimed is raw
        pipeline.client.speaks_foreign_protocol = True
        api_key, api_version, correlation_id, client_id, body = protocol.parse_request(frame)
        seq = pipeline.admit(len(frame))
        request = Request(
            api_key, api_version, correlation_id, client_id, body, pipeline.client,
            RequestTiming(trio.current_time()),
        )  # fmt: skip
        handler = protocol.handlers.get(api_key)
        if handler is None:
            reason = f"unknown api key {api_key}"
            log.warning("%s: %s in a request from %s", self.name, reason, pipeline.client.peer_name)
            pipeline.complete(
                seq, protocol.encode_error(request, UNSUPPORTED_VERSION, reason) or b""
            )
            return
        self._enqueue(pipeline, (seq, handler, request, protocol), nursery)

    def _enqueue(self, pipeline: _Pipeline, work: _Work, nursery: trio.Nursery) -> None:
        pipeline.work.append(work)
        # Hand the work to an idle worker, or start one; workers live as long as the
        # connection, so a steady stream of requests spawns no tasks.
        if not pipeline.idle_workers.unpark() and pipeline.workers < self._max_workers:
            pipeline.workers += 1
            nursery.start_soon(self._worker, pipeline)

    async def _worker(self, pipeline: _Pipeline) -> None:
        work = pipeline.work
        while True:
            while work:
                seq, handler, request, protocol = work.popleft()
                timing = request.timing
                if timing is not None:
                    timing.started = trio.current_time()
                if protocol is None:
                    frame = await self._answer(handler, request)
                else:
                    frame = await self._answer_foreign(protocol, handler, request)
                pipeline.complete(seq, frame, timing)
            await pipeline.idle_workers.park()

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

    async def _answer_foreign(
        self, protocol: FrameProtocol, handler: Handler, request: Request
    ) -> bytes:
        """As `_answer`, in the second protocol's encoding (b"": no response is sent)."""
        try:
            body = await handler(request)
        except RpcError as exc:
            return self._encode_foreign_error(protocol, request, exc.error_code, exc.message)
        except Exception as exc:
            log.exception(
                "%s: %s handler for api key %d failed on a request from %s",
                self.name,
                protocol.name,
                request.api_key,
                request.connection.peer_name,
            )
            reason = f"{type(exc).__name__}: {exc}"
            return self._encode_foreign_error(protocol, request, UNKNOWN_SERVER_ERROR, reason)
        try:
            return protocol.encode_response(request, body) or b""
        except Exception as exc:
            reason = f"{protocol.name} response to api key {request.api_key} cannot be sent: {exc}"
            log.error("%s: %s (request from %s)", self.name, reason, request.connection.peer_name)
            return self._encode_foreign_error(protocol, request, UNKNOWN_SERVER_ERROR, reason)

    def _encode_foreign_error(
        self, protocol: FrameProtocol, request: Request, error_code: int, message: str
    ) -> bytes:
        try:
            return protocol.encode_error(request, error_code, message) or b""
        except Exception:
            # Nothing can be said in this protocol: close rather than leave the client
            # waiting for an answer that never comes.
            log.exception(
                "%s: cannot encode a %s error response; closing the connection from %s",
                self.name,
                protocol.name,
                request.connection.peer_name,
            )
            request.connection.close()
            return b""

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
