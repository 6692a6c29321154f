"""Kafka's dynamic broker configs (DynamicBrokerConfig), the pure half: which settings change
without a restart, the checks an update must pass (with Kafka's messages), what
IncrementalAlterConfigs does to a broker's stored configs, and the layering:
per-broker dynamic (/config/brokers/<id>) > cluster-default dynamic
(/config/brokers/<default>) > static (server.properties) > Kafka's default.

Kafka's list (`DynamicBrokerConfig.AllDynamicConfigs`) restricted to the settings kcore has
says what may be altered at all; a setting Kafka reconfigures but kcore cannot (a thread
pool kcore does not have, a listener bound at start-up) is refused with the reason, never
stored and ignored. The shell that reads ZooKeeper and reconfigures the broker's parts is
`kcore.server.dynamic_broker_config`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from kcore import errors
from kcore.config._alter import AlterConfigOp
from kcore.config._broker import BROKER_DEFINITIONS, KafkaConfig, _listener_override
from kcore.config._definitions import ConfigDef, ConfigError, parse_value

ConfigSource = Literal["per_broker", "cluster_default", "static", "default"]

# Kafka's ConfigEntityName.Default: the cluster-wide defaults live at /config/brokers/<default>
# (an AlterConfigs resource names them with the empty string).
BROKER_DEFAULT_ENTITY = "<default>"

# DynamicLogConfig.ReconfigurableConfigs: the broker settings topic configs default to
# (ServerTopicConfigSynonyms' first synonyms, message.format.version excluded), those kcore
# has. A change reaches every topic without its own override at once.
DYNAMIC_LOG_CONFIGS = frozenset(
    {
        "log.segment.bytes", "log.roll.ms", "log.index.interval.bytes",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
        "log.retention.ms", "message.max.bytes", "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio", "log.cleanup.policy",
        "unclean.leader.election.enable", "min.insync.replicas",
        "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
    }
)  # fmt: skip
# LogCleaner.ReconfigurableConfigs: a change restarts the cleaners with the new settings.
LOG_CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    }
)  # fmt: skip
# DynamicThreadPool.ReconfigurableConfigs (kcore has no background.threads).
THREAD_POOL_CONFIGS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir"}
)
# SslConfigs.RECONFIGURABLE_CONFIGS: Kafka updates them per listener only
# (`listener.name.<listener>.ssl.keystore.location`).
DYNAMIC_SECURITY_CONFIGS = frozenset(
    {
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
        "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
        "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)  # fmt: skip
# DynamicListenerConfig.ReconfigurableConfigs, those kcore has.
LISTENER_CONFIGS = frozenset(
    {
        "advertised.listeners", "listeners", "listener.security.protocol.map", "ssl.protocol",
        "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
        "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
        "ssl.truststore.location", "ssl.truststore.password",
        "ssl.endpoint.identification.algorithm", "ssl.client.auth", "num.network.threads",
    }
)  # fmt: skip
# What Kafka lets an AlterConfigs change; any other setting is refused with Kafka's
# "Cannot update these configs dynamically".
KAFKA_DYNAMIC_CONFIGS = frozenset(
    (
        DYNAMIC_LOG_CONFIGS
        | LOG_CLEANER_CONFIGS
        | THREAD_POOL_CONFIGS
        | DYNAMIC_SECURITY_CONFIGS
        | LISTENER_CONFIGS
    )
    & set(BROKER_DEFINITIONS)
)
# Kafka's PerBrokerConfigs: they cannot be set as a cluster-wide default.
PER_BROKER_CONFIGS = (DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS) - {"num.network.threads"}

_AT_START_UP = "a broker binds and registers its listeners at start-up"
_TLS_AT_START_UP = "a listener's TLS material is loaded when the broker starts"
# Settings Kafka reconfigures at run time that kcore does not: an update is refused, naming
# the setting and why, rather than stored and never applied.
NOT_RECONFIGURABLE: Mapping[str, str] = {
    "num.io.threads": "requests run as Trio tasks; there is no request handler pool to resize",
    "num.network.threads": "connections are served by Trio tasks; there is no network pool",
    "num.recovery.threads.per.data.dir": "logs are recovered at start-up only",
    "log.index.interval.bytes": "kcore's offset indexes take an entry every 4096 bytes",
    "log.cleaner.io.buffer.size": "kcore's cleaner reads and writes whole batches",
    **dict.fromkeys(("listeners", "advertised.listeners", "listener.security.protocol.map"),
                    _AT_START_UP),
    **dict.fromkeys(sorted((DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS) & {
        name for name in BROKER_DEFINITIONS if name.startswith("ssl.")}), _TLS_AT_START_UP),
}  # fmt: skip
# The settings kcore applies without a restart: what an AlterConfigs may change.
DYNAMIC_BROKER_CONFIGS = KAFKA_DYNAMIC_CONFIGS - set(NOT_RECONFIGURABLE)

_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")


def broker_config_synonyms(name: str, *, match_listener_override: bool = True) -> tuple[str, ...]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the settings that set the same
    thing as `name`, highest precedence first (`log.retention.ms`, `.minutes`, `.hours`; a
    listener override and its base setting)."""
    if name in _RETENTION:
        return _RETENTION
    if name in _ROLL:
        return _ROLL
    if match_listener_override and _listener_override(name) is not None:
        return (name, name.removeprefix("listener.name.").partition(".")[2])
    return (name,)


