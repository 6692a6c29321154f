"""ZooKeeper's own wire protocol (jute, as ZooKeeper 3.5-3.8 clients and servers send it),
sans-IO: records, and the functions that turn frames into records and back.

Both ends use it: zkstub's jute server shell (decode requests, encode replies) and
`JuteLink`, the client link that talks to a real ZooKeeper (encode requests, decode
replies). The reference is ZooKeeper 3.8's `zookeeper.jute`, `MultiOperationRecord` /
`MultiResponse`, `ClientCnxn` and `FinalRequestProcessor`.

Framing is jute's: a 4-byte big-endian length, then the body. Every encoder here returns a
whole frame (length prefix included, ready for `MessageConnection.send_bytes`); every
decoder takes one frame's body, without the prefix (what `MessageConnection.receive` hands
out once `claims_raw` said yes).

What comes off the wire is untrusted: a truncated body, a negative or oversized length,
bad UTF-8 or an unknown record kind raise `MarshallingError` naming what was being read
and where, never IndexError / struct.error / UnicodeDecodeError.

Null strings and vectors: jute writes -1 for a null ustring, buffer or vector. A null
ustring decodes to None (kazoo sends an empty string as null), a null buffer to None
(ZooKeeper stores null data apart from empty data), a null vector to an empty tuple (every
reader in ZooKeeper treats the two alike).
"""

from __future__ import annotations

import enum
import logging
import struct
from collections.abc import Callable
from typing import Any

import attrs

from zkstub._errors import (
    BadArgumentsError,
    MarshallingError,
    UnimplementedError,
    ZkError,
)
from zkstub._types import Stat

logger = logging.getLogger("zkstub.jute")

__all__ = [
    "ACL",
    "AUTH_XID",
    "FOUR_LETTER_WORDS",
    "NOTIFICATION_XID",
    "OPEN_ACL_UNSAFE",
    "PING_XID",
    "SET_WATCHES_XID",
    "AddWatchRequest",
    "AuthRequest",
    "CheckVersionRequest",
    "Children2Response",
    "ChildrenResponse",
    "ClientInfo",
    "ConnectRequest",
    "ConnectResponse",
    "Create2Response",
    "CreateMode",
    "CreateRequest",
    "CreateTTLRequest",
    "DeleteRequest",
    "EphemeralsResponse",
    "ErrorResult",
    "GetACLResponse",
    "GetDataResponse",
    "JuteReader",
    "JuteRequestError",
    "JuteWriter",
    "MultiRequest",
    "MultiResponse",
    "NumberResponse",
    "OpCode",
    "PathRequest",
    "PathResponse",
    "PathWatchRequest",
    "ReconfigRequest",
    "ReplyHeader",
    "SaslRequest",
    "SaslResponse",
    "SetACLRequest",
    "SetDataRequest",
    "SetWatchesRequest",
    "StatResponse",
    "WatcherEvent",
    "WatchesRequest",
    "WhoAmIResponse",
    "create_mode",
    "decode_connect_request",
    "decode_connect_response",
    "decode_reply",
    "decode_reply_body",
    "decode_reply_header",
    "decode_request",
    "encode_connect_request",
    "encode_connect_response",
    "encode_reply",
    "encode_request",
    "flags_of",
    "is_four_letter_word",
]


class OpCode(enum.IntEnum):
    """ZooKeeper's `ZooDefs.OpCode` (the request header's `type`)."""

    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECK_WATCHES = 17
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    MULTI_READ = 22
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    GET_EPHEMERALS = 103
    GET_ALL_CHILDREN_NUMBER = 104
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107
    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1


# ClientCnxn's reserved xids: replies with these are not answers to a numbered request.
NOTIFICATION_XID = -1
PING_XID = -2
AUTH_XID = -4
SET_WATCHES_XID = -8

# Watcher.Event.KeeperState.SyncConnected: the state a server sends with every watch event.
SYNC_CONNECTED_STATE = 3

# ClientCnxn.SET_WATCHES_MAX_LENGTH: a reconnect's setWatches is split into requests of
# about this many characters of paths (a larger packet would pass jute.maxbuffer).
SET_WATCHES_MAX_LENGTH = 128 * 1024

# ZooKeeper 3.8's FourLetterCommands, in its order. The server tells one from a request by
# the first four bytes of a connection (read as a length, each is a huge positive number).
FOUR_LETTER_WORDS: tuple[bytes, ...] = (
    b"conf", b"cons", b"crst", b"dirs", b"dump", b"envi", b"gtmk", b"ruok", b"stmk",
    b"srvr", b"srst", b"stat", b"wchc", b"wchp", b"wchs", b"mntr", b"isro", b"hash",
)  # fmt: skip
# What telnet sends when it closes (FourLetterCommands.telnetCloseCmd): known to the server
# as a command, so that it is answered and closed rather than read as a negative length.
TELNET_CLOSE = b"\xff\xf4\xff\xfd"
_KNOWN_WORDS = frozenset((*FOUR_LETTER_WORDS, TELNET_CLOSE))


def is_four_letter_word(first_four_bytes: bytes) -> bool:
    """True when a connection's first four bytes are one of ZooKeeper's commands
    (`FourLetterCommands.isKnown`, telnet's close sequence included)."""
    return bytes(first_four_bytes) in _KNOWN_WORDS


