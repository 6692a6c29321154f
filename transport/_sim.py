"""The simulated network: in-memory connections between named nodes, with seeded latency,
drops, delays, partitions, one-way blocks and node crashes.

Every random choice comes from the network's own `random.Random(seed)`, drawn in the order
the (pinned) Trio scheduler runs the senders, so one seed gives one delivery history. Ties
are broken by a per-network sequence number, never by object identity.
"""

from __future__ import annotations

import errno
import logging
import math
import random
from collections.abc import Callable, Iterable

import attrs
import trio

from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address, MessageConnection, run_handler
from transport._errors import ConnectError
from transport._network import ConnectionHandler, Listener
from transport._sim_stream import Chunk, Pipe, SimLink, SimStream

__all__ = ["ANONYMOUS_NODE", "SimListener", "SimNetwork"]

log = logging.getLogger(__name__)

ANONYMOUS_NODE = "client"  # where connections opened on the root view (not .node(n)) come from
_FIRST_LISTEN_PORT = 10000
_FIRST_EPHEMERAL_PORT = 40000


def _check_range(name: str, low: float, high: float) -> tuple[float, float]:
    if not (0 <= low <= high) or math.isinf(high):
        raise ValueError(
            f"{name} must be (low, high) with 0 <= low <= high < inf, got ({low}, {high})"
        )
    return (float(low), float(high))


