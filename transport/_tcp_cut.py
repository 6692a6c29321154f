"""Real TCP whose links between named nodes can be cut, for demos and fault drills on one
machine: a cut resets the connections between the two nodes and refuses new ones (a
firewall answering with resets), until `heal`. Unlike `SimNetwork`, nothing is held."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable

import attrs
import trio

from transport._connection import Address, MessageConnection
from transport._errors import ConnectError
from transport._network import ConnectionHandler, Listener
from transport._tcp import TcpNetwork

__all__ = ["CuttableTcpNetwork"]

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class _Links:
    """What every node's view shares: who listens where, what is cut, what is open."""

    owners: dict[Address, str] = attrs.field(factory=dict)
    cut: set[tuple[str, str]] = attrs.field(factory=set)
    # (from node, to node) -> the connections opened from one to the other
    open: dict[tuple[str, str], list[trio.SocketStream]] = attrs.field(factory=dict)


@attrs.frozen
class CuttableTcpNetwork:
    """`TcpNetwork` plus `partition(a, b)` / `heal()` between nodes named with `node()`.
    Connections made from an unnamed view are never cut."""

    tcp: TcpNetwork = attrs.field(factory=TcpNetwork)
    node_name: str | None = None
    shared: _Links = attrs.field(factory=_Links)  # the same for every node view

    def node(self, name: str) -> CuttableTcpNetwork:
        return attrs.evolve(self, tcp=self.tcp.node(name), node_name=name)

    async def serve(
        self,
        address: Address,
        handler: ConnectionHandler,
        *,
        task_status: trio.TaskStatus[Listener] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async def serve(*, task_status: trio.TaskStatus[Listener]) -> None:
            await self.tcp.serve(address, handler, task_status=task_status)

        async with trio.open_nursery() as nursery:
            listener = await nursery.start(serve)
            if self.node_name is not None:
                self.shared.owners[_canonical(listener.address)] = self.node_name
            try:
                task_status.started(listener)
                await trio.sleep_forever()
            finally:
                self.shared.owners.pop(_canonical(listener.address), None)

    async def connect(self, address: Address, *, timeout: float | None = None) -> MessageConnection:
        link = self._link_to(address)
        if link is not None and link in self.shared.cut:
            raise ConnectError(f"cannot connect to {address[0]}:{address[1]}: link {link} is cut")
        connection = await self.tcp.connect(address, timeout=timeout)
        if link is not None:
            streams = self.shared.open.setdefault(link, [])
            streams[:] = [s for s in streams if s.socket.fileno() != -1]
            streams.append(connection._stream)
        return connection

    def partition(self, group_a: str | Iterable[str], group_b: str | Iterable[str]) -> None:
        """Cuts both directions between every node of `group_a` and of `group_b`: their
        open connections are reset now and new ones refused until `heal`."""
        pairs = [(a, b) for a in _names(group_a) for b in _names(group_b) if a != b]
        for a, b in pairs:
            for link in ((a, b), (b, a)):
                self.shared.cut.add(link)
                for stream in self.shared.open.pop(link, []):
                    _reset(stream)
        log.info("cut %s", sorted(pairs))

    def heal(self) -> None:
        self.shared.cut.clear()
        log.info("healed every cut link")

    def _link_to(self, address: Address) -> tuple[str, str] | None:
        owner = self.shared.owners.get(_canonical(address))
        if self.node_name is None or owner is None:
            return None
        return (self.node_name, owner)


def _canonical(address: Address) -> Address:
    host, port = address
    return ("127.0.0.1" if host in ("", "localhost", None) else host, port)


def _names(group: str | Iterable[str]) -> list[str]:
    return [group] if isinstance(group, str) else list(group)


def _reset(stream: trio.SocketStream) -> None:
    """Both ends see the connection fail now (the reader on either side wakes up)."""
    try:
        stream.socket.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed
