"""zkstub's wire protocol over transport's RPC envelope: api keys, and ops, results, stats and
watch events as msgpack-ready lists. Decoding validates (a trust boundary): a malformed body
is a BadArgumentsError, never a crash."""

from __future__ import annotations

from typing import Any

import attrs

from zkstub._errors import BadArgumentsError, ZkError, error_for_code
from zkstub._types import CheckOp, CreateOp, DeleteOp, EventType, SetDataOp, Stat, WatchedEvent

CONNECT = 1  # [requested_timeout, session_id, password] -> [session_id, password, timeout]
REQUEST = 2  # [op_name, args]
PING = 3
CLOSE_SESSION = 4

EXPIRED_PUSH = "expired"


def stat_to_wire(stat: Stat | None) -> list[int] | None:
    return None if stat is None else list(attrs.astuple(stat))


def stat_from_wire(value: Any) -> Stat | None:
    if value is None:
        return None
    well_formed = isinstance(value, list) and len(value) == 11
    if not well_formed or not all(isinstance(v, int) for v in value):
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
            return ["create", op.path, op.data, op.ephemeral, op.sequence]
        case DeleteOp():
            return ["delete", op.path, op.version]
        case SetDataOp():
            return ["set", op.path, op.data, op.version]
        case CheckOp():
            return ["check", op.path, op.version]
    raise BadArgumentsError(f"not a multi op: {op!r}")


def _expect(value: Any, kinds: tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise BadArgumentsError(f"{what} has the wrong type: {value!r}")
    return value


def op_from_wire(value: Any) -> Any:
    if not isinstance(value, list) or not value:
        raise BadArgumentsError(f"malformed op {value!r}")
    name, args = value[0], value[1:]
    try:
        match name:
            case "create":
                path, data, ephemeral, sequence = args
                return CreateOp(
                    _expect(path, (str,), "path"),
                    _expect(data, (bytes, type(None)), "data"),
                    _expect(ephemeral, (bool,), "ephemeral"),
                    _expect(sequence, (bool,), "sequence"),
                )
            case "delete":
                path, version = args
                return DeleteOp(_expect(path, (str,), "path"), _expect(version, (int,), "version"))
            case "set":
                path, data, version = args
                return SetDataOp(
                    _expect(path, (str,), "path"),
                    _expect(data, (bytes, type(None)), "data"),
                    _expect(version, (int,), "version"),
                )
            case "check":
                path, version = args
                return CheckOp(_expect(path, (str,), "path"), _expect(version, (int,), "version"))
    except ValueError:
        raise BadArgumentsError(f"malformed {name} op {value!r}") from None
    raise BadArgumentsError(f"unknown op {name!r}")


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
