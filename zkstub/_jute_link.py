"""A client link over ZooKeeper's own wire protocol (jute): `ZkClientImpl` talks to a real
ZooKeeper (or zkstub's jute server) through it, as it talks to zkstub's msgpack server
through `RpcLink`.

The link does what ZooKeeper's ClientCnxn does on the wire: the connect handshake (a
ConnectResponse with no timeout means the session expired), increasing xids, one reader
that matches replies to requests in order (ZooKeeper answers in order), watch
notifications (xid -1) handed to the client, pings (xid -2), and after reconnecting to a
live session, setWatches (xid -8) with the client's watches and the last zxid it saw, so
the server re-registers them or fires what it missed.

Each TCP connection has its own state (`_Connection`): a lost or dropped connection fails
its own pending calls with ConnectionLossError, and its late replies can never reach the
next connection's callers. Requests are queued to a writer task without a checkpoint
between taking the xid, recording the pending call and queueing the frame, so a cancelled
caller cannot leave the pending queue out of step with what was sent.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any

import attrs
import trio

import transport
from zkstub import _jute as jute
from zkstub import _protocol as proto
from zkstub._acl import acl_from_wire
from zkstub._errors import (
    BadArgumentsError,
    ConnectionLossError,
    MarshallingError,
    NoNodeError,
    SessionExpiredError,
    ZkError,
    error_for_code,
)
from zkstub._types import CheckOp, CreateOp, DeleteOp, EventType, SetDataOp, WatchedEvent

logger = logging.getLogger("zkstub.jute")

__all__ = ["JuteLink"]

_INT32_MAX = 2**31 - 1


@attrs.define(eq=False)
class _Pending:
    """One request waiting for its reply."""

    xid: int
    op: int
    done: trio.Event = attrs.field(factory=trio.Event)
    header: jute.ReplyHeader | None = None
    response: Any = None
    error: ZkError | None = None

    def finish(self, header: jute.ReplyHeader, response: Any) -> None:
        self.header, self.response = header, response
        self.done.set()

    def fail(self, error: ZkError) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


class _Connection:
    """One TCP connection to a server and the requests sent on it."""

    def __init__(self, stream: transport.MessageConnection, request_timeout: float) -> None:
        self.stream = stream
        self.request_timeout = request_timeout
        self.pending: deque[_Pending] = deque()  # numbered requests and setWatches, in order
        self.pings: deque[_Pending] = deque()  # pings: answered in order, outside `pending`
        self.lost = trio.Event()
        self.scope = trio.CancelScope()
        self.frames_in, self.frames_out = trio.open_memory_channel[bytes](math.inf)

    def submit(self, xid: int, op: int, request: Any) -> _Pending:
        """Queues one request; never waits (see the module docstring)."""
        frame = jute.encode_request(xid, op, request)  # a bad argument raises here, unsent
        if self.lost.is_set():
            raise ConnectionLossError("the connection to ZooKeeper was lost")
        pending = _Pending(xid, op)
        (self.pings if op == jute.OpCode.PING else self.pending).append(pending)
        self.frames_in.send_nowait(frame)
        return pending

    async def wait(self, pending: _Pending) -> jute.ReplyHeader:
        """The reply's header (its response is `pending.response`). No reply within
        `request_timeout` (two thirds of the session timeout, as ZooKeeper's client
        reads) means the connection is dead: it is closed and the call fails."""
        with trio.move_on_after(self.request_timeout):
            await pending.done.wait()
        if not pending.done.is_set():
            self.fail(f"no reply to xid {pending.xid} within {self.request_timeout:.3g}s")
        if pending.error is not None:
            raise pending.error
        assert pending.header is not None
        return pending.header

    def fail(self, reason: str) -> None:
        """Ends the connection: every waiting call fails with ConnectionLossError, and the
        serving task closes the stream."""
        if self.lost.is_set():
            return
        logger.debug("connection to %s lost: %s", self.stream.peer_name, reason)
        self.lost.set()
        self.scope.cancel()
        self.frames_in.close()
        error = ConnectionLossError(f"connection to ZooKeeper lost: {reason}")
        for pending in (*self.pending, *self.pings):
            pending.fail(error)
        self.pending.clear()
        self.pings.clear()


RECONNECT_PAUSE_MAX = 1.0  # seconds (ClientCnxn.startConnect's r.nextInt(1000) ms)


class JuteLink:
    """Reaches a ZooKeeper server over jute, trying `hosts` in turn. `nursery` (where each
    connection's reader and writer run) is set by `open_client`."""

    def __init__(
        self,
        network: Any,
        hosts: list[tuple[str, int]],
        nursery: trio.Nursery | None = None,
    ) -> None:
        self.network = network
        self.hosts = hosts
        self.nursery = nursery
        self.last_zxid = 0  # the highest zxid any reply carried: what the session has seen
        self._next_host = 0
        self._xid = 0
        self._connection: _Connection | None = None
        self._client: Any = None

    # -- connecting -----------------------------------------------------------------------

    async def open(
        self, client: Any, timeout: float, session_id: int, password: bytes
    ) -> tuple[int, bytes, float]:
        """Connects to the next host and opens a session (`session_id` 0) or resumes one.
        Returns (session id, password, negotiated timeout in seconds)."""
        if self.nursery is None:
            raise RuntimeError("JuteLink.nursery is not set (open_client sets it)")
        self.drop()
        self._client = client
        if session_id:
            # As ZooKeeper's ClientCnxn: a lost session is resumed after a random pause of
            # up to a second. Without it two connections resuming the same session (this
            # one, and ZooKeeper's expire-a-session recipe, which opens a second connection
            # with the session's id) take it from each other for ever.
            await trio.sleep(client.rng.uniform(0, RECONNECT_PAUSE_MAX))
        host = self.hosts[self._next_host % len(self.hosts)]
        self._next_host += 1
        limit = timeout * 2 / 3
        try:
            stream = await self.network.connect(host, timeout=limit)
        except transport.TransportError as error:
            raise ConnectionLossError(f"cannot connect to {host[0]}:{host[1]}: {error}") from None
        stream.claims_raw = lambda body: True  # every frame is jute, not msgpack
        try:
            response = await self._handshake(stream, host, timeout, session_id, password)
            negotiated = response.timeout_ms / 1000
            connection = _Connection(stream, negotiated * 2 / 3)
            await self.nursery.start(self._serve, connection)
        except BaseException:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise
        self._connection = connection
        if session_id:
            await self._set_watches(connection, client)
        logger.debug(
            "session 0x%x on %s:%d, timeout %d ms",
            response.session_id,
            *host,
            response.timeout_ms,
        )
        return response.session_id, response.password or b"", negotiated

    async def _handshake(
        self, stream: Any, host: tuple[str, int], timeout: float, session_id: int, password: bytes
    ) -> jute.ConnectResponse:
        request = jute.ConnectRequest(
            protocol_version=0,
            last_zxid_seen=self.last_zxid,
            timeout_ms=min(max(int(timeout * 1000), 0), _INT32_MAX),
            session_id=session_id,
            password=password if session_id else bytes(16),
            read_only=False,
        )
        body = None
        with trio.move_on_after(timeout * 2 / 3):
            try:
                await stream.send_bytes(jute.encode_connect_request(request))
                body = await stream.receive()
            except transport.TransportError as error:
                raise ConnectionLossError(f"connecting to {host[0]}:{host[1]}: {error}") from None
        if body is None:
            raise ConnectionLossError(f"no answer to connect from {host[0]}:{host[1]}")
        try:
            response = jute.decode_connect_response(body)
        except MarshallingError as error:
            raise ConnectionLossError(
                f"bad connect answer from {host[0]}:{host[1]}: {error}"
            ) from None
        if response.timeout_ms <= 0:
            raise SessionExpiredError(f"session 0x{session_id:x} has expired")
        return response

    async def _set_watches(self, connection: _Connection, client: Any) -> None:
        """ClientCnxn.primeConnection: the watches go back in setWatches requests of about
        SET_WATCHES_MAX_LENGTH characters of paths each, with the last zxid seen, so the
        server fires at once what changed while the client was away."""
        lists = list(client.watched_paths())  # data, exist, child[, persistent, recursive]
        queue = deque((kind, path) for kind, paths in enumerate(lists) for path in paths)
        waiting = []
        while queue:
            batch: list[list[str]] = [[] for _ in range(5)]
            length = 0
            while queue and length < jute.SET_WATCHES_MAX_LENGTH:
                kind, path = queue.popleft()
                batch[kind].append(path)
                length += len(path)
            request = jute.SetWatchesRequest(self.last_zxid, *map(tuple, batch))
            # setWatches2 only when there are persistent watches, as ClientCnxn chooses:
            # a server before 3.6 knows only setWatches.
            op = jute.OpCode.SET_WATCHES2 if batch[3] or batch[4] else jute.OpCode.SET_WATCHES
            waiting.append(connection.submit(jute.SET_WATCHES_XID, op, request))
        for pending in waiting:
            header = await connection.wait(pending)
            if header.err:
                logger.warning("setWatches failed: %s", error_for_code(header.err))

    async def _serve(self, connection: _Connection, *, task_status=trio.TASK_STATUS_IGNORED):
        try:
            with connection.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, connection)
                    nursery.start_soon(self._write, connection)
                    task_status.started()
        finally:
            connection.fail("closed")
            with trio.CancelScope(shield=True):
                await connection.stream.aclose()

    async def _write(self, connection: _Connection) -> None:
        try:
            async for frame in connection.frames_out:
                frames = [frame]
                while True:
                    try:
                        frames.append(connection.frames_out.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await connection.stream.send_frames(frames)
        except transport.TransportError as error:
            connection.fail(str(error))

    async def _read(self, connection: _Connection) -> None:
        try:
            while True:
                body = await connection.stream.receive()
                if not self._on_reply(connection, body):
                    return
        except (transport.TransportError, MarshallingError) as error:
            connection.fail(str(error))

    def _on_reply(self, connection: _Connection, body: Any) -> bool:
        """One reply; False when it ended the connection."""
        if not isinstance(body, bytes):
            connection.fail(f"a frame that is not jute: {body!r:.80}")
            return False
        header = jute.decode_reply_header(body)
        if header.zxid > 0:
            self.last_zxid = max(self.last_zxid, header.zxid)
        if header.xid == jute.NOTIFICATION_XID:
            self._deliver(jute.decode_reply_body(header, None, body))
            return True
        if header.xid == jute.PING_XID:
            if connection.pings:
                connection.pings.popleft().finish(header, None)
            else:
                logger.debug("a ping reply nobody waits for")
            return True
        if header.xid == jute.AUTH_XID:
            # ZooKeeper answers an auth as it reads it, ahead of the requests still in its
            # pipeline: the auth pending is the first one, wherever it waits.
            auth = next((p for p in connection.pending if p.xid == jute.AUTH_XID), None)
            if auth is None:
                logger.debug("auth reply, err %d", header.err)
            else:
                connection.pending.remove(auth)
                auth.finish(header, None)
            return True
        if not connection.pending:
            connection.fail(f"a reply to xid {header.xid}, which was not asked")
            return False
        pending = connection.pending[0]
        if pending.xid != header.xid:
            connection.fail(f"xid out of order: got {header.xid}, expected {pending.xid}")
            return False
        connection.pending.popleft()
        try:
            response = jute.decode_reply_body(header, pending.op, body)
        except MarshallingError as error:
            pending.fail(error)
            connection.fail(f"a malformed reply to xid {header.xid}: {error}")
            return False
        pending.finish(header, response)
        return True

    def _deliver(self, event: jute.WatcherEvent) -> None:
        try:
            kind = EventType(event.type)
        except ValueError:
            logger.debug("ignoring a watch event of type %d on %s", event.type, event.path)
            return
        if event.path is None:
            logger.debug("ignoring a watch event without a path")
            return
        if self._client is not None:
            self._client._on_push_event(WatchedEvent(kind, event.path))

    # -- requests -------------------------------------------------------------------------

    def _live(self) -> _Connection:
        connection = self._connection
        if connection is None or connection.lost.is_set():
            raise ConnectionLossError("not connected to ZooKeeper")
        return connection

    def _next_xid(self) -> int:
        self._xid = self._xid % _INT32_MAX + 1  # ClientCnxn's xids: 1, 2, ... wrapping
        return self._xid

    async def _request(self, op: int, request: Any) -> tuple[jute.ReplyHeader, Any]:
        connection = self._live()
        pending = connection.submit(self._next_xid(), op, request)
        header = await connection.wait(pending)
        return header, pending.response

    async def call(self, op: str, args: list[Any]) -> Any:
        """One request in zkstub's msgpack form (see `_protocol`), answered in that form."""
        match op:
            case "create":
                create = proto.op_from_wire(["create", *args])
                request = _create_request(create)
                return (await self._checked(jute.OpCode.CREATE, request, create.path)).path
            case proto.AUTH:
                scheme, credential = args
                connection = self._live()
                pending = connection.submit(jute.AUTH_XID, jute.OpCode.AUTH,
                                            jute.AuthRequest(0, scheme, credential))  # fmt: skip
                header = await connection.wait(pending)
                if header.err:
                    connection.fail("authentication failed")  # the server closes it too
                    raise error_for_code(header.err)
                return None
            case "get_acl":
                (path,) = args
                response = await self._checked(jute.OpCode.GET_ACL, jute.PathRequest(path), path)
                acl = [[e.perms, e.scheme, e.id] for e in response.acl]
                return [acl, proto.stat_to_wire(response.stat)]
            case "set_acl":
                path, acl, version = args
                entries = tuple(jute.ACL(e.perms, e.scheme, e.id) for e in acl_from_wire(acl))
                request = jute.SetACLRequest(path, entries, version)
                response = await self._checked(jute.OpCode.SET_ACL, request, path)
                return proto.stat_to_wire(response.stat)
            case "get":
                path, watch = args
                request = jute.PathWatchRequest(path, watch)
                response = await self._checked(jute.OpCode.GET_DATA, request, path)
                return [response.data, proto.stat_to_wire(response.stat)]
            case "exists":
                path, watch = args
                request = jute.PathWatchRequest(path, watch)
                try:
                    response = await self._checked(jute.OpCode.EXISTS, request, path)
                except NoNodeError:  # the Java client's answer: no stat (a watch is left)
                    return None
                return proto.stat_to_wire(response.stat)
            case "children":
                path, watch = args
                request = jute.PathWatchRequest(path, watch)
                response = await self._checked(jute.OpCode.GET_CHILDREN, request, path)
                return list(response.children)
            case "set":
                path, data, version = args
                request = jute.SetDataRequest(path, data, version)
                response = await self._checked(jute.OpCode.SET_DATA, request, path)
                return proto.stat_to_wire(response.stat)
            case "delete":
                path, version = args
                await self._checked(jute.OpCode.DELETE, jute.DeleteRequest(path, version), path)
                return True
            case "check":
                path, version = args
                # A lone check (op 13): ZooKeeper 3.8 answers it with a SetDataResponse
                # whose stat it never fills, which it cannot send; as a one-op multi it
                # is the same check, answered.
                result = (await self.call("multi", [["check", path, version]]))[0]
                value = proto.multi_result_from_wire(result)
                if isinstance(value, ZkError):
                    raise value
                return value
            case "multi":
                return await self._multi(args)
            case "multi_get":
                return await self._multi_get(args)
            case "add_watch":
                path, mode = args
                request = jute.AddWatchRequest(path, mode)
                await self._checked(jute.OpCode.ADD_WATCH, request, path)
                return None
            case "remove_watches" | "check_watches":
                path, watcher_type = args
                code = (
                    jute.OpCode.REMOVE_WATCHES
                    if op == "remove_watches"
                    else jute.OpCode.CHECK_WATCHES
                )
                await self._checked(code, jute.WatchesRequest(path, watcher_type), path)
                return None
            case "ephemerals":
                (prefix,) = args
                request = jute.PathRequest(prefix)
                response = await self._checked(jute.OpCode.GET_EPHEMERALS, request, prefix)
                return list(response.paths)
            case "all_children_number":
                (path,) = args
                request = jute.PathRequest(path)
                response = await self._checked(jute.OpCode.GET_ALL_CHILDREN_NUMBER, request, path)
                return response.number
            case "sync":
                (path,) = args
                response = await self._checked(jute.OpCode.SYNC, jute.PathRequest(path), path)
                return response.path
        raise BadArgumentsError(f"unknown request {op!r}")  # as zkstub's server answers

    async def _checked(self, op: int, request: Any, path: str | None) -> Any:
        header, response = await self._request(op, request)
        if header.err:
            raise error_for_code(header.err, path=path)
        return response

    async def _multi(self, wire_ops: list[Any]) -> list[Any]:
        ops = [proto.op_from_wire(one) for one in wire_ops]
        records: list[tuple[jute.OpCode, Any]] = []
        for one in ops:
            match one:
                case CreateOp():
                    records.append((jute.OpCode.CREATE, _create_request(one)))
                case DeleteOp():
                    records.append((jute.OpCode.DELETE, jute.DeleteRequest(one.path, one.version)))
                case SetDataOp():
                    set_data = jute.SetDataRequest(one.path, one.data, one.version)
                    records.append((jute.OpCode.SET_DATA, set_data))
                case CheckOp():
                    check = jute.CheckVersionRequest(one.path, one.version)
                    records.append((jute.OpCode.CHECK, check))
        response = await self._checked(jute.OpCode.MULTI, jute.MultiRequest(tuple(records)), None)
        results = response.results
        if len(results) != len(ops):
            raise MarshallingError(f"a multi of {len(ops)} ops got {len(results)} results")
        return [_multi_result(one, result) for one, result in zip(ops, results, strict=True)]

    async def _multi_get(self, paths: list[str]) -> list[Any]:
        """ZooKeeper's multiRead of getData ops (no watch): each read's result or error."""
        records = tuple(
            (jute.OpCode.GET_DATA, jute.PathWatchRequest(path, False)) for path in paths
        )
        response = await self._checked(jute.OpCode.MULTI_READ, jute.MultiRequest(records), None)
        results = response.results
        if len(results) != len(paths):
            raise MarshallingError(f"a multiRead of {len(paths)} ops got {len(results)} results")
        out: list[Any] = []
        for path, result in zip(paths, results, strict=True):
            match result:
                case jute.ErrorResult(err=err):
                    out.append(proto.multi_result_to_wire(error_for_code(err, path=path)))
                case jute.GetDataResponse(data=data, stat=stat):
                    out.append(proto.multi_result_to_wire([data, proto.stat_to_wire(stat)]))
                case _:
                    raise MarshallingError(f"an unexpected multiRead result {result!r}")
        return out

    async def ping(self) -> None:
        connection = self._live()
        pending = connection.submit(jute.PING_XID, jute.OpCode.PING, None)
        header = await connection.wait(pending)
        if header.err:
            raise error_for_code(header.err)

    async def close_session(self) -> None:
        """closeSession, answered: the server has then removed the session's ephemerals
        (and closes the connection)."""
        try:
            header, _ = await self._request(jute.OpCode.CLOSE_SESSION, None)
        except ConnectionLossError:
            return
        if header.err:
            logger.debug("closeSession answered %s", error_for_code(header.err))

    def drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.fail("dropped by the client")

    async def wait_lost(self) -> None:
        if self._connection is None:
            return
        await self._connection.lost.wait()


def _create_request(op: CreateOp) -> jute.CreateRequest:
    flags = jute.flags_of(op.ephemeral, op.sequence)
    acl = tuple(jute.ACL(e.perms, e.scheme, e.id) for e in op.acl)
    return jute.CreateRequest(op.path, op.data, acl, flags)


def _multi_result(op: Any, result: Any) -> list[Any]:
    """One multi result in `multi_result_to_wire`'s form. A failed multi comes back from
    ZooKeeper as ErrorResults for every op: 0 for those before the failing one (rolled
    back), its error, -2 for those after (not tried): zkstub's RolledBackError, the error,
    RuntimeInconsistencyError."""
    match result:
        case jute.ErrorResult(err=err):
            return proto.multi_result_to_wire(error_for_code(err, path=op.path))
        case jute.PathResponse(path=path) | jute.Create2Response(path=path):
            return proto.multi_result_to_wire(path)
        case jute.StatResponse(stat=stat):
            return proto.multi_result_to_wire(stat)
        case None:
            return proto.multi_result_to_wire(True)
    raise MarshallingError(f"an unexpected multi result {result!r}")
