"""The broker's dynamic config (Kafka's DynamicBrokerConfig, BrokerConfigHandler and the
broker half of ZkAdminManager.alterConfigs).

A broker's components are handed the `DynamicBrokerConfig`, never a copy: it reads like a
`KafkaConfig` (`config.min_insync_replicas`, `config.get("log.retention.ms")`), always with
the effective value, so a component that reads a setting where it uses it (the controller's
unclean election, the log cleaner's settings when it starts) needs nothing more. A component
that keeps what it read, or must act on a change, is a reconfigurable (Kafka's
BrokerReconfigurable): it checks a new config before it is taken and is told once it is:

- `DynamicLogConfig`: the log.* defaults, min.insync.replicas, unclean.leader.election.enable,
  message.max.bytes: the replica manager rebuilds every topic's config from its overrides
  over the new defaults and gives its logs their new segment and flush settings.
- `DynamicThreadPool`: num.replica.fetchers resizes the fetcher pool (each partition moves
  to its fetcher under the new count), by at most a factor of two at a time.
- `DynamicLogCleaner`: log.cleaner.* restarts the cleaners with the new settings (when the
  broker runs a cleaner).

Start-up reads /config/brokers/<default> and /config/brokers/<id> before anything serves
(`initialize`); afterwards the config change listener hands over each notification naming
`brokers/<default>` or `brokers/<id>` (`process_config_change`). A stored config that
cannot be applied is logged and the broker keeps the config it has, as Kafka's does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from kcore import errors
from kcore.config import (
    BROKER_DEFAULT_ENTITY,
    ConfigEntry,
    ConfigError,
    DynamicConfigView,
    KafkaConfig,
    describe_broker_config,
)
from kcore.config._dynamic import (
    DYNAMIC_LOG_CONFIGS,
    LOG_CLEANER_CONFIGS,
    changed_settings,
    check_cleaner_threads_change,
    check_dynamic_update,
    check_thread_count_change,
    loggable,
    sanitize_stored,
)
from kcore.server.log_cleaner import CleanerSettings
from kcore.zkdata import ZkDataError

logger = logging.getLogger("kcore.server.dynamic_broker_config")


class BrokerReconfigurable(Protocol):
    """A part of the broker that applies some dynamic settings (Kafka's
    BrokerReconfigurable)."""

    @property
    def reconfigurable_configs(self) -> frozenset[str]: ...

    def validate_reconfiguration(self, current: KafkaConfig, new: KafkaConfig) -> None:
        """Raises ConfigError if `new` cannot be applied."""

    def reconfigure(self, old: KafkaConfig, new: KafkaConfig) -> None: ...


@attrs.define(eq=False)
class DynamicBrokerConfig:
    """The broker's effective config, kept current as dynamic configs change."""

    static: KafkaConfig
    view: DynamicConfigView = attrs.field(init=False)
    _reconfigurables: list[BrokerReconfigurable] = attrs.field(factory=list, init=False)
    _zk_client: Any = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.view = DynamicConfigView(self.static)

    @classmethod
    def of(cls, config: KafkaConfig | DynamicBrokerConfig) -> DynamicBrokerConfig:
        """`config` itself if dynamic, else a dynamic config with no dynamic layer."""
        return config if isinstance(config, DynamicBrokerConfig) else cls(config)

    # -- reading: as a KafkaConfig -----------------------------------------------------------

    def get(self, name: str) -> Any:
        return self.view.effective.get(name)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_") or attribute in ("static", "view"):
            raise AttributeError(attribute)  # not set yet (during __init__)
        return getattr(self.view.effective, attribute)

    # -- changing --------------------------------------------------------------------------

    def add_reconfigurable(self, reconfigurable: BrokerReconfigurable) -> None:
        self._reconfigurables.append(reconfigurable)

    def validate(self, props: Mapping[str, Any], *, per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validate: ConfigError unless `props`, as this broker's
        own dynamic configs (or as the cluster default's), could be applied here."""
        check_dynamic_update(props, per_broker=per_broker)
        self._reconfigurables_for(self._with_layer(props, per_broker=per_broker))

    def update(self, stored: Mapping[str, Any], *, per_broker: bool) -> bool:
        """Takes `stored` (as read from ZooKeeper) as this broker's own dynamic configs, or
        the cluster default's, and reconfigures what the change affects; whether it was
        applied. What cannot be applied is logged (Kafka's updateBrokerConfig /
        updateDefaultConfig): a setting that is not dynamic or has a bad value is ignored,
        a config that fails as a whole leaves the current one in place."""
        what = (
            f"Per-broker configs of {self.static.broker_id}"
            if per_broker
            else "Cluster default configs"
        )
        props, ignored = sanitize_stored(stored, per_broker=per_broker)
        for name, why in sorted(ignored.items()):
            logger.error("%s: ignoring %s: %s", what, name, why)
        try:
            view = self._with_layer(props, per_broker=per_broker)
            to_reconfigure = self._reconfigurables_for(view)
        except ConfigError as error:
            logger.error("%s could not be applied (%s): %s", what, loggable(props), error)
            return False
        old = self.view.effective
        changed = changed_settings(old, view.effective)
        self.view = view
        if changed:
            logger.info("%s updated: %s", what, loggable(props))
        for reconfigurable in to_reconfigure:
            try:
                reconfigurable.reconfigure(old, view.effective)
            except Exception:  # one part's failure must not keep the others unconfigured
                logger.exception("Reconfiguring %r failed", reconfigurable)
        return True

    def _with_layer(self, props: Mapping[str, Any], *, per_broker: bool) -> DynamicConfigView:
        if per_broker:
            return DynamicConfigView(self.static, self.view.cluster_default, props)
        return DynamicConfigView(self.static, props, self.view.per_broker)

    def _reconfigurables_for(self, view: DynamicConfigView) -> list[BrokerReconfigurable]:
        """The reconfigurables a change to `view` concerns, each having checked it."""
        current = self.view.effective
        changed = changed_settings(current, view.effective)
        concerned = [r for r in self._reconfigurables if r.reconfigurable_configs & changed]
        for reconfigurable in concerned:
            try:
                reconfigurable.validate_reconfiguration(current, view.effective)
            except ConfigError as error:
                raise ConfigError(f"Invalid dynamic configuration: {error}") from None
        return concerned

    # -- ZooKeeper ---------------------------------------------------------------------------

    async def initialize(self, zk_client: Any) -> None:
        """Kafka's DynamicBrokerConfig.initialize: the cluster default, then this broker's
        own dynamic configs, read before the broker's parts are built."""
        self._zk_client = zk_client
        await self.process_config_change(BROKER_DEFAULT_ENTITY)
        await self.process_config_change(str(self.static.broker_id))

    async def process_config_change(self, entity_name: str) -> None:
        """A change notification named `brokers/<entity_name>`: the cluster default or this
        broker's own configs are read again and applied; another broker's are not ours."""
        if entity_name == BROKER_DEFAULT_ENTITY:
            per_broker = False
        elif entity_name.strip() == str(self.static.broker_id):
            per_broker = True
        else:
            if not entity_name.strip().isdigit():
                logger.warning("Ignoring a config change of brokers/%s: not a broker id",
                               entity_name)  # fmt: skip
            return
        try:
            stored = await self._zk_client.read_entity_configs("brokers", entity_name)
        except ZkDataError:
            # (not the error itself: it quotes the znode, which may hold a password)
            logger.error("Ignoring the dynamic configs of brokers/%s: not Kafka's JSON "
                         '{"version":1,"config":{...}}', entity_name)  # fmt: skip
            return
        self.update(stored, per_broker=per_broker)


# -- the reconfigurables -----------------------------------------------------------------------


@attrs.define(eq=False)
class DynamicLogConfig:
    """Kafka's DynamicLogConfig: topic configs default to these settings."""

    replica_manager: Any
    # Told when unclean.leader.election.enable turns true (the controller elects again).
    on_unclean_election_enabled: Callable[[], None] = lambda: None
    reconfigurable_configs: frozenset[str] = DYNAMIC_LOG_CONFIGS

    def validate_reconfiguration(self, current: KafkaConfig, new: KafkaConfig) -> None:
        pass  # the values were checked as the config was built, as Kafka checks them

    def reconfigure(self, old: KafkaConfig, new: KafkaConfig) -> None:
        self.replica_manager.reconfigure_log_defaults()
        if new.unclean_leader_election_enable and not old.unclean_leader_election_enable:
            self.on_unclean_election_enabled()


@attrs.define(eq=False)
class DynamicThreadPool:
    """Kafka's DynamicThreadPool, for the one pool kcore has: the replica fetchers."""

    replica_manager: Any
    reconfigurable_configs: frozenset[str] = frozenset({"num.replica.fetchers"})

    def validate_reconfiguration(self, current: KafkaConfig, new: KafkaConfig) -> None:
        check_thread_count_change(
            "num.replica.fetchers", current.num_replica_fetchers, new.num_replica_fetchers
        )

    def reconfigure(self, old: KafkaConfig, new: KafkaConfig) -> None:
        self.replica_manager.fetcher_manager.resize_thread_pool(new.num_replica_fetchers)


@attrs.define(eq=False)
class DynamicLogCleaner:
    """Kafka's LogCleaner as a reconfigurable: its cleaners restart with the new settings."""

    replica_manager: Any
    reconfigurable_configs: frozenset[str] = LOG_CLEANER_CONFIGS

    def validate_reconfiguration(self, current: KafkaConfig, new: KafkaConfig) -> None:
        check_cleaner_threads_change(current.log_cleaner_threads, new.log_cleaner_threads)

    def reconfigure(self, old: KafkaConfig, new: KafkaConfig) -> None:
        cleaner = self.replica_manager.log_cleaner
        if cleaner is not None:  # not started yet: it will read the new settings
            cleaner.reconfigure(CleanerSettings.from_config(new))


def add_broker_reconfigurables(
    config: DynamicBrokerConfig,
    replica_manager: Any,
    on_unclean_election_enabled: Callable[[], None] = lambda: None,
) -> None:
    """Kafka's addReconfigurables, for what kcore reconfigures (the cleaner only when the
    broker runs one, log.cleaner.enable being static)."""
    config.add_reconfigurable(DynamicLogConfig(replica_manager, on_unclean_election_enabled))
    config.add_reconfigurable(DynamicThreadPool(replica_manager))
    if config.log_cleaner_enable:
        config.add_reconfigurable(DynamicLogCleaner(replica_manager))


# -- the requests ----------------------------------------------------------------------------


def describe_broker_resource(config: DynamicBrokerConfig, name: str) -> list[ConfigEntry]:
    """DescribeConfigs of a BROKER resource: "" is the cluster-wide dynamic defaults, this
    broker's id every setting of this broker (Kafka's ConfigHelper)."""
    if name == "":
        return describe_broker_config(config.view, per_broker=False)
    if _broker_id(name) != config.static.broker_id:
        raise errors.InvalidRequestError(
            f"Unexpected broker id, expected {config.static.broker_id} or empty string, but "
            f"received {name}"
        )
    return describe_broker_config(config.view)


async def alter_broker_configs(
    config: DynamicBrokerConfig,
    zk_client: Any,
    name: str,
    new_configs: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool,
) -> None:
    """AlterConfigs / IncrementalAlterConfigs of a BROKER resource ("" is the cluster-wide
    default, which any broker alters; an id is that broker's own, which only it alters):
    `new_configs(stored)` replaces the stored dynamic configs once this broker has checked
    them (Kafka's ConfigAdminManager.preprocess), written with a change notification
    (AdminZkClient.changeBrokerConfig) from which every broker applies them. Raises the
    KafkaError the result carries: INVALID_REQUEST for a config that cannot be applied,
    with Kafka's message."""
    per_broker = name != ""
    if per_broker and _broker_id(name) != config.static.broker_id:
        raise errors.InvalidRequestError(
            f"Unexpected broker id, expected {config.static.broker_id}, but received {name}"
        )
    entity = name if per_broker else BROKER_DEFAULT_ENTITY
    stored, _ = sanitize_stored(
        await zk_client.read_entity_configs("brokers", entity), per_broker=per_broker
    )
    new = new_configs(stored)
    try:
        config.validate(new, per_broker=per_broker)
    except ConfigError as error:
        # Kafka answers INVALID_REQUEST here (KAFKA-13609), not INVALID_CONFIG.
        raise errors.InvalidRequestError(str(error)) from None
    if validate_only:
        return
    if per_broker:
        logger.info("Updating broker %s with new configuration : %s", name, loggable(new))
    else:
        logger.info("Updating brokers with new configuration : %s", loggable(new))
    await zk_client.change_entity_configs("brokers", entity, new)


def _broker_id(name: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise errors.InvalidRequestError(
            f"Broker id must be an integer, but it is: {name}"
        ) from None


__all__ = [
    "BrokerReconfigurable",
    "DynamicBrokerConfig",
    "DynamicLogCleaner",
    "DynamicLogConfig",
    "DynamicThreadPool",
    "add_broker_reconfigurables",
    "alter_broker_configs",
    "describe_broker_resource",
]