# -- primitives ------------------------------------------------------------------------------

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_STAT = struct.Struct(">qqqqiiiqiiq")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class JuteReader:
    """Reads jute primitives from one frame body. Every read names what it reads, so a
    failure says e.g. "truncated CreateRequest.path at offset 12 (needs 4 bytes, 2 left)"."""

    __slots__ = ("_data", "offset")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        self._data = bytes(data)
        self.offset = offset

    @property
    def remaining(self) -> int:
        return len(self._data) - self.offset

    def _take(self, size: int, what: str) -> bytes:
        start = self.offset
        if size > len(self._data) - start:
            raise MarshallingError(
                f"truncated {what} at offset {start} "
                f"(needs {size} bytes, {len(self._data) - start} left)"
            )
        self.offset = start + size
        return self._data[start : start + size]

    def int(self, what: str) -> int:
        return _INT.unpack(self._take(4, what))[0]

    def long(self, what: str) -> int:
        return _LONG.unpack(self._take(8, what))[0]

    def bool(self, what: str) -> bool:
        # Java's DataInput.readBoolean: any byte but 0 is true.
        return self._take(1, what)[0] != 0

    def _length(self, what: str) -> int | None:
        at = self.offset
        length = self.int(f"{what} length")
        if length == -1:
            return None
        if length < 0 or length > self.remaining:
            raise MarshallingError(
                f"bad {what} length {length} at offset {at} ({self.remaining} bytes left)"
            )
        return length

    def buffer(self, what: str) -> bytes | None:
        length = self._length(what)
        return None if length is None else self._take(length, what)

    def ustring(self, what: str) -> str | None:
        at = self.offset + 4
        raw = self.buffer(what)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise MarshallingError(f"{what} at offset {at} is not UTF-8: {error.reason}") from None

    def vector(self, read_item: Callable[[JuteReader, str], Any], what: str, min_item: int):
        """A vector of items each at least `min_item` bytes long: a count that could not
        fit in what is left is refused before anything is allocated for it."""
        at = self.offset
        count = self.int(f"{what} count")
        if count == -1:
            return ()
        if count < 0 or count * min_item > self.remaining:
            raise MarshallingError(
                f"bad {what} count {count} at offset {at} ({self.remaining} bytes left)"
            )
        return tuple(read_item(self, f"{what}[{i}]") for i in range(count))

    def ustrings(self, what: str) -> tuple[str | None, ...]:
        return self.vector(JuteReader.ustring, what, 4)

    def stat(self, what: str) -> Stat:
        return Stat(*_STAT.unpack(self._take(_STAT.size, what)))

    def acl(self, what: str) -> ACL:
        return ACL(self.int(f"{what}.perms"), self.ustring(f"{what}.scheme"),
                   self.ustring(f"{what}.id"))  # fmt: skip

    def acls(self, what: str) -> tuple[ACL, ...]:
        return self.vector(JuteReader.acl, what, 12)


class JuteWriter:
    """Writes jute primitives. Values come from zkstub's callers (a version, data, a path):
    one that does not fit its jute type is a BadArgumentsError naming it, as a server
    would answer a bad argument, never a struct.error."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def _integer(self, packer: struct.Struct, bounds: tuple[int, int], value: Any, what: str):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadArgumentsError(f"{what} must be an int, got {type(value).__name__}")
        if not bounds[0] <= value <= bounds[1]:
            bits = packer.size * 8
            raise BadArgumentsError(f"{what} must be a {bits}-bit int, got {value}")
        self._parts.append(packer.pack(value))

    def int(self, value: int, what: str = "int") -> None:
        self._integer(_INT, _INT32, value, what)

    def long(self, value: int, what: str = "long") -> None:
        self._integer(_LONG, _INT64, value, what)

    def bool(self, value: bool, what: str = "boolean") -> None:
        self._parts.append(b"\x01" if value else b"\x00")

    def buffer(self, value: bytes | None, what: str = "buffer") -> None:
        if value is None:
            self._parts.append(_INT.pack(-1))
            return
        if not isinstance(value, bytes | bytearray | memoryview):
            raise BadArgumentsError(f"{what} must be bytes, got {type(value).__name__}")
        value = bytes(value)
        self.int(len(value), f"{what} length")
        self._parts.append(value)

    def ustring(self, value: str | None, what: str = "ustring") -> None:
        if value is None:
            self._parts.append(_INT.pack(-1))
            return
        if not isinstance(value, str):
            raise BadArgumentsError(f"{what} must be a str, got {type(value).__name__}")
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise BadArgumentsError(f"{what} cannot be UTF-8 encoded: {error.reason}") from None
        self.buffer(encoded, what)

    def ustrings(self, values: Any, what: str = "vector") -> None:
        values = tuple(values)
        self.int(len(values), f"{what} count")
        for value in values:
            self.ustring(value, what)

    def stat(self, stat: Stat, what: str = "stat") -> None:
        if not isinstance(stat, Stat):
            raise BadArgumentsError(f"{what} must be a Stat, got {type(stat).__name__}")
        try:
            self._parts.append(_STAT.pack(*stat.fields()))
        except struct.error as error:
            raise BadArgumentsError(f"{what} does not fit jute's Stat: {error}") from None

    def acls(self, acls: Any, what: str = "acl") -> None:
        acls = tuple(acls)
        self.int(len(acls), f"{what} count")
        for acl in acls:
            self.int(acl.perms, f"{what}.perms")
            self.ustring(acl.scheme, f"{what}.scheme")
            self.ustring(acl.id, f"{what}.id")

    def raw(self, data: bytes) -> None:
        self._parts.append(data)

    def body(self) -> bytes:
        return b"".join(self._parts)

    def frame(self) -> bytes:
        """The body with jute's 4-byte length in front."""
        body = self.body()
        return _INT.pack(len(body)) + body


