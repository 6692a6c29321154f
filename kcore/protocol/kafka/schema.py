"""Kafka's message schemas, read from kio's generated dataclasses into plain descriptors.

Kafka describes every request and response in `clients/src/main/resources/common/message/
*.json`. We cannot ship those files, but the `kio` package ships Python dataclasses
generated from them: one module per API, version and direction. This module turns one
such dataclass (and the dataclasses nested in it) into frozen descriptors that say only
what the wire needs: field order, Kafka type, nullability, tag and default. The codec
compiles encoders and decoders from these descriptors; nothing reads kio at encode or
decode time, and kio's own value types (timedeltas, datetimes, enums, phantom ints) never
reach our callers.

kio's classes differ from Kafka's JSON in a few ways that are undone here:

- Fields that kio models as `timedelta_i32`, `timedelta_i64` or `datetime_i64` lose
  Kafka's `Ms` suffix (`ThrottleTimeMs` -> `throttle_time`). kio only does this to names
  that end in `Ms` (DescribeDelegationToken's `IssueTimestamp` stays a plain int64), so
  putting `_ms` back gives the snake_case of Kafka's name.
- kio appends `_` to names that shadow Python builtins (`Id` -> `id_`, `Type` -> `type_`);
  no Kafka name ends in `_`, so it is dropped.
- kio types every uuid as `UUID | None` (it reads the zero UUID as None); Kafka's uuids
  are never null, the zero UUID is their default.
- kio types a nullable `datetime_i64` as `datetime | None` with -1 read as None; on the
  wire it is a plain int64 whose default is -1.
- kio drops `"default": "null"` from nullable arrays of structs (it keeps it for arrays of
  primitives and for nullable structs), which would make a missing key encode as an empty
  array where Kafka means null ("all topics"); `_NULL_DEFAULTS_KIO_DROPS` puts it back.

Modules are imported lazily, one API version at a time: kio has hundreds of them and a
broker needs a handful.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib
import types
import typing
import uuid
from collections.abc import Mapping

import attrs

__all__ = [
    "PRIMITIVE_TYPES",
    "ArraySchema",
    "FieldSchema",
    "KafkaCodecError",
    "MessageSchema",
    "StructSchema",
    "UnsupportedVersionError",
    "known_api_keys",
    "known_versions",
    "message_schema",
]

# Kafka's primitive type names, as they appear in the JSON schemas.
PRIMITIVE_TYPES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)

# kio's `kafka_type` names that are one of Kafka's types under another name, with the
# value mapped to a Python type (error codes to an enum, durations to timedelta, ...).
_KIO_TYPE_ALIASES = {
    "error_code": "int16",
    "timedelta_i32": "int32",
    "timedelta_i64": "int64",
    "datetime_i64": "int64",
}
# The kio types whose field names lost Kafka's "Ms" suffix.
_KIO_TYPES_WITHOUT_MS_SUFFIX = frozenset({"timedelta_i32", "timedelta_i64", "datetime_i64"})

# (message, kio field name) of the nullable arrays of structs whose default is null in
# Kafka's JSON (Kafka 4.x) but missing from kio's class.
_NULL_DEFAULTS_KIO_DROPS = frozenset(
    {
        ("ListPartitionReassignmentsRequest", "topics"),
        ("ConsumerGroupHeartbeatRequest", "topic_partitions"),
        ("StreamsGroupHeartbeatRequest", "active_tasks"),
        ("StreamsGroupHeartbeatRequest", "standby_tasks"),
        ("StreamsGroupHeartbeatRequest", "warmup_tasks"),
        ("StreamsGroupHeartbeatRequest", "client_tags"),
        ("StreamsGroupHeartbeatRequest", "task_offsets"),
        ("StreamsGroupHeartbeatRequest", "task_end_offsets"),
        ("StreamsGroupHeartbeatResponse", "status"),
        ("StreamsGroupHeartbeatResponse", "active_tasks"),
        ("StreamsGroupHeartbeatResponse", "standby_tasks"),
        ("StreamsGroupHeartbeatResponse", "warmup_tasks"),
        ("StreamsGroupHeartbeatResponse", "partitions_by_user_endpoint"),
        ("StreamsGroupDescribeResponse", "subtopologies"),
    }
)

_ZERO_UUID = uuid.UUID(int=0)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ONE_MS = datetime.timedelta(milliseconds=1)

REQUEST = "request"
RESPONSE = "response"


class KafkaCodecError(Exception):
    """Bytes that are not a valid Kafka message, or a value that cannot be encoded as one.

    The message names the API, the version and the field path (`topics[2].partitions[0].
    records`) so a bad frame or a bad handler can be found from the log line alone."""


class UnsupportedVersionError(KafkaCodecError):
    """An API key, or a version of it, for which kio has no schema.

    `header` is the request header when the error comes from decoding a request (the
    caller can still answer with the correlation id, e.g. UNSUPPORTED_VERSION); None when
    the caller asked for a schema directly."""

    def __init__(self, message: str, *, api_key: int, api_version: int, header=None):
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.header = header


@attrs.frozen
class ArraySchema:
    """An array of a primitive type (named by its Kafka type) or of a struct."""

    element: str | StructSchema


@attrs.frozen
class FieldSchema:
    """One field of a struct as one version of a message has it.

    `name` is the snake_case of Kafka's JSON name. `type` is a primitive type name, a
    struct or an array. `tag` is the KIP-482 tag of a tagged field (None for a field that is
    always on the wire). `default` is the value a field gets when it is absent: from a
    dict being encoded, or from the tagged fields of a decoded message. It is frozen (a tuple
    for an array, a read-only mapping for a struct) so that the descriptors can be shared.
    """

    name: str
    type: str | StructSchema | ArraySchema
    nullable: bool
    tag: int | None
    default: object


@attrs.frozen
class StructSchema:
    """A struct: its name in Kafka's schema and its fields in wire order (tagged ones in
    schema order too; the codec sorts them by tag)."""

    name: str
    fields: tuple[FieldSchema, ...]


@attrs.frozen
class MessageSchema:
    """One version of one request or response body."""

    api_key: int
    api_version: int
    kind: str  # "request" or "response"
    flexible: bool
    body: StructSchema

    @property
    def label(self) -> str:
        """How errors name this message: Kafka's message name and the version."""
        return f"{self.body.name} v{self.api_version}"