def config_definition(name: str) -> ConfigDef | None:
    """The definition of a broker setting, listener overrides included; None if unknown."""
    return BROKER_DEFINITIONS.get(name) or _listener_override(name)


def _base_name(name: str) -> str:
    """A listener override's base setting (`listener.name.x.ssl.key.password`:
    `ssl.key.password`); any other name itself."""
    if _listener_override(name) is not None:
        return name.removeprefix("listener.name.").partition(".")[2]
    return name


def scala_set(names: Iterable[str]) -> str:
    """Names as Kafka's messages print a Scala Set (`Set(a, b)`), sorted."""
    return f"Set({', '.join(sorted(names))})"


# -- checks ------------------------------------------------------------------------------


def check_dynamic_update(props: Mapping[str, Any], *, per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs, then kcore's own refusals: raises
    ConfigError for the first problem with `props` (a broker's, or the cluster default's
    when not `per_broker`, dynamic configs as stored). A value is never in a message about
    a password or an unknown setting."""
    unknown = [name for name in props if config_definition(name) is None]
    if unknown:
        raise ConfigError(f"Unknown broker configs: {scala_set(unknown)}")
    not_dynamic = [
        name for name in props if name in BROKER_DEFINITIONS and name not in KAFKA_DYNAMIC_CONFIGS
    ]
    if not_dynamic:
        raise ConfigError(f"Cannot update these configs dynamically: {scala_set(not_dynamic)}")
    without_prefix = [name for name in props if name in DYNAMIC_SECURITY_CONFIGS]
    if without_prefix:
        raise ConfigError(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {scala_set(without_prefix)}"
        )
    for name, value in props.items():
        definition = config_definition(name)
        assert definition is not None
        parse_value(definition, value)  # ConfigError naming the setting
    if not per_broker:
        only_per_broker = [n for n in props if _base_name(n) in PER_BROKER_CONFIGS]
        if only_per_broker:
            raise ConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {scala_set(only_per_broker)}"
            )
    for name in sorted(props):
        why = NOT_RECONFIGURABLE.get(_base_name(name))
        if why is not None:
            raise ConfigError(f"{name} cannot be updated dynamically in kcore: {why}")


def sanitize_stored(
    props: Mapping[str, Any], *, per_broker: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    """Kafka's fromPersistentProps: of the dynamic configs found in ZooKeeper, those that
    can be applied, and why each other one is ignored (someone may have written a static
    setting or a bad value there directly)."""
    kept: dict[str, Any] = {}
    ignored: dict[str, str] = {}
    for name, value in props.items():
        try:
            check_dynamic_update({name: value}, per_broker=per_broker)
        except ConfigError as error:
            ignored[name] = str(error)
        else:
            kept[name] = value
    return kept, ignored


def check_thread_count_change(name: str, old: int, new: int) -> None:
    """Kafka's DynamicThreadPool.validateReconfiguration: a pool grows or shrinks by at
    most a factor of two at a time."""
    if new == old:
        return
    failed = f"Dynamic thread count update validation failed for {name}={new}"
    if new <= 0:
        raise ConfigError(f"{failed}, value should be at least 1")
    if new < old // 2:
        raise ConfigError(f"{failed}, value should be at least half the current value {old}")
    if new > old * 2:
        raise ConfigError(
            f"{failed}, value should not be greater than double the current value {old}"
        )


def check_cleaner_threads_change(old: int, new: int) -> None:
    """Kafka's LogCleaner.validateReconfiguration."""
    if new < 1:
        raise ConfigError("Log cleaner threads should be at least 1")
    if new < old // 2:
        raise ConfigError(
            f"Log cleaner threads cannot be reduced to less than half the current value {old}"
        )
    if new > old * 2:
        raise ConfigError(
            f"Log cleaner threads cannot be increased to more than double the current value {old}"
        )


def changed_settings(old: KafkaConfig, new: KafkaConfig) -> frozenset[str]:
    """The settings whose effective value differs."""
    return frozenset(name for name, value in new.values.items() if old.values.get(name) != value)


def loggable(props: Mapping[str, Any]) -> str:
    """`k=v` pairs for a log line, with passwords (and settings of unknown type) hidden, as
    Kafka's toLoggableProps hides them."""
    shown = []
    for name in sorted(props):
        definition = config_definition(name)
        secret = definition is None or definition.kind == "password"
        shown.append(f"{name}={'[hidden]' if secret else props[name]}")
    return ",".join(shown)


# -- IncrementalAlterConfigs -------------------------------------------------------------


def apply_incremental_broker_alterations(
    current: Mapping[str, str], alterations: Iterable[tuple[str, int, str | None]]
) -> dict[str, str]:
    """A broker's (or the cluster default's) dynamic configs after `(name, op, value)`
    alterations (Kafka's ConfigAdminManager: preprocess, then prepareIncrementalConfigs).
    InvalidRequestError for a key altered twice, an unknown op or a missing value;
    InvalidConfigurationError for APPEND / SUBTRACT on an unknown or non-list setting. The
    result is checked by `check_dynamic_update` before it is stored."""
    alterations = list(alterations)
    names = [name for name, _, _ in alterations]
    if len(set(names)) != len(names):
        raise errors.InvalidRequestError("Error due to duplicate config keys")
    missing = [n for n, op, value in alterations if op != AlterConfigOp.DELETE and value is None]
    if missing:
        raise errors.InvalidRequestError(f"Null value not supported for : {', '.join(missing)}")
    configs = dict(current)
    for name, op, value in alterations:
        try:
            operation = AlterConfigOp(op)
        except ValueError:
            raise errors.InvalidRequestError(f"Unknown operations type {op}") from None
        if operation is AlterConfigOp.SET:
            configs[name] = value  # type: ignore[assignment]  (checked above)
        elif operation is AlterConfigOp.DELETE:
            configs.pop(name, None)
        else:
            definition = config_definition(name)
            if definition is None:
                raise errors.InvalidConfigurationError(f"Unknown config name: {name}")
            verb = "append" if operation is AlterConfigOp.APPEND else "subtract"
            if definition.kind != "list":
                raise errors.InvalidConfigurationError(
                    f"Config value {verb} is not allowed for config key: {name}"
                )
            default = ",".join(definition.default or ())
            items = (configs.get(name) or default).split(",")
            given = (value or "").split(",")
            if operation is AlterConfigOp.APPEND:
                items = [item for item in items if item]
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            configs[name] = ",".join(items)
    return configs


# -- the layers --------------------------------------------------------------------------


@attrs.frozen
class DynamicConfigView:
    """The effective broker config. Every layer is validated when the view is built, so a
    bad dynamic value is a ConfigError naming its key and value, not a later surprise.

    A dynamic setting displaces its synonyms from the layers below it, as Kafka's
    overrideProps does (a dynamic `log.retention.ms` and a static `log.retention.hours`:
    the former counts)."""

    static: KafkaConfig
    cluster_default: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    per_broker: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    effective: KafkaConfig = attrs.field(init=False)

    @effective.default
    def _layer(self) -> KafkaConfig:
        layered = dict(self.static.originals)
        for layer in (self.cluster_default, self.per_broker):
            for name, value in layer.items():
                for synonym in broker_config_synonyms(name, match_listener_override=False):
                    layered.pop(synonym, None)
                layered[name] = value
        return KafkaConfig.from_dict(layered)

    def get(self, name: str) -> Any:
        return self.effective.get(name)

    def source(self, name: str) -> ConfigSource:
        """Which layer the effective value of `name` comes from."""
        if name not in BROKER_DEFINITIONS:
            raise ConfigError(f"Unknown configuration {name!r}")
        if name in self.per_broker:
            return "per_broker"
        if name in self.cluster_default:
            return "cluster_default"
        if name in self.static.originals:
            return "static"
        return "default"

    def synonyms(self, names: Iterable[str]) -> list[tuple[ConfigDef, Any, ConfigSource]]:
        """Where a value for any of `names` is set, by precedence (Kafka's configSynonyms
        before its dropWhile): each layer in turn, and in each the names in order; the
        default layer holds the settings with a default. Values are parsed."""
        names = list(names)
        found: list[tuple[ConfigDef, Any, ConfigSource]] = []
        layers: tuple[tuple[ConfigSource, Mapping[str, Any]], ...] = (
            ("per_broker", self.per_broker),
            ("cluster_default", self.cluster_default),
            ("static", self.static.originals),
        )
        for source, layer in layers:
            for name in names:
                definition = config_definition(name)
                if name in layer and definition is not None and layer[name] is not None:
                    found.append((definition, parse_value(definition, layer[name]), source))
        for name in names:
            definition = BROKER_DEFINITIONS.get(name)
            if definition is not None and definition.default is not None:
                found.append((definition, definition.default, "default"))
        return found

    def __getattr__(self, attribute: str) -> Any:
        return getattr(object.__getattribute__(self, "effective"), attribute)


def apply_dynamic(
    static: KafkaConfig,
    cluster_default: Mapping[str, Any] | None = None,
    per_broker: Mapping[str, Any] | None = None,
) -> KafkaConfig:
    """The effective KafkaConfig under the precedence above."""
    return DynamicConfigView(static, cluster_default or {}, per_broker or {}).effective
