"""attrs messages <-> msgpack-ready lists, with validation on the way in.

A message is an `@attrs.frozen` class whose fields are annotated with int, float, str,
bytes, bool, `X | None`, `tuple[X, ...]`, `dict[K, V]`, an Enum, or another message. It goes
on the wire as a list of its field values in declaration order (records as lists, not dicts:
DESIGN section 8); dicts go as lists of pairs (msgpack's strict map keys). Decoding is a
trust boundary: it checks every field's type and raises WireError naming the message and the
field, so a handler never sees a malformed body.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from typing import Any

import attrs


class WireError(ValueError):
    """A body does not have the shape its message declares."""


def to_wire(value: Any) -> Any:
    if attrs.has(type(value)):
        return [to_wire(getattr(value, field.name)) for field in attrs.fields(type(value))]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_wire(item) for item in value]
    if isinstance(value, dict):
        return [[to_wire(k), to_wire(v)] for k, v in value.items()]
    return value


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, type, has_default) per field, hints resolved once per class."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.default is not attrs.NOTHING) for f in attrs.fields(cls))


def from_wire(cls: type, data: Any, *, where: str | None = None) -> Any:
    """Decodes `data` into `cls`, checking every field; trailing fields with defaults may be
    missing (an older sender), extra trailing fields are ignored (a newer one)."""
    where = where or cls.__name__
    if not isinstance(data, list):
        raise WireError(f"{where}: expected a list of fields, got {type(data).__name__}")
    fields = _field_types(cls)
    required = sum(1 for _, _, has_default in fields if not has_default)
    if len(data) < required:
        raise WireError(f"{where}: {len(data)} fields, at least {required} expected")
    values = {
        name: _decode(tp, value, f"{where}.{name}")
        for (name, tp, _), value in zip(fields, data, strict=False)
    }
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:  # validators of the message itself
        raise WireError(f"{where}: {error}") from None


def _decode(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        inner = [option for option in options if option is not type(None)]
        if len(inner) == 1:
            return _decode(inner[0], value, where)
        for option in inner:
            try:
                return _decode(option, value, where)
            except WireError:
                continue
        raise WireError(f"{where}: {value!r} matches none of {tp}")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise WireError(f"{where}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
        if len(args) != len(value):
            raise WireError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(
            _decode(a, item, f"{where}[{i}]")
            for i, (a, item) in enumerate(zip(args, value, strict=True))
        )
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        if not isinstance(value, list) or not all(
            isinstance(pair, list) and len(pair) == 2 for pair in value
        ):
            raise WireError(f"{where}: expected a list of [key, value] pairs")
        return {
            _decode(key_type, k, f"{where}.key"): _decode(value_type, v, f"{where}[{k!r}]")
            for k, v in value
        }
    if tp is Any:
        return value
    if isinstance(tp, type):
        if attrs.has(tp):
            return from_wire(tp, value, where=where)
        if issubclass(tp, enum.Enum):
            try:
                return tp(value)
            except ValueError:
                raise WireError(f"{where}: {value!r} is not a {tp.__name__}") from None
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if tp is int and isinstance(value, bool):
            raise WireError(f"{where}: expected int, got bool")
        if isinstance(value, tp):
            return value
        raise WireError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
    raise TypeError(f"{where}: unsupported field type {tp!r}")  # a bug in a message class
