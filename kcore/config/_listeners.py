"""Listeners: their names' security protocols, the inter-broker listener, and what a broker
advertises (Kafka's listener.security.protocol.map, inter.broker.listener.name,
advertised.listeners and KafkaConfig's checks of them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kcore.common import EndPoint
from kcore.config._definitions import ConfigError

# Kafka's SecurityProtocol names; a listener name maps to one of them.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


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


def check_advertised_listeners(values: Mapping[str, Any]) -> None:
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