def known_api_keys() -> tuple[int, ...]:
    """The API keys kio has schemas for, ascending."""
    return tuple(sorted(_index().api_key_map))


def known_versions(api_key: int) -> range | None:
    """The versions of `api_key` that kio has a request schema for (Kafka 4.x's valid
    versions), or None for an API key kio does not know."""
    return _known_versions(api_key)


def message_schema(api_key: int, api_version: int, kind: str) -> MessageSchema:
    """The descriptor of one request or response version (`kind` is "request" or
    "response"). Raises UnsupportedVersionError for an API key or version kio lacks."""
    key = (api_key, api_version, kind)
    schema = _schema_cache.get(key)
    if schema is None:
        schema = _schema_cache[key] = _load_message_schema(api_key, api_version, kind)
    return schema


_schema_cache: dict[tuple[int, int, str], MessageSchema] = {}
_versions_cache: dict[int, range | None] = {}


def _index():
    # kio.schema.index is a table of dotted paths; it imports no schema module.
    from kio.schema import index

    return index


def _known_versions(api_key: int) -> range | None:
    if api_key in _versions_cache:
        return _versions_cache[api_key]
    index = _index()
    from kio.static.constants import EntityType

    name = index.api_key_map.get(api_key)
    versions = None
    if name is not None:
        found = sorted(
            version
            for version, entities in index.schema_name_map[name].items()
            if EntityType.request in entities
        )
        if found:
            versions = range(found[0], found[-1] + 1)
            if list(versions) != found:
                raise RuntimeError(f"kio's versions of {name} have a gap: {found}")
    _versions_cache[api_key] = versions
    return versions


def _load_message_schema(api_key: int, api_version: int, kind: str) -> MessageSchema:
    from kio.static.constants import EntityType

    if kind not in (REQUEST, RESPONSE):
        raise ValueError(f"kind must be 'request' or 'response', not {kind!r}")
    index = _index()
    name = index.api_key_map.get(api_key)
    if name is None:
        raise UnsupportedVersionError(
            f"unknown API key {api_key}", api_key=api_key, api_version=api_version
        )
    entity_type = EntityType.request if kind == REQUEST else EntityType.response
    try:
        path = index.schema_name_map[name][api_version][entity_type]
    except KeyError:
        versions = _known_versions(api_key)
        raise UnsupportedVersionError(
            f"{name} (API key {api_key}) has no version {api_version} "
            f"(versions {versions.start}-{versions.stop - 1})",
            api_key=api_key,
            api_version=api_version,
        ) from None
    module_name, _, class_name = path.partition(":")
    kio_class = getattr(importlib.import_module(module_name), class_name)
    return MessageSchema(
        api_key=api_key,
        api_version=api_version,
        kind=kind,
        flexible=bool(kio_class.__flexible__),
        body=_struct_schema(kio_class, kio_class.__name__),
    )


def _struct_schema(kio_class: type, message: str) -> StructSchema:
    return StructSchema(
        name=kio_class.__name__,
        fields=tuple(
            _field_schema(kio_class, field, message) for field in dataclasses.fields(kio_class)
        ),
    )


