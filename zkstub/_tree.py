"""ZooKeeper's DataTree and request processing, sans-IO.

Every write request consumes a zxid, including one that fails (ZooKeeper's
PrepRequestProcessor numbers a request before it validates it); reads do not. Watches are
kept per session on the server side, as ZooKeeper keeps them per connection: `exists` on a
missing node leaves a data watch (so its creation is seen), a failed `get` or
`get_children` leaves none. Each write returns the (session id, WatchedEvent) pairs to
deliver, in the order ZooKeeper fires them.

Watches (ZooKeeper's server/watch/WatchManager, as of 3.8): a data table (get, exists) and a
child table (get_children), each mapping a path to the sessions watching it and each watch's
mode (WatcherMode). `add_watch` puts a PERSISTENT or PERSISTENT_RECURSIVE watch in both
tables. One trigger fires each session at most once, whatever number of its watches match
(triggerWatch collects the watchers in a set): a standard or persistent watch on the path
itself, a recursive one on the path or any ancestor (never for NodeChildrenChanged).
Standard watches go when they fire; persistent ones stay until removed or the session ends.
As in 3.8 (WatcherModeManager), a session has one mode per path and table, the last set:
a get or exists with a watch on a path it watches persistently turns that data watch into a
one-shot one (ZOOKEEPER-4466, fixed in 3.9).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from zkstub._acl import (
    ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Identity,
    Perms,
    allowed,
    check_acl,
    fixup_acl,
    redacted,
)
from zkstub._errors import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    NoWatcherError,
    RolledBackError,
    RuntimeInconsistencyError,
    ZkError,
)
from zkstub._paths import RESERVED, name_of, parent_of, validate_path
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

# ZooKeeper refuses to delete these (DataTree.isSpecialPath); creating under /zookeeper
# is allowed.
SPECIAL_PATHS = frozenset(["/", RESERVED, RESERVED + "/quota", RESERVED + "/config"])
# Built-in nodes whose ACL is not the open one (DataTree.addConfigNode: READ_ACL_UNSAFE).
BUILT_IN_ACLS = {RESERVED + "/config": READ_ACL_UNSAFE}
MAX_DATA_BYTES = 1024 * 1024  # ZooKeeper's jute.maxbuffer (1 MiB) bounds a znode's data

Delivery = tuple[int, WatchedEvent]


class WatcherMode(enum.Enum):
    """How a watch in a table fires (ZooKeeper's server/watch/WatcherMode)."""

    STANDARD = "standard"  # on its own path, once
    PERSISTENT = "persistent"  # on its own path, until removed
    PERSISTENT_RECURSIVE = "persistent_recursive"  # on its path and below, until removed


# path -> {session id: the mode of that session's watch on the path}
WatchTable = dict[str, dict[int, WatcherMode]]

_ADDED_MODES = {
    AddWatchMode.PERSISTENT: WatcherMode.PERSISTENT,
    AddWatchMode.PERSISTENT_RECURSIVE: WatcherMode.PERSISTENT_RECURSIVE,
}
# remove_watches / check_watches of a WatcherType: which tables, and which modes in them
# (None: any). DataTree.removeWatch in 3.8 removes a table's entry whatever its mode, so
# DATA also takes the data half of a persistent watch; PERSISTENT and PERSISTENT_RECURSIVE
# are 3.9's and take that mode from both tables.
_PERSISTENT = frozenset([WatcherMode.PERSISTENT])
_RECURSIVE = frozenset([WatcherMode.PERSISTENT_RECURSIVE])


def _ancestors_first_self(path: str) -> Iterator[str]:
    """The path, then each parent up to "/" (ZooKeeper's PathParentIterator.forAll)."""
    yield path
    while path != "/":
        path = parent_of(path)
        yield path


@attrs.define
class Node:
    data: bytes | None
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int = 0
    # ZooKeeper keeps the number of child creates (the sequential suffix) and reports
    # 2 * creates - numChildren, i.e. creates + deletes (DataNode.copyStat).
    cversion: int = 0
    aversion: int = 0
    ephemeral_owner: int = 0
    children: set[str] = attrs.field(factory=set)
    acl: tuple[ACL, ...] = OPEN_ACL_UNSAFE

    def copy(self) -> Node:
        """A copy a transaction may change (its own set of children): written out, as
        attrs.evolve took more time than the rest of a setData in a 10 000-op multi."""
        return Node(
            self.data,
            self.czxid,
            self.mzxid,
            self.pzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            self.aversion,
            self.ephemeral_owner,
            set(self.children),
            self.acl,
        )

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion * 2 - len(self.children),
            aversion=self.aversion,
            ephemeralOwner=self.ephemeral_owner,
            dataLength=len(self.data) if self.data else 0,
            numChildren=len(self.children),
            pzxid=self.pzxid,
        )