# -- records ---------------------------------------------------------------------------------
#
# Each record knows its own fields: `_write(writer)` and `_read(reader)`. Which record a body
# holds is not on the wire: it follows from the op (requests) or from the op of the request
# a reply answers (replies); the tables below say which.


@attrs.frozen
class ACL:
    """org.apache.zookeeper.data.ACL (its Id flattened into scheme and id)."""

    perms: int
    scheme: str | None
    id: str | None


# ZooDefs.Ids.OPEN_ACL_UNSAFE: everything for everyone. zkstub has no ACLs; this is what
# it creates with and reports.
OPEN_ACL_UNSAFE: tuple[ACL, ...] = (ACL(31, "world", "anyone"),)


@attrs.frozen
class ConnectRequest:
    """The first frame of a connection. `read_only` is False when the client omitted it;
    `old_client` says it did (a 3.3-era client: its ConnectResponse must omit it too)."""

    protocol_version: int
    last_zxid_seen: int
    timeout_ms: int
    session_id: int
    password: bytes | None
    read_only: bool = False
    old_client: bool = attrs.field(default=False, kw_only=True)


@attrs.frozen
class ConnectResponse:
    """The answer to a ConnectRequest. A timeout <= 0 (session id 0) says the session
    the client asked for has expired; the server then closes the connection."""

    protocol_version: int
    timeout_ms: int
    session_id: int
    password: bytes | None
    read_only: bool = False


@attrs.frozen
class ReplyHeader:
    xid: int
    zxid: int
    err: int


@attrs.frozen
class CreateRequest:
    """create, create2 and createContainer (`flags` is ZooKeeper's CreateMode flag)."""

    path: str | None
    data: bytes | None
    acl: tuple[ACL, ...]
    flags: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.buffer(self.data, "data")
        w.acls(self.acl)
        w.int(self.flags, "flags")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> CreateRequest:
        return cls(r.ustring(f"{what}.path"), r.buffer(f"{what}.data"), r.acls(f"{what}.acl"),
                   r.int(f"{what}.flags"))  # fmt: skip


@attrs.frozen
class CreateTTLRequest:
    path: str | None
    data: bytes | None
    acl: tuple[ACL, ...]
    flags: int
    ttl: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.buffer(self.data, "data")
        w.acls(self.acl)
        w.int(self.flags, "flags")
        w.long(self.ttl, "ttl")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> CreateTTLRequest:
        return cls(r.ustring(f"{what}.path"), r.buffer(f"{what}.data"), r.acls(f"{what}.acl"),
                   r.int(f"{what}.flags"), r.long(f"{what}.ttl"))  # fmt: skip


@attrs.frozen
class DeleteRequest:
    path: str | None
    version: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.int(self.version, "version")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> DeleteRequest:
        return cls(r.ustring(f"{what}.path"), r.int(f"{what}.version"))


@attrs.frozen
class PathWatchRequest:
    """exists, getData, getChildren and getChildren2: a path and whether to leave a watch."""

    path: str | None
    watch: bool

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.bool(self.watch, "watch")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> PathWatchRequest:
        return cls(r.ustring(f"{what}.path"), r.bool(f"{what}.watch"))


@attrs.frozen
class SetDataRequest:
    path: str | None
    data: bytes | None
    version: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.buffer(self.data, "data")
        w.int(self.version, "version")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> SetDataRequest:
        return cls(r.ustring(f"{what}.path"), r.buffer(f"{what}.data"), r.int(f"{what}.version"))


@attrs.frozen
class PathRequest:
    """getACL, sync, getAllChildrenNumber, and getEphemerals (whose path is a prefix)."""

    path: str | None

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> PathRequest:
        return cls(r.ustring(f"{what}.path"))


@attrs.frozen
class SetACLRequest:
    path: str | None
    acl: tuple[ACL, ...]
    version: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.acls(self.acl)
        w.int(self.version, "version")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> SetACLRequest:
        return cls(r.ustring(f"{what}.path"), r.acls(f"{what}.acl"), r.int(f"{what}.version"))


@attrs.frozen
class CheckVersionRequest:
    path: str | None
    version: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.int(self.version, "version")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> CheckVersionRequest:
        return cls(r.ustring(f"{what}.path"), r.int(f"{what}.version"))


@attrs.frozen
class WatchesRequest:
    """checkWatches and removeWatches (`type`: ZooKeeper's WatcherType, 1 children,
    2 data, 3 any)."""

    path: str | None
    type: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.int(self.type, "type")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> WatchesRequest:
        return cls(r.ustring(f"{what}.path"), r.int(f"{what}.type"))


@attrs.frozen
class SetWatchesRequest:
    """setWatches (op 101: no persistent lists) and setWatches2 (op 105). A reconnecting
    client's watches, for the server to re-register, or fire at once for what changed after
    `relative_zxid` (the last zxid the client saw)."""

    relative_zxid: int
    data: tuple[str | None, ...]
    exist: tuple[str | None, ...]
    child: tuple[str | None, ...]
    persistent: tuple[str | None, ...] = ()
    persistent_recursive: tuple[str | None, ...] = ()


