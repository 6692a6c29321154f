"""The zkstub server: the DataTree and session table behind a Trio shell. It expires
sessions on Trio's clock, delivers watch events to each session's connection (or holds them
while the session is disconnected), and serves the wire protocol over `transport` with each
connection's requests processed in order (ZooKeeper's per-session order).
"""

from __future__ import annotations

import contextlib
import logging
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import attrs
import trio

import actors
import transport
from zkstub import _four_letter_words as fourlw
from zkstub import _jute as jute
from zkstub import _protocol as proto
from zkstub._acl import Identity, acl_to_wire, add_identities, authenticate
from zkstub._connections import (
    DEFAULT_MAX_CLIENT_CNXNS,
    DEFAULT_MAX_OUTBOUND_BYTES,
    DEFAULT_SESSIONLESS_TIMEOUT,
    ConnectionGuard,
    GuardedConnection,
)
from zkstub._errors import (
    AuthFailedError,
    BadArgumentsError,
    MarshallingError,
    SessionExpiredError,
    ZkError,
)
from zkstub._jute_server import JuteConnection, claims_connect
from zkstub._sessions import Session, SessionTable
from zkstub._snapshot import CLOSE, MULTI, SESSION, WRITE, replay, restore_snapshot, take_snapshot
from zkstub._storage import Storage
from zkstub._tree import DataTree, Delivery
from zkstub._types import WatchedEvent

logger = logging.getLogger("zkstub.server")

# deliver(event) for a watch event, deliver(None) when the session expired.
Deliver = Callable[[WatchedEvent | None], None]


