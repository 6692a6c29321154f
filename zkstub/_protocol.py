"""zkstub's wire protocol over transport's RPC envelope: api keys, and ops, results, stats and
watch events as msgpack-ready lists. Decoding validates (a trust boundary): a malformed body
is a BadArgumentsError, never a crash."""

from __future__ import annotations

from typing import Any

import attrs

from zkstub._acl import OPEN_ACL_UNSAFE, acl_from_wire, acl_to_wire
from zkstub._errors import BadArgumentsError, ZkError, error_for_code
from zkstub._paths import validate_path
from zkstub._types import (
    AddWatchMode,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    SetACLOp,
    SetDataOp,
    Stat,
    WatchedEvent,
    WatcherType,
)

CONNECT = 1  # [requested_timeout, session_id, password] -> [session_id, password, timeout]
REQUEST = 2  # [op_name, args]
PING = 3
CLOSE_SESSION = 4

EXPIRED_PUSH = "expired"


def stat_to_wire(stat: Stat | None) -> list[int] | None:
    return None if stat is None else list(stat.fields())


_INTEGERS = frozenset({int, bool})  # what isinstance(v, int) accepts from msgpack


def stat_from_wire(value: Any) -> Stat | None:
    if value is None:
        return None
    well_formed = isinstance(value, list) and len(value) == 11
    if not well_formed or not set(map(type, value)) <= _INTEGERS:
        raise BadArgumentsError(f"malformed stat {value!r}")
    return Stat(*value)


def event_to_wire(event: WatchedEvent) -> list[Any]:
    return [event.type.value, event.path]


def event_from_wire(value: Any) -> WatchedEvent:
    try:
        kind, path = value
        return WatchedEvent(EventType(kind), path)
    except (TypeError, ValueError):
        raise BadArgumentsError(f"malformed watch event {value!r}") from None


def op_to_wire(op: Any) -> list[Any]:
    match op:
        case CreateOp():
            wire = ["create", op.path, op.data, op.ephemeral, op.sequence]
            # The ACL only when not the open one: the form older data dirs logged.
            return wire if op.acl == OPEN_ACL_UNSAFE else [*wire, acl_to_wire(op.acl)]
        case SetACLOp():
            return ["set_acl", op.path, acl_to_wire(op.acl), op.version]
        case DeleteOp():
            return ["delete", op.path, op.version]
        case SetDataOp():
            return ["set", op.path, op.data, op.version]
        case CheckOp():
            return ["check", op.path, op.version]
    raise BadArgumentsError(f"not a multi op: {op!r}")