@attrs.frozen
class AddWatchRequest:
    """`mode`: 0 persistent, 1 persistent recursive (ZooKeeper's AddWatchMode)."""

    path: str | None
    mode: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.int(self.mode, "mode")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> AddWatchRequest:
        return cls(r.ustring(f"{what}.path"), r.int(f"{what}.mode"))


@attrs.frozen
class AuthRequest:
    """addAuthInfo (ZooKeeper's AuthPacket), sent with xid AUTH_XID."""

    type: int
    scheme: str | None
    auth: bytes | None

    def _write(self, w: JuteWriter) -> None:
        w.int(self.type, "type")
        w.ustring(self.scheme, "scheme")
        w.buffer(self.auth, "auth")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> AuthRequest:
        return cls(r.int(f"{what}.type"), r.ustring(f"{what}.scheme"), r.buffer(f"{what}.auth"))


@attrs.frozen
class SaslRequest:
    """sasl (GetSASLRequest): one token."""

    token: bytes | None

    def _write(self, w: JuteWriter) -> None:
        w.buffer(self.token, "token")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> SaslRequest:
        return cls(r.buffer(f"{what}.token"))


@attrs.frozen
class ReconfigRequest:
    joining_servers: str | None
    leaving_servers: str | None
    new_members: str | None
    cur_config_id: int

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.joining_servers, "joiningServers")
        w.ustring(self.leaving_servers, "leavingServers")
        w.ustring(self.new_members, "newMembers")
        w.long(self.cur_config_id, "curConfigId")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> ReconfigRequest:
        return cls(r.ustring(f"{what}.joiningServers"), r.ustring(f"{what}.leavingServers"),
                   r.ustring(f"{what}.newMembers"), r.long(f"{what}.curConfigId"))  # fmt: skip


@attrs.frozen
class MultiRequest:
    """multi (create*, delete, setData, check) and multiRead (getData, getChildren): the
    ops in order, each with its op code (create vs create2 vs createContainer share a
    record, so the code travels with it)."""

    ops: tuple[tuple[OpCode, Any], ...]


# -- responses


@attrs.frozen
class PathResponse:
    """create (CreateResponse) and sync (SyncResponse)."""

    path: str | None

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> PathResponse:
        return cls(r.ustring(f"{what}.path"))


@attrs.frozen
class Create2Response:
    """create2, createTTL, createContainer."""

    path: str | None
    stat: Stat

    def _write(self, w: JuteWriter) -> None:
        w.ustring(self.path, "path")
        w.stat(self.stat)

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> Create2Response:
        return cls(r.ustring(f"{what}.path"), r.stat(f"{what}.stat"))


@attrs.frozen
class StatResponse:
    """exists, setData, setACL and a lone check (ZooKeeper answers it as a setData)."""

    stat: Stat

    def _write(self, w: JuteWriter) -> None:
        w.stat(self.stat)

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> StatResponse:
        return cls(r.stat(f"{what}.stat"))


@attrs.frozen
class GetDataResponse:
    """getData (and reconfig, which answers with the new config as data)."""

    data: bytes | None
    stat: Stat

    def _write(self, w: JuteWriter) -> None:
        w.buffer(self.data, "data")
        w.stat(self.stat)

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> GetDataResponse:
        return cls(r.buffer(f"{what}.data"), r.stat(f"{what}.stat"))


@attrs.frozen
class GetACLResponse:
    acl: tuple[ACL, ...]
    stat: Stat

    def _write(self, w: JuteWriter) -> None:
        w.acls(self.acl)
        w.stat(self.stat)

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> GetACLResponse:
        return cls(r.acls(f"{what}.acl"), r.stat(f"{what}.stat"))


@attrs.frozen
class ChildrenResponse:
    children: tuple[str | None, ...]

    def _write(self, w: JuteWriter) -> None:
        w.ustrings(self.children, "children")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> ChildrenResponse:
        return cls(r.ustrings(f"{what}.children"))


@attrs.frozen
class Children2Response:
    children: tuple[str | None, ...]
    stat: Stat

    def _write(self, w: JuteWriter) -> None:
        w.ustrings(self.children, "children")
        w.stat(self.stat)

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> Children2Response:
        return cls(r.ustrings(f"{what}.children"), r.stat(f"{what}.stat"))


@attrs.frozen
class ErrorResult:
    """ZooKeeper's ErrorResponse record: one op's error in a multi's results (0 for an op
    rolled back because a later one failed), and the whole body of an addWatch reply
    (always 0)."""

    err: int

    def _write(self, w: JuteWriter) -> None:
        w.int(self.err, "err")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> ErrorResult:
        return cls(r.int(f"{what}.err"))


@attrs.frozen
class NumberResponse:
    """getAllChildrenNumber."""

    number: int

    def _write(self, w: JuteWriter) -> None:
        w.int(self.number, "totalNumber")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> NumberResponse:
        return cls(r.int(f"{what}.totalNumber"))


@attrs.frozen
class EphemeralsResponse:
    paths: tuple[str | None, ...]

    def _write(self, w: JuteWriter) -> None:
        w.ustrings(self.paths, "ephemerals")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> EphemeralsResponse:
        return cls(r.ustrings(f"{what}.ephemerals"))


