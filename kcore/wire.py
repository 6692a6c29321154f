"""attrs messages <-> msgpack-ready lists, with validation on the way in.

A message is an `@attrs.frozen` class whose fields are annotated with int, float, str,
bytes, bool, `X | None`, `tuple[X, ...]`, `dict[K, V]`, an Enum, or another message. It goes
on the wire as a list of its field values in declaration order (records as lists, not dicts:
DESIGN section 8); dicts go as lists of pairs (msgpack's strict map keys). Decoding is a
trust boundary: it checks every field's type and raises WireError naming the message and the
field, so a handler never sees a malformed body.

Both directions are compiled once per type into closures: a LeaderAndIsr for 10 000
partitions is decoded field by field, and inspecting the annotations for every value (as
the first version did) cost more than the rest of handling the request.
"""

from __future__ import annotations

import enum
import functools
import itertools
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs


class WireError(ValueError):
    """A body does not have the shape its message declares."""


class _Bad(Exception):
    """A value that does not fit; `path` gathers where, innermost first, on the way out."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


Decoder = Callable[[Any], Any]
_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})

# -- encoding ----------------------------------------------------------------------------

_encoders: dict[type, Callable[[Any], Any]] = {}


def to_wire(value: Any) -> Any:
    cls = type(value)
    if cls in _SCALARS:
        return value
    encode = _encoders.get(cls)
    if encode is None:
        encode = _encoders[cls] = _encoder_for(cls)
    return encode(value)


def _encoder_for(cls: type) -> Callable[[Any], Any]:
    if attrs.has(cls):
        return _message_encoder(cls)
    if issubclass(cls, enum.Enum):
        return lambda value: value.value
    if issubclass(cls, tuple | list):
        return lambda value: [to_wire(item) for item in value]
    if issubclass(cls, dict):
        return lambda value: [[to_wire(k), to_wire(v)] for k, v in value.items()]
    return lambda value: value


def _message_encoder(cls: type) -> Callable[[Any], Any]:
    """A function written for `cls`: a field declared a scalar (or a tuple of scalars) is
    taken as it is (what `to_wire` returns for a scalar), any other through `to_wire`."""
    hints = typing.get_type_hints(cls)
    items = []
    for field in attrs.fields(cls):
        declared = hints[field.name]
        if declared in _SCALARS:
            items.append(f"value.{field.name}")
        elif _scalar_items(declared) is not None:
            items.append(f"list(value.{field.name})")
        else:
            items.append(f"to_wire(value.{field.name})")
    source = f"def encode(value):\n    return [{', '.join(items)}]\n"
    return _compile(source, "encode", {"to_wire": to_wire}, cls)


def _scalar_items(tp: Any) -> type | None:
    """X for `tuple[X, ...]` whose X is a scalar type; None otherwise."""
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis and args[0] in _SCALARS:
            return args[0]
    return None


def _compile(source: str, name: str, namespace: dict[str, Any], cls: type) -> Callable:
    code = compile(source, f"<kcore.wire {name} {cls.__qualname__}>", "exec")
    exec(code, namespace)  # our own source, written from the class's fields
    return namespace[name]


# -- decoding ----------------------------------------------------------------------------


def from_wire(cls: type, data: Any, *, where: str | None = None) -> Any:
    """Decodes `data` into `cls`, checking every field; trailing fields with defaults may be
    missing (an older sender), extra trailing fields are ignored (a newer one)."""
    try:
        return _decoder(cls)(data)
    except _Bad as bad:
        path = "".join(reversed(bad.path))
        raise WireError(f"{where or cls.__name__}{path}: {bad.message}") from None


@functools.cache
def _decoder(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return _union_decoder(tp)
    if origin is tuple:
        return _tuple_decoder(tp)
    if origin is dict:
        return _dict_decoder(tp)
    if tp is Any:
        return lambda value: value
    if isinstance(tp, type):
        if attrs.has(tp):
            return _message_decoder(tp)
        if issubclass(tp, enum.Enum):
            return _enum_decoder(tp)
        return _scalar_decoder(tp)
    raise TypeError(f"unsupported field type {tp!r}")  # a bug in a message class


def _message_decoder(cls: type) -> Decoder:
    fields: list[tuple[str, Decoder]] = []
    required = 0

    def resolve() -> None:  # on first use: a message may refer to itself
        nonlocal required
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            fields.append((field.name, _decoder(hints[field.name])))
        required = sum(1 for f in attrs.fields(cls) if f.default is attrs.NOTHING)

    def checked(value: Any) -> Any:
        if not fields and attrs.fields(cls):
            resolve()
        if not isinstance(value, list):
            raise _Bad(f"expected a list of fields, got {type(value).__name__}")
        if len(value) < required:
            raise _Bad(f"{len(value)} fields, at least {required} expected")
        values = {}
        for (name, field_decoder), item in zip(fields, value, strict=False):
            try:
                values[name] = field_decoder(item)
            except _Bad as bad:
                bad.path.append(f".{name}")
                raise
        try:
            return cls(**values)
        except (TypeError, ValueError) as error:  # validators of the message itself
            raise _Bad(str(error)) from None

    fast: list[Decoder] = []

    def decode(value: Any) -> Any:
        # The fast path, written for the class on first use, takes the common case (every
        # field present and of its exact type); anything else is decoded again by
        # `checked`, which names what is wrong.
        if not fast:
            fast.append(_fast_message_decoder(cls))
        try:
            return fast[0](value)
        except (_Slow, _Bad, TypeError, ValueError):
            return checked(value)

    return decode


class _Slow(Exception):
    """The fast path does not take this value: the checked decoder will."""


_EXACT = {int: "int", str: "str", bytes: "bytes", bool: "bool", float: "float"}


def _fast_message_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = attrs.fields(cls)
    if any(not f.init or f.kw_only for f in fields):

        def refuse(value: Any) -> Any:
            raise _Slow

        return refuse
    lines = [
        "def decode(value):",
        f"    if type(value) is not list or len(value) < {len(fields)}:",
        "        raise _Slow",
    ]
    namespace: dict[str, Any] = {"_Slow": _Slow, "cls": cls}
    args = []
    for index, field in enumerate(fields):
        declared = hints[field.name]
        name = f"x{index}"
        args.append(name)
        lines.append(f"    {name} = value[{index}]")
        items = _scalar_items(declared)
        optional = _optional_of(declared)
        if declared in _EXACT:
            lines.append(f"    if type({name}) is not {_EXACT[declared]}:")
            lines.append("        raise _Slow")
        elif optional in _EXACT:
            lines.append(f"    if {name} is not None and type({name}) is not {_EXACT[optional]}:")
            lines.append("        raise _Slow")
        elif items in _EXACT:
            lines.append(f"    if type({name}) is not list:")
            lines.append("        raise _Slow")
            lines.append(f"    for item in {name}:")
            lines.append(f"        if type(item) is not {_EXACT[items]}:")
            lines.append("            raise _Slow")
            lines.append(f"    {name} = tuple({name})")
        elif declared is not Any:
            namespace[f"decode_{index}"] = _decoder(declared)
            lines.append(f"    {name} = decode_{index}({name})")
    lines.append(f"    return cls({', '.join(args)})")
    return _compile("\n".join(lines) + "\n", "decode", namespace, cls)


def _optional_of(tp: Any) -> Any:
    """X for `X | None`; None otherwise."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        options = [option for option in typing.get_args(tp) if option is not type(None)]
        if len(options) == 1 and len(typing.get_args(tp)) == 2:
            return options[0]
    return None


