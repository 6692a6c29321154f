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
from kcore.config._listeners import (
    check_advertised_listeners,
    inter_broker_listener_name,
    security_protocols,
)
from zkstub.tls import TlsSettingsError, store_type

# authorizer.class.name values kcore serves with its ACL authorizer (kcore.security.acl):
# Kafka 3.5's, and the one older configurations name (removed in Kafka 3.0).
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)

# zookeeper.clientCnxnSocket's values: ZooKeeper's client socket classes (Netty's does TLS,
# NIO's does not).
ZOOKEEPER_CLIENT_SOCKETS = (
    "org.apache.zookeeper.ClientCnxnSocketNetty",
    "org.apache.zookeeper.ClientCnxnSocketNIO",
)
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


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
        "authorizer.class.name",
        lambda value: value not in ("", *AUTHORIZER_CLASS_NAMES),
        f"kcore's authorizer is {AUTHORIZER_CLASS_NAMES[0]} (ACLs in ZooKeeper)",
    ),
    # TLS to ZooKeeper (kcore.security.tls.zookeeper_context): what it cannot honour.
    Unsupported(
        "zookeeper.clientCnxnSocket",
        lambda value: value not in (None, *ZOOKEEPER_CLIENT_SOCKETS),
        f"kcore's ZooKeeper client is its own; {ZOOKEEPER_CLIENT_SOCKETS[0]} (TLS or not) "
        f"and {ZOOKEEPER_CLIENT_SOCKETS[1]} (no TLS) are accepted",
    ),
    Unsupported(
        "zookeeper.ssl.protocol",
        lambda value: value not in (*TLS_VERSIONS, "TLS"),
        "kcore speaks TLSv1.2 and TLSv1.3",
    ),
    Unsupported(
        "zookeeper.ssl.enabled.protocols",
        lambda value: value is not None and not set(value) <= set(TLS_VERSIONS),
        "kcore enables TLSv1.2 and TLSv1.3 only",
    ),
    Unsupported(
        "zookeeper.ssl.cipher.suites",
        lambda value: value is not None,
        "OpenSSL's default cipher suites of the TLS versions enabled are used",
    ),
    Unsupported(
        "zookeeper.ssl.endpoint.identification.algorithm",
        lambda value: (value or "").upper() not in ("HTTPS", ""),
        "HTTPS (the server's certificate must name the host connected to) or empty (no check)",
    ),
    Unsupported(
        "zookeeper.ssl.crl.enable",
        lambda value: value is True,
        "certificate revocation lists are not checked",
    ),
    Unsupported(
        "zookeeper.ssl.ocsp.enable",
        lambda value: value is True,
        "certificates are not checked with OCSP",
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
    message = (
        refusal(values, BROKER_UNSUPPORTED)
        or _listener_refusal(values)
        or _zookeeper_tls_refusal(values)
    )
    if message is not None:
        raise ConfigError(message)
    check_advertised_listeners(values)


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


def _zookeeper_tls_refusal(values: Mapping[str, Any]) -> str | None:
    """TLS to ZooKeeper settings that do not go together: key material without TLS (Kafka
    also takes TLS from the zookeeper.client.secure system property; kcore reads none, so
    the settings would go unused), TLS through ZooKeeper's NIO socket, which has none, or
    through kazoo (a zookeeper:// connect string), whose connection kcore does not secure;
    and store types other than PEM (unset: told by the file's extension, as ZooKeeper
    does)."""
    enabled = values.get("zookeeper.ssl.client.enable")
    stores = ("zookeeper.ssl.keystore.location", "zookeeper.ssl.truststore.location")
    if not enabled:
        for name in stores:
            if values.get(name) is not None:
                return (
                    f"{name} is set but zookeeper.ssl.client.enable is not true: the "
                    "ZooKeeper connection would not use it (set zookeeper.ssl.client.enable"
                    "=true; kcore reads no zookeeper.client.secure system property)"
                )
        return None
    socket = values.get("zookeeper.clientCnxnSocket")
    if socket == ZOOKEEPER_CLIENT_SOCKETS[1]:
        return _refused(
            "zookeeper.clientCnxnSocket", socket,
            f"ZooKeeper's NIO socket has no TLS (set {ZOOKEEPER_CLIENT_SOCKETS[0]}, or "
            "leave it out)",
        )  # fmt: skip
    if str(values.get("zookeeper.connect", "")).startswith("zookeeper://"):
        return (
            "zookeeper.ssl.client.enable=true is not supported yet with a zookeeper:// "
            "connect string (kazoo's connection is not secured): write host:port, or "
            "jute://host:port for a real ZooKeeper"
        )
    for kind in ("keystore", "truststore"):
        location = values.get(f"zookeeper.ssl.{kind}.location")
        configured = values.get(f"zookeeper.ssl.{kind}.type")
        if location is None and configured is None:
            continue
        try:
            store_type(configured, location, f"zookeeper.ssl.{kind}.type")
        except TlsSettingsError as error:
            return str(error)
    return None


def _refused(name: str, value: Any, why: str) -> str:
    return f"{name}={_as_written(value)} is not supported yet: {why}"


def _as_written(value: Any) -> str:
    """The value as a properties file writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)
