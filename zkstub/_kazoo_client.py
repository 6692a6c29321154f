"""The zkstub client contract over kazoo, for a real ZooKeeper (`zookeeper://` connect strings).

Kazoo is threaded; this is the one thread bridge in the project (DESIGN.md section 2). Calls run
in worker threads (`trio.to_thread.run_sync`); kazoo's watch and state callbacks are handed to
the Trio loop with `TrioToken.run_sync_soon`, which keeps their order and never blocks kazoo's
threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Self

import attrs
import trio
from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooClient, TransactionRequest, _prefix_root
from kazoo.protocol.connection import _CONNECTION_DROP
from kazoo.protocol.serialization import Connect, Create, SetData
from kazoo.protocol.states import Callback, KazooState, ZnodeStat
from kazoo.security import ACL as KazooACL
from kazoo.security import Id

import actors
from zkstub import _acl
from zkstub._client_api import SessionHook, StateListener, Watcher
from zkstub._errors import (
    ClosedError,
    ConnectionLossError,
    SessionExpiredError,
    UnimplementedError,
    ZkError,
    error_for_code,
)
from zkstub._listeners import StateListeners
from zkstub._paths import validate_path
from zkstub._types import (
    CheckOp,
    ClientState,
    CreateOp,
    DeleteOp,
    EventType,
    MultiOp,
    SetDataOp,
    Stat,
    WatchedEvent,
    WatcherType,
)

logger = logging.getLogger("zkstub._kazoo_client")

CONNECT_TIMEOUT = 15.0  # seconds kazoo may take to open the first session


def _to_kazoo_acl(acl: Iterable[_acl.ACL]) -> list[KazooACL]:
    return [KazooACL(int(e.perms), Id(e.scheme, e.id)) for e in acl]


def _to_stat(stat: ZnodeStat) -> Stat:
    return Stat(
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        ctime=stat.ctime,
        mtime=stat.mtime,
        version=stat.version,
        cversion=stat.cversion,
        aversion=stat.aversion,
        ephemeralOwner=stat.ephemeralOwner,
        dataLength=stat.dataLength,
        numChildren=stat.numChildren,
        pzxid=stat.pzxid,
    )


def _to_zk_error(error: kazoo_errors.KazooException) -> ZkError:
    """kazoo's exception as zkstub's, by ZooKeeper code (kazoo's own, code-less errors by kind)."""
    if isinstance(error, kazoo_errors.ConnectionClosedError):
        return ClosedError(str(error))
    code = getattr(type(error), "code", None)
    if isinstance(code, int):
        return error_for_code(code, str(error))
    if isinstance(error, kazoo_errors.ConnectionDropped):
        return ConnectionLossError(str(error))
    return ZkError(f"{type(error).__name__}: {error}")


def _multi_result(result: Any) -> Any:
    if isinstance(result, kazoo_errors.KazooException):
        return _to_zk_error(result)
    if isinstance(result, ZnodeStat):
        return _to_stat(result)
    return result


@attrs.frozen
class _WatchRelay:
    """What kazoo stores as the watcher: equal for equal user watches, so that (as in
    ZooKeeper) one watch registered twice on a path fires once."""

    watch: Watcher
    token: trio.lowlevel.TrioToken = attrs.field(eq=False)

    def __call__(self, kazoo_event: Any) -> None:
        event_type = EventType.__members__.get(kazoo_event.type)
        if event_type is None:  # kazoo's NONE events (session changes) are not watch events
            return
        event = WatchedEvent(event_type, kazoo_event.path)
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(self._deliver, event)

    def _deliver(self, event: WatchedEvent) -> None:
        try:
            self.watch(event)
        except Exception:
            logger.exception("watch %r failed on %s", self.watch, event)


@attrs.define(eq=False)
class KazooZkClient:
    """A `ZkClient` over a started KazooClient; built by `open_kazoo_client`."""

    _kazoo: KazooClient
    _token: trio.lowlevel.TrioToken
    chroot: str = ""
    session_id: int = 0
    session_password: bytes = b""
    session_timeout: float = 0.0
    state: ClientState = ClientState.CONNECTING
    _listeners: StateListeners = attrs.Factory(StateListeners)
    _hooks: list[tuple[SessionHook | None, SessionHook | None]] = attrs.Factory(list)
    _kazoo_states: trio.MemorySendChannel[KazooState] | None = None
    _closing: bool = False
    _aborted: bool = False  # dropped without closing its session (`abort`)
    _released: bool = False  # kazoo's threads stopped and its resources freed
    _negotiated_timeout_ms: float = 0.0

    def _record_negotiated_timeout(self) -> None:
        """kazoo negotiates the session timeout but keeps it to itself: read it off the
        ConnectResponse as kazoo's connection thread receives it."""
        connection = self._kazoo._connection
        invoke = connection._invoke

        def recording_invoke(timeout: float, request: Any, xid: Any = None) -> Any:
            reply = invoke(timeout, request, xid)
            if isinstance(request, Connect):
                self._negotiated_timeout_ms = reply[0].time_out
            return reply

        connection._invoke = recording_invoke

    # -- state and sessions -------------------------------------------------------------------

    def add_listener(self, listener: StateListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: StateListener) -> None:
        self._listeners.remove(listener)

    def add_session_hooks(
        self,
        before_initializing_session: SessionHook | None = None,
        after_initializing_session: SessionHook | None = None,
    ) -> None:
        self._hooks.append((before_initializing_session, after_initializing_session))

    def _set_state(self, state: ClientState) -> None:
        if state is self.state:
            return
        self.state = state
        self._listeners.notify(state)

    def _read_session(self) -> None:
        session_id, password = self._kazoo.client_id or (0, b"")
        self.session_id, self.session_password = session_id, password
        self.session_timeout = self._negotiated_timeout_ms / 1000

    def _on_kazoo_state(self, kazoo_state: KazooState) -> None:
        """Runs on kazoo's connection thread: queue it for the Trio side, in order."""
        channel = self._kazoo_states
        if channel is not None:
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._queue_state, channel, kazoo_state)

    @staticmethod
    def _queue_state(channel: trio.MemorySendChannel[KazooState], state: KazooState) -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            channel.send_nowait(state)

    async def _follow_states(self, states: trio.MemoryReceiveChannel[KazooState]) -> None:
        """kazoo's LOST is an expired session (kazoo then opens a new one by itself): zkstub's
        order is EXPIRED, every `before` hook, the new session (CONNECTED), every `after` hook.
        Calls during the hooks see EXPIRED and raise SessionExpiredError."""
        async for kazoo_state in states:
            if self._closing:
                return
            if kazoo_state == KazooState.SUSPENDED:
                self._set_state(ClientState.SUSPENDED)
            elif kazoo_state == KazooState.CONNECTED:
                self._read_session()
                self._set_state(ClientState.CONNECTED)
            elif kazoo_state == KazooState.LOST:
                self._set_state(ClientState.EXPIRED)
                for before, _ in list(self._hooks):
                    if before is not None:
                        await before()
                await self._wait_new_session(states)
                if self._closing:
                    return
                for _, after in list(self._hooks):
                    if after is not None:
                        await after()

    async def _wait_new_session(self, states: trio.MemoryReceiveChannel[KazooState]) -> None:
        async for kazoo_state in states:
            if self._closing:
                return
            if kazoo_state == KazooState.CONNECTED:
                self._read_session()
                self._set_state(ClientState.CONNECTED)
                return

    # -- calls ----------------------------------------------------------------------------------

    def _relay(self, watch: Watcher | None) -> _WatchRelay | None:
        return None if watch is None else _WatchRelay(watch, self._token)

    def _flush_callbacks(self) -> None:
        """Wait until kazoo's callback thread has handed on every watch event it queued before
        this point, so a caller sees the events before the reply that follows them."""
        done = threading.Event()
        self._kazoo.handler.dispatch_callback(Callback("barrier", done.set, ()))
        done.wait()

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.state is ClientState.CLOSED:
            raise ClosedError("the client is closed")
        if self.state is ClientState.EXPIRED:
            raise SessionExpiredError("the session expired; a new one is being opened")

        def run() -> tuple[Any, BaseException | None]:
            try:
                result, error = fn(*args, **kwargs), None
            except kazoo_errors.KazooException as kazoo_error:
                result, error = None, _to_zk_error(kazoo_error)
            self._flush_callbacks()
            return result, error

        result, error = await trio.to_thread.run_sync(run)
        if error is not None:
            raise error
        return result

    async def create(
        self,
        path: str,
        data: bytes | None = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
        acl: Iterable[_acl.ACL] = _acl.OPEN_ACL_UNSAFE,
    ) -> str:
        # The Java client validates paths before sending them; kazoo does not (it would,
        # e.g., quietly drop a trailing slash).
        validate_path(path, sequential=sequence)
        return await self._call(
            self._kazoo.create,
            path,
            data,
            acl=_to_kazoo_acl(acl),
            ephemeral=ephemeral,
            sequence=sequence,
            makepath=make_parents,
        )

    async def get_acl(self, path: str) -> tuple[tuple[_acl.ACL, ...], Stat]:
        acls, stat = await self._call(self._kazoo.get_acls, path)
        entries = tuple(_acl.ACL(a.perms, a.id.scheme, a.id.id) for a in acls)
        return entries, _to_stat(stat)

    async def set_acl(self, path: str, acl: Iterable[_acl.ACL], version: int = -1) -> Stat:
        return _to_stat(await self._call(self._kazoo.set_acls, path, _to_kazoo_acl(acl), version))

    async def add_auth(self, scheme: str, credential: bytes | str) -> None:
        """kazoo's add_auth, which it sends again on every reconnection."""
        if isinstance(credential, bytes):
            credential = credential.decode()
        await self._call(self._kazoo.add_auth, scheme, credential)

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes | None, Stat]:
        data, stat = await self._call(self._kazoo.get, path, watch=self._relay(watch))
        return data, _to_stat(stat)

    async def set(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        return _to_stat(await self._call(self._kazoo.set, path, data, version))

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        stat = await self._call(self._kazoo.exists, path, watch=self._relay(watch))
        return None if stat is None else _to_stat(stat)

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return sorted(await self._call(self._kazoo.get_children, path, watch=self._relay(watch)))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        await self._call(self._kazoo.delete, path, version, recursive)

    async def sync(self, path: str) -> str:
        validate_path(path)  # kazoo sends any string
        return await self._call(self._kazoo.sync, path)

    # ZooKeeper 3.6+'s addWatch, removeWatches, getEphemerals and getAllChildrenNumber:
    # kazoo 2.11 has no request for any of them.

    async def add_watch(self, path: str, watcher: Watcher, *, recursive: bool = False) -> None:
        raise UnimplementedError("add_watch: kazoo 2.11 has no addWatch (persistent watches)")

    async def remove_watches(
        self, path: str, watcher_type: WatcherType, watcher: Watcher | None = None
    ) -> None:
        raise UnimplementedError("remove_watches: kazoo 2.11 has no removeWatches")

    async def get_ephemerals(self, prefix: str = "/") -> list[str]:
        raise UnimplementedError("get_ephemerals: kazoo 2.11 has no getEphemerals")

    async def get_all_children_number(self, path: str) -> int:
        raise UnimplementedError("get_all_children_number: kazoo 2.11 has no getAllChildrenNumber")

    async def multi_get(self, paths: Iterable[str]) -> list[Any]:
        raise UnimplementedError("multi_get: kazoo 2.11 has no multiRead")

    async def multi(self, ops: Iterable[MultiOp]) -> list[Any]:
        transaction = self._kazoo.transaction()
        for op in ops:
            match op:
                case CreateOp(data=None):
                    flags = (1 if op.ephemeral else 0) | (2 if op.sequence else 0)
                    acl = _to_kazoo_acl(op.acl)
                    self._add_raw(transaction, Create, op.path, None, acl, flags)
                case CreateOp():
                    transaction.create(op.path, op.data, acl=_to_kazoo_acl(op.acl),
                                       ephemeral=op.ephemeral, sequence=op.sequence)  # fmt: skip
                case DeleteOp():
                    transaction.delete(op.path, op.version)
                case SetDataOp(data=None):
                    self._add_raw(transaction, SetData, op.path, None, op.version)
                case SetDataOp():
                    transaction.set_data(op.path, op.data, op.version)
                case CheckOp():
                    transaction.check(op.path, op.version)
                case _:
                    raise TypeError(f"not a multi op: {op!r}")
        results = await self._call(transaction.commit)
        return [_multi_result(result) for result in results]

    def _add_raw(
        self, transaction: TransactionRequest, request: type, path: str, *args: Any
    ) -> None:
        """Null data in a multi: kazoo's transaction refuses `None` (its plain create and set
        accept it, and ZooKeeper stores null), so the request goes in as kazoo builds it."""
        transaction._add(request(_prefix_root(self._kazoo.chroot, path), *args), None)

    # -- lifetime -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        if self._released:
            return
        self._closing = True
        kazoo = self._kazoo
        with trio.CancelScope(shield=True):
            if self._aborted:
                # The connection thread is on its way out without a CloseRequest: wait for
                # it and free kazoo's threads (what `stop` does after sending the close).
                await trio.to_thread.run_sync(kazoo._safe_close)
            else:
                await trio.to_thread.run_sync(kazoo.stop)
            await trio.to_thread.run_sync(kazoo.close)
        self._released = True
        if self._kazoo_states is not None:
            self._kazoo_states.close()
        self._set_state(ClientState.CLOSED)

    def abort(self) -> None:
        """Drops the connection without closing the session (a crashed process): ZooKeeper
        keeps the session, and its ephemerals, until it expires. kazoo has no such call, so
        this does what its own connection-drop test hook does, with the client marked
        stopped first so that its connection thread exits instead of reconnecting; kazoo's
        threads are freed by `aclose` (`open_kazoo_client` calls it on the way out)."""
        if self.state is ClientState.CLOSED or self._aborted:
            return
        self._aborted = self._closing = True
        kazoo = self._kazoo
        kazoo._stopped.set()
        kazoo._queue.append((_CONNECTION_DROP, None))
        with contextlib.suppress(OSError):  # the connection thread is gone already
            kazoo._connection._write_sock.send(b"\0")
        self._set_state(ClientState.CLOSED)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def open_kazoo_client(
    hosts: str, *, session_timeout: float, chroot: str = ""
) -> AsyncIterator[KazooZkClient]:
    """A `KazooZkClient` on `hosts` ("host:port[,host:port...]"), `chroot` ("" or "/kafka")."""
    kazoo = KazooClient(hosts=hosts + chroot, timeout=session_timeout)
    client = KazooZkClient(kazoo, trio.lowlevel.current_trio_token(), chroot=chroot)
    send_states, receive_states = trio.open_memory_channel[KazooState](float("inf"))
    client._kazoo_states = send_states
    client._record_negotiated_timeout()
    kazoo.add_listener(client._on_kazoo_state)
    try:
        await trio.to_thread.run_sync(lambda: kazoo.start(timeout=CONNECT_TIMEOUT))
    except Exception as error:  # kazoo's start timeout is no KazooException
        await trio.to_thread.run_sync(kazoo.close)
        raise ConnectionLossError(f"cannot connect to ZooKeeper at {hosts}: {error}") from error
    client._read_session()
    client._set_state(ClientState.CONNECTED)
    async with actors.open_background_nursery() as nursery:
        nursery.start_soon(client._follow_states, receive_states)
        try:
            yield client
        finally:
            await client.aclose()
            nursery.cancel_scope.cancel()
