"""Per-topic configuration: overrides from /config/topics/<t>, defaulting from the broker's
corresponding log.* settings (Kafka's LogConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from kcore.config._broker import KafkaConfig
from kcore.config._definitions import ConfigDef, ConfigError, parse_value
from kcore.config._unsupported import TOPIC_UNSUPPORTED, refusal
from kcore.errors import InvalidConfigurationError


class InvalidTopicConfigError(ConfigError, InvalidConfigurationError):
    """A topic config is unknown or ill-typed; a KafkaError with code INVALID_CONFIG, so
    admin requests can answer with it."""


# topic key -> (definition, the KafkaConfig attribute its default comes from)
TOPIC_DEFINITIONS: dict[str, tuple[ConfigDef, str]] = {
    d.name: (d, source)
    for d, source in (
        (ConfigDef("min.insync.replicas", "int", 1, at_least=1), "min_insync_replicas"),
        (
            ConfigDef("unclean.leader.election.enable", "bool", False),
            "unclean_leader_election_enable",
        ),
        (ConfigDef("retention.ms", "long", 604800000, at_least=-1), "log_retention_time_ms"),
        (ConfigDef("retention.bytes", "long", -1), "log_retention_bytes"),
        (ConfigDef("segment.bytes", "int", 1073741824, at_least=14), "log_segment_bytes"),
        (ConfigDef("segment.ms", "long", 604800000, at_least=1), "log_roll_time_ms"),
        (
            ConfigDef("cleanup.policy", "list", ["delete"], valid_values=("compact", "delete")),
            "log_cleanup_policy",
        ),
        (ConfigDef("max.message.bytes", "int", 1048588, at_least=0), "message_max_bytes"),
        (
            ConfigDef(
                "message.timestamp.type",
                "string",
                "CreateTime",
                valid_values=("CreateTime", "LogAppendTime"),
            ),
            "log_message_timestamp_type",
        ),
        (
            ConfigDef(
                "message.timestamp.difference.max.ms", "long", 9223372036854775807, at_least=0
            ),
            "log_message_timestamp_difference_max_ms",
        ),
        (
            ConfigDef("flush.messages", "long", 9223372036854775807, at_least=1),
            "log_flush_interval_messages",
        ),
    )
}


@attrs.frozen
class TopicConfig:
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    retention_ms: int
    retention_bytes: int
    segment_bytes: int
    segment_ms: int
    cleanup_policy: tuple[str, ...]
    max_message_bytes: int
    message_timestamp_type: str
    message_timestamp_difference_max_ms: int
    flush_messages: int

    @classmethod
    def from_dict(
        cls, overrides: Mapping[str, Any], broker_config: KafkaConfig | None = None
    ) -> TopicConfig:
        """Topic overrides over the broker's defaults (Kafka's own defaults if None)."""
        for key, value in overrides.items():
            if key not in TOPIC_DEFINITIONS:
                raise InvalidTopicConfigError(
                    f"Unknown topic configuration {key!r} (value {value!r})"
                )
        parsed: dict[str, Any] = {}
        for name, (definition, _) in TOPIC_DEFINITIONS.items():
            if name in overrides:
                try:
                    parsed[name] = parse_value(definition, overrides[name])
                except ConfigError as error:
                    raise InvalidTopicConfigError(str(error)) from None
        refused = refusal(parsed, TOPIC_UNSUPPORTED)
        if refused is not None:
            raise InvalidTopicConfigError(refused)
        fields: dict[str, Any] = {}
        for name, (definition, source) in TOPIC_DEFINITIONS.items():
            if name in parsed:
                value = parsed[name]
            elif broker_config is None:
                value = definition.default
            else:
                value = getattr(broker_config, source)
            fields[name.replace(".", "_")] = tuple(value) if isinstance(value, list) else value
        return cls(**fields)

    @staticmethod
    def names() -> tuple[str, ...]:
        return tuple(TOPIC_DEFINITIONS)


# Kafka's name for the same thing (kafka.log.LogConfig).
LogConfig = TopicConfig