def check_data(data: Any, path: str) -> bytes | None:
    if data is not None and not isinstance(data, bytes):
        raise BadArgumentsError(f"data for {path} must be bytes or None", path=path)
    if data is not None and len(data) > MAX_DATA_BYTES:
        raise BadArgumentsError(
            f"data for {path} is {len(data)} bytes, over ZooKeeper's limit of "
            f"{MAX_DATA_BYTES} bytes",
            path=path,
        )
    return data


@attrs.define
class DataTree:
    """`clock` gives the milliseconds stamped into ctime / mtime, unless a write passes its
    transaction's time (`now_ms`, so a replayed log gives the same stats)."""

    clock: Callable[[], int]
    zxid: int = 0
    nodes: dict[str, Node] = attrs.field(factory=dict)
    ephemerals: dict[int, set[str]] = attrs.field(factory=dict)
    data_watches: WatchTable = attrs.field(factory=dict)
    child_watches: WatchTable = attrs.field(factory=dict)
    # PERSISTENT_RECURSIVE entries in both tables: while 0, a trigger looks at its own path
    # only (ZooKeeper's WatcherModeManager.recursiveQty)
    recursive_watches: int = 0

    def __attrs_post_init__(self) -> None:
        if not self.nodes:
            # ZooKeeper's built-in nodes hold empty data (new byte[0]), not null
            self.nodes["/"] = Node(b"", 0, 0, 0, 0, 0, children={"zookeeper"})
            self.nodes[RESERVED] = Node(b"", 0, 0, 0, 0, 0, children={"quota", "config"})
            self.nodes[RESERVED + "/quota"] = Node(b"", 0, 0, 0, 0, 0)
            config = RESERVED + "/config"
            self.nodes[config] = Node(b"", 0, 0, 0, 0, 0, aversion=-1, acl=BUILT_IN_ACLS[config])

    def next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    # -- reads ----------------------------------------------------------------------------
    # `identities`: the asking connection's (`zkstub._acl`), checked against the node's
    # ACL; None for the server's own look (a reply's stat), which nothing stops.

    def _node(self, path: str, identities: Sequence[Identity] | None = None) -> Node:
        """The node; NoAuthError if `identities` (a connection's) may not read it."""
        node = self.nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError(path=path)
        if identities is not None:
            check_acl(node.acl, Perms.READ, identities, path)
        return node

    def get(
        self, path: str, watcher: int | None = None, identities: Sequence[Identity] | None = None
    ) -> tuple[bytes | None, Stat]:
        node = self._node(path, identities)
        if watcher is not None:
            self._watch(self.data_watches, path, watcher)
        return node.data, node.stat()

    def exists(self, path: str, watcher: int | None = None) -> Stat | None:
        """Needs no permission, as in ZooKeeper 3.8.0, the reference (3.8.4 and 3.9.2 check
        READ on a node that exists, ZOOKEEPER-2590)."""
        validate_path(path)
        if watcher is not None:
            self._watch(self.data_watches, path, watcher)
        node = self.nodes.get(path)
        return None if node is None else node.stat()

    def get_children(
        self, path: str, watcher: int | None = None, identities: Sequence[Identity] | None = None
    ) -> list[str]:
        node = self._node(path, identities)
        if watcher is not None:
            self._watch(self.child_watches, path, watcher)
        return sorted(node.children)

    def get_ephemerals(self, session_id: int, prefix_path: str = "/") -> list[str]:
        """The session's ephemeral nodes whose paths start with `prefix_path` (a plain
        string prefix, as FinalRequestProcessor's getEphemerals: "/a" takes "/ab" too;
        blank or "/" takes all). Sorted: ZooKeeper answers in its HashSet's order."""
        paths = self.ephemerals.get(session_id, ())
        if prefix_path.strip() in ("", "/"):
            return sorted(paths)
        return sorted(p for p in paths if p.startswith(prefix_path))

    def all_children_number(self, path: str, identities: Sequence[Identity] | None = None) -> int:
        """How many nodes lie under `path`, at any depth (ZooKeeper's
        getAllChildrenNumber; READ on the node). Under "/" the built-in /zookeeper,
        /zookeeper/quota and /zookeeper/config count, as there (DataTree: nodes.size() - 2,
        the root's two keys)."""
        node = self._node(path, identities)
        if path == "/":
            return len(self.nodes) - 1
        count, below = 0, [(path, node)]
        while below:
            parent_path, parent = below.pop()
            for name in parent.children:
                child_path = f"{parent_path}/{name}"
                count += 1
                below.append((child_path, self.nodes[child_path]))
        return count

    def get_acl(
        self, path: str, identities: Sequence[Identity] = ()
    ) -> tuple[tuple[ACL, ...], Stat]:
        """ZooKeeper's getACL: READ or ADMIN on the node; without ADMIN, digest ids come
        back without their hash (FinalRequestProcessor)."""
        node = self._node(path)
        check_acl(node.acl, Perms.READ | Perms.ADMIN, identities, path)
        if allowed(node.acl, Perms.ADMIN, identities):
            return node.acl, node.stat()
        return redacted(node.acl), node.stat()

    def sync(self, path: str) -> str:
        """ZooKeeper's sync on one server: nothing to wait for; answered with the path."""
        return validate_path(path)

    # -- watches --------------------------------------------------------------------------

    def _watch(
        self,
        table: WatchTable,
        path: str,
        session_id: int,
        mode: WatcherMode = WatcherMode.STANDARD,
    ) -> None:
        watchers = table.setdefault(path, {})
        old = watchers.get(session_id)
        watchers[session_id] = mode  # the last mode set wins (3.8's WatcherModeManager)
        recursive = WatcherMode.PERSISTENT_RECURSIVE
        self.recursive_watches += (mode is recursive) - (old is recursive)

    def _unwatch(self, table: WatchTable, path: str, session_id: int) -> None:
        watchers = table[path]
        mode = watchers.pop(session_id)
        if not watchers:
            del table[path]
        self.recursive_watches -= mode is WatcherMode.PERSISTENT_RECURSIVE

    def add_watch(self, session_id: int, path: str, mode: AddWatchMode | int) -> None:
        """ZooKeeper's addWatch: a persistent (or persistent recursive) watch on `path`,
        which need not exist. DataTree.addWatch puts it in both tables: the data table's
        fires on NodeCreated / NodeDataChanged / NodeDeleted, the child table's on
        NodeChildrenChanged of the path (a recursive one never on that)."""
        validate_path(path)
        watcher_mode = _ADDED_MODES[_enum_value(AddWatchMode, mode, "add watch mode")]
        self._watch(self.data_watches, path, session_id, watcher_mode)
        self._watch(self.child_watches, path, session_id, watcher_mode)

    def _selected(
        self, session_id: int, path: str, watcher_type: WatcherType | int
    ) -> list[WatchTable]:
        """The tables where the session holds a watch of `watcher_type` on `path`."""
        validate_path(path)
        kind = _enum_value(WatcherType, watcher_type, "watcher type")
        data, child = self.data_watches, self.child_watches
        modes: frozenset[WatcherMode] | None = None
        match kind:
            case WatcherType.CHILDREN:
                tables = [child]
            case WatcherType.DATA:
                tables = [data]
            case WatcherType.ANY:
                tables = [child, data]
            case WatcherType.PERSISTENT:
                tables, modes = [child, data], _PERSISTENT
            case _:
                tables, modes = [child, data], _RECURSIVE
        return [
            table
            for table in tables
            if (mode := table.get(path, {}).get(session_id)) is not None
            and (modes is None or mode in modes)
        ]

    def remove_watches(self, session_id: int, path: str, watcher_type: WatcherType | int) -> None:
        """ZooKeeper's removeWatches: the session's watches of that type on the path go (no
        event: ZooKeeper's client makes the *WatchRemoved events itself);
        NoWatcherError if it has none."""
        tables = self._selected(session_id, path, watcher_type)
        if not tables:
            raise NoWatcherError(f"no watch of type {WatcherType(watcher_type).name} on {path}",
                                 path=path)  # fmt: skip
        for table in tables:
            self._unwatch(table, path, session_id)

    def check_watches(self, session_id: int, path: str, watcher_type: WatcherType | int) -> None:
        """ZooKeeper's checkWatches: NoWatcherError unless the session holds such a watch.
        (3.8's containsWatcher also answers yes for another session's watch on the path;
        this looks at the asking session's, as 3.9 does.)"""
        if not self._selected(session_id, path, watcher_type):
            raise NoWatcherError(f"no watch of type {WatcherType(watcher_type).name} on {path}",
                                 path=path)  # fmt: skip

    def set_watches(
        self,
        watcher: int,
        relative_zxid: int,
        data: Sequence[str] = (),
        exist: Sequence[str] = (),
        child: Sequence[str] = (),
        persistent: Sequence[str] = (),
        persistent_recursive: Sequence[str] = (),
    ) -> list[Delivery]:
        """A reconnecting client's watches (ZooKeeper's setWatches / setWatches2): the
        standard ones this tree still holds stay; for the others, what changed after
        `relative_zxid` (the last zxid the client saw) fires now, and the rest are
        registered again. Persistent and recursive watches are registered again with no
        catch-up event, whatever changed meanwhile (DataTree.setWatches)."""
        deliveries: list[Delivery] = []
        # (paths, watch table, event if the node is gone, event if it changed, its zxid)
        kinds = [
            (data, self.data_watches, EventType.DELETED, EventType.CHANGED, "mzxid"),
            (exist, self.data_watches, None, EventType.CREATED, None),
            (child, self.child_watches, EventType.DELETED, EventType.CHILD, "pzxid"),
        ]
        for paths, table, if_gone, if_changed, zxid_field in kinds:
            for path in sorted(set(paths)):
                if table.get(path, {}).get(watcher) is WatcherMode.STANDARD:
                    continue
                node = self.nodes.get(path)
                if node is None:
                    kind = if_gone  # an exists watch on a missing node keeps waiting
                elif zxid_field is None or getattr(node, zxid_field) > relative_zxid:
                    kind = if_changed
                else:
                    kind = None
                if kind is None:
                    self._watch(table, path, watcher)
                else:
                    deliveries.append((watcher, WatchedEvent(kind, path)))
        # After the standard ones, as in ZooKeeper: a path in both lists ends persistent.
        for paths, mode in [
            (persistent, WatcherMode.PERSISTENT),
            (persistent_recursive, WatcherMode.PERSISTENT_RECURSIVE),
        ]:
            for path in sorted(set(paths)):
                self._watch(self.child_watches, path, watcher, mode)
                self._watch(self.data_watches, path, watcher, mode)
        return deliveries

    # -- writes ---------------------------------------------------------------------------

    def apply(
        self,
        session_id: int,
        op: Any,
        now_ms: int | None = None,
        identities: Sequence[Identity] = (),
    ) -> tuple[Any, list[Delivery]]:
        """One write request: a zxid, the op applied or its ZkError raised (the zxid stays
        consumed either way), and the watch deliveries. `identities`: the requesting
        connection's (`zkstub._acl`), which the nodes' ACLs are checked against."""
        zxid = self.next_zxid()
        now = self.clock() if now_ms is None else now_ms
        plan = _Plan(self, session_id, zxid, now, tuple(identities))
        result = plan.prepare(op)
        return result, plan.commit()

    def multi(
        self,
        session_id: int,
        ops: Sequence[Any],
        now_ms: int | None = None,
        identities: Sequence[Identity] = (),
    ) -> tuple[list[Any], list[Delivery]]:
        """All ops in one zxid, or none: a failed transaction returns RolledBackError for the
        ops before the failing one, its error, and RuntimeInconsistencyError after it."""
        zxid = self.next_zxid()
        now = self.clock() if now_ms is None else now_ms
        plan = _Plan(self, session_id, zxid, now, tuple(identities))
        results: list[Any] = []
        for index, op in enumerate(ops):
            try:
                results.append(plan.prepare(op))
            except ZkError as error:
                failed = [RolledBackError(path=getattr(o, "path", None)) for o in ops[:index]]
                failed.append(error)
                failed += [
                    RuntimeInconsistencyError(path=getattr(o, "path", None))
                    for o in ops[index + 1 :]
                ]
                return failed, []
        return results, plan.commit()

    def close_session(self, session_id: int, now_ms: int | None = None) -> list[Delivery]:
        """Deletes the session's ephemerals in one transaction and forgets its watches."""
        zxid = self.next_zxid()
        # Closing a session is the server's doing: no ACL stops it (ZooKeeper's
        # closeSession deletes the ephemerals whatever their parents' ACLs).
        plan = _Plan(self, session_id, zxid, self.clock() if now_ms is None else now_ms,
                     skip_acl=True)  # fmt: skip
        for path in sorted(self.ephemerals.get(session_id, ()), reverse=True):
            plan.prepare(DeleteOp(path))
        deliveries = plan.commit()
        self.ephemerals.pop(session_id, None)
        for table in (self.data_watches, self.child_watches):
            for path in [p for p, watchers in table.items() if session_id in watchers]:
                self._unwatch(table, path, session_id)
        return [d for d in deliveries if d[0] != session_id]

    def _fire(
        self,
        table: WatchTable,
        path: str,
        kind: EventType,
        already: frozenset[int] = frozenset(),
    ) -> list[Delivery]:
        """Fires the table's watches matching an event on `path` (ZooKeeper's
        WatchManager.triggerWatch): on the path itself every watch but a recursive one on a
        NodeChildrenChanged, and the standard ones go; above it the recursive ones, again
        not on a NodeChildrenChanged. Each session once, in session order, skipping those in
        `already` (a delete fires one DELETED per session even if it watched both data and
        children)."""
        fired: set[int] = set()
        recursive, standard = WatcherMode.PERSISTENT_RECURSIVE, WatcherMode.STANDARD
        watched = _ancestors_first_self(path) if self.recursive_watches else iter([path])
        for watched_path in watched:
            watchers = table.get(watched_path)
            if not watchers:
                continue
            for session_id, mode in list(watchers.items()):
                if mode is recursive:
                    if kind is not EventType.CHILD:
                        fired.add(session_id)
                elif watched_path == path:
                    fired.add(session_id)
                    if mode is standard:
                        self._unwatch(table, watched_path, session_id)
        return [(sid, WatchedEvent(kind, path)) for sid in sorted(fired) if sid not in already]