def _union_decoder(tp: Any) -> Decoder:
    options = typing.get_args(tp)
    nullable = type(None) in options
    inner = [_decoder(option) for option in options if option is not type(None)]
    if len(inner) == 1:
        (only,) = inner

        def decode_optional(value: Any) -> Any:
            if value is None and nullable:
                return None
            return only(value)

        return decode_optional

    def decode_union(value: Any) -> Any:
        if value is None and nullable:
            return None
        for option in inner:
            try:
                return option(value)
            except _Bad:
                continue
        raise _Bad(f"{value!r} matches none of {tp}")

    return decode_union


def _tuple_decoder(tp: Any) -> Decoder:
    args = typing.get_args(tp)
    variable = len(args) == 2 and args[1] is Ellipsis
    decoders = [_decoder(args[0])] if variable else [_decoder(arg) for arg in args]

    def decode(value: Any) -> tuple:
        if not isinstance(value, list):
            raise _Bad(f"expected a list, got {type(value).__name__}")
        if not variable and len(decoders) != len(value):
            raise _Bad(f"expected {len(decoders)} items, got {len(value)}")
        # `tuple[X, ...]`: X's decoder for every item; `tuple[X, Y]`: one per position.
        per_item = itertools.repeat(decoders[0]) if variable else decoders
        items = []
        for index, (item_decoder, item) in enumerate(zip(per_item, value, strict=False)):
            try:
                items.append(item_decoder(item))
            except _Bad as bad:
                bad.path.append(f"[{index}]")
                raise
        return tuple(items)

    return decode


def _dict_decoder(tp: Any) -> Decoder:
    key_type, value_type = typing.get_args(tp)
    key_decoder, value_decoder = _decoder(key_type), _decoder(value_type)

    def decode(value: Any) -> dict:
        if not isinstance(value, list) or not all(
            isinstance(pair, list) and len(pair) == 2 for pair in value
        ):
            raise _Bad("expected a list of [key, value] pairs")
        decoded = {}
        for k, v in value:
            try:
                key = key_decoder(k)
            except _Bad as bad:
                bad.path.append(".key")
                raise
            try:
                decoded[key] = value_decoder(v)
            except _Bad as bad:
                bad.path.append(f"[{k!r}]")
                raise
        return decoded

    return decode


def _enum_decoder(tp: type) -> Decoder:
    def decode(value: Any) -> Any:
        try:
            return tp(value)
        except ValueError:
            raise _Bad(f"{value!r} is not a {tp.__name__}") from None

    return decode


def _scalar_decoder(tp: type) -> Decoder:
    name = tp.__name__
    if tp is float:

        def decode_float(value: Any) -> float:
            if type(value) is float:
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, float):
                return value
            raise _Bad(f"expected float, got {type(value).__name__}")

        return decode_float
    if tp is int:

        def decode_int(value: Any) -> int:
            if type(value) is int:
                return value
            if isinstance(value, bool):
                raise _Bad("expected int, got bool")
            if isinstance(value, int):
                return value
            raise _Bad(f"expected int, got {type(value).__name__}")

        return decode_int

    def decode(value: Any) -> Any:
        if isinstance(value, tp):
            return value
        raise _Bad(f"expected {name}, got {type(value).__name__}")

    return decode