@attrs.frozen
class SaslResponse:
    token: bytes | None

    def _write(self, w: JuteWriter) -> None:
        w.buffer(self.token, "token")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> SaslResponse:
        return cls(r.buffer(f"{what}.token"))


@attrs.frozen
class ClientInfo:
    auth_scheme: str | None
    user: str | None


@attrs.frozen
class WhoAmIResponse:
    client_info: tuple[ClientInfo, ...]

    def _write(self, w: JuteWriter) -> None:
        w.int(len(self.client_info), "clientInfo count")
        for info in self.client_info:
            w.ustring(info.auth_scheme, "authScheme")
            w.ustring(info.user, "user")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> WhoAmIResponse:
        def one(reader: JuteReader, item: str) -> ClientInfo:
            return ClientInfo(reader.ustring(f"{item}.authScheme"), reader.ustring(f"{item}.user"))

        return cls(r.vector(one, f"{what}.clientInfo", 8))


@attrs.frozen
class WatcherEvent:
    """A watch notification (sent with xid NOTIFICATION_XID). `type` is ZooKeeper's
    EventType (1 created, 2 deleted, 3 data changed, 4 children changed, 5-7 watch
    removed); `state` is the KeeperState, SYNC_CONNECTED_STATE from a server."""

    type: int
    state: int
    path: str | None

    def _write(self, w: JuteWriter) -> None:
        w.int(self.type, "type")
        w.int(self.state, "state")
        w.ustring(self.path, "path")

    @classmethod
    def _read(cls, r: JuteReader, what: str) -> WatcherEvent:
        return cls(r.int(f"{what}.type"), r.int(f"{what}.state"), r.ustring(f"{what}.path"))


@attrs.frozen
class MultiResponse:
    """multi / multiRead results, in the order of the request's ops. Each is a response
    record (PathResponse for create, Create2Response for create2 / createTTL /
    createContainer, StatResponse for setData, GetDataResponse / ChildrenResponse for
    multiRead), None for an op with an empty result (delete, check), or ErrorResult.

    `types` are the results' MultiHeader types. Decoding fills them in. Encoding infers
    them from the records (ErrorResult is always OpCode.ERROR) except for None, which
    could be a delete or a check: a response holding None needs `types` (give the
    request's op codes, e.g. `tuple(op for op, _ in request.ops)`)."""

    results: tuple[Any, ...]
    types: tuple[int, ...] = ()


_RESULT_TYPES: dict[type, OpCode] = {
    PathResponse: OpCode.CREATE,
    Create2Response: OpCode.CREATE2,
    StatResponse: OpCode.SET_DATA,
    GetDataResponse: OpCode.GET_DATA,
    ChildrenResponse: OpCode.GET_CHILDREN,
    ErrorResult: OpCode.ERROR,
}
# A MultiHeader type -> the record its result body holds (None: no body).
_RESULT_RECORDS: dict[int, type | None] = {
    OpCode.CREATE: PathResponse,
    OpCode.CREATE2: Create2Response,
    OpCode.CREATE_TTL: Create2Response,
    OpCode.CREATE_CONTAINER: Create2Response,
    OpCode.DELETE: None,
    OpCode.DELETE_CONTAINER: None,
    OpCode.CHECK: None,
    OpCode.SET_DATA: StatResponse,
    OpCode.GET_DATA: GetDataResponse,
    OpCode.GET_CHILDREN: ChildrenResponse,
    OpCode.ERROR: ErrorResult,
}
# A MultiOperationRecord op code -> its request record.
_MULTI_OP_RECORDS: dict[int, type] = {
    OpCode.CREATE: CreateRequest,
    OpCode.CREATE2: CreateRequest,
    OpCode.CREATE_CONTAINER: CreateRequest,
    OpCode.CREATE_TTL: CreateTTLRequest,
    OpCode.DELETE: DeleteRequest,
    OpCode.SET_DATA: SetDataRequest,
    OpCode.CHECK: CheckVersionRequest,
    OpCode.GET_CHILDREN: PathWatchRequest,
    OpCode.GET_DATA: PathWatchRequest,
}

# An op code -> the record its request body holds (None: no body).
_REQUEST_RECORDS: dict[int, type | None] = {
    OpCode.CREATE: CreateRequest,
    OpCode.CREATE2: CreateRequest,
    OpCode.CREATE_CONTAINER: CreateRequest,
    OpCode.CREATE_TTL: CreateTTLRequest,
    OpCode.DELETE: DeleteRequest,
    OpCode.EXISTS: PathWatchRequest,
    OpCode.GET_DATA: PathWatchRequest,
    OpCode.SET_DATA: SetDataRequest,
    OpCode.GET_ACL: PathRequest,
    OpCode.SET_ACL: SetACLRequest,
    OpCode.GET_CHILDREN: PathWatchRequest,
    OpCode.GET_CHILDREN2: PathWatchRequest,
    OpCode.SYNC: PathRequest,
    OpCode.PING: None,
    OpCode.CHECK: CheckVersionRequest,
    OpCode.MULTI: MultiRequest,
    OpCode.MULTI_READ: MultiRequest,
    OpCode.RECONFIG: ReconfigRequest,
    OpCode.CHECK_WATCHES: WatchesRequest,
    OpCode.REMOVE_WATCHES: WatchesRequest,
    OpCode.AUTH: AuthRequest,
    OpCode.SET_WATCHES: SetWatchesRequest,
    OpCode.SET_WATCHES2: SetWatchesRequest,
    OpCode.SASL: SaslRequest,
    OpCode.GET_EPHEMERALS: PathRequest,
    OpCode.GET_ALL_CHILDREN_NUMBER: PathRequest,
    OpCode.ADD_WATCH: AddWatchRequest,
    OpCode.WHO_AM_I: None,
    OpCode.CLOSE_SESSION: None,
}

