"""The real network: frames over trio TCP streams."""

from __future__ import annotations

import logging
import socket

import attrs
import trio

from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address, MessageConnection, run_handler
from transport._errors import ConnectError
from transport._network import ConnectionHandler, Listener

__all__ = ["DEFAULT_HOST", "TcpListener", "TcpNetwork"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"


@attrs.frozen
class TcpListener:
    address: Address


@attrs.frozen
class TcpNetwork:
    """trio TCP with TCP_NODELAY. `serve` binds 127.0.0.1 when the address's host is empty
    (or None), so nothing listens beyond loopback unless asked to."""

    connect_timeout: float = 10.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    node_name: str | None = None

    def node(self, name: str) -> TcpNetwork:
        return attrs.evolve(self, node_name=name)

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
        except trio.TooSlowError:
            raise ConnectError(f"timed out connecting to {host}:{port} after {limit}s") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        return self._wrap(stream)

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
