"""Kafka's dynamic broker config precedence (DynamicBrokerConfig), as pure layering:
per-broker dynamic (/config/brokers/<id>) > cluster-default dynamic
(/config/brokers/<default>) > static (server.properties) > Kafka's default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from kcore.config._broker import BROKER_DEFINITIONS, KafkaConfig
from kcore.config._definitions import ConfigError

ConfigSource = Literal["per_broker", "cluster_default", "static", "default"]


@attrs.frozen
class DynamicConfigView:
    """The effective broker config. Every layer is validated when the view is built, so a
    bad dynamic value is a ConfigError naming its key and value, not a later surprise."""

    static: KafkaConfig
    cluster_default: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    per_broker: Mapping[str, Any] = attrs.field(factory=dict, converter=dict)
    effective: KafkaConfig = attrs.field(init=False)

    @effective.default
    def _layer(self) -> KafkaConfig:
        layered = {**self.static.originals, **self.cluster_default, **self.per_broker}
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

    def __getattr__(self, attribute: str) -> Any:
        return getattr(object.__getattribute__(self, "effective"), attribute)


def apply_dynamic(
    static: KafkaConfig,
    cluster_default: Mapping[str, Any] | None = None,
    per_broker: Mapping[str, Any] | None = None,
) -> KafkaConfig:
    """The effective KafkaConfig under the precedence above."""
    return DynamicConfigView(static, cluster_default or {}, per_broker or {}).effective