def _expect(value: Any, kinds: tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise BadArgumentsError(f"{what} has the wrong type: {_brief(value)}")
    return value


def _version(value: Any) -> int:
    """A znode version: ZooKeeper's int (32 bits); -1 matches any."""
    if not _is_int(value) or not INT32_MIN <= value <= INT32_MAX:
        raise BadArgumentsError(f"version must be a 32-bit int, got {_brief(value)}")
    return value


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def op_from_wire(value: Any) -> Any:
    if not isinstance(value, list) or not value:
        raise BadArgumentsError(f"malformed op {_brief(value)}")
    name, args = value[0], value[1:]
    try:
        match name:
            case "create":
                path, data, ephemeral, sequence, *acl = args
                if len(acl) > 1:
                    raise ValueError
                return CreateOp(
                    _expect(path, (str,), "path"),
                    _expect(data, (bytes, type(None)), "data"),
                    _expect(ephemeral, (bool,), "ephemeral"),
                    _expect(sequence, (bool,), "sequence"),
                    acl_from_wire(acl[0]) if acl else OPEN_ACL_UNSAFE,
                )
            case "set_acl":
                path, acl, version = args
                return SetACLOp(_expect(path, (str,), "path"), acl_from_wire(acl),
                                _version(version))  # fmt: skip
            case "delete":
                path, version = args
                return DeleteOp(_expect(path, (str,), "path"), _version(version))
            case "set":
                path, data, version = args
                return SetDataOp(
                    _expect(path, (str,), "path"),
                    _expect(data, (bytes, type(None)), "data"),
                    _version(version),
                )
            case "check":
                path, version = args
                return CheckOp(_expect(path, (str,), "path"), _version(version))
    except ValueError:
        raise BadArgumentsError(f"malformed {name} op {_brief(value)}") from None
    raise BadArgumentsError(f"unknown op {_brief(name)}")


# A reconnect's watches: (relative_zxid, data, exist, child, persistent, persistent
# recursive paths), the arguments of `DataTree.set_watches` after the session id.
Watches = tuple[int, list[str], list[str], list[str], list[str], list[str]]


@attrs.frozen
class Connect:
    """A decoded connect request. `watches` (a reconnect's setWatches) is `Watches` or
    None. The timeout is checked where it is negotiated (`SessionTable.negotiate`)."""

    timeout: object
    session_id: int
    password: bytes
    watches: Watches | None


MAX_SESSION_ID = 2**64 - 1
READS = ("get", "exists", "children")
WRITES = ("create", "delete", "set", "check", "set_acl")
# Requests that neither write nor take a watch flag, and their arguments:
# add_watch [path, AddWatchMode], remove_watches / check_watches [path, WatcherType],
# ephemerals [prefix] (a plain string prefix, as ZooKeeper's getEphemerals),
# all_children_number [path], sync [path], get_acl [path] (-> [acl, stat]).
SESSION_OPS = ("add_watch", "remove_watches", "check_watches", "ephemerals",
               "all_children_number", "sync", "get_acl")  # fmt: skip
# A connection's `auth` [scheme, credential bytes]: answered None, or AuthFailedError and
# the connection closed (ZooKeeper's addAuthInfo).
AUTH = "auth"


def connect_from_wire(body: Any) -> Connect:
    """[requested_timeout, session_id, password] or, reconnecting, with
    [relative_zxid, data paths, exist paths, child paths] after them, optionally followed by
    persistent and persistent recursive paths (ZooKeeper's setWatches2; a client that has
    none may leave them out). Every field is checked for its type and range:
    BadArgumentsError names the first bad one."""
    if not (isinstance(body, list) and len(body) in (3, 4)):
        raise BadArgumentsError(f"a connect request is 3 or 4 fields, got {_brief(body)}")
    timeout, session_id, password = body[:3]
    if not _is_int(session_id) or not 0 <= session_id <= MAX_SESSION_ID:
        raise BadArgumentsError(
            f"session id must be an unsigned 64-bit int, got {_brief(session_id)}"
        )
    if not isinstance(password, bytes):
        raise BadArgumentsError(f"session password must be bytes, got {_brief(password)}")
    watches = _watches_from_wire(body[3]) if len(body) == 4 else None
    return Connect(timeout, session_id, password, watches)


def _watches_from_wire(value: Any) -> Watches:
    if not (isinstance(value, list) and len(value) in (4, 6)):
        raise BadArgumentsError(
            "watches must be [zxid, data, exist, child] or [zxid, data, exist, child, "
            f"persistent, persistent_recursive], got {_brief(value)}"
        )
    relative_zxid, *lists = value
    if not _is_int(relative_zxid):
        raise BadArgumentsError(f"watches' zxid must be an int, got {_brief(relative_zxid)}")
    for paths in lists:
        if not isinstance(paths, list):
            raise BadArgumentsError(f"watched paths must be a list, got {_brief(paths)}")
        for path in paths:
            validate_path(path)
    data, exist, child, persistent, recursive = [*lists, [], []][:5]
    return relative_zxid, data, exist, child, persistent, recursive


def request_from_wire(op: Any, args: Any) -> Any:
    """A request's op name and arguments, checked: the arguments of a read (path, watch),
    the op of a write, the ops of a multi. Returns the parsed form `ZkServer.handle` uses
    (the path for a read, the op for a write, the list of ops for a multi)."""
    if not isinstance(args, list):
        raise BadArgumentsError(f"a request's arguments are a list, got {_brief(args)}")
    if op in READS:
        if len(args) != 2:
            raise BadArgumentsError(f"{op} takes [path, watch], got {_brief(args)}")
        path, watch = args
        validate_path(path)
        _expect(watch, (bool,), "watch")
        return path
    if op in WRITES:
        return op_from_wire([op, *args])
    if op == "multi":
        ops = [op_from_wire(o) for o in args]
        if any(isinstance(o, SetACLOp) for o in ops):  # as ZooKeeper's MultiOperationRecord
            raise BadArgumentsError("set_acl cannot be part of a multi")
        return ops
    if op == "multi_get":
        return [validate_path(path) for path in args]
    if op in SESSION_OPS:
        return _session_op_from_wire(op, args)
    raise BadArgumentsError(f"unknown request {_brief(op)}")


def _session_op_from_wire(op: str, args: list[Any]) -> Any:
    """The path (or prefix) alone, or (path, mode or watcher type) for the watch ops."""
    if op in ("add_watch", "remove_watches", "check_watches"):
        if len(args) != 2:
            raise BadArgumentsError(f"{op} takes [path, {_SECOND[op][0]}], got {_brief(args)}")
        path, number = args
        validate_path(path)
        what, values = _SECOND[op]
        if not _is_int(number) or number not in values:
            raise BadArgumentsError(f"{op}: unknown {what} {_brief(number)}")
        return path, number
    if len(args) != 1:
        raise BadArgumentsError(f"{op} takes one argument, got {_brief(args)}")
    (path,) = args
    if op == "ephemerals":
        # ZooKeeper matches the prefix as a string and never validates it as a path.
        return _expect(path, (str,), "prefix")
    return validate_path(path)


_WATCHER_TYPES = ("watcher type", {t.value for t in WatcherType})
_SECOND = {
    "add_watch": ("mode", {m.value for m in AddWatchMode}),
    "remove_watches": _WATCHER_TYPES,
    "check_watches": _WATCHER_TYPES,
}


JUTE_MAXBUFFER = 0xFFFFF  # ZooKeeper's default jute.maxbuffer: 1 MiB - 1
_OP_OVERHEAD = 16  # an op's fixed fields on ZooKeeper's wire (header, lengths, version)


def request_size(op: Any, args: Any, limit: int) -> int:
    """About what the request takes on ZooKeeper's wire (paths, data and each op's fixed
    fields), counted only until it passes `limit`: a multi of a million ops is refused
    after the first ones that pass it, not after a million."""
    ops = args if op in ("multi", "multi_get") and isinstance(args, list) else [[op, *args]]
    size = 0
    for one in ops:
        size += _OP_OVERHEAD
        if isinstance(one, str):  # a multi_get's path
            size += len(one)
        elif isinstance(one, list):
            for field in one[1:3]:
                if isinstance(field, str | bytes):
                    size += len(field)
        if size > limit:
            break
    return size


def children_size(names: list[str]) -> int:
    """A get_children reply's size on ZooKeeper's wire: each name and its length."""
    return sum(4 + len(name.encode()) for name in names)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _brief(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut short: an error message names bad input, not megabytes of it."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({type(value).__name__})"


def multi_result_to_wire(result: Any) -> list[Any]:
    if isinstance(result, ZkError):
        return ["error", result.code, str(result)]
    if isinstance(result, Stat):
        return ["stat", stat_to_wire(result)]
    return ["value", result]


def multi_result_from_wire(value: Any) -> Any:
    if not isinstance(value, list) or len(value) < 2:
        raise BadArgumentsError(f"malformed multi result {value!r}")
    if value[0] == "error":
        return error_for_code(value[1], value[2] if len(value) > 2 else "")
    if value[0] == "stat":
        return stat_from_wire(value[1])
    return value[1]
