"""The server's guard around each client connection: what one connection may cost.

- `maxClientCnxns` (ZooKeeper's name, default 60; 0 for no limit): connections from one
  address beyond it are closed on arrival, as ZooKeeper does ("Too many connections").
- `sessionless_timeout` (ZooKeeper's `zookeeper.nio.sessionlessCnxnTimeout`, 10 s): a
  connection that has no session and has sent nothing for that long is closed, so idle or
  half-open connections cannot hold file descriptors. A connection with a session lives as
  long as its session: it is closed at once when the session expires.
- `max_outbound_bytes` (zkstub's own; ZooKeeper has no bound): what the server has queued
  for a client and the client has not taken. A client that stops reading while watch
  events pile up is disconnected past it, instead of growing the server's memory.

Responses and pushes leave the RPC server's writer into `GuardedConnection`'s queue, which
one task drains into the socket; the queue's size in bytes is therefore exact, and the
order of frames (a watch event before the reply that shows its change) is kept.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

import transport

logger = logging.getLogger("zkstub.connections")

DEFAULT_MAX_CLIENT_CNXNS = 60
DEFAULT_SESSIONLESS_TIMEOUT = 10.0
DEFAULT_MAX_OUTBOUND_BYTES = 16 * 1024 * 1024


@attrs.define
class AddressCounts:
    """Open connections per client address, against `maxClientCnxns` (0: no limit)."""

    max_client_cnxns: int
    counts: dict[str, int] = attrs.field(factory=dict)

    def admit(self, host: str) -> bool:
        count = self.counts.get(host, 0)
        if self.max_client_cnxns and count >= self.max_client_cnxns:
            return False
        self.counts[host] = count + 1
        return True

    def release(self, host: str) -> None:
        count = self.counts.get(host, 0) - 1
        if count > 0:
            self.counts[host] = count
        else:
            self.counts.pop(host, None)


class GuardedConnection:
    """A `transport.MessageConnection` as the RPC server sees it: writes are queued here
    (bounded by `max_outbound_bytes`) and sent by `run_sender`; `abort()` ends the
    connection at once, whatever is queued; `last_received` is when a message last came."""

    def __init__(
        self, connection: transport.MessageConnection, *, max_outbound_bytes: int,
        scope: trio.CancelScope, linger: float,
    ) -> None:  # fmt: skip
        self._connection = connection
        self._limit = max_outbound_bytes
        self._scope = scope
        self._linger = linger
        self._queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self._lot = trio.lowlevel.ParkingLot()
        self._drained = trio.lowlevel.ParkingLot()
        self.aborted = False
        self.last_received = trio.current_time()
        self.server_connection: transport.ServerConnection | None = None
        self._put_back: deque[object] = deque()
        self.received = 0  # messages, and frames sent, for the four-letter words' reports
        self.sent = 0
        self.session_id: int | None = None  # of a jute connection (see `_jute_server`)

    # What RpcServer and its ServerConnection read of a MessageConnection.
    @property
    def peer_name(self) -> str:
        return self._connection.peer_name

    @property
    def peer_address(self) -> transport.Address:
        return self._connection.peer_address

    @property
    def max_frame_bytes(self) -> int:
        return self._connection.max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self._connection.max_frame_bytes = value

    @property
    def claims_raw(self) -> Callable[[bytes], bool] | None:
        return self._connection.claims_raw

    @claims_raw.setter
    def claims_raw(self, value: Callable[[bytes], bool] | None) -> None:
        self._connection.claims_raw = value

    @property
    def claims_word(self) -> Callable[[bytes], bool] | None:
        return self._connection.claims_word

    @claims_word.setter
    def claims_word(self, value: Callable[[bytes], bool] | None) -> None:
        self._connection.claims_word = value

    @property
    def raw(self) -> bool:
        return self._connection.raw

    @property
    def word(self) -> bool:
        return self._connection.word

    @property
    def last_frame_bytes(self) -> int:
        """The body size of the frame last received (a message put back keeps its own:
        nothing is read after it until it is taken)."""
        return self._connection.last_frame_bytes

    def put_back(self, message: object) -> None:
        """Makes `message` the next one `receive` returns: the server reads a connection's
        first message to learn its protocol, then hands the connection, message and all,
        to that protocol's server."""
        self._put_back.append(message)

    async def receive(self) -> object:
        if self._put_back:
            return self._put_back.popleft()
        message = await self._connection.receive()
        self.last_received = trio.current_time()
        self.received += 1
        return message

    async def send_frames(self, frames: Iterable[bytes]) -> None:
        """Queues the frames (never blocks); past `max_outbound_bytes` the client is too
        slow and the connection is aborted."""
        await trio.lowlevel.checkpoint()
        for frame in frames:
            self._queue.append(frame)
            self.queued_bytes += len(frame)
            self.sent += 1
        if self.queued_bytes > self._limit:
            self.abort(
                f"{self.queued_bytes} bytes queued for it and not taken, more than "
                f"max_outbound_bytes ({self._limit})"
            )
        elif self._lot:
            self._lot.unpark()

    async def drain(self) -> None:
        """Returns once everything queued so far was handed to the socket."""
        while self._queue or self.queued_bytes:
            await self._drained.park()

    async def run_sender(self) -> None:
        """Sends what is queued, in order; aborts the connection when the peer is gone."""
        try:
            while True:
                while not self._queue:
                    self._drained.unpark_all()
                    await self._lot.park()
                batch = list(self._queue)
                self._queue.clear()
                try:
                    await self._connection.send_frames(batch)
                finally:
                    self.queued_bytes -= sum(len(frame) for frame in batch)
        except transport.ConnectionClosedError as error:
            logger.debug("connection from %s closed while writing: %s", self.peer_name, error)
            self._scope.cancel()

    def abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Ends the connection now, dropping what is queued for it."""
        if not self.aborted:
            self.aborted = True
            logger.log(level, "Closing the connection from %s: %s", self.peer_name, reason)
        self.queued_bytes -= sum(len(frame) for frame in self._queue)
        self._queue.clear()
        self._scope.cancel()

    async def aclose(self) -> None:
        """Sends what is queued (for at most `linger` seconds, unless aborted), then
        closes."""
        if not self.aborted:
            with trio.move_on_after(self._linger):
                await self.drain()
        await self._connection.aclose()


Serve = Callable[[GuardedConnection], Awaitable[None]]


@attrs.define
class ConnectionGuard:
    """Wraps an RPC server's `handle_connection` with the limits above; give `handle` to
    `network.serve`."""

    serve: Serve
    max_client_cnxns: int = DEFAULT_MAX_CLIENT_CNXNS
    sessionless_timeout: float = DEFAULT_SESSIONLESS_TIMEOUT
    max_outbound_bytes: int = DEFAULT_MAX_OUTBOUND_BYTES
    linger: float = 1.0
    has_session: Callable[[GuardedConnection], bool] = lambda _: False
    _counts: AddressCounts = attrs.field(init=False)
    live: set[GuardedConnection] = attrs.field(init=False, factory=set)  # for `cons`, `stat`

    def __attrs_post_init__(self) -> None:
        self._counts = AddressCounts(self.max_client_cnxns)

    @property
    def open_connections(self) -> dict[str, int]:
        """Connections being served, per client address."""
        return dict(self._counts.counts)

    async def handle(self, connection: transport.MessageConnection) -> None:
        host = str(connection.peer_address[0])
        if not self._counts.admit(host):
            logger.warning("Too many connections from %s - max is %d", host, self.max_client_cnxns)
            return  # the network closes it
        try:
            with trio.CancelScope() as scope:
                guarded = GuardedConnection(
                    connection, max_outbound_bytes=self.max_outbound_bytes, scope=scope,
                    linger=self.linger,
                )  # fmt: skip
                self.live.add(guarded)
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(guarded.run_sender)
                        nursery.start_soon(self._watch_sessionless, guarded)
                        await self.serve(guarded)
                        nursery.cancel_scope.cancel()
                finally:
                    self.live.discard(guarded)
        finally:
            self._counts.release(host)

    async def _watch_sessionless(self, guarded: GuardedConnection) -> None:
        """ZooKeeper's sessionless connection expiry: a connection with no session that
        has been silent for `sessionless_timeout` is closed."""
        timeout = self.sessionless_timeout
        while True:
            await trio.sleep_until(guarded.last_received + timeout)
            now = trio.current_time()
            if now >= guarded.last_received + timeout and not self.has_session(guarded):
                guarded.abort(f"no session and nothing received for {timeout:g} s")
                return
            if now >= guarded.last_received + timeout:
                await trio.sleep(timeout)  # a session holds it; look again later