@attrs.define(eq=False)
class ZkServer:
    """What `open_server` yields: `address` (and `secure_address`, the TLS port's), the
    test hooks `await expire_session(sid)` and `drop_connections(sid)`,
    `connect_local(...)`, and `write_snapshot()`."""

    tree: DataTree
    sessions: SessionTable
    tick_time: float
    address: Any = None
    secure_address: Any = None  # ZooKeeper's secureClientPort: the same service in TLS
    _deliver: dict[int, Deliver] = attrs.field(factory=dict)
    _held: dict[int, list[WatchedEvent]] = attrs.field(factory=dict)
    _connections: dict[int, Any] = attrs.field(factory=dict)  # each has close()
    storage: Storage | None = None
    snapshot_every: int = 10_000  # log records between snapshots (ZooKeeper's snapCount)
    _flushed: trio.Event | None = None  # set when the batch being flushed is durable
    # Sessions recovered from disk whose clients have not come back yet: their watches
    # were lost with the old process, so the client's setWatches is needed (a session that
    # lived on in memory kept its watches, and its held events, here).
    _watchless: set[int] = attrs.field(factory=set)
    connection_guard: ConnectionGuard | None = None  # with a network: the limits per client
    # ZooKeeper's jute.maxbuffer: the largest request, and the largest get_children reply.
    jute_maxbuffer: int = proto.JUTE_MAXBUFFER
    # 4lw.commands.whitelist: the four-letter words this server answers.
    four_letter_words: frozenset[str] = fourlw.DEFAULT_WHITELIST
    config_facts: dict[str, str] = attrs.field(factory=dict)  # what `conf` shows
    # zookeeper.DigestAuthenticationProvider.superDigest: "super:base64(sha1(...))"; a
    # digest `auth` with the matching "super:password" passes every ACL.
    super_digest: str | None = None
    _rpc: transport.RpcServer | None = None

    # -- durability -----------------------------------------------------------------------

    def _journal(self, kind: str, session_id: int, *payload: Any) -> None:
        """Logs a request about to take the next zxid (before it is applied, so a failed
        request is logged too: it consumes its zxid on replay as it did the first time)."""
        if self.storage is not None:
            self.storage.append([kind, self.tree.zxid + 1, session_id, *payload])

    async def sync(self) -> None:
        """Returns once everything journaled so far is on disk. The requests that arrive
        in one scheduling batch share one write and one fsync (group commit)."""
        if self.storage is None or not self.storage.dirty:
            await trio.lowlevel.checkpoint()
            return
        if self._flushed is not None:
            await self._flushed.wait()
            return
        flushed = self._flushed = trio.Event()
        try:
            await trio.lowlevel.checkpoint()  # let the rest of this batch journal first
        finally:
            # Even when this caller is cancelled (its connection went), the batch is
            # flushed and its waiters released: otherwise every later sync would wait on
            # an event nobody sets, and the server would stop answering writes.
            self._flushed = None
            self._flush_now()
            flushed.set()

    def _flush_now(self) -> None:
        storage = self.storage
        if storage is None:
            return
        storage.flush()
        if storage.records_since_snapshot >= self.snapshot_every:
            self.write_snapshot()

    def write_snapshot(self) -> None:
        if self.storage is not None:
            live = {sid: (s.timeout, s.password) for sid, s in self.sessions.sessions.items()}
            content = take_snapshot(self.tree, live)
            content["last_session_id"] = self.sessions.last_id
            self.storage.write_snapshot(self.tree.zxid, content)

    # -- sessions -------------------------------------------------------------------------

    def open_session(self, timeout: object, session_id: int = 0, password: bytes = b"") -> Session:
        now = trio.current_time()
        if session_id:
            return self.sessions.revalidate(session_id, password, now)
        session = self.sessions.create(timeout, now)
        self._journal(SESSION, session.session_id, session.timeout, session.password)
        self.tree.next_zxid()  # createSession is a transaction in ZooKeeper
        logger.info("Established session 0x%x with negotiated timeout %.0f ms",
                    session.session_id, session.timeout * 1000)  # fmt: skip
        return session

    def attach(self, session_id: int, deliver: Deliver) -> None:
        """Routes the session's events to `deliver`, first the ones held while it had none."""
        self._deliver[session_id] = deliver
        for event in self._held.pop(session_id, []):
            deliver(event)

    def detach(self, session_id: int, deliver: Deliver) -> None:
        if self._deliver.get(session_id) is deliver:
            del self._deliver[session_id]

    def attach_connection(self, session_id: int, connection: Any) -> None:
        """Records the connection (anything with `close()`) now serving the session; a
        session is served on one connection at a time, so an older one is closed."""
        old = self._connections.get(session_id)
        if old is not None and old is not connection:
            old.close()
        self._connections[session_id] = connection

    def detach_connection(self, session_id: int, connection: Any) -> None:
        if self._connections.get(session_id) is connection:
            del self._connections[session_id]

    def close_session(self, session_id: int) -> None:
        if self.sessions.remove(session_id) is None:
            return
        self._close_in_tree(session_id)
        self._deliver.pop(session_id, None)
        self._held.pop(session_id, None)
        logger.info("Closed session 0x%x", session_id)

    def _close_in_tree(self, session_id: int) -> None:
        self._watchless.discard(session_id)
        now_ms = self.tree.clock()
        self._journal(CLOSE, session_id, now_ms)
        self._dispatch(self.tree.close_session(session_id, now_ms))

    async def expire_session(self, session_id: int) -> None:
        """Test hook: expire a session now, as if its timeout had passed."""
        self._expire(session_id)
        await self.sync()

    def _expire(self, session_id: int) -> None:
        if self.sessions.remove(session_id) is None:
            return
        logger.info("Expiring session 0x%x", session_id)
        self._close_in_tree(session_id)
        self._held.pop(session_id, None)
        self._connections.pop(session_id, None)
        deliver = self._deliver.pop(session_id, None)
        if deliver is not None:
            deliver(None)

    def drop_connections(self, session_id: int) -> None:
        """Test hook: close the session's connection; the session lives on until it expires
        or the client reconnects."""
        connection = self._connections.pop(session_id, None)
        if connection is not None:
            connection.close()

    async def run_expiry(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Expires sessions past their deadline, every half tick. The server is one thread:
        while it is busy with one large piece of work (a session with a million ephemerals
        expiring, a huge multi), no ping is read, so that time does not count against
        anyone's session (ZooKeeper's session tracker and its request pipeline are separate
        threads, so there a busy pipeline does not expire idle-but-pinging clients either).
        The time this task woke late is such time, and so is each expiry's own work."""
        task_status.started()
        interval = self.tick_time / 2
        wake_at = trio.current_time() + interval
        while True:
            await trio.sleep_until(wake_at)
            late = trio.current_time() - wake_at
            if late > 0:
                self.sessions.extend(late)
            while due := self.sessions.due(trio.current_time()):
                started = trio.current_time()
                self._expire(due[0])
                busy = trio.current_time() - started
                if busy > 0:
                    self.sessions.extend(busy)
                # Reads waiting since before that work get their turn before the next.
                await trio.lowlevel.checkpoint()
            self._flush_now()
            wake_at = trio.current_time() + interval

    # -- requests -------------------------------------------------------------------------

    def authenticate(
        self, identities: tuple[Identity, ...], scheme: Any, credential: Any
    ) -> tuple[Identity, ...]:
        """A connection's `auth` (ZooKeeper's AuthPacket): its identities after it, or
        AuthFailedError (an unknown scheme: digest accepts any credential), after which
        the caller closes the connection, as ZooKeeper does."""
        if not isinstance(scheme, str) or not isinstance(credential, bytes):
            raise AuthFailedError("auth takes [scheme, credential bytes]")
        added = authenticate(scheme, credential, self.super_digest)
        if not added:
            logger.warning("Authentication failed for scheme: %s", scheme)
            raise AuthFailedError(f"no authentication provider for scheme {scheme!r}")
        logger.info("Auth success for scheme %s", scheme)
        return add_identities(identities, added)

    def handle(
        self, session_id: int, op: str, args: list[Any], identities: tuple[Identity, ...] = ()
    ) -> Any:
        """One request of a live session, from a connection authenticated as `identities`
        (`zkstub._acl`); raises its ZkError (BadArgumentsError for a request that is not
        well-formed, before anything is applied)."""
        if session_id not in self.sessions.sessions:
            raise SessionExpiredError(f"session 0x{session_id:x} has expired")
        if isinstance(args, list):
            size = proto.request_size(op, args, self.jute_maxbuffer)
            if size > self.jute_maxbuffer:
                raise MarshallingError(
                    f"{op} request of more than {size} bytes is larger than "
                    f"jute.maxbuffer ({self.jute_maxbuffer})"
                )
        parsed = proto.request_from_wire(op, args)
        self.sessions.touch(session_id, trio.current_time())
        tree = self.tree
        watcher = session_id if op in proto.READS and args[1] else None
        # Logged with a write when not empty: replaying it checks the same ACLs.
        logged = [[scheme, name] for scheme, name in identities] if identities else []
        match op:
            case "get":
                data, stat = tree.get(parsed, watcher, identities)
                return [data, proto.stat_to_wire(stat)]
            case "exists":
                return proto.stat_to_wire(tree.exists(parsed, watcher))
            case "children":
                return self._children(parsed, watcher, identities)
            case "multi":
                now_ms = tree.clock()
                self._journal(MULTI, session_id, now_ms, args, *([logged] if logged else []))
                results, deliveries = tree.multi(session_id, parsed, now_ms, identities)
                self._dispatch(deliveries)
                return [proto.multi_result_to_wire(r) for r in results]
            case "multi_get":
                return [self._read_for_multi(path, identities) for path in parsed]
            case _ if op in proto.SESSION_OPS:
                return self._session_op(session_id, op, parsed, identities)
        now_ms = tree.clock()
        self._journal(WRITE, session_id, now_ms, [op, *args], *([logged] if logged else []))
        result, deliveries = tree.apply(session_id, parsed, now_ms, identities)
        self._dispatch(deliveries)
        return proto.stat_to_wire(result) if op in ("set", "set_acl") else result

    def _read_for_multi(self, path: str, identities: tuple[Identity, ...]) -> list[Any]:
        """One getData of a multiRead (ZooKeeper 3.6's): its data and stat, or its error,
        the other reads going on all the same. No watch: a multiRead's ops take none."""
        try:
            data, stat = self.tree.get(path, None, identities)
        except ZkError as error:
            return proto.multi_result_to_wire(error)
        return proto.multi_result_to_wire([data, proto.stat_to_wire(stat)])

    def _session_op(
        self, session_id: int, op: str, parsed: Any, identities: tuple[Identity, ...]
    ) -> Any:
        """The requests that read or change only the session's own view (watches,
        ephemerals) or nothing: no zxid, nothing journaled (ZooKeeper does not log watches
        either)."""
        tree = self.tree
        match op:
            case "add_watch":
                tree.add_watch(session_id, *parsed)
            case "remove_watches":
                tree.remove_watches(session_id, *parsed)
            case "check_watches":
                tree.check_watches(session_id, *parsed)
            case "ephemerals":
                paths = tree.get_ephemerals(session_id, parsed)
                size = proto.children_size(paths)
                if size > self.jute_maxbuffer:  # as for get_children (see `_children`)
                    raise MarshallingError(
                        f"the ephemerals of session 0x{session_id:x} under {parsed!r} take "
                        f"{size} bytes, more than jute.maxbuffer ({self.jute_maxbuffer})"
                    )
                return paths
            case "all_children_number":
                return tree.all_children_number(parsed, identities)
            case "sync":
                return tree.sync(parsed)
            case "get_acl":
                acl, stat = tree.get_acl(parsed, identities)
                return [acl_to_wire(acl), proto.stat_to_wire(stat)]
        return None

    def _children(
        self, path: str, watcher: int | None, identities: tuple[Identity, ...] = ()
    ) -> list[str]:
        """ZooKeeper's server sends a reply of any size, and its client, refusing one
        larger than jute.maxbuffer, drops the connection and retries for ever. Here the
        read fails instead (MarshallingError) and names the node; nothing is registered."""
        names = self.tree.get_children(path, None, identities)
        size = proto.children_size(names)
        if size > self.jute_maxbuffer:
            raise MarshallingError(
                f"the children of {path} take {size} bytes, more than "
                f"jute.maxbuffer ({self.jute_maxbuffer})"
            )
        return names if watcher is None else self.tree.get_children(path, watcher)

    async def request(
        self, session_id: int, op: str, args: list[Any], identities: tuple[Identity, ...] = ()
    ) -> Any:
        """`handle`, answered once its transaction is durable."""
        try:
            return self.handle(session_id, op, args, identities)
        finally:
            await self.sync()

    def ping(self, session_id: int) -> None:
        if session_id not in self.sessions.sessions:
            raise SessionExpiredError(f"session 0x{session_id:x} has expired")
        self.sessions.touch(session_id, trio.current_time())

    def _dispatch(self, deliveries: list[Delivery]) -> None:
        for session_id, event in deliveries:
            deliver = self._deliver.get(session_id)
            if deliver is None:
                self._held.setdefault(session_id, []).append(event)
            else:
                deliver(event)

    # -- the wire protocol ----------------------------------------------------------------

    def rpc_server(self) -> transport.RpcServer:
        if self._rpc is None:
            self._rpc = self._new_rpc_server()
        return self._rpc

    def _new_rpc_server(self) -> transport.RpcServer:
        return transport.RpcServer(
            {
                proto.CONNECT: self._rpc_connect,
                proto.REQUEST: self._rpc_request,
                proto.PING: self._rpc_ping,
                proto.CLOSE_SESSION: self._rpc_close,
            },
            name="zkstub",
            ordered=True,
            on_connect=self._on_connect,
            on_disconnect=self._on_disconnect,
        )

    def _on_connect(self, connection: transport.ServerConnection) -> None:
        guarded = connection.connection
        if isinstance(guarded, GuardedConnection):
            guarded.server_connection = connection
            connection.context["abort"] = guarded.abort
        # ZooKeeper gives every connection its client's address as an identity.
        connection.context["identities"] = (("ip", str(connection.peer_address[0])),)

    @staticmethod
    def _has_session(guarded: GuardedConnection) -> bool:
        if guarded.session_id is not None:  # a jute connection's
            return True
        connection = guarded.server_connection
        return connection is not None and "session_id" in connection.context

    async def serve_connection(self, guarded: GuardedConnection) -> None:
        """One client connection, in whichever protocol its first bytes speak: ZooKeeper's
        four-letter words, ZooKeeper's jute, or zkstub's msgpack RPC (see `_jute_server`)."""
        guarded.claims_word = jute.is_four_letter_word
        guarded.claims_raw = claims_connect
        try:
            first = await guarded.receive()
        except transport.TransportError as error:
            logger.debug("connection from %s ended before a request: %s", guarded.peer_name, error)
            return
        if guarded.word:
            assert isinstance(first, bytes)
            await self._answer_four_letter_word(guarded, first.decode("ascii"))
        elif guarded.raw:
            assert isinstance(first, bytes)
            await JuteConnection(self, guarded).serve(first)
        else:
            guarded.put_back(first)
            await self.rpc_server().handle_connection(guarded)  # type: ignore[arg-type]

    async def _answer_four_letter_word(self, guarded: GuardedConnection, command: str) -> None:
        text = fourlw.answer(command, self.four_letter_words, self._facts())
        logger.info("Processing %s command from %s", command, guarded.peer_name)
        await guarded.send_frames([text.encode()])  # raw text, no length: then closed
        await guarded.drain()

    def set_watches(self, session_id: int, request: Any) -> None:
        """A reconnecting jute client's setWatches: as for a msgpack reconnect (see
        `_rpc_connect`), the client's list is the truth and held events are dropped."""
        self._watchless.discard(session_id)
        self._held.pop(session_id, None)
        watches = (request.relative_zxid, request.data, request.exist, request.child,
                   request.persistent, request.persistent_recursive)  # fmt: skip
        self._dispatch(self.tree.set_watches(session_id, *watches))

    async def serve_metrics(
        self,
        host: str,
        port: int,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serves this server's `mntr` numbers at /metrics on real TCP (host, port), under
        the names ZooKeeper's Prometheus provider gives them, until cancelled;
        `task_status.started` gets the address bound (port 0: the one the OS picked)."""
        from zkstub._metrics_http import serve_metrics  # prometheus-client, only when asked

        await serve_metrics(host, port, self._facts, task_status=task_status)

    def _facts(self) -> fourlw.ServerFacts:
        tree = self.tree
        watches: dict[int, list[str]] = {}
        for table in (tree.data_watches, tree.child_watches):
            for path, watchers in table.items():
                for sid in watchers:
                    watches.setdefault(sid, []).append(path)
        guard = self.connection_guard
        connections = [] if guard is None else [
            fourlw.ConnectionFacts(
                f"{c.peer_address[0]}:{c.peer_address[1]}", self._session_of_connection(c),
                c.received, c.sent,
            )
            for c in sorted(guard.live, key=lambda c: c.peer_name)
        ]  # fmt: skip
        return fourlw.ServerFacts(
            zxid=tree.zxid,
            node_count=len(tree.nodes),
            data_bytes=sum(len(p) + len(n.data or b"") for p, n in tree.nodes.items()),
            ephemerals={sid: sorted(paths) for sid, paths in tree.ephemerals.items()},
            sessions={sid: s.timeout for sid, s in self.sessions.sessions.items()},
            watches=watches,
            connections=connections,
            received=sum(c.received for c in connections),
            sent=sum(c.sent for c in connections),
            config=self.config_facts,
        )

    @staticmethod
    def _session_of_connection(guarded: GuardedConnection) -> int | None:
        if guarded.session_id is not None:
            return guarded.session_id
        connection = guarded.server_connection
        return None if connection is None else connection.context.get("session_id")

    async def _rpc_connect(self, request: transport.Request) -> Any:
        try:
            connect = proto.connect_from_wire(request.body)
            session = self.open_session(connect.timeout, connect.session_id, connect.password)
        except ZkError as error:
            if isinstance(error, BadArgumentsError):
                logger.warning("Refused a connect from %s: %s", request.connection.peer_name, error)
            raise transport.RpcError(error.code, str(error)) from None
        watches = connect.watches
        connection = request.connection
        connection.context["session_id"] = session.session_id
        self.attach_connection(session.session_id, connection)

        def deliver(event: WatchedEvent | None) -> None:
            if event is None:
                # Closed at once, as ZooKeeper does: a client that is not reading would
                # hold a close-after-flush open forever. One that is reading may get the
                # notice first; otherwise its reconnect is answered SessionExpired.
                connection.push([proto.EXPIRED_PUSH])
                abort = connection.context.get("abort")
                if abort is None:
                    connection.close()
                else:
                    abort(f"session 0x{session.session_id:x} expired", logging.INFO)
            else:
                connection.push(proto.event_to_wire(event))

        connection.context["deliver"] = deliver
        if watches is None:
            self.attach(session.session_id, deliver)
        else:
            # A reconnect: the client's watch list is the truth (ZooKeeper's setWatches).
            # An event pushed into the old connection may have died with it, and the
            # watch it fired is gone here: setWatches fires it again, since the node
            # changed after the last zxid the client saw. Events held while no
            # connection served the session are covered the same way, so they are
            # dropped rather than sent twice.
            self._watchless.discard(session.session_id)
            self._held.pop(session.session_id, None)
            self.attach(session.session_id, deliver)
            self._dispatch(self.tree.set_watches(session.session_id, *watches))
        await self.sync()
        return [session.session_id, session.password, session.timeout]

    def _session_of(self, request: transport.Request) -> int:
        session_id = request.connection.context.get("session_id")
        if session_id is None:
            raise transport.RpcError(SessionExpiredError.code, "no session on this connection")
        return session_id

    async def _rpc_request(self, request: transport.Request) -> Any:
        session_id = self._session_of(request)
        body = request.body
        if not (isinstance(body, list) and len(body) == 2):
            raise transport.RpcError(BadArgumentsError.code, "a request is [op, args]")
        identities: Any = request.connection.context.get("identities", ())
        if body[0] == proto.AUTH:
            return await self._rpc_auth(request, identities, body[1])
        try:
            # The zxid the reply reflects, which a reconnecting client hands back
            # with its watches (ZooKeeper's ReplyHeader.zxid).
            result = await self.request(session_id, body[0], body[1], identities)
            return [self.tree.zxid, result]
        except ZkError as error:
            raise transport.RpcError(error.code, str(error)) from None

    async def _rpc_auth(self, request: transport.Request, identities: Any, args: Any) -> Any:
        """`auth` [scheme, credential]: the connection's identities grow, or it is answered
        AuthFailed and closed (ZooKeeper's client then reports AUTH_FAILED)."""
        credential = args if isinstance(args, list) and len(args) == 2 else [None, None]
        try:
            added = self.authenticate(identities, *credential)
        except AuthFailedError as error:
            request.connection.close_after_answer()
            raise transport.RpcError(error.code, str(error)) from None
        request.connection.context["identities"] = added
        await trio.lowlevel.checkpoint()
        return [self.tree.zxid, None]

    async def _rpc_ping(self, request: transport.Request) -> Any:
        try:
            self.ping(self._session_of(request))
        except ZkError as error:
            raise transport.RpcError(error.code, str(error)) from None
        return self.tree.zxid

    async def _rpc_close(self, request: transport.Request) -> Any:
        self.close_session(self._session_of(request))
        request.connection.context.pop("session_id", None)
        await self.sync()
        return None

    def _on_disconnect(self, connection: transport.ServerConnection) -> None:
        session_id = connection.context.get("session_id")
        deliver = connection.context.get("deliver")
        if session_id is not None and deliver is not None:
            self.detach(session_id, deliver)
            self.detach_connection(session_id, connection)

    def connect_local(self, session_timeout: float = 6.0, chroot: str = ""):
        """An in-process client (no network) with the same API as `zkstub.connect`."""
        from zkstub._client import LocalLink, open_client

        return open_client(
            LocalLink(self), session_timeout=session_timeout, chroot=chroot,
            rng=random.Random(self.sessions.rng.getrandbits(64)),
        )  # fmt: skip


@contextlib.asynccontextmanager
async def open_server(
    network: Any = None,
    address: Any = None,
    data_dir: Any = None,
    tick_time: float = 2.0,
    clock: Callable[[], float] = time.time,
    *,
    seed: int = 0,
    snapshot_every: int = 10_000,
    min_session_timeout: float | None = None,
    max_session_timeout: float | None = None,
    max_client_cnxns: int = DEFAULT_MAX_CLIENT_CNXNS,
    sessionless_timeout: float = DEFAULT_SESSIONLESS_TIMEOUT,
    max_outbound_bytes: int = DEFAULT_MAX_OUTBOUND_BYTES,
    jute_maxbuffer: int = proto.JUTE_MAXBUFFER,
    snap_retain_count: int = 3,
    truncate_corrupt_log: bool = False,
    four_letter_words: str | Iterable[str] | None = None,
    super_digest: str | None = None,
    tls: ssl.SSLContext | None = None,
    secure_address: Any = None,
    plaintext: bool = True,
) -> AsyncIterator[ZkServer]:
    """A zkstub server. With `network`, it listens on `address` (default 127.0.0.1, a free
    port); without, it serves only `connect_local` clients. Negotiated session timeouts are
    clamped to [`min_session_timeout`, `max_session_timeout`] (ZooKeeper's settings, in
    seconds; by default 2 and 20 times `tick_time`); `clock` stamps ctime/mtime; `seed` seeds
    session ids and passwords. With `data_dir`, every write is logged and fsynced before it
    is answered, a snapshot is taken every `snapshot_every` records, and a restart recovers
    the tree and the sessions (which expire unless their clients come back in time).
    What one client may cost: `max_client_cnxns` connections per address (ZooKeeper's
    maxClientCnxns, 0 for no limit), `sessionless_timeout` seconds for a connection with
    no session to say something (zookeeper.nio.sessionlessCnxnTimeout), and
    `max_outbound_bytes` queued for it and not taken (see `zkstub._connections`). A request
    larger than `jute_maxbuffer` (ZooKeeper's jute.maxbuffer, 1 MiB) is refused, and so is
    a get_children whose reply would be (MarshallingError). The newest `snap_retain_count`
    snapshots are kept with their logs; a damaged log is refused (`CorruptDataError`)
    unless `truncate_corrupt_log` (see `_storage`).

    The port speaks zkstub's msgpack RPC and ZooKeeper's own protocol (jute), told apart by
    a connection's first frame, and answers ZooKeeper's four-letter words listed in
    `four_letter_words` (ZooKeeper's 4lw.commands.whitelist: comma-separated, `*` for all;
    default `srvr`). `super_digest` is ZooKeeper's
    zookeeper.DigestAuthenticationProvider.superDigest ("super:" and the base64 SHA-1 of
    "super:password", `zkstub.digest`): a connection authenticated with that digest passes
    every ACL check.

    With `tls` (a server context, `zkstub.tls.TlsSettings.server_context()`), the server also
    listens on `secure_address` (default 127.0.0.1, a free port: ZooKeeper's
    secureClientPort) and serves there, in TLS, everything the plain port serves; without
    `plaintext` (ZooKeeper's clientPort left out) it listens in TLS only."""
    if tls is not None and network is not None and not hasattr(network, "with_tls"):
        raise ValueError(f"a secure client port needs a network that does TLS (real TCP); "
                         f"{type(network).__name__} does not")  # fmt: skip
    if not plaintext and (tls is None or network is None):
        raise ValueError("a server without its plain client port needs a secure one (tls)")
    whitelist = fourlw.parse_whitelist(four_letter_words)
    tree = DataTree(clock=lambda: int(clock() * 1000))
    sessions = SessionTable(
        tick_time, random.Random(seed),
        min_session_timeout=min_session_timeout, max_session_timeout=max_session_timeout,
    )  # fmt: skip
    server = ZkServer(
        tree, sessions, tick_time, snapshot_every=snapshot_every, jute_maxbuffer=jute_maxbuffer,
        four_letter_words=whitelist, super_digest=super_digest,
        config_facts={
            "dataDir": str(data_dir), "tickTime": str(round(tick_time * 1000)),
            "minSessionTimeout": str(round(sessions.min_timeout * 1000)),
            "maxSessionTimeout": str(round(sessions.max_timeout * 1000)),
            "maxClientCnxns": str(max_client_cnxns), "serverId": "0",
            "4lw.commands.whitelist": ",".join(sorted(whitelist)),
        },
    )  # fmt: skip
    if data_dir is not None:
        server.storage = _recover(server, data_dir, truncate_corrupt_log=truncate_corrupt_log,
                                  snap_retain_count=snap_retain_count)  # fmt: skip
    async with actors.open_background_nursery() as nursery:
        await nursery.start(server.run_expiry)
        if network is not None:
            guard = ConnectionGuard(
                server.serve_connection,
                max_client_cnxns=max_client_cnxns,
                sessionless_timeout=sessionless_timeout,
                max_outbound_bytes=max_outbound_bytes,
                linger=tick_time,
                has_session=server._has_session,
            )
            server.connection_guard = guard
            if plaintext:
                listener = await nursery.start(
                    network.serve, address or ("127.0.0.1", 0), guard.handle
                )
                server.address = listener.address
            if tls is not None:
                secure = await nursery.start(
                    network.with_tls(tls).serve, secure_address or ("127.0.0.1", 0), guard.handle
                )
                server.secure_address = secure.address
                server.config_facts["secureClientPort"] = str(secure.address[1])
                logger.info("binding to port %s:%d (secure)", *secure.address)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
            if server.storage is not None:
                server.storage.close()


def _recover(server: ZkServer, data_dir: Any, **storage_options: Any) -> Storage:
    """Rebuilds the tree and the live sessions from the data directory. A recovered session
    gets one full timeout from now: if no client reconnects to it, it expires and its
    ephemerals go."""
    storage, recovered = Storage.open(data_dir, **storage_options)
    live: dict[int, tuple[float, bytes]] = {}
    if recovered.snapshot is not None:
        live = restore_snapshot(recovered.snapshot, server.tree)
        server.sessions.reserve(recovered.snapshot.get("last_session_id", 0))
    for record in recovered.records:
        replay(record, server.tree, live)
        if record[0] == SESSION:
            server.sessions.reserve(record[2])
    now = trio.current_time()
    for session_id, (timeout, password) in sorted(live.items()):
        server.sessions.restore(session_id, password, timeout, now)
        server._watchless.add(session_id)
    logger.info("Recovered %s at zxid 0x%x with %d live sessions",
                data_dir, server.tree.zxid, len(live))  # fmt: skip
    return storage
