"""What DescribeConfigs answers: every config of a topic or a broker, its value as Kafka
prints it, and where the value comes from (Kafka's DescribeConfigsResponse.ConfigSource)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from kcore.config._broker import BROKER_DEFINITIONS, KafkaConfig
from kcore.config._definitions import ConfigDef
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


@attrs.frozen
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive or unset value
    source: ConfigSourceCode
    config_type: ConfigTypeCode
    is_sensitive: bool = False
    read_only: bool = False


def format_config_value(kind: str, value: Any) -> str | None:
    """A typed value as Kafka prints it (`true`, `1,2`, `604800000`)."""
    if value is None:
        return None
    if kind == "bool":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(str(item) for item in value)
    return str(value)


def describe_topic_config(overrides: Mapping[str, Any], broker: KafkaConfig) -> list[ConfigEntry]:
    """Every config of a topic: its overrides (from /config/topics/<t>), else the broker's
    corresponding log.* setting, else Kafka's default."""
    effective = TopicConfig.from_dict(overrides, broker)
    entries = []
    for name, (definition, broker_attribute) in TOPIC_DEFINITIONS.items():
        if name in overrides:
            source = ConfigSourceCode.DYNAMIC_TOPIC_CONFIG
        elif any(
            key in broker.originals
            for key in _TOPIC_DEFAULT_SOURCES.get(
                broker_attribute, (broker_attribute.replace("_", "."),)
            )
        ):
            source = ConfigSourceCode.STATIC_BROKER_CONFIG
        else:
            source = ConfigSourceCode.DEFAULT_CONFIG
        value = getattr(effective, name.replace(".", "_"))
        entries.append(
            ConfigEntry(
                name,
                format_config_value(definition.kind, value),
                source,
                _TYPE_CODES.get(definition.kind, ConfigTypeCode.UNKNOWN),
            )
        )
    return entries


def describe_broker_config(broker: KafkaConfig) -> list[ConfigEntry]:
    """Every setting of a broker: static when its properties set it, else the default.
    kcore has no dynamic broker configs yet, so every entry is read-only."""
    return [_broker_entry(definition, broker) for definition in BROKER_DEFINITIONS.values()]


def _broker_entry(definition: ConfigDef, broker: KafkaConfig) -> ConfigEntry:
    sensitive = definition.kind == "password"
    value = broker.values.get(definition.name)
    source = (
        ConfigSourceCode.STATIC_BROKER_CONFIG
        if definition.name in broker.originals
        else ConfigSourceCode.DEFAULT_CONFIG
    )
    return ConfigEntry(
        definition.name,
        None if sensitive else format_config_value(definition.kind, value),
        source,
        _TYPE_CODES.get(definition.kind, ConfigTypeCode.UNKNOWN),
        is_sensitive=sensitive,
        read_only=True,
    )
