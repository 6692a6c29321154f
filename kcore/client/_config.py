"""Client settings: checking Kafka's settings (python-style names) once, at construction,
so a typo or a bad value fails where it was written, naming the setting."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kcore import errors
from kcore.common import TopicPartition

__all__ = [
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
    "to_topic_partition",
]


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