# An op code -> the record a successful reply's body holds (None: no body).
# FinalRequestProcessor's answers: a lone check is answered as a SetDataResponse, addWatch
# with an ErrorResponse(0).
_REPLY_RECORDS: dict[int, type | None] = {
    OpCode.CREATE: PathResponse,
    OpCode.CREATE2: Create2Response,
    OpCode.CREATE_TTL: Create2Response,
    OpCode.CREATE_CONTAINER: Create2Response,
    OpCode.DELETE: None,
    OpCode.DELETE_CONTAINER: None,
    OpCode.EXISTS: StatResponse,
    OpCode.GET_DATA: GetDataResponse,
    OpCode.SET_DATA: StatResponse,
    OpCode.GET_ACL: GetACLResponse,
    OpCode.SET_ACL: StatResponse,
    OpCode.GET_CHILDREN: ChildrenResponse,
    OpCode.GET_CHILDREN2: Children2Response,
    OpCode.SYNC: PathResponse,
    OpCode.PING: None,
    OpCode.CHECK: StatResponse,
    OpCode.MULTI: MultiResponse,
    OpCode.MULTI_READ: MultiResponse,
    OpCode.RECONFIG: GetDataResponse,
    OpCode.CHECK_WATCHES: None,
    OpCode.REMOVE_WATCHES: None,
    OpCode.AUTH: None,
    OpCode.SET_WATCHES: None,
    OpCode.SET_WATCHES2: None,
    OpCode.SASL: SaslResponse,
    OpCode.GET_EPHEMERALS: EphemeralsResponse,
    OpCode.GET_ALL_CHILDREN_NUMBER: NumberResponse,
    OpCode.ADD_WATCH: ErrorResult,
    OpCode.WHO_AM_I: WhoAmIResponse,
    OpCode.CLOSE_SESSION: None,
    OpCode.NOTIFICATION: WatcherEvent,
}


def _op_name(op: int) -> str:
    try:
        return OpCode(op).name.lower()
    except ValueError:
        return f"op {op}"


# -- multi bodies ----------------------------------------------------------------------------


def _write_multi_header(w: JuteWriter, type_: int, done: bool, err: int) -> None:
    w.int(type_, "MultiHeader.type")
    w.bool(done, "MultiHeader.done")
    w.int(err, "MultiHeader.err")


def _read_multi_header(r: JuteReader, what: str) -> tuple[int, bool, int]:
    return r.int(f"{what}.type"), r.bool(f"{what}.done"), r.int(f"{what}.err")


def _write_multi_request(w: JuteWriter, request: MultiRequest) -> None:
    for op, record in request.ops:
        expected = _MULTI_OP_RECORDS.get(op)
        if expected is None or not isinstance(record, expected):
            raise BadArgumentsError(f"{_op_name(op)} with {type(record).__name__} in a multi")
        _write_multi_header(w, op, False, -1)
        record._write(w)
    _write_multi_header(w, -1, True, -1)


def _read_multi_request(r: JuteReader) -> MultiRequest:
    ops = []
    while True:
        what = f"MultiRequest.ops[{len(ops)}]"
        op, done, _ = _read_multi_header(r, f"{what}.header")
        if done:
            return MultiRequest(tuple(ops))
        record = _MULTI_OP_RECORDS.get(op)
        if record is None:
            raise MarshallingError(f"{what} has an op type {op} a multi cannot hold")
        ops.append((OpCode(op), record._read(r, what)))


def _write_multi_response(w: JuteWriter, response: MultiResponse) -> None:
    types = response.types
    if types and len(types) != len(response.results):
        raise BadArgumentsError(
            f"a MultiResponse has {len(response.results)} results but {len(types)} types"
        )
    for index, result in enumerate(response.results):
        if isinstance(result, ErrorResult):
            type_ = OpCode.ERROR
        elif types:
            type_ = types[index]
        elif result is None:
            raise BadArgumentsError(
                f"multi result {index} is None, which is a delete or a check: "
                "give MultiResponse its types"
            )
        else:
            type_ = _RESULT_TYPES.get(type(result))
        expected = _RESULT_RECORDS.get(type_, False) if type_ is not None else False
        if (
            expected is False
            or (expected is None) != (result is None)
            or (expected is not None and not isinstance(result, expected))
        ):
            raise BadArgumentsError(
                f"multi result {index} ({type(result).__name__}) cannot be sent as "
                f"{_op_name(type_) if type_ is not None else 'any op'}"
            )
        err = result.err if isinstance(result, ErrorResult) else 0
        _write_multi_header(w, type_, False, err)
        if result is not None:
            result._write(w)
    _write_multi_header(w, -1, True, -1)


