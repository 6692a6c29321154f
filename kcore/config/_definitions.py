"""Typed config definitions and Kafka's parsing of their values (ConfigDef.parseType)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

_INTEGER = re.compile(r"[+-]?[0-9]+")
_RANGES = {
    "int": (-(2**31), 2**31 - 1),
    "short": (-(2**15), 2**15 - 1),
    "long": (-(2**63), 2**63 - 1),
}


class ConfigError(ValueError):
    """A configuration key is unknown, missing, or has a bad value."""


@attrs.frozen(repr=False)
class Password:
    """A secret setting (Kafka's Password type): printing it never shows the secret."""

    value: str

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__


@attrs.frozen
class ConfigDef:
    name: str
    kind: str  # int, short, long, bool, string, list, double, password
    default: Any
    at_least: float | None = None
    at_most: float | None = None
    valid_values: tuple[str, ...] | None = None  # for strings and list items
    required: bool = False


def _bad(definition: ConfigDef, value: Any, why: str) -> ConfigError:
    shown = "[hidden]" if definition.kind == "password" else repr(value)
    return ConfigError(f"Invalid value {shown} for configuration {definition.name}: {why}")


def parse_value(definition: ConfigDef, value: Any) -> Any:
    """The typed value of `value` (a string as in a properties file, or already typed),
    checked against the definition's range; None stays None (an unset nullable key)."""
    if value is None:
        return None
    parsed = _parse_type(definition, value)
    _check_range(definition, value, parsed)
    return parsed


def _parse_type(definition: ConfigDef, value: Any) -> Any:
    kind = definition.kind
    if kind in _RANGES:
        if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            parsed = int(value.strip())
        elif isinstance(value, int) and not isinstance(value, bool):
            parsed = value
        else:
            raise _bad(definition, value, f"Expected value to be a {_java_type(kind)} number.")
        low, high = _RANGES[kind]
        if not low <= parsed <= high:
            raise _bad(definition, value, f"Not a number of type {_java_type(kind)}")
        return parsed
    if kind == "double":
        if isinstance(value, bool):
            raise _bad(definition, value, "Expected value to be a double.")
        try:
            return float(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise _bad(definition, value, "Expected value to be a double.") from None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise _bad(definition, value, "Expected value to be either true or false")
    if kind == "list":
        if isinstance(value, str):
            text = value.strip()
            return [item.strip() for item in text.split(",")] if text else []
        if isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
            return [item.strip() for item in value]
        raise _bad(definition, value, "Expected a comma separated list.")
    if kind == "password":
        if isinstance(value, Password):
            return value
        if isinstance(value, str):
            return Password(value)
        raise _bad(definition, value, "Expected value to be a string")
    if isinstance(value, str):
        return value.strip()
    raise _bad(definition, value, "Expected value to be a string")


def _java_type(kind: str) -> str:
    return {"int": "32-bit integer", "short": "16-bit integer", "long": "64-bit integer"}[kind]


def _check_range(definition: ConfigDef, value: Any, parsed: Any) -> None:
    if definition.at_least is not None and parsed < definition.at_least:
        raise _bad(definition, value, f"Value must be at least {definition.at_least:g}")
    if definition.at_most is not None and parsed > definition.at_most:
        raise _bad(definition, value, f"Value must be no more than {definition.at_most:g}")
    if definition.valid_values is not None:
        items = parsed if isinstance(parsed, list) else [parsed]
        for item in items:
            if item not in definition.valid_values:
                raise _bad(
                    definition,
                    value,
                    f"String must be one of: {', '.join(definition.valid_values)}",
                )
