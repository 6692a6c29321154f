"""The real network: frames over trio TCP streams, optionally in TLS (`trio.SSLStream`)."""

from __future__ import annotations

import logging
import socket
import ssl

import attrs
import trio

from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address, MessageConnection, run_handler
from transport._errors import ConnectError
from transport._network import ConnectionHandler, Listener

__all__ = ["DEFAULT_HOST", "TcpListener", "TcpNetwork", "TlsMessageConnection"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
# A TLS connection's close_notify is sent within this, else the socket is closed without
# it: a peer that stopped reading must not hold a closing connection open.
TLS_CLOSE_TIMEOUT = 1.0


class TlsMessageConnection(MessageConnection):
    """A `MessageConnection` over TLS, with what its handshake established."""

    def __init__(self, stream: trio.SSLStream, **kwargs: object) -> None:
        super().__init__(_BoundedClose(stream), **kwargs)  # type: ignore[arg-type]
        # The DER certificate the peer presented (None: it presented none).
        self.peer_certificate: bytes | None = stream.getpeercert(binary_form=True)
        self.tls_version: str | None = stream.version()
        self.cipher: str | None = (stream.cipher() or (None,))[0]


class _BoundedClose:
    """A `trio.SSLStream` whose failures say what TLS said (a peer's alert: "tlsv13 alert
    certificate required") and whose `aclose` gives up on the close_notify after
    TLS_CLOSE_TIMEOUT (SSLStream then closes the socket without it)."""

    def __init__(self, stream: trio.SSLStream) -> None:
        self._stream = stream

    async def send_all(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except trio.BrokenResourceError as exc:
            raise trio.BrokenResourceError(f"TLS: {_tls_failure(exc)}") from exc

    async def receive_some(self, max_bytes: int) -> bytes:
        try:
            return await self._stream.receive_some(max_bytes)
        except trio.BrokenResourceError as exc:
            raise trio.BrokenResourceError(f"TLS: {_tls_failure(exc)}") from exc

    async def aclose(self) -> None:
        with trio.move_on_after(TLS_CLOSE_TIMEOUT):
            await self._stream.aclose()
            return
        await trio.aclose_forcefully(self._stream.transport_stream)


@attrs.frozen
class TcpListener:
    address: Address


@attrs.frozen
class TcpNetwork:
    """trio TCP with TCP_NODELAY. `serve` binds 127.0.0.1 when the address's host is empty
    (or None), so nothing listens beyond loopback unless asked to.

    With `ssl_context` (`with_tls(context)`), every connection is TLS: `serve` is the
    server side of the handshake (a `ssl.PROTOCOL_TLS_SERVER` context), `connect` the
    client side (a `ssl.PROTOCOL_TLS_CLIENT` one, which checks the certificate against
    the address's host when its `check_hostname` is set). The handshake completes before a
    connection is handed out, within `connect_timeout`; a failed one is a `ConnectError`
    when connecting, and one log line when serving."""

    connect_timeout: float = 10.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    node_name: str | None = None
    ssl_context: ssl.SSLContext | None = attrs.field(default=None, repr=False)

    def node(self, name: str) -> TcpNetwork:
        return attrs.evolve(self, node_name=name)

    def with_tls(self, context: ssl.SSLContext | None) -> TcpNetwork:
        """This network with every connection in TLS by `context` (None: plain TCP)."""
        return attrs.evolve(self, ssl_context=context)

    async def serve(
        self,
        address: Address,
        handler: ConnectionHandler,
        *,
        task_status: trio.TaskStatus[Listener] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, port = address
        listeners = await trio.open_tcp_listeners(port, host=host or DEFAULT_HOST)
        bound = _address_of(listeners[0].socket.getsockname())

        async def on_stream(stream: trio.SocketStream) -> None:
            try:
                if self.ssl_context is not None:
                    conn = await self._accept_tls(stream, self.ssl_context)
                    if conn is None:
                        return
                else:
                    conn = self._wrap(stream)
            except OSError as exc:  # reset between accept and here
                log.info("dropping a connection reset before it was served: %s", exc)
                await stream.aclose()
                return
            await run_handler(handler, conn, log)

        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, on_stream, listeners)
            log.debug("%s listening on %s:%d", self.node_name or "tcp", *bound)
            task_status.started(TcpListener(bound))

    async def connect(
        self,
        address: Address,
        *,
        timeout: float | None = None,
    ) -> MessageConnection:
        host, port = address
        limit = self.connect_timeout if timeout is None else timeout
        try:
            with trio.fail_after(limit):
                stream = await trio.open_tcp_stream(host, port)
                if self.ssl_context is not None:
                    return await self._handshake_as_client(stream, host, port, self.ssl_context)
        except trio.TooSlowError:
            raise ConnectError(f"timed out connecting to {host}:{port} after {limit}s") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        return self._wrap(stream)

    async def _handshake_as_client(
        self, stream: trio.SocketStream, host: str, port: int, context: ssl.SSLContext
    ) -> MessageConnection:
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        tls = trio.SSLStream(stream, context, server_hostname=host)
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:
            await _send_alert(tls, stream)
            await trio.aclose_forcefully(stream)
            raise ConnectError(
                f"TLS handshake with {host}:{port} failed: {_tls_failure(exc)}"
            ) from exc
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return self._wrap_tls(tls, stream)

    async def _accept_tls(
        self, stream: trio.SocketStream, context: ssl.SSLContext
    ) -> MessageConnection | None:
        """The TLS connection once the handshake completed; None (logged, closed) when it
        failed or took longer than `connect_timeout`."""
        peer = _address_of(stream.socket.getpeername())
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        tls = trio.SSLStream(stream, context, server_side=True)
        failure = None
        with trio.move_on_after(self.connect_timeout) as scope:
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError as exc:
                failure = _tls_failure(exc)
                await _send_alert(tls, stream)
        if scope.cancelled_caught:
            failure = f"no handshake within {self.connect_timeout:g}s"
        if failure is not None:
            log.info("TLS handshake with %s:%d failed: %s", *peer, failure)
            await trio.aclose_forcefully(stream)
            return None
        return self._wrap_tls(tls, stream)

    def _wrap_tls(self, tls: trio.SSLStream, stream: trio.SocketStream) -> MessageConnection:
        peer = _address_of(stream.socket.getpeername())
        return TlsMessageConnection(
            tls,
            local_address=_address_of(stream.socket.getsockname()),
            peer_address=peer,
            peer_name=f"{peer[0]}:{peer[1]}",
            max_frame_bytes=self.max_frame_bytes,
        )

    def _wrap(self, stream: trio.SocketStream) -> MessageConnection:
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        peer = _address_of(stream.socket.getpeername())
        return MessageConnection(
            stream,
            local_address=_address_of(stream.socket.getsockname()),
            peer_address=peer,
            peer_name=f"{peer[0]}:{peer[1]}",
            max_frame_bytes=self.max_frame_bytes,
        )


def _address_of(sockaddr: tuple) -> Address:
    return (sockaddr[0], sockaddr[1])


async def _send_alert(tls: trio.SSLStream, stream: trio.SocketStream) -> None:
    """Sends the alert OpenSSL wrote when the handshake failed, so that the peer learns why
    ("tlsv13 alert certificate required") instead of seeing the connection drop: a broken
    `trio.SSLStream` keeps it in its outgoing buffer, unsent."""
    outgoing = getattr(tls, "_outgoing", None)
    if not isinstance(outgoing, ssl.MemoryBIO) or not outgoing.pending:
        return
    with trio.move_on_after(TLS_CLOSE_TIMEOUT):
        try:
            await stream.send_all(outgoing.read())
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


def _tls_failure(exc: BaseException) -> str:
    """What went wrong in a handshake, as OpenSSL says it (trio wraps it)."""
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return str(cause or exc) or type(exc).__name__