def _read_multi_response(r: JuteReader) -> MultiResponse:
    results: list[Any] = []
    types: list[int] = []
    while True:
        what = f"MultiResponse.results[{len(results)}]"
        type_, done, _ = _read_multi_header(r, f"{what}.header")
        if done:
            return MultiResponse(tuple(results), tuple(types))
        record = _RESULT_RECORDS.get(type_, False)
        if record is False:
            raise MarshallingError(f"{what} has a type {type_} a multi result cannot have")
        results.append(None if record is None else record._read(r, what))
        types.append(type_)


def _write_set_watches(w: JuteWriter, op: int, request: SetWatchesRequest) -> None:
    w.long(request.relative_zxid, "relativeZxid")
    w.ustrings(request.data, "dataWatches")
    w.ustrings(request.exist, "existWatches")
    w.ustrings(request.child, "childWatches")
    if op == OpCode.SET_WATCHES2:
        w.ustrings(request.persistent, "persistentWatches")
        w.ustrings(request.persistent_recursive, "persistentRecursiveWatches")
    elif request.persistent or request.persistent_recursive:
        raise BadArgumentsError("persistent watches need setWatches2, not setWatches")


def _read_set_watches(r: JuteReader, op: int) -> SetWatchesRequest:
    what = "SetWatches2" if op == OpCode.SET_WATCHES2 else "SetWatches"
    zxid = r.long(f"{what}.relativeZxid")
    data = r.ustrings(f"{what}.dataWatches")
    exist = r.ustrings(f"{what}.existWatches")
    child = r.ustrings(f"{what}.childWatches")
    if op != OpCode.SET_WATCHES2:
        return SetWatchesRequest(zxid, data, exist, child)
    persistent = r.ustrings(f"{what}.persistentWatches")
    recursive = r.ustrings(f"{what}.persistentRecursiveWatches")
    return SetWatchesRequest(zxid, data, exist, child, persistent, recursive)


def _write_body(w: JuteWriter, op: int, record: Any, table: dict[int, type | None]) -> None:
    expected = table.get(op, False)
    if expected is False:
        raise UnimplementedError(f"jute has no body for {_op_name(op)}")
    if expected is None:
        if record is not None:
            raise BadArgumentsError(f"{_op_name(op)} has no body, got {type(record).__name__}")
        return
    if not isinstance(record, expected):
        raise BadArgumentsError(
            f"{_op_name(op)} takes a {expected.__name__}, got {type(record).__name__}"
        )
    if expected is MultiRequest:
        _write_multi_request(w, record)
    elif expected is MultiResponse:
        _write_multi_response(w, record)
    elif expected is SetWatchesRequest:
        _write_set_watches(w, op, record)
    else:
        record._write(w)


def _read_body(r: JuteReader, op: int, record: type | None, what: str) -> Any:
    if record is None:
        return None
    if record is MultiRequest:
        return _read_multi_request(r)
    if record is MultiResponse:
        return _read_multi_response(r)
    if record is SetWatchesRequest:
        return _read_set_watches(r, op)
    return record._read(r, what)


# -- connect ---------------------------------------------------------------------------------


def encode_connect_request(request: ConnectRequest) -> bytes:
    """The client's first frame. `old_client` leaves out the trailing readOnly flag."""
    w = JuteWriter()
    w.int(request.protocol_version, "protocolVersion")
    w.long(request.last_zxid_seen, "lastZxidSeen")
    w.int(request.timeout_ms, "timeOut")
    w.long(request.session_id, "sessionId")
    w.buffer(request.password, "passwd")
    if not request.old_client:
        w.bool(request.read_only, "readOnly")
    return w.frame()


def decode_connect_request(body: bytes) -> ConnectRequest:
    """A connection's first frame, server side. Without the trailing readOnly byte it is
    an old client's (`old_client=True`, as ZooKeeperServer.processConnectRequest tells)."""
    r = JuteReader(body)
    protocol_version = r.int("ConnectRequest.protocolVersion")
    last_zxid = r.long("ConnectRequest.lastZxidSeen")
    timeout_ms = r.int("ConnectRequest.timeOut")
    session_id = r.long("ConnectRequest.sessionId")
    password = r.buffer("ConnectRequest.passwd")
    if r.remaining == 0:
        return ConnectRequest(protocol_version, last_zxid, timeout_ms, session_id, password,
                              False, old_client=True)  # fmt: skip
    read_only = r.bool("ConnectRequest.readOnly")
    return ConnectRequest(protocol_version, last_zxid, timeout_ms, session_id, password,
                          read_only)  # fmt: skip


def encode_connect_response(response: ConnectResponse, *, old_client: bool = False) -> bytes:
    """The server's answer to a ConnectRequest; pass the request's `old_client` (its
    ConnectResponse then has no readOnly byte, as ZooKeeper answers such a client)."""
    w = JuteWriter()
    w.int(response.protocol_version, "protocolVersion")
    w.int(response.timeout_ms, "timeOut")
    w.long(response.session_id, "sessionId")
    w.buffer(response.password, "passwd")
    if not old_client:
        w.bool(response.read_only, "readOnly")
    return w.frame()


def decode_connect_response(body: bytes) -> ConnectResponse:
    r = JuteReader(body)
    protocol_version = r.int("ConnectResponse.protocolVersion")
    timeout_ms = r.int("ConnectResponse.timeOut")
    session_id = r.long("ConnectResponse.sessionId")
    password = r.buffer("ConnectResponse.passwd")
    read_only = r.bool("ConnectResponse.readOnly") if r.remaining else False
    return ConnectResponse(protocol_version, timeout_ms, session_id, password, read_only)


