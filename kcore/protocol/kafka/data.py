"""Kafka's "data" messages: structs with a schema but no API key, encoded on their own.

Some of Kafka's `common/message/*.json` schemas are not requests or responses but bytes
carried inside other messages: ConsumerProtocolSubscription and ConsumerProtocolAssignment
travel as opaque `bytes` in JoinGroup / SyncGroup, and the group coordinator never parses
them. kio generates them as `EntityType.data` classes. This module encodes and decodes one
such struct with the same compiled readers and writers as the request / response codec, so
the wire rules (and the error messages that name the field) are the same.

`encode_struct` / `decode_struct` do the same for a schema the caller builds itself, for
Kafka's data messages that kio does not ship (the `__consumer_offsets` records in
`kcore.coordinator.group.records`).

The caller frames the struct: the consumer protocol, for one, puts a 2-byte version in
front of it (`kcore.client.consumer_protocol`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kcore.protocol.kafka import codec as _codec
from kcore.protocol.kafka.schema import KafkaCodecError, StructSchema, UnsupportedVersionError
from kcore.protocol.kafka.schema import _struct_schema as _schema_of_kio_class

__all__ = ["data_schema", "decode_data", "decode_struct", "encode_data", "encode_struct"]


def data_schema(name: str, version: int) -> StructSchema:
    """The descriptor of one version of a data message, by kio's module name for it
    (`"consumer_protocol_subscription"`). Raises UnsupportedVersionError for a name or a
    version kio has no data schema for."""
    return _kio_schema(name, version)[0]


def encode_data(name: str, version: int, value: Mapping[str, object]) -> bytes:
    """The struct's bytes (no version prefix, no size). Missing keys take the field's
    default. Raises KafkaCodecError naming the field for a value that does not fit."""
    schema, flexible = _kio_schema(name, version)
    return _encode(schema, flexible, value, f"{schema.name} v{version}")


def decode_data(
    name: str, version: int, data: bytes | bytearray | memoryview, *, allow_trailing: bool = False
) -> tuple[dict, int]:
    """(the struct as a dict, the number of bytes it took) from the start of `data`.

    Bytes after the struct are an error unless `allow_trailing` (a newer version's fields
    that this version does not know). Raises KafkaCodecError naming the field for bytes
    that are not a valid struct of this version."""
    schema, flexible = _kio_schema(name, version)
    return _decode(schema, flexible, data, allow_trailing, f"{schema.name} v{version}")


def encode_struct(
    schema: StructSchema, value: Mapping[str, object], *, flexible: bool = False
) -> bytes:
    """`value` as the struct `schema` describes (compact lengths and tagged fields when
    `flexible`). Errors name `schema.name` and the field."""
    return _encode(schema, flexible, value, schema.name)


def decode_struct(
    schema: StructSchema,
    data: bytes | bytearray | memoryview,
    *,
    flexible: bool = False,
    allow_trailing: bool = False,
) -> tuple[dict, int]:
    """(the struct as a dict, the bytes it took) from the start of `data`, as
    `decode_data` but for a schema the caller built."""
    return _decode(schema, flexible, data, allow_trailing, schema.name)


def _encode(schema: StructSchema, flexible: bool, value, label: str) -> bytes:
    _, write = _compiled(schema, flexible)
    parts: list = []
    try:
        write(value, parts)
    except _codec._ENCODE_FAILURES as error:
        raise KafkaCodecError(f"{label}: {_codec._as_encode_error(error).describe()}") from None
    return b"".join(parts)


def _decode(schema: StructSchema, flexible: bool, data, allow_trailing: bool, label: str):
    read, _ = _compiled(schema, flexible)
    buf = _codec._as_view(data)
    try:
        value, end = read(buf, 0)
    except _codec._DECODE_FAILURES as error:
        raise KafkaCodecError(f"{label}: {_codec._reason(error)}") from None
    if end != len(buf) and not allow_trailing:
        raise KafkaCodecError(
            f"{label}: {len(buf) - end} trailing bytes after the struct "
            f"({len(buf)} bytes, the struct ends at {end})"
        )
    return value, end


# Compiled readers / writers, by the schema's identity (a schema's defaults may be
# unhashable mappings); the schema is kept in the entry so its id is not reused.
_compiled_structs: dict[tuple[int, bool], tuple] = {}
_kio_schemas: dict[tuple[str, int], tuple[StructSchema, bool]] = {}


def _compiled(schema: StructSchema, flexible: bool) -> tuple:
    key = (id(schema), flexible)
    entry = _compiled_structs.get(key)
    if entry is None or entry[0] is not schema:
        entry = _compiled_structs[key] = (
            schema,
            _codec._struct_reader(schema, flexible),
            _codec._struct_writer(schema, flexible),
        )
    return entry[1], entry[2]


def _kio_schema(name: str, version: int) -> tuple[StructSchema, bool]:
    key = (name, version)
    entry = _kio_schemas.get(key)
    if entry is None:
        kio_class = _kio_data_class(name, version)
        entry = _kio_schemas[key] = (
            _schema_of_kio_class(kio_class, kio_class.__name__),
            bool(kio_class.__flexible__),
        )
    return entry


def _kio_data_class(name: str, version: int) -> type:
    from kio.schema import index
    from kio.static.constants import EntityType

    try:
        path = index.schema_name_map[name][version][EntityType.data]
    except KeyError:
        raise UnsupportedVersionError(
            f"kio has no data schema {name!r} version {version}", api_key=-1, api_version=version
        ) from None
    module_name, _, class_name = path.partition(":")
    return getattr(importlib.import_module(module_name), class_name)
