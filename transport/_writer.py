"""A connection's single writer: one task drains a queue of encoded frames and sends them
joined, so a burst of N small messages costs one `send_all`, not N."""

from __future__ import annotations

from collections.abc import Callable

import trio

from transport._connection import MessageConnection

__all__ = ["FrameWriter"]


class FrameWriter:
    """`put` never blocks; `run` is the writer task.

    `put(frame, counted=True)` marks frames whose sending `run` reports through `on_sent`
    (a server counts responses written, to bound what a connection has in flight).
    """

    def __init__(self, conn: MessageConnection) -> None:
        self._conn = conn
        self._frames: list[bytes] = []
        self._counted = 0
        self._lot = trio.lowlevel.ParkingLot()
        self.closing = False

    @property
    def queued(self) -> int:
        return len(self._frames)

    def put(self, frame: bytes, *, counted: bool = False) -> None:
        self._frames.append(frame)
        if counted:
            self._counted += 1
        if self._lot:
            self._lot.unpark()

    def close_after_flush(self) -> None:
        """`run` returns once everything queued so far is sent."""
        self.closing = True
        if self._lot:
            self._lot.unpark()

    async def run(self, on_sent: Callable[[int], None] | None = None) -> None:
        """Sends until `close_after_flush` and an empty queue; raises
        `ConnectionClosedError` when the connection breaks."""
        while True:
            frames = self._frames
            if not frames:
                if self.closing:
                    return
                await self._lot.park()
                continue
            counted = self._counted
            self._frames = []
            self._counted = 0
            await self._conn.send_frames(frames)
            if on_sent is not None and counted:
                on_sent(counted)
