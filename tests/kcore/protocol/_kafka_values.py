"""Hypothesis strategies for message bodies, built from the codec's own descriptors.

`kio_compatible=True` narrows values to what kio's types can hold (its error codes are an
enum, its durations timedeltas, its timestamps non-negative datetimes), so that the same
values can be handed to kio for the cross-check."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import types
import typing
import uuid
from collections.abc import Mapping

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from kcore.protocol.kafka import (
    ArraySchema,
    FieldSchema,
    StructSchema,
    known_api_keys,
    message_schema,
)

ZERO_UUID = uuid.UUID(int=0)
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
# Text that UTF-8 can encode (no lone surrogates), kept short: the schemas are the point.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
BINARY = st.binary(max_size=12)
UUIDS = st.one_of(st.just(ZERO_UUID), st.uuids())
# The milliseconds kio's timedelta survives exactly (a float of seconds has 53 bits).
TIMEDELTA_I64_MS = st.integers(-(2**50), 2**50)
# kio reads a datetime_i64 as an aware datetime: non-negative, before year 10000.
DATETIME_MS = st.integers(0, 253_402_300_799_999)


def api_name(api_key: int) -> str:
    """A test id for an API key: kio's name for it (`produce`), found without importing
    any schema module at collection time."""
    from kio.schema.index import api_key_map

    return api_key_map[api_key]


EVERY_API_KEY = known_api_keys()


def frozen_to_plain(value):
    """A descriptor default (tuples, read-only mappings) as decoded values look."""
    if isinstance(value, tuple | list):
        return [frozen_to_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: frozen_to_plain(item) for key, item in value.items()}
    return value


@functools.cache
def message_values(api_key: int, api_version: int, kind: str, kio_compatible: bool):
    schema = message_schema(api_key, api_version, kind)
    kio_class = kio_class_of(api_key, api_version, kind) if kio_compatible else None
    return struct_values(schema.body, kio_class)


def kio_class_of(api_key: int, api_version: int, kind: str) -> type:
    from pkgutil import resolve_name

    from kio.schema.index import api_key_map, schema_name_map
    from kio.static.constants import EntityType

    entity = EntityType.request if kind == "request" else EntityType.response
    return resolve_name(schema_name_map[api_key_map[api_key]][api_version][entity])


def kio_inner_class(annotation) -> type | None:
    """The dataclass a kio field annotation holds (through `| None` and tuples)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin in (types.UnionType, typing.Union):
            (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        elif origin is tuple:
            annotation = typing.get_args(annotation)[0]
        else:
            break
    return annotation if dataclasses.is_dataclass(annotation) else None


def struct_values(struct: StructSchema, kio_class: type | None = None):
    kio_fields = (
        dataclasses.fields(kio_class) if kio_class is not None else [None] * len(struct.fields)
    )
    return st.fixed_dictionaries(
        {
            field.name: field_values(field, kio_field)
            for field, kio_field in zip(struct.fields, kio_fields, strict=True)
        }
    )


def field_values(field: FieldSchema, kio_field: dataclasses.Field | None):
    kio_type = kio_field.metadata.get("kafka_type") if kio_field is not None else None
    nested_kio = kio_inner_class(kio_field.type) if kio_field is not None else None
    field_type = field.type
    if isinstance(field_type, StructSchema):
        values = struct_values(field_type, nested_kio)
    elif isinstance(field_type, ArraySchema):
        element = field_type.element
        if isinstance(element, StructSchema):
            values = st.lists(struct_values(element, nested_kio), max_size=2)
        else:
            values = st.lists(primitive_values(element, kio_type), max_size=3)
    else:
        values = primitive_values(field_type, kio_type)
        if kio_type == "datetime_i64" and kio_field is not None and field.default == -1:
            values = st.one_of(st.just(-1), values)  # kio's None
    if field.nullable:
        values = st.one_of(st.none(), values)
    if field.tag is not None:
        # Tagged fields holding their default are left off the wire: test that path too.
        values = st.one_of(st.just(frozen_to_plain(field.default)), values)
    return values


def primitive_values(kafka_type: str, kio_type: str | None = None):
    if kio_type == "error_code":
        from kio.schema.errors import ErrorCode

        return st.sampled_from(sorted(code.value for code in ErrorCode))
    if kio_type == "timedelta_i64":
        return TIMEDELTA_I64_MS
    if kio_type == "datetime_i64":
        return DATETIME_MS
    if kafka_type in INT_RANGES:
        low, high = INT_RANGES[kafka_type]
        return st.integers(low, high)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False, allow_infinity=kio_type is None)
    if kafka_type == "string":
        return TEXT
    if kafka_type in ("bytes", "records"):
        return BINARY
    if kafka_type == "uuid":
        return UUIDS
    raise AssertionError(kafka_type)


