"""Client settings: checking Kafka's settings (python-style names) once, at construction,
so a typo or a bad value fails where it was written, naming the setting."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import transport
from kcore import errors
from kcore.common import TopicPartition
from kcore.config import ConfigError
from kcore.security import client_context

__all__ = [
    "SECURITY_SETTINGS",
    "ClientConfigError",
    "InvalidPartitionError",
    "check_assignors",
    "check_bool",
    "check_choice",
    "check_group_id",
    "check_int",
    "check_no_unknown",
    "parse_acks",
    "parse_bootstrap",
    "security_network",
    "to_topic_partition",
]

# Kafka's client security settings, python-style (`security.protocol` is
# `security_protocol`); the ssl_* ones mean what the broker's ssl.* settings mean
# (kcore.security.tls: PEM key material only, so the store types default to PEM here).
SECURITY_SETTINGS = (
    "security_protocol",
    "ssl_truststore_type",
    "ssl_truststore_location",
    "ssl_truststore_certificates",
    "ssl_keystore_type",
    "ssl_keystore_location",
    "ssl_keystore_key",
    "ssl_keystore_certificate_chain",
    "ssl_key_password",
    "ssl_endpoint_identification_algorithm",
    "ssl_protocol",
    "ssl_enabled_protocols",
    # SASL (kafka-python's names): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
)


class ClientConfigError(errors.InvalidConfigurationError, ValueError):
    """A client setting is unknown or has a bad value (Kafka's ConfigException); the
    message names the setting."""


class InvalidPartitionError(errors.KafkaError, ValueError):
    """A record names a partition its topic does not have."""

    name = "INVALID_PARTITION"
    retriable = False


def check_no_unknown(kind: str, unknown: Mapping[str, object], known: Iterable[str]) -> None:
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ClientConfigError(
            f"unknown {kind} setting(s): {names} (known: {', '.join(sorted(known))})"
        )


def check_int(name: str, value: object, *, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClientConfigError(f"{name} must be an int, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ClientConfigError(f"{name} must be >= {minimum}{upper}, got {value}")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ClientConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value  # type: ignore[return-value]


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ClientConfigError(f"{name} must be True or False, got {value!r}")
    return value


def check_group_id(name: str, value: object, *, allow_none: bool = False) -> str | None:
    """A group id or group instance id: a non-empty string (Kafka refuses an empty one)."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value:
        raise ClientConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def check_assignors(name: str, value: object, by_name: Callable[[str], Any]) -> list[Any]:
    """Kafka's `partition.assignment.strategy`: assignor names (a comma-separated string
    or a list) or assignor objects (anything with `name`, `supported_protocols` and
    `assign`), in preference order; new assignor objects for the names."""
    items: list[object]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        items = []
    if not items:
        raise ClientConfigError(f"{name} must name at least one assignor, got {value!r}")
    assignors = []
    for item in items:
        if isinstance(item, str):
            try:
                assignors.append(by_name(item))
            except ValueError as exc:
                raise ClientConfigError(f"{name}: {exc}") from None
        elif all(hasattr(item, a) for a in ("name", "supported_protocols", "assign")):
            assignors.append(item)
        else:
            raise ClientConfigError(f"{name}: {item!r} is neither an assignor name nor one")
    names = [a.name for a in assignors]
    if len(set(names)) != len(names):
        raise ClientConfigError(f"{name} lists an assignor twice: {', '.join(names)}")
    common = set.intersection(*(set(a.supported_protocols) for a in assignors))
    if not common:
        raise ClientConfigError(
            f"{name}: the assignors {', '.join(names)} support no common rebalance protocol"
        )
    return assignors


def parse_acks(value: object) -> int:
    """Kafka's `acks`: "all" / -1, 0, 1 (as ints or strings) -> -1, 0 or 1."""
    text = str(value).strip().lower() if isinstance(value, str | int) else None
    if isinstance(value, bool):
        text = None
    mapping = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if text not in mapping:
        raise ClientConfigError(f'acks must be "all", -1, 0 or 1; got {value!r}')
    return mapping[text]


def parse_bootstrap(bootstrap: object) -> tuple[tuple[str, int], ...]:
    """`[(host, port), ...]`, `["host:port", ...]` or `"host:port,host:port"`."""
    items: list[object]
    if isinstance(bootstrap, str):
        items = [part for part in bootstrap.split(",") if part.strip()]
    elif isinstance(bootstrap, tuple) and len(bootstrap) == 2 and isinstance(bootstrap[1], int):
        items = [bootstrap]
    else:
        try:
            items = list(bootstrap)  # type: ignore[call-overload]
        except TypeError:
            items = []
    addresses = []
    for item in items:
        if isinstance(item, str):
            host, colon, port = item.strip().rpartition(":")
            if not colon or not host or not port.isdigit():
                raise ClientConfigError(f"bootstrap servers: bad address {item!r}, want host:port")
            addresses.append((host.strip("[]"), int(port)))
        elif (
            isinstance(item, tuple | list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
        ):
            addresses.append((item[0], item[1]))
        else:
            raise ClientConfigError(f"bootstrap servers: bad address {item!r}, want (host, port)")
    if not addresses:
        raise ClientConfigError(f"bootstrap servers: no address given in {bootstrap!r}")
    return tuple(addresses)


def security_network(
    network: transport.Network | None = None, **settings: Any
) -> transport.Network:
    """The network a client reaches brokers through, given Kafka's security settings
    (`SECURITY_SETTINGS`): `network` (real TCP when None), in TLS when `security_protocol`
    is "SSL" or "SASL_SSL" (Kafka's default, "PLAINTEXT", is none), each connection
    authenticated with `sasl_mechanism` (PLAIN by default, as kafka-python's) when it is
    "SASL_PLAINTEXT" or "SASL_SSL". The TLS context is built here, so a
    missing file or a JKS store fails where the client is made, naming the setting."""
    check_no_unknown(
        "security",
        {k: v for k, v in settings.items() if k not in SECURITY_SETTINGS},
        SECURITY_SETTINGS,
    )
    protocol = str(settings.get("security_protocol") or "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ClientConfigError(
            "security_protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; got "
            f"{settings['security_protocol']!r}"
        )
    network = network if network is not None else transport.TcpNetwork()
    sasl = {k: settings.pop(k) for k in list(settings) if k.startswith("sasl_")}
    if protocol.startswith("SASL_"):
        tls_settings = dict(settings, security_protocol=protocol.removeprefix("SASL_"))
        return _sasl_network(security_network(network, **tls_settings), **sasl)
    given = sorted(k for k, v in sasl.items() if v is not None)
    if given:
        raise ClientConfigError(
            f"{', '.join(given)} given with security_protocol={protocol}: set "
            "security_protocol=SASL_PLAINTEXT or SASL_SSL to authenticate with SASL"
        )
    if protocol == "PLAINTEXT":
        ssl_only = sorted(k for k, v in settings.items() if k.startswith("ssl_") and v is not None)
        if ssl_only:
            raise ClientConfigError(
                f"{', '.join(ssl_only)} given with security_protocol=PLAINTEXT: "
                "set security_protocol=SSL to connect in TLS"
            )
        return network
    with_tls = getattr(network, "with_tls", None)
    if with_tls is None:
        raise ClientConfigError(
            f"security_protocol=SSL needs a network that does TLS (real TCP); "
            f"{type(network).__name__} does not"
        )
    # PEM is the only store a client here can read: it is the default (Kafka's is JKS).
    dotted = {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"}
    dotted.update(
        (name.replace("_", "."), value) for name, value in settings.items() if value is not None
    )
    try:
        return with_tls(client_context(dotted))
    except ConfigError as error:
        # The broker's dotted names, as this client's settings are written.
        message = re.sub(r"\bssl(\.[a-z]+)+", lambda m: m.group(0).replace(".", "_"), str(error))
        raise ClientConfigError(message) from None


def _sasl_network(
    network: transport.Network,
    sasl_mechanism: str | None = None,
    sasl_plain_username: str | None = None,
    sasl_plain_password: str | None = None,
) -> transport.Network:
    """`network` with each connection authenticated (kcore.security.sasl_network)."""
    from kcore.security.sasl import SUPPORTED_MECHANISMS, SaslCredentials
    from kcore.security.sasl_network import SaslNetwork

    mechanism = str(sasl_mechanism or "PLAIN").upper()  # kafka-python's default
    check_choice("sasl_mechanism", mechanism, SUPPORTED_MECHANISMS)
    if not sasl_plain_username or sasl_plain_password is None:
        raise ClientConfigError(
            f"sasl_mechanism={mechanism} needs sasl_plain_username and sasl_plain_password"
        )
    # SCRAM's client nonce must be unpredictable: the system's randomness, not a seed.
    rng = random.SystemRandom()
    credentials = SaslCredentials(mechanism, sasl_plain_username, sasl_plain_password)
    return SaslNetwork(network, credentials, rng)  # type: ignore[return-value]


def to_topic_partition(value: object) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    if (
        isinstance(value, tuple | list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
    ):
        return TopicPartition(value[0], value[1])
    raise TypeError(f"expected a TopicPartition or a (topic, partition) pair, got {value!r}")
