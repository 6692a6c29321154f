"""The session table: ids, passwords, negotiated timeouts and expiry deadlines. Pure: the
server passes `now` in (Trio's clock) and asks which sessions are due."""

from __future__ import annotations

import random

import attrs

from zkstub._errors import SessionExpiredError


@attrs.define
class Session:
    session_id: int
    password: bytes
    timeout: float  # negotiated, seconds
    deadline: float


@attrs.define
class SessionTable:
    tick_time: float
    rng: random.Random
    server_id: int = 1
    sessions: dict[int, Session] = attrs.field(factory=dict)
    _next_id: int = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        # ZooKeeper's initial session id: server id in the top byte, time-derived below; here
        # the time part comes from the injected rng so a seed gives the same ids.
        self._next_id = (self.server_id << 56) | (self.rng.getrandbits(40) << 8)

    def negotiate(self, requested: float) -> float:
        """ZooKeeper clamps a requested timeout to [2, 20] ticks."""
        return min(max(requested, 2 * self.tick_time), 20 * self.tick_time)

    def create(self, requested_timeout: float, now: float) -> Session:
        self._next_id += 1
        timeout = self.negotiate(requested_timeout)
        session = Session(self._next_id, self.rng.randbytes(16), timeout, now + timeout)
        self.sessions[session.session_id] = session
        return session

    @property
    def last_id(self) -> int:
        return self._next_id

    def reserve(self, session_id: int) -> None:
        """Never hands out `session_id` or a lower one again (ids of recovered history)."""
        self._next_id = max(self._next_id, session_id)

    def restore(self, session_id: int, password: bytes, timeout: float, now: float) -> Session:
        """A session recovered from the data directory: it lives one more timeout from
        `now`, so a client that reconnects in time keeps it (and its ephemerals)."""
        self._next_id = max(self._next_id, session_id)
        session = Session(session_id, password, timeout, now + timeout)
        self.sessions[session_id] = session
        return session

    def revalidate(self, session_id: int, password: bytes, now: float) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.password != password:
            raise SessionExpiredError(f"session 0x{session_id:x} has expired")
        self.touch(session_id, now)
        return session

    def touch(self, session_id: int, now: float) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.deadline = now + session.timeout

    def due(self, now: float) -> list[int]:
        return sorted(sid for sid, s in self.sessions.items() if s.deadline <= now)

    def remove(self, session_id: int) -> Session | None:
        return self.sessions.pop(session_id, None)