# ------------------------------------------------------------------ kio <-> plain values

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
ONE_MS = datetime.timedelta(milliseconds=1)


def kio_to_plain(entity, struct: StructSchema) -> dict:
    """A kio entity as our codec's dict: kio's timedeltas, datetimes, enums and Nones for
    Kafka's zero uuid and -1 timestamps become Kafka's plain values."""
    return {
        field.name: _kio_value_to_plain(getattr(entity, kio_field.name), field.nullable, field.type)
        for field, kio_field in zip(struct.fields, dataclasses.fields(entity), strict=True)
    }


def _kio_value_to_plain(value, nullable: bool, field_type):
    if value is None:
        if nullable:
            return None
        return ZERO_UUID if field_type == "uuid" else -1  # datetime_i64's null is -1
    if isinstance(field_type, StructSchema):
        return kio_to_plain(value, field_type)
    if isinstance(field_type, ArraySchema):
        return [_kio_value_to_plain(item, False, field_type.element) for item in value]
    if isinstance(value, datetime.timedelta):
        return value // ONE_MS
    if isinstance(value, datetime.datetime):
        # Rounded: kio builds its datetimes through float seconds, a microsecond off.
        return round((value - EPOCH) / ONE_MS)
    if isinstance(value, enum.Enum):  # kio's ErrorCode
        return value.value
    if field_type in ("bytes", "records"):
        return bytes(value)
    if field_type == "string":
        return str(value)
    if field_type == "uuid":
        return value
    if field_type == "bool":
        return bool(value)
    if field_type == "float64":
        return float(value)
    return int(value)


def plain_to_kio(value: dict, struct: StructSchema, kio_class: type):
    """Our dict as an instance of kio's class (the inverse of kio_to_plain)."""
    kwargs = {}
    for field, kio_field in zip(struct.fields, dataclasses.fields(kio_class), strict=True):
        kwargs[kio_field.name] = _plain_value_to_kio(value[field.name], field, kio_field)
    return kio_class(**kwargs)


def _plain_value_to_kio(value, field: FieldSchema, kio_field: dataclasses.Field):
    if value is None:
        return None
    field_type = field.type
    if isinstance(field_type, StructSchema):
        return plain_to_kio(value, field_type, kio_inner_class(kio_field.type))
    if isinstance(field_type, ArraySchema):
        element = field_type.element
        if isinstance(element, StructSchema):
            nested = kio_inner_class(kio_field.type)
            return tuple(plain_to_kio(item, element, nested) for item in value)
        return tuple(_primitive_to_kio(item, element, kio_field) for item in value)
    return _primitive_to_kio(value, field_type, kio_field)


def _primitive_to_kio(value, kafka_type: str, kio_field: dataclasses.Field):
    from kio.schema.errors import ErrorCode

    kio_type = kio_field.metadata.get("kafka_type")
    if kio_type == "error_code":
        return ErrorCode(value)
    if kio_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kio_type == "datetime_i64":
        return None if value == -1 else EPOCH + datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid":
        return None if value == ZERO_UUID else value  # kio's reading of the zero uuid
    return value


def every_version_settings(max_examples: int) -> settings:
    """Hypothesis settings for a test that draws one value per version of an API: few,
    reproducible examples and no shrinking (a draw spans every version of an API, and
    shrinking that takes minutes; the assertion names the version and hypothesis prints the
    values drawn)."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
