"""Settings kcore knows by name but cannot honour yet. Kafka's server.properties and topic
configs load, but a value that asks for a missing feature is refused when the config is
built, naming the key and the value, instead of being accepted and silently doing nothing.
The README's "Not supported yet" section lists the same settings; an entry goes when its
feature lands."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kcore.common import EndPoint
from kcore.config._definitions import ConfigError

# Kafka's SecurityProtocol names; a listener name maps to one of them.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# authorizer.class.name values kcore serves with its ACL authorizer (kcore.security.acl):
# Kafka 3.5's, and the one older configurations name (removed in Kafka 3.0).
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)


@attrs.frozen
class Unsupported:
    name: str
    refuses: Callable[[Any], bool]  # does this (parsed) value ask for what kcore lacks?
    why: str


BROKER_UNSUPPORTED = (
    Unsupported(
        "log.flush.interval.ms",
        lambda value: value is not None,
        "logs are flushed by log.flush.interval.messages only",
    ),
    Unsupported(
        "advertised.listeners",
        lambda value: value is not None,
        "a broker advertises the addresses its listeners bound",
    ),
    Unsupported(
        "authorizer.class.name",
        lambda value: value not in ("", *AUTHORIZER_CLASS_NAMES),
        f"kcore's authorizer is {AUTHORIZER_CLASS_NAMES[0]} (ACLs in ZooKeeper)",
    ),
)

# Every topic setting kcore knows it honours (compaction included, since the log cleaner).
TOPIC_UNSUPPORTED: tuple[Unsupported, ...] = ()


def refusal(settings: Mapping[str, Any], table: tuple[Unsupported, ...]) -> str | None:
    """Why the first setting of `settings` (parsed values) that asks for a missing feature
    is refused, or None when every one can be honoured."""
    for entry in table:
        value = settings.get(entry.name)
        if entry.name in settings and entry.refuses(value):
            return _refused(entry.name, value, entry.why)
    return None


def check_broker_settings(values: Mapping[str, Any]) -> None:
    """Raises ConfigError for the first broker setting kcore cannot honour (complete parsed
    values, defaults included)."""
    message = refusal(values, BROKER_UNSUPPORTED) or _listener_refusal(values)
    if message is not None:
        raise ConfigError(message)


def security_protocols(values: Mapping[str, Any]) -> dict[str, str]:
    """Listener name -> security protocol: `listener.security.protocol.map` when it is set,
    else Kafka's default (each protocol's name is a listener name for itself)."""
    text = values.get("listener.security.protocol.map")
    if text is None:
        return {protocol: protocol for protocol in SECURITY_PROTOCOLS}
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip(), protocol.strip().upper()
        if not colon or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {text!r} for configuration listener.security.protocol.map: "
                f"{item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        mapping[name] = protocol
    return mapping


def _listener_refusal(values: Mapping[str, Any]) -> str | None:
    protocols = security_protocols(values)
    names = []
    for listener in values["listeners"]:
        try:
            name = EndPoint.parse(listener).listener_name
        except ValueError as error:
            raise ConfigError(
                f"Invalid value {listener!r} for configuration listeners: {error}"
            ) from None
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(
                f"Invalid value {listener!r} for configuration listeners: no security protocol "
                f"for listener name {name} (map it in listener.security.protocol.map)"
            )
        names.append(name)
    explicit = values.get("inter.broker.listener.name")
    protocol = values.get("security.inter.broker.protocol") or "PLAINTEXT"
    if explicit is not None and protocol != "PLAINTEXT":
        raise ConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set."
        )
    inter_broker = inter_broker_listener_name(values)
    if names and inter_broker != names[0]:
        setting = "inter.broker.listener.name" if explicit else "security.inter.broker.protocol"
        return _refused(
            setting,
            values.get(setting),
            f"brokers talk to each other over their first listener ({names[0]})",
        )
    return None


def inter_broker_listener_name(values: Mapping[str, Any]) -> str:
    """The listener brokers talk to each other over: `inter.broker.listener.name`, else
    the one `security.inter.broker.protocol` names (Kafka's rule), else (kcore, when that
    is its default, PLAINTEXT, and no listener has that name) the first listener."""
    explicit = values.get("inter.broker.listener.name")
    if explicit is not None:
        return explicit
    protocol = values.get("security.inter.broker.protocol") or "PLAINTEXT"
    names = [EndPoint.parse(listener).listener_name for listener in values["listeners"]]
    if protocol in names or protocol != "PLAINTEXT" or not names:
        return protocol
    return names[0]


def _refused(name: str, value: Any, why: str) -> str:
    return f"{name}={_as_written(value)} is not supported yet: {why}"


def _as_written(value: Any) -> str:
    """The value as a properties file writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)
