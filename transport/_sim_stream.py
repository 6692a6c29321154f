"""The simulated byte stream: two FIFO pipes with delivery times, read lazily.

No task carries bytes across: a sender stamps each chunk with the virtual time it arrives
(`SimFabric.transmit`), and the reader sleeps until the chunk at the head of its pipe is due.
Every decision (latency, drops, blocked links) is the fabric's; this module only waits.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Protocol

import attrs
import trio

__all__ = ["Chunk", "Pipe", "SimFabric", "SimLink", "SimStream"]


@attrs.define(eq=False, slots=True)
class Chunk:
    due: float  # virtual time the bytes reach the other end
    seq: int  # the network's send counter: a total order for traces
    data: bytes | None  # None: the sender closed (FIN)


@attrs.define(eq=False)
class Pipe:
    """One direction of a connection: bytes from node `src` to node `dst`, in order."""

    src: str
    dst: str
    chunks: deque[Chunk] = attrs.field(factory=deque)
    last_due: float = -math.inf  # chunks never overtake each other (a stream)
    resume_at: float = -math.inf  # set when a block lifts: held bytes flow from then on
    fin_due: float | None = None  # when the sender's close reaches the reader
    reader_closed: bool = False
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def notify(self) -> None:
        """Wakes the reader so it re-reads the pipe's state."""
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_change(self, deadline: float) -> None:
        with trio.move_on_at(deadline):
            await self._changed.wait()


class SimFabric(Protocol):
    """What a stream asks of its network (implemented by `SimNetwork`'s core)."""

    def transmit(self, link: SimLink, pipe: Pipe, data: bytes | None) -> None: ...

    def is_blocked(self, src: str, dst: str) -> bool: ...

    def delivered(self, link: SimLink, pipe: Pipe, seq: int, nbytes: int | None) -> None: ...

    def end_closed(self, link: SimLink) -> None: ...


@attrs.define(eq=False)
class SimLink:
    """One simulated connection between a client node and a server node."""

    id: int
    fabric: SimFabric
    client_node: str
    server_node: str
    upstream: Pipe  # client -> server
    downstream: Pipe  # server -> client
    reset_at: float | None = None
    reset_reason: str = ""
    open_ends: int = 2

    def involves(self, node: str) -> bool:
        return node in (self.client_node, self.server_node)

    def reset(self, at: float, reason: str) -> None:
        """Breaks the connection for both ends from virtual time `at` on."""
        if self.reset_at is not None and self.reset_at <= at:
            return
        self.reset_at = at
        self.reset_reason = reason
        self.upstream.notify()
        self.downstream.notify()


class SimStream:
    """One end of a `SimLink`, shaped like a trio stream (what `MessageConnection` wraps)."""

    def __init__(self, link: SimLink, outgoing: Pipe, incoming: Pipe) -> None:
        self._link = link
        self._out = outgoing
        self._in = incoming
        self._closed = False

    def _check_usable(self, now: float) -> None:
        if self._closed:
            raise trio.ClosedResourceError("this end of the connection was closed")
        link = self._link
        if link.reset_at is not None and now >= link.reset_at:
            raise trio.BrokenResourceError(link.reset_reason)

    async def send_all(self, data: bytes) -> None:
        await trio.lowlevel.checkpoint()
        now = trio.current_time()
        self._check_usable(now)
        peer_fin = self._in.fin_due
        if self._out.reader_closed and peer_fin is not None and now >= peer_fin:
            raise trio.BrokenResourceError("connection reset by peer (it closed its end)")
        if data:
            self._link.fabric.transmit(self._link, self._out, bytes(data))

    async def receive_some(self, max_bytes: int) -> bytes:
        await trio.lowlevel.checkpoint_if_cancelled()
        link = self._link
        pipe = self._in
        fabric = link.fabric
        while True:
            now = trio.current_time()
            self._check_usable(now)
            wake_at = math.inf if link.reset_at is None else link.reset_at
            if pipe.chunks:
                chunk = pipe.chunks[0]
                due = max(chunk.due, pipe.resume_at)
                if due > now:
                    wake_at = min(wake_at, due)
                elif not fabric.is_blocked(pipe.src, pipe.dst):
                    break
                # Due but the link is blocked: held until a fault change wakes us.
            await pipe.wait_for_change(wake_at)
        if chunk.data is None:
            # EOF stays at the head: every later read sees it too.
            if chunk.seq >= 0:
                fabric.delivered(link, pipe, chunk.seq, None)
                chunk.seq = -1
            data = b""
        elif len(chunk.data) <= max_bytes:
            pipe.chunks.popleft()
            data = chunk.data
            fabric.delivered(link, pipe, chunk.seq, len(data))
        else:
            data = chunk.data[:max_bytes]
            chunk.data = chunk.data[max_bytes:]
            fabric.delivered(link, pipe, chunk.seq, max_bytes)
        await trio.lowlevel.cancel_shielded_checkpoint()
        return data

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            link = self._link
            now = trio.current_time()
            if link.reset_at is None or now < link.reset_at:
                link.fabric.transmit(link, self._out, None)
            self._in.reader_closed = True
            self._in.chunks.clear()
            self._in.notify()
            link.fabric.end_closed(link)
        await trio.lowlevel.checkpoint()
