"""What the data directory stores, and how it is turned back into a tree and sessions.
Pure: the log holds requests (with their zxid, session and time), and replaying them on
the tree they were first applied to gives the same tree, failed requests included, since
the tree is deterministic."""

from __future__ import annotations

import logging
from typing import Any

from zkstub import _protocol as proto
from zkstub._errors import DataInconsistencyError, ZkError
from zkstub._paths import name_of, parent_of
from zkstub._tree import DataTree, Node

logger = logging.getLogger("zkstub.snapshot")

# Log records: [kind, zxid, session_id, ...]
SESSION = "session"  # [SESSION, zxid, session_id, timeout, password]
WRITE = "write"  # [WRITE, zxid, session_id, now_ms, wire_op]
MULTI = "multi"  # [MULTI, zxid, session_id, now_ms, [wire_op, ...]]
CLOSE = "close"  # [CLOSE, zxid, session_id, now_ms]

_NODE_FIELDS = ("data", "czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion",
                "aversion", "ephemeral_owner")  # fmt: skip


def take_snapshot(tree: DataTree, sessions: dict[int, tuple[float, bytes]]) -> dict[str, Any]:
    """`sessions`: session id -> (timeout, password) of the live sessions."""
    nodes = [
        [path, *(getattr(node, field) for field in _NODE_FIELDS)]
        for path, node in sorted(tree.nodes.items())
    ]
    live = [[sid, timeout, password] for sid, (timeout, password) in sorted(sessions.items())]
    return {"zxid": tree.zxid, "nodes": nodes, "sessions": live}


def is_snapshot_of(content: Any, zxid: int) -> bool:
    """Whether decoded snapshot content has the shape `take_snapshot` gives, as of `zxid`
    (the zxid its file is named after)."""
    return (
        isinstance(content, dict)
        and content.get("zxid") == zxid
        and isinstance(content.get("nodes"), list)
        and isinstance(content.get("sessions"), list)
    )


def restore_snapshot(snapshot: dict[str, Any], tree: DataTree) -> dict[int, tuple[float, bytes]]:
    """Loads the snapshot into an empty tree; returns its live sessions."""
    tree.nodes.clear()
    tree.ephemerals.clear()
    for path, *values in snapshot["nodes"]:
        node = Node(**dict(zip(_NODE_FIELDS, values, strict=True)))
        tree.nodes[path] = node
        if node.ephemeral_owner:
            tree.ephemerals.setdefault(node.ephemeral_owner, set()).add(path)
    for path in tree.nodes:
        if path != "/":
            tree.nodes[parent_of(path)].children.add(name_of(path))
    tree.zxid = snapshot["zxid"]
    return {sid: (timeout, password) for sid, timeout, password in snapshot["sessions"]}


def replay(record: list[Any], tree: DataTree, sessions: dict[int, tuple[float, bytes]]) -> None:
    """Applies one log record, as it was applied the first time."""
    kind, zxid, session_id, *rest = record
    if zxid != tree.zxid + 1:
        raise DataInconsistencyError(f"log record for zxid 0x{zxid:x} follows 0x{tree.zxid:x}")
    try:
        match kind:
            case "session":
                tree.next_zxid()
                timeout, password = rest
                sessions[session_id] = (timeout, password)
            case "write":
                now_ms, wire = rest
                tree.apply(session_id, proto.op_from_wire(wire), now_ms)
            case "multi":
                now_ms, wires = rest
                tree.multi(session_id, [proto.op_from_wire(w) for w in wires], now_ms)
            case "close":
                (now_ms,) = rest
                tree.close_session(session_id, now_ms)
                sessions.pop(session_id, None)
            case _:
                raise DataInconsistencyError(f"unknown log record {kind!r}")
    except ZkError as error:
        if isinstance(error, DataInconsistencyError):
            raise
        logger.debug("replayed a failed request (zxid 0x%x): %s", zxid, error)
