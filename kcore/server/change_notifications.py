"""Kafka's ZkNodeChangeNotificationListener, which the config and ACL change listeners are
built on: an admin writes what changed, then a sequential notification znode naming it
(`/config/changes/config_change_N`, `/kafka-acl-changes/acl_changes_N`, ...); every broker
handles each notification once, in order, and purges those older than 15 minutes. A
notification that cannot be read is logged and skipped, as Kafka does. A new ZooKeeper
session (its watches lost) reads the notifications again, after reloading everything when
the listener keeps a cache (`load_all`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from kcore.zk_client import KafkaZkClient, ZooKeeperError

logger = logging.getLogger("kcore.server.change_notifications")

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
RETRY_BACKOFF = 1.0  # seconds, after ZooKeeper failed to answer


def change_sequence(name: str, prefix: str) -> int | None:
    """The sequence number of a notification `<prefix>0000000012` (12); None for a name
    that is not one (someone else's znode)."""
    digits = name[len(prefix) :]
    return int(digits) if name.startswith(prefix) and digits.isdigit() else None


@attrs.define(eq=False)
class NotificationStore:
    """One notification znode's children. `read_change(name)` gives what the notification
    names and its creation time (ms since the epoch), None once purged, or raises one of
    `unreadable`; `handle` acts on what it names."""

    path: str  # for the logs
    prefix: str
    list_changes: Callable[[Callable[[], None]], Awaitable[list[str]]]
    read_change: Callable[[str], Awaitable[tuple[Any, int] | None]]
    delete_change: Callable[[str], Awaitable[None]]
    handle: Callable[[Any], Awaitable[None]]
    unreadable: tuple[type[Exception], ...]
    last_processed: int = -1  # the sequence number of the last notification handled

    async def process(self, names: Sequence[str], now_ms: int) -> None:
        for name in names:
            sequence = change_sequence(name, self.prefix)
            if sequence is None:
                continue
            try:
                found = await self.read_change(name)
            except self.unreadable as error:
                logger.error("Skipping change notification %s/%s: %s", self.path, name, error)
                self.last_processed = max(self.last_processed, sequence)
                continue
            if found is None:
                continue  # purged by another broker
            change, ctime_ms = found
            if sequence > self.last_processed:
                await self.handle(change)
                self.last_processed = sequence
            if ctime_ms + CHANGE_EXPIRATION_MS < now_ms:
                await self.delete_change(name)


@attrs.define(eq=False)
class NotificationListener:
    """Follows `stores` until cancelled; `run`'s `task_status.started()` comes once
    `load_all` (if any) and every notification present were handled."""

    zk_client: KafkaZkClient
    stores: Sequence[NotificationStore]
    wall_clock_ms: Callable[[], int]
    what: str  # what failed to be read, for the log: "ACLs", "config change notifications"
    load_all: Callable[[], Awaitable[None]] | None = None
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _reload: bool = attrs.field(default=True, init=False)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.zk_client.add_session_hooks(after_initializing_session=self._on_new_session)
        started = False
        while True:
            self._changed = trio.Event()
            try:
                if self._reload and self.load_all is not None:
                    await self.load_all()
                self._reload = False
                for store in self.stores:
                    names = await store.list_changes(self._changed.set)
                    await store.process(names, self.wall_clock_ms())
            except ZooKeeperError as error:
                logger.warning("Reading %s failed: %r; retrying", self.what, error)
                await trio.sleep(RETRY_BACKOFF)
                continue
            if not started:
                task_status.started()
                started = True
            await self._changed.wait()

    async def _on_new_session(self) -> None:
        self._reload = True
        self._changed.set()