def _check_probability(name: str, p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
    return float(p)


def _names(group: str | Iterable[str]) -> list[str]:
    return [group] if isinstance(group, str) else sorted(group)


@attrs.define(eq=False)
class SimListener:
    address: Address
    _handler: ConnectionHandler
    _nursery: trio.Nursery
    stopped: trio.Event = attrs.field(factory=trio.Event)

    def accept(self, conn: MessageConnection) -> None:
        self._nursery.start_soon(run_handler, self._handler, conn, log)


@attrs.define(eq=False)
class _Core:
    """State shared by every view of one SimNetwork; implements `SimFabric`."""

    rng: random.Random
    latency: tuple[float, float]
    drop_rate: float
    delay_rate: float
    extra_delay: tuple[float, float]
    connect_timeout: float
    max_frame_bytes: int
    trace: list[tuple] | None
    link_latency: dict[tuple[str, str], tuple[float, float]] = attrs.field(factory=dict)
    blocked: set[tuple[str, str]] = attrs.field(factory=set)
    isolated: set[str] = attrs.field(factory=set)
    listeners: dict[Address, SimListener] = attrs.field(factory=dict)
    links: dict[int, SimLink] = attrs.field(factory=dict)
    seq: int = 0
    next_link_id: int = 1
    next_listen_port: int = _FIRST_LISTEN_PORT
    next_ephemeral_port: int = _FIRST_EPHEMERAL_PORT
    faults_changed: trio.Event = attrs.field(factory=trio.Event)

    # -- decisions ---------------------------------------------------------------------

    def is_blocked(self, src: str, dst: str) -> bool:
        if src == dst:
            return False  # a node always reaches itself (loopback)
        return src in self.isolated or dst in self.isolated or (src, dst) in self.blocked

    def draw_latency(self, src: str, dst: str) -> float:
        low, high = self.link_latency.get((src, dst), self.latency)
        return self.rng.uniform(low, high)

    def record(self, *event: object) -> None:
        if self.trace is not None:
            self.trace.append((round(trio.current_time(), 9), *event))

    # -- SimFabric ------------------------------------------------------------------------

    def transmit(self, link: SimLink, pipe: Pipe, data: bytes | None) -> None:
        now = trio.current_time()
        self.seq += 1
        due = now + self.draw_latency(pipe.src, pipe.dst)
        if self.delay_rate and self.rng.random() < self.delay_rate:
            due += self.rng.uniform(*self.extra_delay)
        due = max(due, pipe.last_due)
        pipe.last_due = due
        if data is None:
            pipe.fin_due = due
        elif self.drop_rate and self.rng.random() < self.drop_rate:
            # A stream loses connections, not single messages.
            self.record("drop", self.seq, pipe.src, pipe.dst, link.id)
            link.reset(due, f"connection reset (simulated drop on {pipe.src} -> {pipe.dst})")
            return
        if not pipe.reader_closed:
            pipe.chunks.append(Chunk(due, self.seq, data))
            pipe.notify()

    def delivered(self, link: SimLink, pipe: Pipe, seq: int, nbytes: int | None) -> None:
        self.record(
            "deliver", seq, pipe.src, pipe.dst, link.id, "EOF" if nbytes is None else nbytes
        )

    def end_closed(self, link: SimLink) -> None:
        link.open_ends -= 1
        if link.open_ends <= 0:
            self.links.pop(link.id, None)

    # -- faults ---------------------------------------------------------------------------

    def change_faults(self, change: Callable[[], object]) -> None:
        """Applies `change` to the fault tables, then lets held bytes flow (after a fresh
        latency) on every pipe whose link is no longer blocked, and wakes every waiter."""
        pipes = [p for link in self.links.values() for p in (link.upstream, link.downstream)]
        was_blocked = [self.is_blocked(p.src, p.dst) for p in pipes]
        change()
        if pipes:
            now = trio.current_time()
            for pipe, was in zip(pipes, was_blocked, strict=True):
                if was and not self.is_blocked(pipe.src, pipe.dst):
                    pipe.resume_at = max(
                        pipe.resume_at, now + self.draw_latency(pipe.src, pipe.dst)
                    )
                pipe.notify()
        self.faults_changed.set()
        self.faults_changed = trio.Event()

    def kill_node(self, node: str) -> None:
        for address in sorted(a for a in self.listeners if a[0] == node):
            self.listeners.pop(address).stopped.set()
        doomed = [link for link in self.links.values() if link.involves(node)]
        if doomed:  # (links exist only inside trio.run, where there is a clock)
            now = trio.current_time()
            for link in doomed:
                link.reset(now, f"connection reset: node {node} was killed")
            self.record("kill", node)

    # -- connections ----------------------------------------------------------------------

    def free_address(self, host: str, port: int) -> Address:
        """`(host, port)`, with a free port for port 0; OSError if it is taken."""
        if port == 0:
            while (host, self.next_listen_port) in self.listeners:
                self.next_listen_port += 1
            port = self.next_listen_port
            self.next_listen_port += 1
        if (host, port) in self.listeners:
            raise OSError(errno.EADDRINUSE, f"address already in use: {host}:{port}")
        return (host, port)

    def listen(
        self, address: Address, handler: ConnectionHandler, nursery: trio.Nursery
    ) -> SimListener:
        listener = SimListener(address, handler, nursery)
        self.listeners[address] = listener
        return listener

    def unlisten(self, listener: SimListener) -> None:
        if self.listeners.get(listener.address) is listener:
            del self.listeners[listener.address]

    async def connect(
        self, origin: str, address: Address, limit: float | None
    ) -> MessageConnection:
        host, port = address
        limit = self.connect_timeout if limit is None else limit
        with trio.move_on_after(limit):
            while self.is_blocked(origin, host) or self.is_blocked(host, origin):
                await self.faults_changed.wait()
            await trio.sleep(self.draw_latency(origin, host))  # the SYN's trip
            return await self._accept(origin, host, port)
        self.record("connect-timeout", origin, host, port)
        raise ConnectError(f"timed out connecting to {host}:{port} after {limit}s (link blocked)")

    async def _accept(self, origin: str, host: str, port: int) -> MessageConnection:
        listener = self.listeners.get((host, port))
        if listener is None:
            self.record("refused", origin, host, port)
            await trio.sleep(self.draw_latency(host, origin))
            raise ConnectError(f"connection refused by {host}:{port} (nothing listens there)")
        link = SimLink(
            id=self.next_link_id,
            fabric=self,
            client_node=origin,
            server_node=host,
            upstream=Pipe(origin, host),
            downstream=Pipe(host, origin),
        )
        self.next_link_id += 1
        self.links[link.id] = link
        client_address = (origin, self.next_ephemeral_port)
        self.next_ephemeral_port += 1
        self.record("connect", origin, host, port, link.id)
        server_side = MessageConnection(
            SimStream(link, link.downstream, link.upstream),
            local_address=(host, port),
            peer_address=client_address,
            peer_name=origin,
            max_frame_bytes=self.max_frame_bytes,
        )
        client_side = MessageConnection(
            SimStream(link, link.upstream, link.downstream),
            local_address=client_address,
            peer_address=(host, port),
            peer_name=host,
            max_frame_bytes=self.max_frame_bytes,
        )
        listener.accept(server_side)
        try:
            await trio.sleep(self.draw_latency(host, origin))  # the SYN-ACK's trip
        except BaseException:
            with trio.CancelScope(shield=True):
                await client_side.aclose()
            raise
        return client_side


class SimNetwork:
    """An in-memory network whose behaviour is decided by `seed` alone.

    Nodes are names: `network.node("broker-1")` is the network as seen from that node; a
    server's address is `(node name, port)`. Connections carry bytes through the same
    framing as TCP, in order, each chunk arriving after a latency drawn from `latency`
    (or the link's own, see `set_latency`). Faults: `partition`, `block` (one way),
    `isolate`, `heal`, `set_drop_rate` (a drop breaks the whole connection, both ends see
    `ConnectionClosedError`), `set_delay` (occasional extra delay), `kill_node` (a crashed
    process). Bytes on a blocked link are held, not lost, and flow after the block lifts.
    With `trace=True`, `network.trace` records every connect, delivery and drop.
    """

    def __init__(
        self,
        seed: int,
        *,
        latency: tuple[float, float] = (0.0005, 0.002),
        drop_rate: float = 0.0,
        delay_rate: float = 0.0,
        extra_delay: tuple[float, float] = (0.01, 0.1),
        connect_timeout: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        trace: bool = False,
    ) -> None:
        self.seed = seed
        self.node_name: str | None = None
        self._core = _Core(
            rng=random.Random(seed),
            latency=_check_range("latency", *latency),
            drop_rate=_check_probability("drop_rate", drop_rate),
            delay_rate=_check_probability("delay_rate", delay_rate),
            extra_delay=_check_range("extra_delay", *extra_delay),
            connect_timeout=connect_timeout,
            max_frame_bytes=max_frame_bytes,
            trace=[] if trace else None,
        )

    def __repr__(self) -> str:
        return f"<SimNetwork seed={self.seed} node={self.node_name!r}>"

    # -- the Network interface --------------------------------------------------------

    def node(self, name: str) -> SimNetwork:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a node name must be a non-empty str, got {name!r}")
        view = object.__new__(SimNetwork)
        view.seed = self.seed
        view.node_name = name
        view._core = self._core
        return view

    async def serve(
        self,
        address: Address,
        handler: ConnectionHandler,
        *,
        task_status: trio.TaskStatus[Listener] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, port = address
        if self.node_name is not None and host != self.node_name:
            raise ValueError(
                f"node {self.node_name!r} cannot serve on {host}:{port}: in SimNetwork the "
                "host of a server address is the serving node's name"
            )
        core = self._core
        bound = core.free_address(host, port)
        async with trio.open_nursery() as nursery:
            listener = core.listen(bound, handler, nursery)
            try:
                task_status.started(listener)
                await listener.stopped.wait()
                nursery.cancel_scope.cancel()  # the node crashed: its handlers die with it
            finally:
                core.unlisten(listener)

    async def connect(
        self,
        address: Address,
        *,
        timeout: float | None = None,
    ) -> MessageConnection:
        return await self._core.connect(self.node_name or ANONYMOUS_NODE, address, timeout)

    # -- faults -------------------------------------------------------------------------

    def partition(self, group_a: str | Iterable[str], group_b: str | Iterable[str]) -> None:
        """Blocks both directions between every node of `group_a` and every node of
        `group_b` (until `heal`, or `unblock` per direction)."""
        pairs = [(a, b) for a in _names(group_a) for b in _names(group_b) if a != b]
        self._core.change_faults(
            lambda: self._core.blocked.update(pairs + [(b, a) for a, b in pairs])
        )

    def block(self, src: str, dst: str) -> None:
        """Blocks one direction: bytes from `src` to `dst` are held."""
        self._core.change_faults(lambda: self._core.blocked.add((src, dst)))

    def unblock(self, src: str, dst: str) -> None:
        self._core.change_faults(lambda: self._core.blocked.discard((src, dst)))

    def isolate(self, node: str) -> None:
        """Cuts `node` off from every other node, both ways."""
        self._core.change_faults(lambda: self._core.isolated.add(node))

    def rejoin(self, node: str) -> None:
        """Ends `isolate(node)` (other partitions and blocks stay)."""
        self._core.change_faults(lambda: self._core.isolated.discard(node))

    def heal(self) -> None:
        """Lifts every partition, block and isolation."""

        def clear() -> None:
            self._core.blocked.clear()
            self._core.isolated.clear()

        self._core.change_faults(clear)

    def is_blocked(self, src: str, dst: str) -> bool:
        return self._core.is_blocked(src, dst)

    def kill_node(self, name: str) -> None:
        """A crashed process: every connection of `name` is reset and its listeners stop
        (their `serve` tasks return, their handler tasks are cancelled)."""
        self._core.kill_node(name)

    def set_latency(
        self, low: float, high: float, *, src: str | None = None, dst: str | None = None
    ) -> None:
        """The one-way latency range, for every link, or (with `src` and `dst`) for the
        link from `src` to `dst` only."""
        value = _check_range("latency", low, high)
        if src is None and dst is None:
            self._core.latency = value
        elif src is not None and dst is not None:
            self._core.link_latency[(src, dst)] = value
        else:
            raise ValueError("set_latency needs both src and dst for a per-link latency")

    @property
    def latency(self) -> tuple[float, float]:
        return self._core.latency

    @property
    def drop_rate(self) -> float:
        return self._core.drop_rate

    @drop_rate.setter
    def drop_rate(self, p: float) -> None:
        self.set_drop_rate(p)

    def set_drop_rate(self, p: float) -> None:
        """Probability, per message sent, that the connection it travels on breaks."""
        self._core.drop_rate = _check_probability("drop_rate", p)

    @property
    def delay_rate(self) -> float:
        return self._core.delay_rate

    @delay_rate.setter
    def delay_rate(self, p: float) -> None:
        self.set_delay(p)

    def set_delay(self, rate: float, extra: tuple[float, float] | None = None) -> None:
        """Probability, per message, of an extra delay drawn from `extra`; the messages
        behind it on the same connection wait too (a stream keeps its order)."""
        self._core.delay_rate = _check_probability("delay_rate", rate)
        if extra is not None:
            self._core.extra_delay = _check_range("extra_delay", *extra)

    @property
    def connect_timeout(self) -> float:
        return self._core.connect_timeout

    @property
    def trace(self) -> list[tuple]:
        """What happened, in order: `(time, "connect"|"deliver"|"drop"|..., ...)`; empty
        unless the network was made with `trace=True`."""
        return self._core.trace if self._core.trace is not None else []
