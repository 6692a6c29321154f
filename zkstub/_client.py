"""The zkstub client: one class for every way of reaching a server (in process, or over
`transport`), behind a small `link`.

Like ZooKeeper's Java client it keeps the session across connection losses (SUSPENDED, then
CONNECTED again with the same session and its watches), heartbeats every third of the
session timeout, and treats a connection as lost after two thirds of it without a reply.
When the server says the session expired it runs Kafka's session hooks: every
`before_initializing_session` hook (awaited), a new session, every
`after_initializing_session` hook. What `add_auth` added is sent again on every new
connection before anything else, as ZooKeeper's client does (a server keeps it per
connection).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import attrs
import trio

import actors
import transport
from zkstub import _paths
from zkstub import _protocol as proto
from zkstub._acl import ACL, OPEN_ACL_UNSAFE, acl_from_wire, acl_to_wire
from zkstub._errors import (
    AuthFailedError,
    ClosedError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    NoWatcherError,
    SessionExpiredError,
    ZkError,
    error_for_code,
)
from zkstub._listeners import StateListeners
from zkstub._types import (
    AddWatchMode,
    CheckOp,
    ClientState,
    CreateOp,
    DeleteOp,
    EventType,
    SetDataOp,
    Stat,
    WatchedEvent,
    WatcherType,
)

logger = logging.getLogger("zkstub.client")

Watcher = Callable[[WatchedEvent], None]
Hook = Callable[[], Awaitable[None]]


class LocalLink:
    """Reaches an in-process ZkServer directly. Its "connection" can still be dropped
    (`server.drop_connections`): calls then fail with ConnectionLossError and the client
    reconnects to its session, as over a network."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.session_id = 0
        self.identities: tuple[tuple[str, str], ...] = ()  # this connection's (`_acl`)
        self._deliver: Callable[[Any], None] | None = None
        self._lost = trio.Event()

    async def open(self, client: ZkClientImpl, timeout: float, session_id: int, password: bytes):
        await trio.lowlevel.checkpoint()
        session = self.server.open_session(timeout, session_id, password)
        self.session_id = session.session_id
        self.identities = ()
        self._lost = trio.Event()
        self._deliver = client._on_push_event
        self.server.attach_connection(session.session_id, self)
        self.server.attach(session.session_id, self._deliver)
        await self.server.sync()
        return session.session_id, session.password, session.timeout

    def _check_connected(self) -> None:
        if self._lost.is_set():
            raise ConnectionLossError("the in-process connection was dropped")

    async def call(self, op: str, args: list[Any]) -> Any:
        await trio.lowlevel.checkpoint()
        self._check_connected()
        if op == proto.AUTH:
            try:
                self.identities = self.server.authenticate(self.identities, *args)
            except AuthFailedError:
                self.drop()  # the server closes the connection after AuthFailed
                raise
            return None
        return await self.server.request(self.session_id, op, args, self.identities)

    async def ping(self) -> None:
        await trio.lowlevel.checkpoint()
        self._check_connected()
        self.server.ping(self.session_id)

    async def close_session(self) -> None:
        self._check_connected()
        self.server.close_session(self.session_id)
        await self.server.sync()

    def close(self) -> None:
        """The server side dropping this connection."""
        self.drop()

    def drop(self) -> None:
        self._lost.set()
        if self._deliver is not None:
            self.server.detach(self.session_id, self._deliver)
            self.server.detach_connection(self.session_id, self)
            self._deliver = None

    async def wait_lost(self) -> None:
        await self._lost.wait()