# -- requests (client -> server) -------------------------------------------------------------


class JuteRequestError(MarshallingError):
    """A request whose header was read but whose op is unknown or whose body is malformed:
    the server can answer `xid` with `error.code` (UnimplementedError, MarshallingError)
    or close the connection, as it chooses."""

    def __init__(self, xid: int, op: int, error: ZkError) -> None:
        super().__init__(f"xid {xid}, {_op_name(op)}: {error}")
        self.xid = xid
        self.op = op
        self.error = error
        self.code = error.code


def encode_request(xid: int, op: int, request: Any = None) -> bytes:
    """A request frame: RequestHeader(xid, op), then the op's record (None for ping,
    closeSession and whoAmI). A record that is not the op's raises BadArgumentsError."""
    w = JuteWriter()
    w.int(xid, "xid")
    w.int(op, "type")
    _write_body(w, op, request, _REQUEST_RECORDS)
    return w.frame()


def decode_request(body: bytes) -> tuple[int, int, Any]:
    """(xid, op, request record or None), server side. MarshallingError when not even the
    header can be read; JuteRequestError (carrying the xid, the op and an
    UnimplementedError / MarshallingError) for an unknown op or a malformed body. Bytes
    after the record are ignored, as ZooKeeper's deserializers ignore them."""
    r = JuteReader(body)
    xid = r.int("RequestHeader.xid")
    op = r.int("RequestHeader.type")
    record = _REQUEST_RECORDS.get(op, False)
    if record is False:
        raise JuteRequestError(xid, op, UnimplementedError(f"unknown op code {op}"))
    try:
        request = _read_body(r, op, record, record.__name__ if record else "")
    except MarshallingError as error:
        raise JuteRequestError(xid, op, error) from None
    return xid, OpCode(op), request


# -- replies (server -> client) --------------------------------------------------------------


def encode_reply(header: ReplyHeader, op: int, response: Any = None) -> bytes:
    """A reply frame: the header, then (when `header.err` is 0) the op's response record.
    A reply with an error carries no body, whatever `response` is: the client reads
    none (ClientCnxn.readResponse). Note that a failed multi is not an error reply: its
    header says 0 and its body holds the ErrorResults. A notification is
    `encode_reply(ReplyHeader(NOTIFICATION_XID, -1, 0), OpCode.NOTIFICATION, event)`."""
    w = JuteWriter()
    w.int(header.xid, "ReplyHeader.xid")
    w.long(header.zxid, "ReplyHeader.zxid")
    w.int(header.err, "ReplyHeader.err")
    if header.err == 0:
        _write_body(w, op, response, _REPLY_RECORDS)
    return w.frame()


def decode_reply_header(body: bytes) -> ReplyHeader:
    r = JuteReader(body)
    return ReplyHeader(r.int("ReplyHeader.xid"), r.long("ReplyHeader.zxid"),
                       r.int("ReplyHeader.err"))  # fmt: skip


_REPLY_HEADER_SIZE = 16


def decode_reply_body(header: ReplyHeader, op: int | None, body: bytes) -> Any:
    """The response record of a reply whose header was read with `decode_reply_header`:
    a WatcherEvent for a notification, None for a reply with an error or an op with no
    answer body (or `op` None: the caller knows no request with that xid), else the
    record of `op`, the op of the request with that xid."""
    if header.xid == NOTIFICATION_XID:
        op = OpCode.NOTIFICATION
    elif header.err != 0 or op is None:
        return None
    record = _REPLY_RECORDS.get(op, False)
    if record is False:
        raise MarshallingError(f"a reply to {_op_name(op)} cannot be read: unknown op")
    r = JuteReader(body, _REPLY_HEADER_SIZE)
    name = record.__name__ if record else ""
    return _read_body(r, op, record, name)


def decode_reply(body: bytes, op_of: Callable[[int], int | None]) -> tuple[ReplyHeader, Any]:
    """(header, response), client side, in one step: `op_of(xid)` says which op the
    request with the header's xid was (it is not called for a notification)."""
    header = decode_reply_header(body)
    op = None if header.xid == NOTIFICATION_XID else op_of(header.xid)
    return header, decode_reply_body(header, op, body)


# -- create modes ----------------------------------------------------------------------------


class CreateMode(enum.IntEnum):
    """ZooKeeper's CreateMode flags."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6


def create_mode(flags: int) -> tuple[bool, bool]:
    """(ephemeral, sequence) of a create's flags. Container and TTL modes, which zkstub
    does not have, raise UnimplementedError naming the mode; a flag ZooKeeper does not
    know raises BadArgumentsError (CreateMode.fromFlag's answer)."""
    try:
        mode = CreateMode(flags)
    except ValueError:
        raise BadArgumentsError(f"unknown create mode flag {flags}") from None
    if mode > CreateMode.EPHEMERAL_SEQUENTIAL:
        raise UnimplementedError(f"create mode {mode.name} is not supported")
    return bool(mode & 1), bool(mode & 2)


def flags_of(ephemeral: bool, sequence: bool) -> int:
    """A create's flags for zkstub's (ephemeral, sequence)."""
    return (1 if ephemeral else 0) | (2 if sequence else 0)
