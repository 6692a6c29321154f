"""The broker's ACL cache, kept current (Kafka's AclAuthorizer over its two
ZkNodeChangeNotificationListeners): at start-up every ACL is read from ZooKeeper into the
authorizer; an admin's change to a resource pattern's ACLs is followed by a sequential
notification (`/kafka-acl-changes/acl_changes_N` for literal patterns,
`/kafka-acl-extended-changes/acl_changes_N` for prefixed ones) naming the pattern, and every
broker reloads that pattern's ACLs, once per notification, in order (see
kcore.server.change_notifications). A new ZooKeeper session (the watches lost) reads
everything again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from kcore.security import acl
from kcore.server.change_notifications import NotificationListener, NotificationStore
from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.server.acl_changes")

_CHANGE_STORES = (acl.LITERAL_ACL_CHANGES, acl.EXTENDED_ACL_CHANGES)


def acl_change_listener(
    zk_client: KafkaZkClient, authorizer: acl.AclAuthorizer, wall_clock_ms: Callable[[], int]
) -> NotificationListener:
    """Its `run` loads every ACL, then follows the notifications; `task_status.started()`
    once the ACLs are loaded (the broker serves no request before)."""

    async def load_all() -> None:
        found = await zk_client.get_all_acls()
        authorizer.acls = dict(found)
        logger.info("Loaded %d ACLs on %d resource patterns",
                    sum(len(e) for e in found.values()), len(found))  # fmt: skip

    async def reload(pattern: acl.ResourcePattern) -> None:
        """The pattern's ACLs read again from ZooKeeper into the cache."""
        try:
            entries, _ = await zk_client.get_resource_acls(pattern)
        except acl.AclError as error:
            logger.error("Cannot read the ACLs of %s: %s", pattern, error)
            return
        logger.info("Processing ACL change notification for %s, ACLs now %d", pattern,
                    len(entries))  # fmt: skip
        authorizer.set_acls(pattern, entries)

    stores = [
        NotificationStore(
            path=store,
            prefix=acl.ACL_CHANGE_PREFIX,
            list_changes=functools.partial(zk_client.get_acl_changes, store),
            read_change=functools.partial(zk_client.read_acl_change, store),
            delete_change=functools.partial(zk_client.delete_acl_change, store),
            handle=reload,
            unreadable=(acl.AclError,),
        )
        for store in _CHANGE_STORES
    ]
    return NotificationListener(zk_client, stores, wall_clock_ms, "ACLs", load_all=load_all)
