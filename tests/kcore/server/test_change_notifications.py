"""Kafka's ZkNodeChangeNotificationListener rules, as the config and ACL listeners share
them: each notification handled once and in order, unreadable ones skipped, old ones
purged."""

from kcore.server.change_notifications import (
    CHANGE_EXPIRATION_MS,
    NotificationStore,
    change_sequence,
)
from kcore.zkdata import ZkDataError

NOW_MS = 10 * CHANGE_EXPIRATION_MS


def _store(notifications):
    handled, deleted = [], []

    async def read_change(name):
        found = notifications[name]
        if isinstance(found, Exception):
            raise found
        return found

    async def delete_change(name):
        deleted.append(name)

    async def handle(change):
        handled.append(change)

    async def list_changes(watch):
        return sorted(notifications)

    store = NotificationStore(
        path="/config/changes",
        prefix="config_change_",
        list_changes=list_changes,
        read_change=read_change,
        delete_change=delete_change,
        handle=handle,
        unreadable=(ZkDataError,),
    )
    return store, handled, deleted


def test_a_notification_name_carries_its_sequence_number():
    assert change_sequence("config_change_0000000012", "config_change_") == 12
    assert change_sequence("config_change_x", "config_change_") is None
    assert change_sequence("other_0000000001", "config_change_") is None


async def test_each_notification_is_handled_once_in_order_and_old_ones_are_purged():
    fresh = NOW_MS - 1000
    old = NOW_MS - CHANGE_EXPIRATION_MS - 1
    notifications = {
        "config_change_0000000001": ("topics/a", old),
        "config_change_0000000002": ZkDataError(
            "/config/changes/config_change_0000000002", b"{", "not JSON"
        ),
        "config_change_0000000003": None,  # purged by another broker meanwhile
        "config_change_0000000004": ("topics/b", fresh),
        "someone_elses": ("topics/c", fresh),
    }
    store, handled, deleted = _store(notifications)
    await store.process(sorted(notifications), NOW_MS)
    assert handled == ["topics/a", "topics/b"]
    assert deleted == ["config_change_0000000001"]
    assert store.last_processed == 4
    # The watch fires again with one more: only the new one is handled.
    notifications["config_change_0000000005"] = ("topics/a", fresh)
    await store.process(sorted(notifications), NOW_MS)
    assert handled == ["topics/a", "topics/b", "topics/a"]
