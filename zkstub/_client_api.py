"""The client contract every zkstub client honours: the in-process one, the one over
`transport`, and the kazoo adapter for a real ZooKeeper (see notes/zk_client_api.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, Self, runtime_checkable

from zkstub._acl import ACL, OPEN_ACL_UNSAFE
from zkstub._types import ClientState, MultiOp, Stat, WatchedEvent, WatcherType

Watcher = Callable[[WatchedEvent], None]
StateListener = Callable[[ClientState], None]
SessionHook = Callable[[], Awaitable[None]]


@runtime_checkable
class ZkClient(Protocol):
    session_id: int
    session_timeout: float  # negotiated, seconds
    state: ClientState
    chroot: str  # "" when none

    async def create(
        self,
        path: str,
        data: bytes | None = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        make_parents: bool = False,
        acl: Iterable[ACL] = OPEN_ACL_UNSAFE,
    ) -> str: ...

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes | None, Stat]: ...

    async def set(self, path: str, data: bytes | None, version: int = -1) -> Stat: ...

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None: ...

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]: ...

    async def multi(self, ops: Iterable[MultiOp]) -> list[Any]: ...

    # ACLs and authentication (`zkstub._acl`): ZooKeeper's getACL, setACL, addAuthInfo.

    async def get_acl(self, path: str) -> tuple[tuple[ACL, ...], Stat]: ...

    async def set_acl(self, path: str, acl: Iterable[ACL], version: int = -1) -> Stat: ...

    async def add_auth(self, scheme: str, credential: bytes | str) -> None:
        """Authenticates this connection and every later one (AuthFailedError for an
        unknown scheme, and the connection closed)."""
        ...

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    # ZooKeeper 3.6+'s calls (the kazoo adapter raises UnimplementedError for all but sync:
    # kazoo 2.11 has none of them).

    async def add_watch(self, path: str, watcher: Watcher, *, recursive: bool = False) -> None:
        """A persistent watch (recursive: on the path and every node under it), kept until
        removed or the session ends; see `ZkClientImpl.add_watch`."""
        ...

    async def remove_watches(
        self, path: str, watcher_type: WatcherType, watcher: Watcher | None = None
    ) -> None:
        """Stops watches on the path (ZooKeeper's removeAllWatches, or removeWatches of one
        watcher); NoWatcherError if none is held."""
        ...

    async def multi_get(self, paths: Iterable[str]) -> list[Any]:
        """ZooKeeper 3.6's multiRead of getData ops: each path's (data, stat) or its error,
        in one request; see `ZkClientImpl.multi_get`."""
        ...

    async def get_ephemerals(self, prefix: str = "/") -> list[str]: ...

    async def get_all_children_number(self, path: str) -> int: ...

    async def sync(self, path: str) -> str: ...

    def add_listener(self, listener: StateListener) -> None: ...

    def remove_listener(self, listener: StateListener) -> None: ...

    def add_session_hooks(
        self,
        before_initializing_session: SessionHook | None = None,
        after_initializing_session: SessionHook | None = None,
    ) -> None: ...

    async def aclose(self) -> None: ...

    def abort(self) -> None:
        """Drops the connection without closing the session (a crashed process): its
        ephemerals stay until it expires."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc_info: object) -> None: ...
