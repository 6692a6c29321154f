"""What DescribeConfigs answers: every config of a topic or a broker, its value as Kafka
prints it, and where the value comes from (Kafka's DescribeConfigsResponse.ConfigSource)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from kcore.config._broker import BROKER_DEFINITIONS, KafkaConfig
from kcore.config._definitions import ConfigDef, parse_value
from kcore.config._dynamic import (
    DYNAMIC_BROKER_CONFIGS,
    ConfigSource,
    DynamicConfigView,
    broker_config_synonyms,
)
from kcore.config._topic import TOPIC_DEFINITIONS, TopicConfig

# Kafka's ConfigResource.Type numbers for the resources kcore describes.
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


class ConfigSourceCode(enum.IntEnum):
    """Kafka's numbers for where a config value comes from."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigTypeCode(enum.IntEnum):
    """Kafka's numbers for a config's type (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_TYPE_CODES = {
    "bool": ConfigTypeCode.BOOLEAN,
    "string": ConfigTypeCode.STRING,
    "int": ConfigTypeCode.INT,
    "short": ConfigTypeCode.SHORT,
    "long": ConfigTypeCode.LONG,
    "double": ConfigTypeCode.DOUBLE,
    "list": ConfigTypeCode.LIST,
    "password": ConfigTypeCode.PASSWORD,
}

# Broker settings whose value a topic config defaults to, where the name differs from the
# attribute (log.retention.ms falls back to .minutes and .hours, as in Kafka).
_TOPIC_DEFAULT_SOURCES = {
    "log_retention_time_ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log_roll_time_ms": ("log.roll.ms", "log.roll.hours"),
}


_SOURCE_CODES: dict[ConfigSource, ConfigSourceCode] = {
    "per_broker": ConfigSourceCode.DYNAMIC_BROKER_CONFIG,
    "cluster_default": ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG,
    "static": ConfigSourceCode.STATIC_BROKER_CONFIG,
    "default": ConfigSourceCode.DEFAULT_CONFIG,
}


@attrs.frozen
class ConfigSynonym:
    """A setting that gives a config its value where nothing above it does (Kafka's
    DescribeConfigsSynonym): a config's synonyms are listed by precedence, its source is
    the first one's."""

    name: str
    value: str | None  # None when sensitive
    source: ConfigSourceCode


@attrs.frozen
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive or unset value
    source: ConfigSourceCode
    config_type: ConfigTypeCode
    is_sensitive: bool = False
    read_only: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()


def format_config_value(kind: str, value: Any) -> str | None:
    """A typed value as Kafka prints it (`true`, `1,2`, `604800000`)."""
    if value is None:
        return None
    if kind == "bool":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(str(item) for item in value)
    return str(value)


def _as_view(broker: KafkaConfig | DynamicConfigView) -> DynamicConfigView:
    return broker if isinstance(broker, DynamicConfigView) else DynamicConfigView(broker)


def _synonyms(view: DynamicConfigView, names: tuple[str, ...]) -> list[ConfigSynonym]:
    return [
        ConfigSynonym(
            definition.name,
            None if definition.kind == "password" else format_config_value(definition.kind, value),
            _SOURCE_CODES[layer],
        )
        for definition, value, layer in view.synonyms(names)
    ]


def describe_topic_config(
    overrides: Mapping[str, Any], broker: KafkaConfig | DynamicConfigView
) -> list[ConfigEntry]:
    """Every config of a topic: its overrides (from /config/topics/<t>), else the broker's
    corresponding log.* setting (per-broker dynamic, cluster-default dynamic, static), else
    Kafka's default; each with its synonyms (the override, then the broker settings)."""
    view = _as_view(broker)
    effective = TopicConfig.from_dict(overrides, view.effective)
    entries = []
    for name, (definition, broker_attribute) in TOPIC_DEFINITIONS.items():
        value = format_config_value(definition.kind, getattr(effective, name.replace(".", "_")))
        synonyms = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, value, ConfigSourceCode.DYNAMIC_TOPIC_CONFIG))
        # Unlike Kafka's (which drops the broker synonyms before the first one named like
        # the topic config's first synonym), every broker setting the value can come from is
        # kept: a static log.retention.hours gives retention.ms a STATIC_BROKER_CONFIG
        # source rather than DEFAULT_CONFIG.
        names = _TOPIC_DEFAULT_SOURCES.get(broker_attribute, (broker_attribute.replace("_", "."),))
        synonyms += _synonyms(view, names)
        entries.append(
            ConfigEntry(
                name,
                value,
                synonyms[0].source if synonyms else ConfigSourceCode.DEFAULT_CONFIG,
                _TYPE_CODES.get(definition.kind, ConfigTypeCode.UNKNOWN),
                synonyms=tuple(synonyms),
            )
        )
    return entries


def describe_broker_config(
    broker: KafkaConfig | DynamicConfigView, *, per_broker: bool = True
) -> list[ConfigEntry]:
    """Kafka's DescribeConfigs of a BROKER resource: with `per_broker`, every setting of the
    broker, its effective value and where it comes from (its own dynamic config, the
    cluster default, server.properties, Kafka's default); else (the resource named "") the
    cluster-wide dynamic defaults only. A password's value is never shown. A setting kcore
    cannot change without a restart is read-only."""
    view = _as_view(broker)
    if per_broker:
        return [
            _broker_entry(definition, view, per_broker=True)
            for definition in BROKER_DEFINITIONS.values()
        ]
    return [
        _broker_entry(definition, view, per_broker=False)
        for name in sorted(view.cluster_default)
        if (definition := BROKER_DEFINITIONS.get(name)) is not None
    ]


def _broker_entry(
    definition: ConfigDef, view: DynamicConfigView, *, per_broker: bool
) -> ConfigEntry:
    """Kafka's ConfigHelper.createBrokerConfigEntry."""
    name = definition.name
    sensitive = definition.kind == "password"
    synonyms = _synonyms(view, broker_config_synonyms(name))
    # Kafka's dropWhile: the synonyms above the config itself set another name.
    while synonyms and synonyms[0].name != name:
        synonyms.pop(0)
    if per_broker:
        value = view.effective.values.get(name)
    else:
        value = parse_value(definition, view.cluster_default[name])
        synonyms = [
            s for s in synonyms if s.source == ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
    return ConfigEntry(
        name,
        None if sensitive else format_config_value(definition.kind, value),
        synonyms[0].source if synonyms else ConfigSourceCode.DEFAULT_CONFIG,
        _TYPE_CODES.get(definition.kind, ConfigTypeCode.UNKNOWN),
        is_sensitive=sensitive,
        read_only=name not in DYNAMIC_BROKER_CONFIGS,
        synonyms=tuple(synonyms),
    )