def _field_schema(kio_class: type, field: dataclasses.Field, message: str) -> FieldSchema:
    annotation = field.type
    if isinstance(annotation, str):  # kio's generated modules never postpone annotations
        raise RuntimeError(f"{kio_class.__name__}.{field.name}: unresolved annotation")
    nullable, annotation = _strip_none(annotation)
    kio_type = field.metadata.get("kafka_type")
    tag = field.metadata.get("tag")
    if tag is not None:
        tag = int(tag)
    name = field.name.removesuffix("_")
    if kio_type in _KIO_TYPES_WITHOUT_MS_SUFFIX:
        name += "_ms"

    field_type: str | StructSchema | ArraySchema
    if typing.get_origin(annotation) is tuple:
        element, ellipsis = typing.get_args(annotation)
        if ellipsis is not Ellipsis:
            raise RuntimeError(f"{kio_class.__name__}.{field.name}: not an array: {annotation}")
        # An array's elements are never null in Kafka (kio's uuid elements say otherwise).
        _, element = _strip_none(element)
        if dataclasses.is_dataclass(element):
            field_type = ArraySchema(_struct_schema(element, message))
        else:
            field_type = ArraySchema(_primitive(kio_class, field, kio_type))
    elif dataclasses.is_dataclass(annotation):
        field_type = _struct_schema(annotation, message)
    else:
        field_type = _primitive(kio_class, field, kio_type)
        if kio_type == "datetime_i64" or field_type == "uuid":
            nullable = False  # see the module docstring

    if nullable and (message, field.name) in _NULL_DEFAULTS_KIO_DROPS:
        default = None
    else:
        default = _default(field, field_type, nullable, kio_type)
    return FieldSchema(name=name, type=field_type, nullable=nullable, tag=tag, default=default)


def _strip_none(annotation) -> tuple[bool, object]:
    """(is `X | None`, X)."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        args = typing.get_args(annotation)
        others = [arg for arg in args if arg is not types.NoneType]
        if len(others) != 1:
            raise RuntimeError(f"unsupported union {annotation}")
        return len(others) != len(args), others[0]
    return False, annotation


def _primitive(kio_class: type, field: dataclasses.Field, kio_type: str | None) -> str:
    kafka_type = _KIO_TYPE_ALIASES.get(kio_type, kio_type)
    if kafka_type not in PRIMITIVE_TYPES:
        raise RuntimeError(f"{kio_class.__name__}.{field.name}: unknown kafka_type {kio_type!r}")
    return kafka_type


def _default(field: dataclasses.Field, field_type, nullable: bool, kio_type: str | None):
    """Kafka's default of a field, as a frozen plain value."""
    if field.default is not dataclasses.MISSING:
        kio_default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        kio_default = field.default_factory()
    else:
        return _implicit_default(field_type, nullable)
    if kio_default is None:
        if nullable:
            return None
        if kio_type == "datetime_i64":
            return -1  # kio's None is Kafka's -1
        if field_type == "uuid":
            return _ZERO_UUID
        raise RuntimeError(f"{field.name}: default None in a field that is not nullable")
    return _plain(kio_default, field_type)


def _implicit_default(field_type, nullable: bool):
    """What Kafka's generated code uses when the JSON gives no default."""
    if isinstance(field_type, ArraySchema):
        return ()
    if isinstance(field_type, StructSchema):
        return _struct_default(field_type)
    if field_type == "records":
        return None if nullable else b""
    return _ZERO_VALUES[field_type]


def _struct_default(struct: StructSchema) -> Mapping[str, object]:
    return types.MappingProxyType({field.name: field.default for field in struct.fields})


_ZERO_VALUES = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "uuid": _ZERO_UUID,
}


def _plain_or_none(value, field: FieldSchema):
    if value is None:
        # kio's None in a uuid or a datetime_i64 field is the field's default (zero, -1).
        return None if field.nullable else field.default
    return _plain(value, field.type)


def _plain(value, field_type):
    """kio's default value as a frozen plain value of `field_type`."""
    if isinstance(field_type, ArraySchema):
        return tuple(_plain(item, field_type.element) for item in value)
    if isinstance(field_type, StructSchema):
        # Same field order as the struct's descriptor (built from the same class).
        kio_fields = dataclasses.fields(value)
        return types.MappingProxyType(
            {
                ours.name: _plain_or_none(getattr(value, theirs.name), ours)
                for ours, theirs in zip(field_type.fields, kio_fields, strict=True)
            }
        )
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // _ONE_MS
    if field_type == "bool":
        return bool(value)
    if field_type == "float64":
        return float(value)
    if field_type == "string":
        return str(value)
    if field_type in ("bytes", "records"):
        return bytes(value)
    if field_type == "uuid":
        return value
    return int(value)