def _enum_value(enum_type: type[enum.IntEnum], value: Any, what: str) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        raise BadArgumentsError(f"unknown {what} {value!r}") from None


@attrs.define
class _Plan:
    """Validates a request's ops against the tree as the earlier ops of the same request
    left it (ZooKeeper's outstanding ChangeRecords), then applies them all at once."""

    tree: DataTree
    session_id: int
    zxid: int
    now: int  # the transaction's time (ZooKeeper's TxnHeader.time), ms
    identities: tuple[Identity, ...] = ()  # the requesting connection's
    skip_acl: bool = False
    created: dict[str, Node] = attrs.field(factory=dict)
    deleted: set[str] = attrs.field(factory=set)
    changes: list[tuple[str, Any]] = attrs.field(factory=list)
    # Pending node views so later ops of a multi see earlier ones.
    pending: dict[str, Node | None] = attrs.field(factory=dict)

    def _view(self, path: str) -> Node | None:
        if path in self.pending:
            return self.pending[path]
        return self.tree.nodes.get(path)

    def _check(self, node: Node, perm: int, path: str) -> None:
        # The open ACL (one shared value: see fixup_acl) allows everything: skipped fast.
        if node.acl is not OPEN_ACL_UNSAFE and not self.skip_acl:
            check_acl(node.acl, perm, self.identities, path)

    def _pending_copy(self, path: str) -> Node:
        node = self._view(path)
        assert node is not None
        copy = node.copy()
        self.pending[path] = copy
        return copy

    def prepare(self, op: Any) -> Any:
        match op:
            case CreateOp():
                return self._create(op)
            case DeleteOp():
                return self._delete(op)
            case SetDataOp():
                return self._set(op)
            case SetACLOp():
                return self._set_acl(op)
            case CheckOp():
                validate_path(op.path)
                node = self._view(op.path)
                if node is None:
                    raise NoNodeError(path=op.path)
                self._check(node, Perms.READ, op.path)
                if op.version != -1 and op.version != node.version:
                    raise BadVersionError(path=op.path)
                return True
        raise BadArgumentsError(f"unknown op {op!r}")

    def _create(self, op: CreateOp) -> str:
        validate_path(op.path, sequential=op.sequence)
        data = check_data(op.data, op.path)
        parent_path = parent_of(op.path)
        parent = self._view(parent_path)
        if op.path == "/" and not op.sequence:
            raise NodeExistsError(path=op.path)
        # As PrepRequestProcessor: the ACL is fixed up (InvalidACL) before the parent is
        # looked up (NoNode), and CREATE on the parent checked before NodeExists.
        acl = fixup_acl(op.path, self.identities, op.acl)
        if parent is None:
            raise NoNodeError(path=op.path)
        self._check(parent, Perms.CREATE, op.path)
        path = f"{op.path}{parent.cversion:010d}" if op.sequence else op.path
        if self._view(path) is not None:
            raise NodeExistsError(path=path)
        if parent.ephemeral_owner:  # checked after NodeExists, as PrepRequestProcessor does
            raise NoChildrenForEphemeralsError(path=op.path)
        now = self.now
        parent = self._pending_copy(parent_path)
        parent.children.add(name_of(path))
        parent.cversion += 1
        parent.pzxid = self.zxid
        owner = self.session_id if op.ephemeral else 0
        self.pending[path] = Node(data, self.zxid, self.zxid, self.zxid, now, now,
                                  ephemeral_owner=owner, acl=acl)  # fmt: skip
        self.changes.append(("create", path))
        return path

    def _delete(self, op: DeleteOp) -> bool:
        validate_path(op.path)
        if op.path in SPECIAL_PATHS:
            raise BadArgumentsError(f"cannot delete {op.path}: reserved", path=op.path)
        parent_path = parent_of(op.path)
        parent = self._view(parent_path)
        if parent is None:
            raise NoNodeError(path=op.path)
        self._check(parent, Perms.DELETE, op.path)  # before the node's NoNode, as there
        node = self._view(op.path)
        if node is None:
            raise NoNodeError(path=op.path)
        if op.version != -1 and op.version != node.version:
            raise BadVersionError(path=op.path)
        if node.children:
            raise NotEmptyError(path=op.path)
        parent = self._pending_copy(parent_path)
        parent.children.discard(name_of(op.path))
        # The stored cversion counts creates only; the reported one moves (see Node).
        parent.pzxid = max(parent.pzxid, self.zxid)
        self.pending[op.path] = None
        self.changes.append(("delete", op.path))
        return True

    def _set(self, op: SetDataOp) -> Stat:
        validate_path(op.path)
        data = check_data(op.data, op.path)
        node = self._view(op.path)
        if node is None:
            raise NoNodeError(path=op.path)
        self._check(node, Perms.WRITE, op.path)
        if op.version != -1 and op.version != node.version:
            raise BadVersionError(path=op.path)
        node = self._pending_copy(op.path)
        node.data = data
        node.version += 1
        node.mzxid = self.zxid
        node.mtime = self.now
        self.changes.append(("set", op.path))
        return node.stat()

    def _set_acl(self, op: SetACLOp) -> Stat:
        """ZooKeeper's setACL: the ACL fixed up, ADMIN on the node, `version` against the
        node's aversion. No watch fires (ZooKeeper has no ACL event)."""
        validate_path(op.path)
        acl = fixup_acl(op.path, self.identities, op.acl)
        node = self._view(op.path)
        if node is None:
            raise NoNodeError(path=op.path)
        self._check(node, Perms.ADMIN, op.path)
        if op.version != -1 and op.version != node.aversion:
            raise BadVersionError(path=op.path)
        node = self._pending_copy(op.path)
        node.acl = acl
        node.aversion += 1
        return node.stat()

    def commit(self) -> list[Delivery]:
        tree = self.tree
        for path, node in self.pending.items():
            if node is None:
                old = tree.nodes.pop(path, None)
                if old is not None and old.ephemeral_owner:
                    tree.ephemerals.get(old.ephemeral_owner, set()).discard(path)
            else:
                tree.nodes[path] = node
                if node.ephemeral_owner:
                    tree.ephemerals.setdefault(node.ephemeral_owner, set()).add(path)
        deliveries: list[Delivery] = []
        for kind, path in self.changes:
            if kind == "create":
                deliveries += tree._fire(tree.data_watches, path, EventType.CREATED)
                deliveries += tree._fire(tree.child_watches, parent_of(path), EventType.CHILD)
            elif kind == "delete":
                fired = tree._fire(tree.data_watches, path, EventType.DELETED)
                deliveries += fired
                already = frozenset(sid for sid, _ in fired)
                deliveries += tree._fire(tree.child_watches, path, EventType.DELETED, already)
                deliveries += tree._fire(tree.child_watches, parent_of(path), EventType.CHILD)
            else:
                deliveries += tree._fire(tree.data_watches, path, EventType.CHANGED)
        return deliveries
