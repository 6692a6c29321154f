"""The broker's config change listener (Kafka's ConfigChangeListener over its
ZkNodeChangeNotificationListener): an admin who changes a topic's config writes the new
overrides to /config/topics/T, then a sequential notification /config/changes/config_change_N
naming `topics/T`; every broker processes each notification once, in order, and reloads that
topic's config. Broker configs go the same way (`brokers/<default>` for the cluster-wide
defaults, `brokers/1` for broker 1's own): each broker hands them to its dynamic config,
which applies the default and its own (Kafka's BrokerConfigHandler). Notifications older
than 15 minutes are purged, as Kafka purges them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from kcore.zk_client import KafkaZkClient, ZooKeeperError
from kcore.zkdata import CONFIG_CHANGE_PREFIX, ZkDataError

logger = logging.getLogger("kcore.server.config_changes")

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_RETRY_BACKOFF = 1.0  # seconds, after ZooKeeper failed to answer


def change_sequence(name: str) -> int | None:
    """The sequence number of a notification `config_change_0000000012` (12); None for a
    name that is not one."""
    digits = name[len(CONFIG_CHANGE_PREFIX) :]
    return int(digits) if name.startswith(CONFIG_CHANGE_PREFIX) and digits.isdigit() else None


@attrs.define(eq=False)
class ConfigChangeListener:
    zk_client: KafkaZkClient
    on_topic_config_change: Callable[[str], Awaitable[None]]
    wall_clock_ms: Callable[[], int]
    # Called with the entity's name (`<default>`, or a broker id) of a broker config change.
    on_broker_config_change: Callable[[str], Awaitable[None]] | None = None
    # Called with the user's name of a user config change (SCRAM credentials).
    on_user_config_change: Callable[[str], Awaitable[None]] | None = None
    last_processed: int = -1
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # A new session lost the watch: read the notifications again (Kafka's
        # ZkStateChangeHandler does the same).
        self.zk_client.add_session_hooks(after_initializing_session=self._on_new_session)
        started = False
        while True:
            self._changed = trio.Event()
            try:
                names = await self.zk_client.get_config_changes(watch=self._changed.set)
                await self._process(names)
            except ZooKeeperError as error:
                logger.warning("Reading config change notifications failed: %r; retrying", error)
                await trio.sleep(_RETRY_BACKOFF)
                continue
            if not started:
                task_status.started()
                started = True
            await self._changed.wait()

    async def _on_new_session(self) -> None:
        self._changed.set()

    async def _process(self, names: list[str]) -> None:
        now_ms = self.wall_clock_ms()
        for name in names:
            sequence = change_sequence(name)
            if sequence is None:
                continue  # not a notification: someone else's znode
            try:
                found = await self.zk_client.read_config_change(name)
            except ZkDataError as error:
                # Kafka logs a notification it cannot read and goes on to the next.
                logger.error("Skipping config change notification %s: %s", name, error)
                self.last_processed = max(self.last_processed, sequence)
                continue
            if found is None:
                continue  # purged by another broker
            entity_path, ctime_ms = found
            if sequence > self.last_processed:
                await self._apply(entity_path)
                self.last_processed = sequence
            if ctime_ms + CHANGE_EXPIRATION_MS < now_ms:
                await self.zk_client.delete_config_change(name)

    async def _apply(self, entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        if entity_type == "topics" and name:
            logger.info("Processing config change notification for topic %s", name)
            await self.on_topic_config_change(name)
        elif entity_type == "brokers" and name and self.on_broker_config_change is not None:
            logger.info("Processing config change notification for brokers/%s", name)
            await self.on_broker_config_change(name)
        elif entity_type == "users" and name and self.on_user_config_change is not None:
            logger.info("Processing config change notification for users/%s", name)
            await self.on_user_config_change(name)
        else:
            # Client and IP configs (quotas) are not dynamic in kcore yet.
            logger.info("Ignoring config change notification for %s", entity_path)