class RpcLink:
    """Reaches a zkstub server over `transport`, trying its hosts in turn."""

    def __init__(self, network: Any, hosts: list[tuple[str, int]], nursery: trio.Nursery) -> None:
        self.network = network
        self.hosts = hosts
        self.nursery = nursery
        self.connection: transport.RpcConnection | None = None
        self.last_zxid = 0  # of the last reply: what the session has seen
        self._next_host = 0

    async def open(self, client: ZkClientImpl, timeout: float, session_id: int, password: bytes):
        self.drop()
        host = self.hosts[self._next_host % len(self.hosts)]
        self._next_host += 1
        try:
            stream = await self.network.connect(host, timeout=timeout * 2 / 3)
        except transport.TransportError as error:
            raise ConnectionLossError(f"cannot connect to {host[0]}:{host[1]}: {error}") from None
        connection = transport.RpcConnection(
            stream,
            client_id=f"zkstub-0x{session_id:x}",
            on_push=client._on_push_wire,
            request_timeout=timeout * 2 / 3,
            close_on_timeout=True,
        )
        await self.nursery.start(connection.run)
        self.connection = connection
        connect = [timeout, session_id, password]
        if session_id:
            connect.append([self.last_zxid, *client.watched_paths()])
        body = await self._request(proto.CONNECT, connect)
        new_id, new_password, negotiated = body
        return new_id, new_password, negotiated

    async def _request(self, api_key: int, body: Any) -> Any:
        if self.connection is None:
            raise ConnectionLossError("not connected")
        try:
            response = await self.connection.request(api_key, body)
        except transport.TransportError as error:
            raise ConnectionLossError(f"connection lost: {error}") from None
        if response.error_code:
            message = ""
            if isinstance(response.body, dict):
                message = str(response.body.get("error_message", ""))
            raise error_for_code(response.error_code, message)
        return response.body

    async def call(self, op: str, args: list[Any]) -> Any:
        zxid, result = await self._request(proto.REQUEST, [op, args])
        self.last_zxid = max(self.last_zxid, zxid)
        return result

    async def ping(self) -> None:
        self.last_zxid = max(self.last_zxid, await self._request(proto.PING, None))

    async def close_session(self) -> None:
        with contextlib.suppress(ZkError):
            await self._request(proto.CLOSE_SESSION, None)

    def drop(self) -> None:
        if self.connection is not None:
            self.nursery.start_soon(self.connection.aclose)
            self.connection = None

    async def wait_lost(self) -> None:
        if self.connection is None:
            return
        await self.connection.closed.wait()


