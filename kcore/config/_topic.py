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


_LONG_MAX = 2**63 - 1

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
        (
            ConfigDef("delete.retention.ms", "long", 86400000, at_least=0),
            "log_cleaner_delete_retention_ms",
        ),
        (
            ConfigDef("min.compaction.lag.ms", "long", 0, at_least=0),
            "log_cleaner_min_compaction_lag_ms",
        ),
        (
            ConfigDef("max.compaction.lag.ms", "long", _LONG_MAX, at_least=1),
            "log_cleaner_max_compaction_lag_ms",
        ),
        (
            ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, at_least=0, at_most=1),
            "log_cleaner_min_cleanable_ratio",
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
            ConfigDef("message.timestamp.difference.max.ms", "long", _LONG_MAX, at_least=0),
            "log_message_timestamp_difference_max_ms",
        ),
        (
            ConfigDef("flush.messages", "long", _LONG_MAX, at_least=1),
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
    # (defaulted, Kafka's defaults, so that a TopicConfig built by hand need not name them)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    @property
    def compact(self) -> bool:
        """The log cleaner keeps the last record of each key (Kafka's LogConfig.compact)."""
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How long a segment stays active (Kafka's LogConfig.maxSegmentMs): a compacted
        log rolls by max.compaction.lag.ms too, since the active segment is never cleaned."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def delete(self) -> bool:
        """Retention by time and size deletes old segments (Kafka's LogConfig.delete)."""
        return "delete" in self.cleanup_policy

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
        _check_compaction_lags(parsed)
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


def _check_compaction_lags(parsed: Mapping[str, Any]) -> None:
    """Kafka's LogConfig.validateValues, over the topic's own settings and Kafka's defaults."""
    low = parsed.get("min.compaction.lag.ms", TOPIC_DEFINITIONS["min.compaction.lag.ms"][0].default)
    high = parsed.get(
        "max.compaction.lag.ms", TOPIC_DEFINITIONS["max.compaction.lag.ms"][0].default
    )
    if low > high:
        raise InvalidTopicConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


# Kafka's name for the same thing (kafka.log.LogConfig).
LogConfig = TopicConfig
