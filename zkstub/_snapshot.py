"""What the data directory stores, and how it is turned back into a tree and sessions.
Pure: the log holds requests (with their zxid, session and time), and replaying them on
the tree they were first applied to gives the same tree, failed requests included, since
the tree is deterministic."""

from __future__ import annotations

import logging
from typing import Any

from zkstub import _protocol as proto
from zkstub._acl import OPEN_ACL_UNSAFE, acl_from_wire, acl_to_wire
from zkstub._errors import DataInconsistencyError, ZkError
from zkstub._paths import name_of, parent_of
from zkstub._tree import BUILT_IN_ACLS, DataTree, Node

logger = logging.getLogger("zkstub.snapshot")

# Log records: [kind, zxid, session_id, ...]. A write or multi from a connection with
# identities (`zkstub._acl`) ends with them, [[scheme, id], ...], which the ACL checks of its
# replay need; records without them (all those of data dirs from before ACLs) had none.
SESSION = "session"  # [SESSION, zxid, session_id, timeout, password]
WRITE = "write"  # [WRITE, zxid, session_id, now_ms, wire_op(, identities)]
MULTI = "multi"  # [MULTI, zxid, session_id, now_ms, [wire_op, ...](, identities)]
CLOSE = "close"  # [CLOSE, zxid, session_id, now_ms]

_NODE_FIELDS = ("data", "czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion",
                "aversion", "ephemeral_owner")  # fmt: skip


def take_snapshot(tree: DataTree, sessions: dict[int, tuple[float, bytes]]) -> dict[str, Any]:
    """`sessions`: session id -> (timeout, password) of the live sessions. A node's row
    is its path and `_NODE_FIELDS`, then its ACL when it is not the open one."""
    nodes = [
        [path, *(getattr(node, field) for field in _NODE_FIELDS),
         *([acl_to_wire(node.acl)] if node.acl != OPEN_ACL_UNSAFE else [])]
        for path, node in sorted(tree.nodes.items())
    ]  # fmt: skip
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
    width = len(_NODE_FIELDS)
    for path, *values in snapshot["nodes"]:
        fields, acl = values[:width], values[width:]
        node = Node(**dict(zip(_NODE_FIELDS, fields, strict=True)))
        # Snapshots from before ACLs hold none: their nodes were all open but the
        # built-in ones.
        node.acl = acl_from_wire(acl[0]) if acl else BUILT_IN_ACLS.get(path, OPEN_ACL_UNSAFE)
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
                now_ms, wire, *identities = rest
                tree.apply(session_id, proto.op_from_wire(wire), now_ms, _identities(identities))
            case "multi":
                now_ms, wires, *identities = rest
                ops = [proto.op_from_wire(w) for w in wires]
                tree.multi(session_id, ops, now_ms, _identities(identities))
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


def _identities(logged: list[Any]) -> tuple[tuple[str, str], ...]:
    """The identities a record ends with (none in records from before ACLs)."""
    if not logged:
        return ()
    return tuple((scheme, name) for scheme, name in logged[0])
