"""The data zkstub's API speaks: Stat, watch events, client states, multi ops."""

from __future__ import annotations

import enum
import operator

import attrs

from zkstub._acl import ACL, OPEN_ACL_UNSAFE


@attrs.frozen
class Stat:
    """A znode's Stat, field for field as ZooKeeper's (`org.apache.zookeeper.data.Stat`)."""

    czxid: int
    mzxid: int
    ctime: int  # milliseconds since the epoch, from the injected wall clock
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int  # camelCase: ZooKeeper's names, as kazoo has them
    dataLength: int
    numChildren: int
    pzxid: int

    def fields(self) -> tuple[int, ...]:
        """The eleven numbers in ZooKeeper's order (what both wire formats carry)."""
        return _STAT_FIELDS(self)


_STAT_FIELDS = operator.attrgetter(*(field.name for field in attrs.fields(Stat)))


class EventType(enum.Enum):
    """Watch event types, named as kazoo names them."""

    CREATED = 1  # ZooKeeper's NodeCreated
    DELETED = 2  # NodeDeleted
    CHANGED = 3  # NodeDataChanged
    CHILD = 4  # NodeChildrenChanged


class AddWatchMode(enum.IntEnum):
    """`add_watch`'s modes, numbered as ZooKeeper's `AddWatchMode` (ZooDefs.AddWatchModes).

    PERSISTENT on P: NodeCreated, NodeDataChanged and NodeDeleted of P and NodeChildrenChanged
    of P, until removed. PERSISTENT_RECURSIVE on P: NodeCreated, NodeDataChanged and
    NodeDeleted of P and of every node under it, never NodeChildrenChanged."""

    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatcherType(enum.IntEnum):
    """Which watches `remove_watches` / `check_watches` mean, numbered as ZooKeeper's
    `Watcher.WatcherType`. CHILDREN, DATA and ANY are ZooKeeper 3.8's (DATA and CHILDREN
    name a table, whatever the mode of the watch in it: see `DataTree.remove_watches`);
    PERSISTENT and PERSISTENT_RECURSIVE are 3.9's (a 3.8 server answers them with
    MarshallingError)."""

    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5


@attrs.frozen
class WatchedEvent:
    type: EventType
    path: str


class ClientState(enum.Enum):
    CONNECTING = "CONNECTING"
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"  # connection lost; the session may still be alive
    EXPIRED = "EXPIRED"
    CLOSED = "CLOSED"


@attrs.frozen
class CreateOp:
    path: str
    data: bytes | None = b""
    ephemeral: bool = False
    sequence: bool = False
    acl: tuple[ACL, ...] = attrs.field(default=OPEN_ACL_UNSAFE, converter=tuple)


@attrs.frozen
class DeleteOp:
    path: str
    version: int = -1


@attrs.frozen
class SetDataOp:
    path: str
    data: bytes | None
    version: int = -1


@attrs.frozen
class CheckOp:
    path: str
    version: int


@attrs.frozen
class SetACLOp:
    """ZooKeeper's setACL; `version` is matched against the node's aversion (-1: any)."""

    path: str
    acl: tuple[ACL, ...] = attrs.field(converter=tuple)
    version: int = -1


MultiOp = CreateOp | DeleteOp | SetDataOp | CheckOp


class Op:
    """Factories for `multi` ops: `Op.create`, `Op.delete`, `Op.set`, `Op.check`."""

    @staticmethod
    def create(
        path: str,
        data: bytes | None = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        acl: tuple[ACL, ...] = OPEN_ACL_UNSAFE,
    ) -> CreateOp:
        return CreateOp(path, data, ephemeral, sequence, acl)

    @staticmethod
    def delete(path: str, version: int = -1) -> DeleteOp:
        return DeleteOp(path, version)

    @staticmethod
    def set(path: str, data: bytes | None, version: int = -1) -> SetDataOp:
        return SetDataOp(path, data, version)

    @staticmethod
    def check(path: str, version: int) -> CheckOp:
        return CheckOp(path, version)
