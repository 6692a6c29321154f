"""ZooKeeper's own wire protocol (jute) on zkstub's client port: the Trio shell that serves
one jute connection.

A jute request is decoded at the edge (`_jute`) into the request value zkstub's msgpack
protocol also produces (an op name and its arguments), handled by the same
`ZkServer.handle`, and its result encoded back as ZooKeeper's response record: the two
protocols share one request path, as DESIGN.md section 10 asks.

Per connection, requests are handled one at a time in arrival order (ZooKeeper's
per-session order) and their replies queued in that order with the watch notifications
their writes fire, which ZooKeeper sends before the reply of the write that fired them.
What leaves the connection waits until the writes before it are durable (`ZkServer.sync`):
ZooKeeper applies a transaction, and so fires its watches and answers it, only after its
log record is synced. Requests keep being read and handled while a sync is under way, so a
client that pipelines (kazoo, ZooKeeper's Java client) shares one fsync among many writes.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import trio

import transport
from zkstub import _jute as jute
from zkstub._acl import ACL, Identity, acl_from_wire, acl_to_wire
from zkstub._errors import (
    AuthFailedError,
    InvalidACLError,
    MarshallingError,
    NoNodeError,
    SessionExpiredError,
    UnimplementedError,
    ZkError,
)
from zkstub._protocol import op_to_wire
from zkstub._types import CheckOp, CreateOp, DeleteOp, SetDataOp, Stat, WatchedEvent

if TYPE_CHECKING:
    from zkstub._connections import GuardedConnection
    from zkstub._sessions import Session
    from zkstub._tree import DataTree


class ZkServer(Protocol):
    """What a jute connection uses of `zkstub._server.ZkServer` (named here, not imported:
    the server imports this module)."""

    tree: DataTree
    jute_maxbuffer: int

    def open_session(self, timeout: object, session_id: int, password: bytes) -> Session: ...
    def attach(self, session_id: int, deliver: Any) -> None: ...
    def detach(self, session_id: int, deliver: Any) -> None: ...
    def attach_connection(self, session_id: int, connection: Any) -> None: ...
    def detach_connection(self, session_id: int, connection: Any) -> None: ...
    def handle(
        self, session_id: int, op: str, args: list[Any], identities: tuple[Identity, ...] = ()
    ) -> Any: ...
    def authenticate(
        self, identities: tuple[Identity, ...], scheme: Any, credential: Any
    ) -> tuple[Identity, ...]: ...
    def ping(self, session_id: int) -> None: ...
    def close_session(self, session_id: int) -> None: ...
    def set_watches(self, session_id: int, request: Any) -> None: ...
    async def sync(self) -> None: ...


logger = logging.getLogger("zkstub.jute")

OpCode = jute.OpCode
# What a ConnectResponse says to a client whose session is gone (ZooKeeper's
# ZooKeeperServer.reopenSession with valid=false): timeout 0, session 0, an empty password.
EXPIRED_CONNECT_RESPONSE = jute.ConnectResponse(0, 0, 0, bytes(16), False)
SYNC_CONNECTED = 3  # ZooKeeper's KeeperState.SyncConnected, the state notifications carry
# A notification's reply header (ClientCnxn.NOTIFICATION_XID, zxid -1, no error).
NOTIFICATION_HEADER = jute.ReplyHeader(jute.NOTIFICATION_XID, -1, 0)


def claims_connect(first_frame_body: bytes) -> bool:
    """A jute ConnectRequest starts with its int32 protocol version, 0, so a zero byte; a
    msgpack envelope starts with an array marker."""
    return first_frame_body[:1] == b"\x00"


class JuteConnection:
    """One client connection speaking jute, from its ConnectRequest on."""

    def __init__(self, server: ZkServer, connection: GuardedConnection) -> None:
        self.server = server
        self.connection = connection
        self.session_id: int | None = None
        self._outbox: deque[bytes] = deque()
        self._queued = trio.lowlevel.ParkingLot()
        self._closing = False
        # ServerCnxn.authInfo: the client's address, then what its `auth` requests add.
        self.identities: tuple[Identity, ...] = (("ip", str(connection.peer_address[0])),)

    # -- the connection's life ------------------------------------------------------------

    async def serve(self, connect_body: bytes) -> None:
        try:
            await self._serve(connect_body)
        finally:
            self._detach()
            with trio.CancelScope(shield=True):
                await self.connection.aclose()  # what is queued goes first (for a while)

    async def _serve(self, connect_body: bytes) -> None:
        try:
            request = jute.decode_connect_request(connect_body)
        except ZkError as error:
            logger.warning("Closing the connection from %s: a malformed connect request (%s)",
                           self.connection.peer_name, error)  # fmt: skip
            return
        if not await self._open_session(request):
            return
        # Past the handshake, a frame over jute.maxbuffer ends the connection, as
        # ZooKeeper's "Len error" does.
        self.connection.max_frame_bytes = self.server.jute_maxbuffer
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_loop)
            await self._read_loop()
            # The client closed its session, or went: what is queued still goes out.
            self._closing = True
            self._queued.unpark_all()

    async def _open_session(self, request: jute.ConnectRequest) -> bool:
        server = self.server
        if request.last_zxid_seen > server.tree.zxid:
            # ZooKeeper refuses a client that has seen a newer state than this server has
            # (it would go back in time); the client tries another server.
            logger.info("Refusing session 0x%x from %s: it has seen zxid 0x%x, this server "
                        "is at 0x%x", request.session_id, self.connection.peer_name,
                        request.last_zxid_seen, server.tree.zxid)  # fmt: skip
            return False
        try:
            session = server.open_session(request.timeout_ms / 1000, request.session_id,
                                          request.password)  # fmt: skip
        except SessionExpiredError:
            expired = jute.encode_connect_response(
                EXPIRED_CONNECT_RESPONSE, old_client=request.old_client
            )
            await self._send_now(expired)
            return False
        except ZkError as error:
            logger.warning("Refused a connect from %s: %s", self.connection.peer_name, error)
            return False
        self.session_id = self.connection.session_id = session.session_id
        server.attach_connection(session.session_id, self)
        server.attach(session.session_id, self._deliver)
        await server.sync()
        response = jute.ConnectResponse(
            0, round(session.timeout * 1000), session.session_id, session.password, False
        )
        await self._send_now(jute.encode_connect_response(response, old_client=request.old_client))
        return True

    async def _send_now(self, frame: bytes) -> None:
        await self.connection.send_frames([frame])

    def _detach(self) -> None:
        if self.session_id is not None:
            self.server.detach(self.session_id, self._deliver)
            self.server.detach_connection(self.session_id, self)

    def close(self) -> None:
        """The server ending this connection: another one took its session over, or a
        test dropped it (`ZkServer.drop_connections`)."""
        self.connection.abort("closed by the server; its session lives on", logging.INFO)

    # -- outgoing -------------------------------------------------------------------------

    def _queue(self, frame: bytes) -> None:
        self._outbox.append(frame)
        self._queued.unpark()

    def _deliver(self, event: WatchedEvent | None) -> None:
        if event is None:
            # Expired: closed at once (a client that stops reading would otherwise hold it
            # open); the client learns of the expiry when it reconnects.
            self.connection.abort(f"session 0x{self.session_id:x} expired", logging.INFO)
            return
        notification = jute.WatcherEvent(event.type.value, SYNC_CONNECTED, event.path)
        self._queue(jute.encode_reply(NOTIFICATION_HEADER, OpCode.NOTIFICATION, notification))

    async def _write_loop(self) -> None:
        outbox = self._outbox
        while True:
            while not outbox:
                if self._closing:
                    return
                await self._queued.park()
            batch = list(outbox)
            outbox.clear()
            await self.server.sync()  # the writes these answer are on disk first
            await self.connection.send_frames(batch)

    # -- incoming -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        while True:
            try:
                body = await self.connection.receive()
            except transport.ConnectionClosedError:
                return
            except transport.TransportError as error:
                logger.warning("Closing the connection from %s: %s",
                               self.connection.peer_name, error)  # fmt: skip
                return
            assert isinstance(body, bytes)  # a raw connection gives frame bodies
            if not self._handle_frame(body):
                return
            await trio.lowlevel.checkpoint()

    def _handle_frame(self, body: bytes) -> bool:
        """Handles one request and queues its reply; False when the connection ends."""
        try:
            xid, op, request = jute.decode_request(body)
        except jute.JuteRequestError as error:
            logger.info("Request 0x%x (op %d) from %s: %s", error.xid, error.op,
                        self.connection.peer_name, error.error)  # fmt: skip
            self._reply(error.xid, error.op, error.error.code, None)
            return True
        except ZkError as error:
            logger.warning("Closing the connection from %s: an unreadable request (%s)",
                           self.connection.peer_name, error)  # fmt: skip
            return False
        session_id = self.session_id
        assert session_id is not None
        if op == OpCode.CLOSE_SESSION:
            self.server.close_session(session_id)
            self._detach()
            self.session_id = self.connection.session_id = None
            self._reply(xid, op, 0, None)
            return False
        try:
            response = self._answer(session_id, xid, op, request)
        except ZkError as error:
            if isinstance(error, SessionExpiredError):
                self.connection.abort(f"session 0x{session_id:x} expired", logging.INFO)
                return False
            self._reply(xid, op, error.code, None)
            return not isinstance(error, AuthFailedError)  # ZooKeeper closes after that
        self._reply(xid, op, 0, response)
        return True

    def _reply(self, xid: int, op: int, err: int, response: Any) -> None:
        # ZooKeeper answers an auth outside its request pipeline, with zxid 0.
        zxid = 0 if op == OpCode.AUTH else self.server.tree.zxid
        header = jute.ReplyHeader(xid, zxid, err)
        self._queue(jute.encode_reply(header, op, response))

    def _answer(self, session_id: int, xid: int, op: int, request: Any) -> Any:
        """The response record for one request, or its ZkError."""
        server = self.server
        match op:
            case OpCode.PING:
                server.ping(session_id)
                return None
            case OpCode.SET_WATCHES | OpCode.SET_WATCHES2:
                server.ping(session_id)
                server.set_watches(session_id, request)
                return None
            case OpCode.AUTH:
                # AuthFailed (an unknown scheme) closes the connection (`_handle_frame`).
                self.identities = server.authenticate(self.identities, request.scheme,
                                                      request.auth)  # fmt: skip
                return None
            case OpCode.CREATE | OpCode.CREATE2:
                create = op_to_wire(self._create_op(request))[1:]
                path = self._handle(session_id, "create", create)
                if op == OpCode.CREATE:
                    return jute.PathResponse(path)
                return jute.Create2Response(path, self._stat(path))
            case OpCode.DELETE:
                self._handle(session_id, "delete", [request.path, request.version])
                return None
            case OpCode.EXISTS:
                stat = self._handle(session_id, "exists", [request.path, request.watch])
                if stat is None:
                    raise NoNodeError(path=request.path)  # the watch stays, as in ZooKeeper
                return jute.StatResponse(Stat(*stat))
            case OpCode.GET_DATA:
                data, stat = self._handle(session_id, "get", [request.path, request.watch])
                return jute.GetDataResponse(data, Stat(*stat))
            case OpCode.SET_DATA:
                stat = self._handle(session_id, "set",
                                     [request.path, request.data, request.version])  # fmt: skip
                return jute.StatResponse(Stat(*stat))
            case OpCode.GET_CHILDREN:
                names = self._handle(session_id, "children", [request.path, request.watch])
                return jute.ChildrenResponse(tuple(names))
            case OpCode.GET_CHILDREN2:
                names = self._handle(session_id, "children", [request.path, request.watch])
                return jute.Children2Response(tuple(names), self._stat(request.path))
            case OpCode.GET_ACL:
                acl, stat = self._handle(session_id, "get_acl", [request.path])
                entries = tuple(jute.ACL(e.perms, e.scheme, e.id) for e in acl_from_wire(acl))
                return jute.GetACLResponse(entries, Stat(*stat))
            case OpCode.SET_ACL:
                acl = acl_to_wire(_acl_of(request.acl, request.path))
                stat = self._handle(session_id, "set_acl", [request.path, acl, request.version])
                return jute.StatResponse(Stat(*stat))
            case OpCode.SYNC:
                return jute.PathResponse(self._handle(session_id, "sync", [request.path]))
            case OpCode.ADD_WATCH:
                self._handle(session_id, "add_watch", [request.path, request.mode])
                return jute.ErrorResult(0)  # ZooKeeper's addWatch reply: one int, 0
            case OpCode.REMOVE_WATCHES:
                self._handle(session_id, "remove_watches", [request.path, request.type])
                return None
            case OpCode.CHECK_WATCHES:
                self._handle(session_id, "check_watches", [request.path, request.type])
                return None
            case OpCode.GET_EPHEMERALS:
                paths = self._handle(session_id, "ephemerals", [request.path])
                return jute.EphemeralsResponse(tuple(paths))
            case OpCode.GET_ALL_CHILDREN_NUMBER:
                number = self._handle(session_id, "all_children_number", [request.path])
                return jute.NumberResponse(number)
            case OpCode.CHECK:
                self._handle(session_id, "check", [request.path, request.version])
                return None
            case OpCode.MULTI:
                return self._multi(session_id, request)
            case OpCode.MULTI_READ:
                return self._multi_read(session_id, request)
        raise UnimplementedError(f"zkstub does not implement {_op_name(op)}")

    def _handle(self, session_id: int, op: str, args: list[Any]) -> Any:
        return self.server.handle(session_id, op, args, self.identities)

    def _stat(self, path: str) -> Stat:
        stat = self.server.tree.exists(path)
        if stat is None:
            raise NoNodeError(path=path)
        return stat

    @staticmethod
    def _create_op(request: Any) -> CreateOp:
        ephemeral, sequence = jute.create_mode(request.flags)
        acl = _acl_of(request.acl, request.path)
        return CreateOp(request.path, request.data, ephemeral, sequence, acl)

    def _multi(self, session_id: int, request: Any) -> Any:
        ops = []
        for op, sub in request.ops:
            match op:
                case OpCode.CREATE | OpCode.CREATE2:
                    ops.append(op_to_wire(self._create_op(sub)))
                case OpCode.DELETE:
                    ops.append(op_to_wire(DeleteOp(sub.path, sub.version)))
                case OpCode.SET_DATA:
                    ops.append(op_to_wire(SetDataOp(sub.path, sub.data, sub.version)))
                case OpCode.CHECK:
                    ops.append(op_to_wire(CheckOp(sub.path, sub.version)))
                case _:
                    raise UnimplementedError(f"{_op_name(op)} cannot be part of a multi")
        results = self._handle(session_id, "multi", ops)
        return _multi_response([op for op, _ in request.ops], results, self.server.tree.exists)

    def _multi_read(self, session_id: int, request: Any) -> Any:
        """Each read on its own: one that fails gives its ErrorResult, the rest still run."""
        results: list[Any] = []
        for op, sub in request.ops:
            try:
                if op == OpCode.GET_CHILDREN:
                    names = self._handle(session_id, "children", [sub.path, sub.watch])
                    results.append(jute.ChildrenResponse(tuple(names)))
                elif op == OpCode.GET_DATA:
                    data, stat = self._handle(session_id, "get", [sub.path, sub.watch])
                    results.append(jute.GetDataResponse(data, Stat(*stat)))
                else:
                    raise MarshallingError(f"{_op_name(op)} cannot be part of a multiRead")
            except ZkError as error:
                results.append(jute.ErrorResult(error.code))
        return jute.MultiResponse(tuple(results))


def _acl_of(entries: Any, path: str | None) -> tuple[ACL, ...]:
    """A request's jute ACL entries. An Id without a scheme is InvalidACL, as fixupACL
    finds it; one without an id too, but for `auth`, whose id fixupACL never reads (kazoo
    sends its "" as null)."""
    acl = []
    for e in entries:
        if e.scheme is None or (e.id is None and e.scheme != "auth"):
            raise InvalidACLError(path=path)
        acl.append(ACL(e.perms, e.scheme, e.id or ""))
    return tuple(acl)


def _multi_response(ops: list[int], results: list[Any], stat_of: Any) -> Any:
    """A multi's results (in zkstub's wire form) as ZooKeeper's OpResults. A failed multi
    has an ErrorResult for every op: RolledBack (0) before the failing one, its error, and
    RuntimeInconsistency after it, exactly as zkstub's tree returns them. A create2's stat
    is the node's after the whole multi (ZooKeeper's is the one at creation: they differ
    only when a later op of the same multi changed the node it created)."""
    out: list[Any] = []
    failed = any(kind == "error" for kind, *_ in results)
    for op, (kind, value, *_) in zip(ops, results, strict=True):
        if failed:
            out.append(jute.ErrorResult(value if kind == "error" else 0))
        elif op == OpCode.CREATE:
            out.append(jute.PathResponse(value))
        elif op == OpCode.CREATE2:
            out.append(jute.Create2Response(value, stat_of(value)))
        elif op == OpCode.SET_DATA:
            out.append(jute.StatResponse(Stat(*value)))
        else:  # delete, check: an empty result
            out.append(None)
    # An empty result (None) is a delete's or a check's: the reply's op header says which.
    types = tuple(-1 if failed else op for op in ops)
    return jute.MultiResponse(tuple(out), types)


def _op_name(op: int) -> str:
    try:
        return f"{OpCode(op).name} (op {op})"
    except ValueError:
        return f"op {op}"
