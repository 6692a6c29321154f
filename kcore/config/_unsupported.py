"""Settings kcore knows by name but cannot honour yet. Kafka's server.properties and topic
configs load, but a value that asks for a missing feature is refused when the config is
built, naming the key and the value, instead of being accepted and silently doing nothing.
The README's "Not supported yet" section lists the same settings; an entry goes when its
feature lands."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from kcore.common import EndPoint
from kcore.config._definitions import ConfigError
from zkstub.tls import TlsSettingsError, store_type

# Kafka's SecurityProtocol names; a listener name maps to one of them.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

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
    _check_advertised_listeners(values)


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


def advertised_listeners(values: Mapping[str, Any]) -> list[EndPoint]:
    """Kafka's effectiveAdvertisedListeners, as configured: `advertised.listeners` when it
    is set, else `listeners` (a port 0 or an empty host is resolved once bound:
    `advertised_endpoints`)."""
    protocols = security_protocols(values)
    setting = "listeners" if values.get("advertised.listeners") is None else "advertised.listeners"
    endpoints = []
    for listener in values[setting]:
        try:
            endpoint = EndPoint.parse(listener, protocols)
        except ValueError as error:
            raise ConfigError(
                f"Invalid value {listener!r} for configuration {setting}: {error}"
            ) from None
        if endpoint.listener_name not in protocols:
            raise ConfigError(
                f"Invalid value {listener!r} for configuration {setting}: no security protocol "
                f"for listener name {endpoint.listener_name} (map it in "
                "listener.security.protocol.map)"
            )
        endpoints.append(endpoint)
    return endpoints


def advertised_endpoints(
    values: Mapping[str, Any], bound: Sequence[EndPoint]
) -> tuple[EndPoint, ...]:
    """What a broker registers in /brokers/ids/N (Kafka's createBrokerInfo): its advertised
    listeners, a port 0 taken from the listener of that name as bound, an empty host too
    (where Kafka takes the machine's canonical host name, kcore the address the listener
    bound, as it does without advertised.listeners). In the order of `bound` (`listeners`),
    so the inter-broker listener, the first, comes first, as the controller expects."""
    by_name = {endpoint.listener_name: endpoint for endpoint in bound}
    advertised = {e.listener_name: e for e in advertised_listeners(values)}
    resolved = []
    for name, listener in by_name.items():
        endpoint = advertised.get(name)
        if endpoint is None:
            continue  # not advertised: reachable by whoever knows its address, as in Kafka
        resolved.append(
            attrs.evolve(
                endpoint,
                host=endpoint.host or listener.host,
                port=endpoint.port or listener.port,
            )
        )
    return tuple(resolved)


def _check_advertised_listeners(values: Mapping[str, Any]) -> None:
    """Kafka's KafkaConfig checks of the advertised listeners (advertised.listeners, or
    listeners without it): distinct names, each one a listener's, the inter-broker listener
    among them, and none on the non-routable 0.0.0.0."""
    explicit = values.get("advertised.listeners") is not None
    setting = "advertised.listeners" if explicit else "listeners"
    advertised = advertised_listeners(values)
    names = [endpoint.listener_name for endpoint in advertised]
    if len(set(names)) != len(names):
        raise ConfigError(
            f"Invalid value {','.join(values[setting])!r} for configuration {setting}: each "
            "listener must have a different name"
        )
    listener_names = {EndPoint.parse(listener).listener_name for listener in values["listeners"]}
    if explicit and not set(names) <= listener_names:
        raise ConfigError(
            f"Invalid value {','.join(values[setting])!r} for configuration "
            "advertised.listeners: advertised.listeners listener names must be equal to or a "
            f"subset of the ones defined in listeners. Found {','.join(names)}. The valid "
            f"options based on the current configuration are {','.join(sorted(listener_names))}"
        )
    inter_broker = inter_broker_listener_name(values)
    if explicit and listener_names and inter_broker not in names:
        raise ConfigError(
            f"Invalid value {','.join(values[setting])!r} for configuration "
            f"advertised.listeners: inter.broker.listener.name must be a listener name defined "
            f"in advertised.listeners. The valid options based on currently configured "
            f"listeners are {','.join(names)}"
        )
    if any(endpoint.host == "0.0.0.0" for endpoint in advertised):
        raise ConfigError(
            f"Invalid value {','.join(values[setting])!r} for configuration {setting}: "
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a "
            "routable IP address."
            + ("" if explicit else " (set advertised.listeners to the address clients reach)")
        )


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
