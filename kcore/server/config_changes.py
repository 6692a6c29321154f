"""The broker's config change listener (Kafka's ConfigChangeListener over its
ZkNodeChangeNotificationListener, kcore.server.change_notifications): an admin who changes
a topic's config writes the new overrides to /config/topics/T, then a sequential
notification /config/changes/config_change_N naming `topics/T`; every broker processes each
notification once, in order, and reloads that topic's config. Broker configs go the same way
(`brokers/<default>` for the cluster-wide defaults, `brokers/1` for broker 1's own): each
broker hands them to its dynamic config, which applies the default and its own (Kafka's
BrokerConfigHandler); user configs (SCRAM credentials) too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kcore.server.change_notifications import NotificationListener, NotificationStore
from kcore.zk_client import KafkaZkClient
from kcore.zkdata import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES, ZkDataError

logger = logging.getLogger("kcore.server.config_changes")


def config_change_listener(
    zk_client: KafkaZkClient,
    on_topic_config_change: Callable[[str], Awaitable[None]],
    wall_clock_ms: Callable[[], int],
    *,
    on_broker_config_change: Callable[[str], Awaitable[None]] | None = None,
    on_user_config_change: Callable[[str], Awaitable[None]] | None = None,
) -> NotificationListener:
    """`on_broker_config_change` gets the entity's name (`<default>`, or a broker id) of a
    broker config change, `on_user_config_change` the user's name of a user config change."""

    async def apply(entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        if entity_type == "topics" and name:
            logger.info("Processing config change notification for topic %s", name)
            await on_topic_config_change(name)
        elif entity_type == "brokers" and name and on_broker_config_change is not None:
            logger.info("Processing config change notification for brokers/%s", name)
            await on_broker_config_change(name)
        elif entity_type == "users" and name and on_user_config_change is not None:
            logger.info("Processing config change notification for users/%s", name)
            await on_user_config_change(name)
        else:
            # Client and IP configs (quotas) are not dynamic in kcore yet.
            logger.info("Ignoring config change notification for %s", entity_path)

    store = NotificationStore(
        path=CONFIG_CHANGES,
        prefix=CONFIG_CHANGE_PREFIX,
        list_changes=zk_client.get_config_changes,
        read_change=zk_client.read_config_change,
        delete_change=zk_client.delete_config_change,
        handle=apply,
        unreadable=(ZkDataError,),
    )
    return NotificationListener(zk_client, [store], wall_clock_ms, "config change notifications")