@attrs.define(eq=False)
class ZkClientImpl:
    link: Any
    requested_timeout: float
    chroot: str
    rng: random.Random
    state: ClientState = ClientState.CONNECTING
    session_id: int = 0
    session_timeout: float = 0.0
    _password: bytes = b""
    _listeners: StateListeners = attrs.field(factory=StateListeners)
    _before_hooks: list[Hook] = attrs.field(factory=list)
    _after_hooks: list[Hook] = attrs.field(factory=list)
    _data_watches: dict[str, list[Watcher]] = attrs.field(factory=dict)
    _child_watches: dict[str, list[Watcher]] = attrs.field(factory=dict)
    # exists() on a missing node: which data-table paths wait for a CREATED (setWatches
    # treats those apart from watches on existing nodes)
    _exist_paths: set[str] = attrs.field(factory=set)
    # add_watch: called on every matching event until removed (ZKWatchManager's
    # persistentWatches / persistentRecursiveWatches)
    _persistent_watches: dict[str, list[Watcher]] = attrs.field(factory=dict)
    _recursive_watches: dict[str, list[Watcher]] = attrs.field(factory=dict)
    _state_changed: trio.Event = attrs.field(factory=trio.Event)  # replaced at each change
    _expired: trio.Event = attrs.field(factory=trio.Event)
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _auths: list[tuple[str, bytes]] = attrs.field(factory=list)  # add_auth's, in order
    # Why the last attempt to connect failed (a refused port, a TLS handshake the server
    # or this client refused): what a client that gives up waiting says.
    last_connect_error: str | None = None
    _failures_told: set[str] = attrs.field(factory=set)  # logged since the last connect

    @property
    def session_password(self) -> bytes:
        return self._password

    # -- state ----------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[ClientState], None]) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: Callable[[ClientState], None]) -> None:
        self._listeners.remove(listener)

    def add_session_hooks(
        self,
        before_initializing_session: Hook | None = None,
        after_initializing_session: Hook | None = None,
    ) -> None:
        if before_initializing_session is not None:
            self._before_hooks.append(before_initializing_session)
        if after_initializing_session is not None:
            self._after_hooks.append(after_initializing_session)

    def _set_state(self, state: ClientState) -> None:
        if state is self.state:
            return
        self.state = state
        changed, self._state_changed = self._state_changed, trio.Event()
        changed.set()
        self._listeners.notify(state)

    # -- the session loop -----------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            await self._establish(new_session=True)
            task_status.started()
            while True:
                await self._serve_connection()
                if self.state is ClientState.CLOSED:
                    return
                if self._expired.is_set():
                    await self._handle_expiry()
                else:
                    self._set_state(ClientState.SUSPENDED)
                    await self._establish(new_session=False)

    async def _establish(self, *, new_session: bool) -> None:
        """Connects (a new session, or the current one again); retries with jittered
        backoff until it gets an answer. An expired session ends in `_handle_expiry`."""
        backoff = 0.05
        while True:
            try:
                session_id = 0 if new_session else self.session_id
                password = b"" if new_session else self._password
                sid, password, timeout = await self.link.open(
                    self, self.requested_timeout, session_id, password
                )
            except SessionExpiredError:
                self._expired.set()
                await self._handle_expiry()
                return
            except ConnectionLossError as error:
                reason = str(error)
                if reason not in self._failures_told:  # once per reason, not per retry
                    self._failures_told.add(reason)
                    logger.info("connect failed: %s", reason)
                self.last_connect_error = reason
                await trio.sleep(backoff * self.rng.uniform(0.8, 1.2))
                backoff = min(backoff * 2, 1.0)
                continue
            try:
                for scheme, credential in self._auths:
                    await self.link.call(proto.AUTH, [scheme, credential])
            except AuthFailedError as error:  # the server closed the connection
                logger.warning("authentication failed on reconnecting: %s", error)
            except ConnectionLossError as error:
                logger.debug("connection lost while authenticating: %s", error)
            self.session_id, self._password, self.session_timeout = sid, password, timeout
            self._failures_told.clear()
            self._set_state(ClientState.CONNECTED)
            return

    async def _serve_connection(self) -> None:
        """Heartbeats until the connection is lost or the session expires."""
        async with trio.open_nursery() as nursery:

            async def watch_lost() -> None:
                await self.link.wait_lost()
                nursery.cancel_scope.cancel()

            async def watch_expired() -> None:
                await self._expired.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_lost)
            nursery.start_soon(watch_expired)
            while True:
                await trio.sleep(self.session_timeout / 3)
                try:
                    await self.link.ping()
                except SessionExpiredError:
                    self._expired.set()
                    break
                except ConnectionLossError:
                    break
            nursery.cancel_scope.cancel()
        self.link.drop()

    async def _handle_expiry(self) -> None:
        logger.info("Session 0x%x expired", self.session_id)
        self._set_state(ClientState.EXPIRED)
        for watches in self._watch_tables():
            watches.clear()
        self._exist_paths.clear()
        self.link.drop()
        for hook in list(self._before_hooks):
            await hook()
        self._expired = trio.Event()
        self._set_state(ClientState.CONNECTING)
        await self._establish(new_session=True)
        for hook in list(self._after_hooks):
            await hook()

    # -- events from the server -----------------------------------------------------------

    def _on_push_wire(self, body: Any) -> None:
        if body == [proto.EXPIRED_PUSH]:
            self._on_push_event(None)
            return
        try:
            event = proto.event_from_wire(body)
        except ZkError:
            logger.warning("ignoring a malformed watch event %r", body)
            return
        self._on_push_event(event)

    def _on_push_event(self, event: WatchedEvent | None) -> None:
        if event is None:
            self._expired.set()
            return
        path = _paths.strip_chroot(self.chroot, event.path)
        # ZooKeeper's ZKWatchManager.materialize: which client watchers an event fires.
        watchers: list[Watcher] = []
        if event.type in (EventType.CHANGED, EventType.CREATED):
            watchers += self._data_watches.pop(path, [])
        elif event.type is EventType.CHILD:
            watchers += self._child_watches.pop(path, [])
        else:
            watchers += self._data_watches.pop(path, [])
            watchers += self._child_watches.pop(path, [])
        if event.type is not EventType.CHILD:
            self._exist_paths.discard(path)
        # Persistent watchers stay (addPersistentWatches). A recursive one never gets a
        # NodeChildrenChanged, even one the server sent for a child watch of this session
        # on a node below it (3.9's client filters those; 3.8's passes them on).
        watchers += self._persistent_watches.get(path, [])
        if event.type is not EventType.CHILD:
            watched = path
            while True:
                watchers += self._recursive_watches.get(watched, [])
                if watched == "/":
                    break
                watched = _paths.parent_of(watched)
        delivered = WatchedEvent(event.type, path)
        seen: list[Watcher] = []
        for watcher in watchers:
            if watcher in seen:
                continue
            seen.append(watcher)
            try:
                watcher(delivered)
            except Exception:
                logger.exception("watcher %r failed on %r", watcher, delivered)

    async def _watched_call(self, op: str, path: str, watch: Watcher | None, table: dict) -> Any:
        """A read that may leave a watch. The callback is registered before the request
        goes out: an event pushed right after the reply then finds it (ZooKeeper's client
        registers on reading the reply, before any later event). A read that fails leaves
        no watch, as on the server."""
        added = watch is not None and self._register(table, path, watch)
        try:
            return await self._call(op, [self._full(path), watch is not None])
        except BaseException:
            if added:
                self._unregister(table, path, watch)
            raise

    @staticmethod
    def _register(table: dict[str, list[Watcher]], path: str, watch: Watcher) -> bool:
        """Adds the watcher unless it is there already; says whether it was added."""
        registered = table.setdefault(path, [])
        if watch in registered:
            return False
        registered.append(watch)
        return True

    @staticmethod
    def _unregister(table: dict[str, list[Watcher]], path: str, watch: Watcher | None) -> bool:
        """Takes the watcher (None: every watcher) off the path; says whether any was."""
        registered = table.get(path)
        if not registered or (watch is not None and watch not in registered):
            return False
        if watch is None:
            registered.clear()
        else:
            registered.remove(watch)
        if not registered:
            del table[path]
        return True

    def _watch_tables(self) -> list[dict[str, list[Watcher]]]:
        return [self._data_watches, self._child_watches, self._persistent_watches,
                self._recursive_watches]  # fmt: skip

    # -- requests -------------------------------------------------------------------------

    async def _call(self, op: str, args: list[Any]) -> Any:
        # A request waiting out a disconnection belongs to its session: if that session
        # expires meanwhile, the request fails with SessionExpired (ZooKeeper's client
        # does the same), never runs in the next session. Waiting on instead would
        # deadlock Kafka's expiry handling: its before-session hook waits for the
        # controller, which waits for this request.
        session_id = self.session_id
        while True:
            if self.state is ClientState.CLOSED:
                raise ClosedError("the client is closed")
            if self.state is ClientState.EXPIRED or self.session_id != session_id:
                raise SessionExpiredError(f"session 0x{session_id:x} has expired")
            if self.state is ClientState.CONNECTED:
                break
            await self._state_changed.wait()
        return await self.link.call(op, args)

    def _full(self, path: str, *, sequential: bool = False) -> str:
        _paths.validate_path(path, sequential=sequential)
        return _paths.join_chroot(self.chroot, path)

    async def create(
        self,
        path: str,
        data: bytes | None = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
        acl: Iterable[ACL] = OPEN_ACL_UNSAFE,
    ) -> str:
        """`acl`: the node's (and, with `make_parents`, its new parents', as kazoo's
        ensure_path gives them); `auth` entries become this connection's identities."""
        full = self._full(path, sequential=sequence)
        acl = tuple(acl)
        try:
            created = await self._call("create", _create_args(full, data, ephemeral, sequence, acl))
        except NoNodeError:
            if not make_parents:
                raise
            await self._create_parents(_paths.parent_of(path), acl)
            created = await self._call("create", _create_args(full, data, ephemeral, sequence, acl))
        return _paths.strip_chroot(self.chroot, created)

    async def _create_parents(self, path: str, acl: tuple[ACL, ...]) -> None:
        if path == "/":
            return
        args = _create_args(self._full(path), None, False, False, acl)
        try:
            await self._call("create", args)
        except NodeExistsError:
            return
        except NoNodeError:
            await self._create_parents(_paths.parent_of(path), acl)
            with contextlib.suppress(NodeExistsError):
                await self._call("create", args)

    def watched_paths(
        self,
    ) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
        """The server-side paths (chroot joined) of the data, exists, child, persistent and
        persistent recursive watches (ZooKeeper's setWatches2 lists)."""
        full = self._full_unchecked
        data = [full(p) for p in sorted(self._data_watches) if p not in self._exist_paths]
        exist = [full(p) for p in sorted(self._data_watches) if p in self._exist_paths]
        child = [full(p) for p in sorted(self._child_watches)]
        persistent = [full(p) for p in sorted(self._persistent_watches)]
        return data, exist, child, persistent, [full(p) for p in sorted(self._recursive_watches)]

    def _full_unchecked(self, path: str) -> str:
        return _paths.join_chroot(self.chroot, path)

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes | None, Stat]:
        data, stat = await self._watched_call("get", path, watch, self._data_watches)
        if watch is not None:
            self._exist_paths.discard(path)
        return data, proto.stat_from_wire(stat)

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        # CREATED, CHANGED and DELETED fire data and exists watches alike, so one table
        # serves both (ZooKeeper's client keeps two only for bookkeeping).
        stat = await self._watched_call("exists", path, watch, self._data_watches)
        if watch is not None:
            if stat is None:
                self._exist_paths.add(path)
            else:
                self._exist_paths.discard(path)
        return proto.stat_from_wire(stat)

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        children = await self._watched_call("children", path, watch, self._child_watches)
        return sorted(children)

    async def set(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        return proto.stat_from_wire(await self._call("set", [self._full(path), data, version]))

    async def get_acl(self, path: str) -> tuple[tuple[ACL, ...], Stat]:
        """ZooKeeper's getACL: the node's ACL (digest hashes hidden without ADMIN) and
        Stat; needs READ or ADMIN."""
        acl, stat = await self._call("get_acl", [self._full(path)])
        return acl_from_wire(acl), proto.stat_from_wire(stat)

    async def set_acl(self, path: str, acl: Iterable[ACL], version: int = -1) -> Stat:
        """ZooKeeper's setACL: needs ADMIN; `version` is matched against the aversion."""
        wire = acl_to_wire(tuple(acl))
        return proto.stat_from_wire(await self._call("set_acl", [self._full(path), wire, version]))

    async def add_auth(self, scheme: str, credential: bytes | str) -> None:
        """ZooKeeper's addAuthInfo: this connection, and every later one of the client, is
        authenticated as `credential` ("user:password" for digest) too. AuthFailedError
        for a scheme the server does not know; the server then closes the connection."""
        if isinstance(credential, str):
            credential = credential.encode()
        await self._call(proto.AUTH, [scheme, credential])
        if (scheme, credential) not in self._auths:
            self._auths.append((scheme, credential))

    async def add_watch(self, path: str, watcher: Watcher, *, recursive: bool = False) -> None:
        """A persistent watch on `path` (which need not exist): `watcher` gets every
        CREATED, CHANGED and DELETED of the path and its CHILD events; with `recursive`,
        CREATED, CHANGED and DELETED of the path and of every node under it, and no CHILD.
        It stays until `remove_watches` or the end of the session, across reconnects
        (with no catch-up for changes made while disconnected, as in ZooKeeper)."""
        if recursive:
            table, mode = self._recursive_watches, AddWatchMode.PERSISTENT_RECURSIVE
        else:
            table, mode = self._persistent_watches, AddWatchMode.PERSISTENT
        full = self._full(path)
        added = self._register(table, path, watcher)
        try:
            await self._call("add_watch", [full, mode.value])
        except BaseException:
            if added:
                self._unregister(table, path, watcher)
            raise

    async def remove_watches(
        self, path: str, watcher_type: WatcherType, watcher: Watcher | None = None
    ) -> None:
        """Stops watches on `path` of `watcher_type` (CHILDREN, DATA: the one-shot ones;
        PERSISTENT, PERSISTENT_RECURSIVE: add_watch's; ANY: all of them).

        Without `watcher`, ZooKeeper's removeAllWatches: the server forgets the session's
        watches of that type on the path, and every such watcher here goes. With one,
        removeWatches(path, watcher, type): only that watcher goes; the server keeps its
        watch (other watchers of the session may share it) and is only asked whether it
        holds one (checkWatches). NoWatcherError if no such watch is held. No
        *WatchRemoved event is delivered (ZooKeeper's client makes those itself).
        As on a ZooKeeper 3.8 server, DATA or CHILDREN without `watcher` on a path that
        also has a persistent watch takes that watch's data or child half there."""
        kind = WatcherType(watcher_type)
        full = self._full(path)
        tables = self._tables_of(kind)
        held = [t for t in tables if t.get(path) and (watcher is None or watcher in t[path])]
        if not held:
            raise NoWatcherError(f"no watch of type {kind.name} on {path}", path=path)
        op = "remove_watches" if watcher is None else "check_watches"
        await self._call(op, [full, kind.value])
        for table in held:
            self._unregister(table, path, watcher)
        if path not in self._data_watches:
            self._exist_paths.discard(path)

    def _tables_of(self, kind: WatcherType) -> list[dict[str, list[Watcher]]]:
        match kind:
            case WatcherType.CHILDREN:
                return [self._child_watches]
            case WatcherType.DATA:
                return [self._data_watches]
            case WatcherType.PERSISTENT:
                return [self._persistent_watches]
            case WatcherType.PERSISTENT_RECURSIVE:
                return [self._recursive_watches]
        return self._watch_tables()

    async def get_ephemerals(self, prefix: str = "/") -> list[str]:
        """This session's ephemeral nodes whose paths start with `prefix` (as a string:
        "/a" also takes "/ab"), sorted; "/" for all of them."""
        _paths.validate_path(prefix)
        paths = await self._call("ephemerals", [self._full_unchecked(prefix)])
        if self.chroot:  # the server matched a string prefix: "/kafka" takes "/kafka2/x"
            inside = self.chroot + "/"
            paths = [p for p in paths if p == self.chroot or p.startswith(inside)]
        return sorted(_paths.strip_chroot(self.chroot, p) for p in paths)

    async def get_all_children_number(self, path: str) -> int:
        """How many nodes lie under `path`, at any depth (under "/" without a chroot, the
        three built-in /zookeeper nodes count)."""
        return await self._call("all_children_number", [self._full(path)])

    async def sync(self, path: str) -> str:
        """ZooKeeper's sync: the server this client talks to catches up with the leader
        (zkstub is one server: there is nothing to wait for). Returns the path."""
        synced = await self._call("sync", [self._full(path)])
        return _paths.strip_chroot(self.chroot, synced)

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            for child in await self.get_children(path):
                child_path = f"{path.rstrip('/')}/{child}"
                with contextlib.suppress(NoNodeError):
                    await self.delete(child_path, recursive=True)
        await self._call("delete", [self._full(path), version])

    async def multi(self, ops: Iterable[Any]) -> list[Any]:
        wire = []
        for op in ops:
            match op:
                case CreateOp():
                    full = self._full(op.path, sequential=op.sequence)
                case CheckOp() | DeleteOp() | SetDataOp():  # not SetACLOp: as ZooKeeper
                    full = self._full(op.path)
                case _:
                    raise TypeError(f"not a multi op: {op!r}")
            # The op's wire form with the chrooted path (cheaper than a copy of the op,
            # which a multi of hundreds of ops felt).
            one = proto.op_to_wire(op)
            one[1] = full
            wire.append(one)
        results = [proto.multi_result_from_wire(r) for r in await self._call("multi", wire)]
        return [_paths.strip_chroot(self.chroot, r) if isinstance(r, str) else r for r in results]

    async def multi_get(self, paths: Iterable[str]) -> list[tuple[bytes | None, Stat] | ZkError]:
        """ZooKeeper 3.6's multiRead of getData ops: the paths read in one request, each
        one's (data, stat) or its error (NoNodeError), returned, not raised: one failing
        read does not stop the others. No watch."""
        wire = [self._full(path) for path in paths]
        results: list[tuple[bytes | None, Stat] | ZkError] = []
        for result in await self._call("multi_get", wire):
            value = proto.multi_result_from_wire(result)
            if isinstance(value, ZkError):
                results.append(value)
            else:
                data, stat = value
                results.append((data, proto.stat_from_wire(stat)))
        return results

    # -- closing --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Closes the session: its ephemerals go at once."""
        if self.state is ClientState.CLOSED:
            return
        if self.state is ClientState.CONNECTED:
            with trio.move_on_after(self.session_timeout or 1.0):
                with contextlib.suppress(ZkError):
                    await self.link.close_session()
        self._close()

    def abort(self) -> None:
        """Drops the client without closing its session (a crashed process): the server
        keeps the session, and its ephemerals, until it expires."""
        self._close()

    def _close(self) -> None:
        self._set_state(ClientState.CLOSED)  # (waiting calls wake and see CLOSED)
        self.link.drop()
        self._scope.cancel()

    async def __aenter__(self) -> ZkClientImpl:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _create_args(
    full: str, data: bytes | None, ephemeral: bool, sequence: bool, acl: tuple[ACL, ...]
) -> list[Any]:
    return proto.op_to_wire(CreateOp(full, data, ephemeral, sequence, acl))[1:]


@contextlib.asynccontextmanager
async def open_client(
    link: Any,
    *,
    session_timeout: float,
    chroot: str = "",
    rng: random.Random | None = None,
    connect_timeout: float | None = None,
) -> AsyncIterator[ZkClientImpl]:
    """`connect_timeout` (default: the session timeout, as Kafka's
    zookeeper.connection.timeout.ms) bounds the wait for the first session."""
    if chroot:
        _paths.validate_path(chroot)
    client = ZkClientImpl(link, session_timeout, chroot, rng or random.Random(0))
    limit = session_timeout if connect_timeout is None else connect_timeout
    async with actors.open_background_nursery() as nursery:
        if getattr(link, "nursery", False) is None:  # a network link, given its tasks' home
            link.nursery = nursery
        with trio.move_on_after(limit) as waiting:
            await nursery.start(client.run)
        if waiting.cancelled_caught:
            nursery.cancel_scope.cancel()
            reason = client.last_connect_error
            raise ConnectionLossError(
                f"no ZooKeeper session within {limit}s" + (f": {reason}" if reason else "")
            )
        try:
            yield client
        except BaseException:
            # Cancelled or failed: no round trip to close the session (it could not finish
            # under cancellation); the server expires it, as it would a crashed client's.
            client.abort()
            raise
        else:
            await client.aclose()
        finally:
            nursery.cancel_scope.cancel()


def _check_seconds(name: str, value: object) -> None:
    """A duration a caller gave: a finite number of seconds above zero (NaN, inf and
    negatives would otherwise fail deep inside, or never expire)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number of seconds above 0, not {value!r}")


@contextlib.asynccontextmanager
async def connect(
    connect_string: str,
    *,
    session_timeout: float = 6.0,
    network: Any = None,
    rng: random.Random | None = None,
    connect_timeout: float | None = None,
) -> AsyncIterator[Any]:
    """A client for `host:port[,...][/chroot]` (a zkstub server, in zkstub's msgpack
    protocol over `transport`), `jute://host:port[,...][/chroot]` (any ZooKeeper server, a
    real one or zkstub, in ZooKeeper's own protocol over `network`), or
    `zookeeper://host:port[,...][/chroot]` (any ZooKeeper server, through kazoo's threads)."""
    _check_seconds("session_timeout", session_timeout)
    if connect_timeout is not None:
        _check_seconds("connect_timeout", connect_timeout)
    if connect_string.startswith("zookeeper://"):
        from zkstub._kazoo_client import open_kazoo_client

        hosts, chroot = _paths.split_connect_string(connect_string.removeprefix("zookeeper://"))
        host_string = ",".join(f"{h}:{p}" for h, p in hosts)
        async with open_kazoo_client(
            host_string, session_timeout=session_timeout, chroot=chroot
        ) as client:
            yield client
        return
    if connect_string.startswith("jute://"):
        from zkstub._jute_link import JuteLink

        hosts, chroot = _paths.split_connect_string(connect_string.removeprefix("jute://"))
        link: Any = JuteLink(network or transport.TcpNetwork(), hosts)
    else:
        hosts, chroot = _paths.split_connect_string(connect_string)
        link = RpcLink(network or transport.TcpNetwork(), hosts, nursery=None)  # type: ignore[arg-type]
    async with open_client(
        link,
        session_timeout=session_timeout,
        chroot=chroot,
        rng=rng,
        connect_timeout=connect_timeout,
    ) as client:
        yield client
