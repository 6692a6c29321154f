"""The session table: ids, passwords, negotiated timeouts and expiry deadlines. Pure: the
server passes `now` in (Trio's clock) and asks which sessions are due."""

from __future__ import annotations

import math
import random

import attrs

from zkstub._errors import BadArgumentsError, SessionExpiredError


@attrs.define
class Session:
    session_id: int
    password: bytes
    timeout: float  # negotiated, seconds
    deadline: float


def _positive_or_none(_: object, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and not (_is_number(value) and 0 < value < math.inf):
        raise ValueError(f"{attribute.name} must be a positive number of seconds, got {value!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.define
class SessionTable:
    """`min_session_timeout` / `max_session_timeout` are ZooKeeper's minSessionTimeout /
    maxSessionTimeout (seconds here); None means ZooKeeper's default of 2 / 20 ticks."""

    tick_time: float
    rng: random.Random
    server_id: int = 1
    sessions: dict[int, Session] = attrs.field(factory=dict)
    min_session_timeout: float | None = attrs.field(default=None, validator=_positive_or_none)
    max_session_timeout: float | None = attrs.field(default=None, validator=_positive_or_none)
    _next_id: int = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if not (_is_number(self.tick_time) and 0 < self.tick_time < math.inf):
            raise ValueError(
                f"tick_time must be a positive number of seconds, got {self.tick_time!r}"
            )
        if self.min_timeout > self.max_timeout:
            raise ValueError(
                f"min_session_timeout ({self.min_timeout}) is above "
                f"max_session_timeout ({self.max_timeout})"
            )
        # ZooKeeper's initial session id: server id in the top byte, time-derived below; here
        # the time part comes from the injected rng so a seed gives the same ids.
        self._next_id = (self.server_id << 56) | (self.rng.getrandbits(40) << 8)

    @property
    def min_timeout(self) -> float:
        return 2 * self.tick_time if self.min_session_timeout is None else self.min_session_timeout

    @property
    def max_timeout(self) -> float:
        return 20 * self.tick_time if self.max_session_timeout is None else self.max_session_timeout

    def negotiate(self, requested: object) -> float:
        """ZooKeeper's processConnectRequest: the requested timeout clamped to
        [minSessionTimeout, maxSessionTimeout], so zero and negative ones get the minimum.
        On ZooKeeper's wire it is an int of milliseconds, which cannot be anything but a
        number: here a non-number, NaN or an infinity is refused (BadArgumentsError)."""
        if not _is_number(requested) or not math.isfinite(requested):  # type: ignore[arg-type]
            raise BadArgumentsError(
                f"session timeout must be a finite number of seconds, got {requested!r}"
            )
        return min(max(float(requested), self.min_timeout), self.max_timeout)  # type: ignore[arg-type]

    def create(self, requested_timeout: object, now: float) -> Session:
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
        # Negotiated again: a log written before timeouts were validated may hold NaN or
        # an infinity, and a session with either would never expire.
        if not _is_number(timeout) or not math.isfinite(timeout):
            timeout = self.max_timeout
        timeout = self.negotiate(timeout)
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

    def extend(self, seconds: float) -> None:
        """Every session's deadline `seconds` later: the server could hear nobody for that
        long (its one thread was busy), so no client's silence counts it."""
        for session in self.sessions.values():
            session.deadline += seconds

    def due(self, now: float) -> list[int]:
        return sorted(sid for sid, s in self.sessions.items() if s.deadline <= now)

    def remove(self, session_id: int) -> Session | None:
        return self.sessions.pop(session_id, None)
