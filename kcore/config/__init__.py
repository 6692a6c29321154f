"""Broker and topic configuration with Kafka's dotted names, types and defaults.

`KafkaConfig.from_dict({...})` or `KafkaConfig.from_properties_file(path)`; values may be
strings (as in server.properties) or already typed. An unknown key or a bad value is a
ConfigError naming the key and the value. Attributes use Python names
(`config.replica_lag_time_max_ms` for `replica.lag.time.max.ms`).
"""

from kcore.config._alter import AlterConfigOp, apply_incremental_alterations
from kcore.config._broker import BROKER_DEFINITIONS, KafkaConfig, parse_http_listener
from kcore.config._definitions import ConfigDef, ConfigError, Password, parse_value
from kcore.config._describe import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigEntry,
    ConfigSourceCode,
    ConfigSynonym,
    ConfigTypeCode,
    describe_broker_config,
    describe_topic_config,
)
from kcore.config._dynamic import (
    BROKER_DEFAULT_ENTITY,
    DYNAMIC_BROKER_CONFIGS,
    ConfigSource,
    DynamicConfigView,
    apply_dynamic,
    apply_incremental_broker_alterations,
    check_dynamic_update,
)
from kcore.config._listeners import (
    SECURITY_PROTOCOLS,
    advertised_endpoints,
    inter_broker_listener_name,
    security_protocols,
)
from kcore.config._principals import PrincipalError, parse_principal, parse_super_users
from kcore.config._properties import parse_properties
from kcore.config._topic import InvalidTopicConfigError, LogConfig, TopicConfig

__all__ = [
    "BROKER_DEFAULT_ENTITY",
    "BROKER_DEFINITIONS",
    "BROKER_RESOURCE",
    "DYNAMIC_BROKER_CONFIGS",
    "SECURITY_PROTOCOLS",
    "TOPIC_RESOURCE",
    "AlterConfigOp",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSourceCode",
    "ConfigSynonym",
    "ConfigTypeCode",
    "DynamicConfigView",
    "InvalidTopicConfigError",
    "KafkaConfig",
    "LogConfig",
    "Password",
    "PrincipalError",
    "TopicConfig",
    "advertised_endpoints",
    "apply_dynamic",
    "apply_incremental_alterations",
    "apply_incremental_broker_alterations",
    "check_dynamic_update",
    "describe_broker_config",
    "describe_topic_config",
    "inter_broker_listener_name",
    "parse_http_listener",
    "parse_principal",
    "parse_properties",
    "parse_super_users",
    "parse_value",
    "security_protocols",
]
