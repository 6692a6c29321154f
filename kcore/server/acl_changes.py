"""The broker's ACL cache, kept current (Kafka's AclAuthorizer over its two
ZkNodeChangeNotificationListeners): at start-up every ACL is read from ZooKeeper into the
authorizer; an admin's change to a resource pattern's ACLs is followed by a sequential
notification (`/kafka-acl-changes/acl_changes_N` for literal patterns,
`/kafka-acl-extended-changes/acl_changes_N` for prefixed ones) naming the pattern, and every
broker reloads that pattern's ACLs, once per notification, in order. Notifications older
than 15 minutes are purged, as Kafka purges them. A new ZooKeeper session (the watches
lost) reads everything again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import trio

from kcore.security import acl
from kcore.zk_client import KafkaZkClient, ZooKeeperError

logger = logging.getLogger("kcore.server.acl_changes")

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_RETRY_BACKOFF = 1.0  # seconds, after ZooKeeper failed to answer
_CHANGE_STORES = (acl.LITERAL_ACL_CHANGES, acl.EXTENDED_ACL_CHANGES)


def change_sequence(name: str) -> int | None:
    digits = name[len(acl.ACL_CHANGE_PREFIX) :]
    return int(digits) if name.startswith(acl.ACL_CHANGE_PREFIX) and digits.isdigit() else None


@attrs.define(eq=False)
class AclChangeListener:
    zk_client: KafkaZkClient
    authorizer: acl.AclAuthorizer
    wall_clock_ms: Callable[[], int]
    # The last notification processed, per change store.
    last_processed: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(_CHANGE_STORES, -1))
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)
    _reload: bool = attrs.field(default=True, init=False)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Loads every ACL, then follows the notifications; `task_status.started()` once
        the ACLs are loaded (the broker serves no request before)."""
        self.zk_client.add_session_hooks(after_initializing_session=self._on_new_session)
        started = False
        while True:
            self._changed = trio.Event()
            try:
                if self._reload:
                    self._reload = False
                    await self._load_all()
                for store in _CHANGE_STORES:
                    names = await self.zk_client.get_acl_changes(store, watch=self._changed.set)
                    await self._process(store, names)
            except ZooKeeperError as error:
                logger.warning("Reading ACLs failed: %r; retrying", error)
                await trio.sleep(_RETRY_BACKOFF)
                continue
            if not started:
                task_status.started()
                started = True
            await self._changed.wait()

    async def _on_new_session(self) -> None:
        self._reload = True
        self._changed.set()

    async def _load_all(self) -> None:
        found = await self.zk_client.get_all_acls()
        self.authorizer.acls = dict(found)
        logger.info("Loaded %d ACLs on %d resource patterns",
                    sum(len(e) for e in found.values()), len(found))  # fmt: skip

    async def _process(self, store: str, names: list[str]) -> None:
        now_ms = self.wall_clock_ms()
        for name in names:
            sequence = change_sequence(name)
            if sequence is None:
                continue
            try:
                found = await self.zk_client.read_acl_change(store, name)
            except acl.AclError as error:
                logger.error("Skipping ACL change notification %s/%s: %s", store, name, error)
                self.last_processed[store] = max(self.last_processed[store], sequence)
                continue
            if found is None:
                continue  # purged by another broker
            pattern, ctime_ms = found
            if sequence > self.last_processed[store]:
                await self.reload(pattern)
                self.last_processed[store] = sequence
            if ctime_ms + CHANGE_EXPIRATION_MS < now_ms:
                await self.zk_client.delete_acl_change(store, name)

    async def reload(self, pattern: acl.ResourcePattern) -> None:
        """The pattern's ACLs read again from ZooKeeper into the cache."""
        try:
            entries, _ = await self.zk_client.get_resource_acls(pattern)
        except acl.AclError as error:
            logger.error("Cannot read the ACLs of %s: %s", pattern, error)
            return
        logger.info("Processing ACL change notification for %s, ACLs now %d", pattern,
                    len(entries))  # fmt: skip
        self.authorizer.set_acls(pattern, entries)
