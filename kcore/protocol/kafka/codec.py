"""Kafka's binary protocol: request and response frames <-> plain Python values.

Sans-IO: functions from bytes to values and back, no await, no sockets, no clock. The
transport hands a frame (the bytes after the 4-byte size prefix) to `decode_request` and
sends what `encode_response` returns (size prefix included).

For each (API key, version, request|response) the schema descriptor from `schema.py` is
compiled once into a tree of closures, which is cached; encoding and decoding then run those
closures without looking at a descriptor again. Runs of consecutive fixed-width fields
(`int32 int64 int16 ...`) are packed and unpacked with one precompiled `struct.Struct`.
Encoders append to a list of parts that is joined once, so a multi-megabyte `records`
value is copied once (into the frame), never concatenated; decoders read from one
memoryview of the frame, so a `records` or `bytes` value is copied once (out of it).

The wire rules (Kafka's `protocol` guide, KIPs 482, 511 and 893):

- request header v1 (api_key int16, api_version int16, correlation_id int32, client_id as a
  nullable int16-length string), v2 (v1 + a tagged-field section) for flexible versions;
  client_id keeps its int16 length in v2 too (Kafka's RequestHeader.json says so);
- response header v0 (correlation_id), v1 (+ tagged fields) for flexible versions, except
  ApiVersions responses, always v0: a client that sent a version the broker does not know
  must still be able to read the error (KIP-511);
- flexible versions use compact strings, bytes and arrays (unsigned varint length + 1, 0 is
  null) and end every struct with a tagged-field section (KIP-482): a count, then (tag,
  size, value) in ascending tag order; unknown tags are skipped; a tagged field whose value
  equals its default is not written;
- a nullable struct is preceded by an int8: -1 null, 1 present (KIP-893);
- uuid is 16 bytes, records is a bytes field (the record batches are not parsed here).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping

import attrs

from kcore.protocol.kafka.schema import (
    REQUEST,
    RESPONSE,
    ArraySchema,
    FieldSchema,
    KafkaCodecError,
    MessageSchema,
    StructSchema,
    UnsupportedVersionError,
    message_schema,
)

__all__ = [
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "is_flexible",
]

API_VERSIONS_KEY = 18

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REQUEST_HEADER_START = struct.Struct(">hhih")  # api_key, api_version, correlation_id, len
_REQUEST_HEADER_IDS = struct.Struct(">hhi")

# struct format of each fixed-width Kafka type.
_FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
}
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_MAX_INT16 = 2**15 - 1
_MAX_INT32 = 2**31 - 1

_ONE_BYTE = tuple(bytes((value,)) for value in range(256))
_NULL_LEGACY_STRING = b"\xff\xff"
_NULL_LEGACY_BYTES = b"\xff\xff\xff\xff"
_NULL_COMPACT = b"\x00"
_NULL_STRUCT = b"\xff"
_PRESENT_STRUCT = b"\x01"
_NO_TAGGED_FIELDS = b"\x00"
_UUID = uuid.UUID
_MISSING = object()

# (buffer, position) -> (value, new position)
Reader = Callable[[memoryview, int], tuple[object, int]]
# (value, parts) -> None; appends the encoded value to parts
Writer = Callable[[object, list], None]


@attrs.frozen
class RequestHeader:
    """The request header (v1 / v2) without its tagged fields, which no version uses."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# ----------------------------------------------------------------------------- public API


def decode_request_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """The header of a request frame (the bytes after the size prefix).

    Reads only api_key, api_version, correlation_id and client_id, which every header
    version since v1 starts with, so it works for an API or version we have no schema for:
    the caller can still answer with the correlation id."""
    header, _ = _read_request_header(_as_view(frame))
    return header


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict]:
    """A whole request frame (after the size prefix): its header and its body as a dict.

    Every field of that version is in the dict (absent tagged fields with their default).
    Raises UnsupportedVersionError (with `.header`) for an API key or version without a
    schema, KafkaCodecError for bytes that are not a valid request. Bytes after the body
    are ignored, as Kafka's broker ignores them: librdkafka 2.x sends Metadata v12 for all
    topics with three bytes past its body.
    """
    buf = _as_view(frame)
    header, pos = _read_request_header(buf)
    try:
        codec = _codec(header.api_key, header.api_version, REQUEST)
    except UnsupportedVersionError as error:
        raise UnsupportedVersionError(
            str(error),
            api_key=header.api_key,
            api_version=header.api_version,
            header=header,
        ) from None
    if codec.flexible:
        try:
            pos = _skip_tagged_fields(buf, pos)
        except _DECODE_FAILURES as error:
            raise KafkaCodecError(
                f"{codec.label}: request header tagged fields: {_reason(error)}"
            ) from None
    return header, codec.decode_body(buf, pos, allow_trailing=True)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    """A response frame: the 4-byte big-endian size, the response header (v0, or v1 for a
    flexible version except ApiVersions) and the body."""
    codec = _codec(api_key, api_version, RESPONSE)
    try:
        header = _I32.pack(correlation_id)
    except struct.error:
        raise KafkaCodecError(
            f"{codec.label}: correlation_id {correlation_id!r} is not an int32"
        ) from None
    parts = [b"", header]
    if codec.flexible_header:
        parts.append(_NO_TAGGED_FIELDS)
    codec.encode_body(body, parts)
    return _frame(parts)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """A request frame: the 4-byte big-endian size, the request header (v1, or v2 for a
    flexible version) and the body. For tests and raw clients."""
    codec = _codec(api_key, api_version, REQUEST)
    try:
        ids = _REQUEST_HEADER_IDS.pack(api_key, api_version, correlation_id)
    except struct.error:
        raise KafkaCodecError(
            f"{codec.label}: correlation_id {correlation_id!r} is not an int32"
        ) from None
    parts = [b"", ids]
    try:
        _write_client_id(client_id, parts)
    except _FieldError as error:
        raise KafkaCodecError(f"{codec.label}: client_id: {error.reason}") from None
    if codec.flexible:
        parts.append(_NO_TAGGED_FIELDS)
    codec.encode_body(body, parts)
    return _frame(parts)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict]:
    """A response frame (after the size prefix) of a request we sent with this API key and
    version (a response does not say which it answers): (correlation_id, body)."""
    codec = _codec(api_key, api_version, RESPONSE)
    buf = _as_view(frame)
    try:
        (correlation_id,) = _I32.unpack_from(buf, 0)
        pos = 4
        if codec.flexible_header:
            pos = _skip_tagged_fields(buf, pos)
    except _DECODE_FAILURES as error:
        raise KafkaCodecError(f"{codec.label}: response header: {_reason(error)}") from None
    return correlation_id, codec.decode_body(buf, pos)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this version uses the flexible encoding (compact lengths, tagged fields,
    request header v2). Raises UnsupportedVersionError for an unknown API or version."""
    return _codec(api_key, api_version, REQUEST).flexible


# ----------------------------------------------------------------------- message codecs


class _MessageCodec:
    """One compiled (API key, version, kind): the body's reader and writer."""

    __slots__ = ("_read", "_write", "flexible", "flexible_header", "label", "schema")

    def __init__(self, schema: MessageSchema):
        self.schema = schema
        self.label = schema.label
        self.flexible = schema.flexible
        # KIP-511: ApiVersions responses keep header v0 in every version.
        self.flexible_header = schema.flexible and not (
            schema.kind == RESPONSE and schema.api_key == API_VERSIONS_KEY
        )
        self._read = _struct_reader(schema.body, schema.flexible)
        self._write = _struct_writer(schema.body, schema.flexible)

    def decode_body(self, buf: memoryview, pos: int, *, allow_trailing: bool = False) -> dict:
        try:
            body, pos = self._read(buf, pos)
        except _FieldError as error:
            raise KafkaCodecError(f"{self.label}: {error.describe()}") from None
        except _DECODE_FAILURES as error:
            raise KafkaCodecError(f"{self.label}: {_reason(error)}") from None
        if pos != len(buf) and not allow_trailing:
            raise KafkaCodecError(
                f"{self.label}: {len(buf) - pos} trailing bytes after the body "
                f"({len(buf)} bytes, the body ends at {pos})"
            )
        return body

    def encode_body(self, body: dict, parts: list) -> None:
        try:
            self._write(body, parts)
        except _FieldError as error:
            raise KafkaCodecError(f"{self.label}: {error.describe()}") from None


_codecs: dict[tuple[int, int, str], _MessageCodec] = {}


def _codec(api_key: int, api_version: int, kind: str) -> _MessageCodec:
    key = (api_key, api_version, kind)
    codec = _codecs.get(key)
    if codec is None:
        codec = _codecs[key] = _MessageCodec(message_schema(api_key, api_version, kind))
    return codec


def _frame(parts: list) -> bytes:
    """Joins the parts once, with the size prefix in parts[0]."""
    size = 0
    for part in parts:
        size += len(part)
    if size > _MAX_INT32:
        raise KafkaCodecError(f"frame of {size} bytes is larger than Kafka's int32 size")
    parts[0] = _I32.pack(size)
    return b"".join(parts)


def _as_view(frame) -> memoryview:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if view.itemsize != 1 or view.ndim != 1:
        view = view.cast("B")
    return view


# ----------------------------------------------------------------------------- errors


class _FieldError(Exception):
    """A failure inside a value; each struct and array it passes through on the way out
    adds its step of the path (innermost first)."""

    def __init__(self, reason: str, *path: str):
        super().__init__(reason)
        self.reason = reason
        self.path = list(path)

    def describe(self) -> str:
        text = ""
        for step in reversed(self.path):
            if step.startswith("[") or not text:
                text += step
            else:
                text += "." + step
        return f"{text}: {self.reason}" if text else self.reason


# What reading malformed bytes raises besides _FieldError: struct for short fixed-width
# values, IndexError for a varint cut short, ValueError (UnicodeDecodeError) for bad UTF-8.
_DECODE_FAILURES = (_FieldError, struct.error, IndexError, ValueError)


def _reason(error: Exception) -> str:
    if isinstance(error, _FieldError):
        return error.describe()
    if isinstance(error, UnicodeDecodeError):
        return f"invalid UTF-8 ({error.reason} at byte {error.start})"
    if isinstance(error, struct.error | IndexError):
        return "truncated (the frame ends inside this value)"
    return str(error)


def _as_field_error(error: Exception, step: str) -> _FieldError:
    if isinstance(error, _FieldError):
        error.path.append(step)
        return error
    return _FieldError(_reason(error), step)


# What a writer may raise: _FieldError for the values it checks, the others for values of a
# type nobody foresaw (they must still come out as a KafkaCodecError naming the field).
_ENCODE_FAILURES = (_FieldError, struct.error, TypeError, ValueError, OverflowError)


def _as_encode_error(error: Exception, *step: str) -> _FieldError:
    if isinstance(error, _FieldError):
        error.path.extend(step)
        return error
    return _FieldError(f"cannot encode: {error}", *step)


def _truncated(needed: int, available: int) -> _FieldError:
    return _FieldError(f"truncated: needs {needed} bytes, {available} left")


def _type_name(value) -> str:
    return "None" if value is None else type(value).__name__


def _bad_value(value, kafka_type: str) -> _FieldError:
    """Why `value` cannot be written as `kafka_type`."""
    if value is None:
        return _FieldError("None in a field that is not nullable")
    if kafka_type == "bool":
        return _FieldError(f"expected bool, got {_type_name(value)}")
    if kafka_type == "float64":
        return _FieldError(f"expected float, got {_type_name(value)}")
    if kafka_type in _INT_RANGES:
        low, high = _INT_RANGES[kafka_type]
        if not isinstance(value, int):
            return _FieldError(f"expected int, got {_type_name(value)}")
        return _FieldError(f"{value} is out of range for {kafka_type} ({low}..{high})")
    if kafka_type == "string":
        return _FieldError(f"expected str, got {_type_name(value)}")
    if kafka_type in ("bytes", "records"):
        return _FieldError(f"expected bytes, bytearray or memoryview, got {_type_name(value)}")
    if kafka_type == "uuid":
        return _FieldError(f"expected uuid.UUID, got {_type_name(value)}")
    return _FieldError(f"cannot encode {_type_name(value)} as {kafka_type}")


# ---------------------------------------------------------------------------- varints


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _FieldError("unsigned varint longer than 5 bytes")


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    encoded = bytearray()
    while value >= 0x80:
        encoded.append((value & 0x7F) | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise _truncated(size, len(buf) - pos + size)
    return pos


# ------------------------------------------------------------------------ request header


def _read_request_header(buf: memoryview) -> tuple[RequestHeader, int]:
    try:
        api_key, api_version, correlation_id, length = _REQUEST_HEADER_START.unpack_from(buf, 0)
    except struct.error:
        raise KafkaCodecError(
            f"request header: truncated ({len(buf)} bytes, at least 10 needed)"
        ) from None
    pos = _REQUEST_HEADER_START.size
    client_id = None
    if length >= 0:
        end = pos + length
        if end > len(buf):
            raise KafkaCodecError(
                f"request header (API key {api_key} v{api_version}): client_id truncated"
            )
        try:
            client_id = str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as error:
            raise KafkaCodecError(
                f"request header (API key {api_key} v{api_version}): client_id: {_reason(error)}"
            ) from None
        pos = end
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def _write_client_id(client_id: str | None, parts: list) -> None:
    # Kafka's RequestHeader.json: client_id is never a compact string, even in header v2.
    _write_legacy_nullable_string(client_id, parts)


# ------------------------------------------------------------------------------ readers


def _field_reader(field_type, nullable: bool, flexible: bool) -> Reader:
    if isinstance(field_type, StructSchema):
        read_struct = _struct_reader(field_type, flexible)
        return _nullable_struct_reader(read_struct) if nullable else read_struct
    if isinstance(field_type, ArraySchema):
        return _array_reader(field_type, nullable, flexible)
    return _primitive_reader(field_type, nullable, flexible)


def _primitive_reader(kafka_type: str, nullable: bool, flexible: bool) -> Reader:
    fmt = _FIXED_FORMATS.get(kafka_type)
    if fmt is not None:
        return _fixed_reader(struct.Struct(">" + fmt))
    if kafka_type == "uuid":
        return _read_uuid
    if kafka_type == "string":
        return _bytes_reader(flexible, nullable, text=True, legacy_length=_I16)
    if kafka_type in ("bytes", "records"):
        return _bytes_reader(flexible, nullable, text=False, legacy_length=_I32)
    raise AssertionError(kafka_type)


def _fixed_reader(packer: struct.Struct) -> Reader:
    unpack_from = packer.unpack_from
    size = packer.size

    def read_fixed(buf, pos):
        return unpack_from(buf, pos)[0], pos + size

    return read_fixed


def _read_uuid(buf, pos):
    end = pos + 16
    if end > len(buf):
        raise _truncated(16, len(buf) - pos)
    return _UUID(bytes=bytes(buf[pos:end])), end


def _bytes_reader(compact: bool, nullable: bool, text: bool, legacy_length: struct.Struct):
    """Strings (int16 length or compact) and bytes / records (int32 length or compact).
    A negative length is null, as in Kafka's generated readers."""
    unpack_length = legacy_length.unpack_from
    length_size = legacy_length.size

    def read_bytes(buf, pos):
        if compact:
            length, pos = _read_uvarint(buf, pos)
            length -= 1
        else:
            (length,) = unpack_length(buf, pos)
            pos += length_size
        if length < 0:
            if nullable:
                return None, pos
            raise _FieldError("null in a field that is not nullable")
        end = pos + length
        if end > len(buf):
            raise _truncated(length, len(buf) - pos)
        if text:
            return str(buf[pos:end], "utf-8"), end
        return bytes(buf[pos:end]), end

    return read_bytes


def _array_length_reader(compact: bool):
    if compact:

        def read_compact_length(buf, pos):
            length, pos = _read_uvarint(buf, pos)
            return length - 1, pos

        return read_compact_length

    def read_legacy_length(buf, pos):
        return _I32.unpack_from(buf, pos)[0], pos + 4

    return read_legacy_length


_sequence_structs: dict[tuple[str, int], struct.Struct] = {}


def _sequence_struct(fmt: str, length: int) -> struct.Struct:
    """The Struct of `length` values of one fixed-width type (replica lists, partition
    lists): short ones are cached, the lengths a peer sends cannot grow the cache."""
    packer = _sequence_structs.get((fmt, length))
    if packer is None:
        packer = struct.Struct(f">{length}{fmt}")
        if length <= 64:
            _sequence_structs[fmt, length] = packer
    return packer


def _array_reader(array: ArraySchema, nullable: bool, flexible: bool) -> Reader:
    read_length = _array_length_reader(flexible)
    element = array.element
    fmt = _FIXED_FORMATS.get(element) if isinstance(element, str) else None

    def check_length(buf, pos, length):
        # Kafka's own check: no element takes less than a byte, so a length beyond the
        # remaining bytes is malformed (and must not make us allocate for it).
        if length > len(buf) - pos:
            raise _FieldError(f"array of {length} elements but only {len(buf) - pos} bytes left")

    if fmt is not None:

        def read_fixed_array(buf, pos):
            length, pos = read_length(buf, pos)
            if length < 0:
                if nullable:
                    return None, pos
                raise _FieldError("null in an array that is not nullable")
            check_length(buf, pos, length)
            packer = _sequence_struct(fmt, length)
            return list(packer.unpack_from(buf, pos)), pos + packer.size

        return read_fixed_array

    read_element = _field_reader(element, False, flexible)

    def read_array(buf, pos):
        length, pos = read_length(buf, pos)
        if length < 0:
            if nullable:
                return None, pos
            raise _FieldError("null in an array that is not nullable")
        check_length(buf, pos, length)
        items = []
        append = items.append
        index = 0
        try:
            for index in range(length):  # noqa: B007 (read in the except clause)
                item, pos = read_element(buf, pos)
                append(item)
        except _DECODE_FAILURES as error:
            raise _as_field_error(error, f"[{index}]") from None
        return items, pos

    return read_array


def _nullable_struct_reader(read_struct: Reader) -> Reader:
    def read_nullable_struct(buf, pos):
        if buf[pos] >= 0x80:  # a negative int8 marker: null (KIP-893)
            return None, pos + 1
        return read_struct(buf, pos + 1)

    return read_nullable_struct


def _fixed_runs(struct_schema: StructSchema):
    """The struct's untagged fields in wire order, consecutive fixed-width primitives
    grouped: yields lists of fields (a run when longer than one)."""
    group: list[FieldSchema] = []
    for field in struct_schema.fields:
        if field.tag is not None:
            continue
        if isinstance(field.type, str) and field.type in _FIXED_FORMATS:
            group.append(field)
            continue
        if group:
            yield group
            group = []
        yield [field]
    if group:
        yield group


def _run_struct(fields: list[FieldSchema]) -> struct.Struct:
    return struct.Struct(">" + "".join(_FIXED_FORMATS[field.type] for field in fields))


def _run_reader(fields: list[FieldSchema]) -> Reader:
    packer = _run_struct(fields)
    unpack_from = packer.unpack_from
    size = packer.size
    ends = []
    end = 0
    for field in fields:
        end += struct.calcsize(">" + _FIXED_FORMATS[field.type])
        ends.append((end, field.name))

    def read_run(buf, pos):
        try:
            return unpack_from(buf, pos), pos + size
        except struct.error:
            # Name the first field the frame ends in.
            available = len(buf) - pos
            name = next(name for end, name in ends if end > available)
            raise _FieldError("truncated (the frame ends inside this value)", name) from None

    return read_run


def _frozen_default_copier(default) -> Callable[[], object] | None:
    """A function that returns a fresh mutable copy of a frozen default (None when the
    default is immutable and can be shared). Compiled once: decoding a Fetch response
    fills three struct-valued tagged defaults per partition."""
    if isinstance(default, tuple | list):
        if not default:
            return list
        return lambda: _thaw(default)
    if isinstance(default, Mapping):
        copiers = [(key, value, _frozen_default_copier(value)) for key, value in default.items()]
        if all(copier is None for _, _, copier in copiers):
            return dict(default).copy
        return lambda: {
            key: value if copier is None else copier() for key, value, copier in copiers
        }
    return None


def _thaw(value):
    if isinstance(value, tuple | list):
        return [_thaw(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    return value


def _struct_reader(struct_schema: StructSchema, flexible: bool) -> Reader:
    # steps: (name, reader) for a field, (names, reader) for a run of fixed-width fields.
    steps: list[tuple[str | tuple[str, ...], Reader]] = []
    for group in _fixed_runs(struct_schema):
        if len(group) > 1:
            steps.append((tuple(field.name for field in group), _run_reader(group)))
        else:
            (field,) = group
            steps.append((field.name, _field_reader(field.type, field.nullable, flexible)))
    tagged = {
        field.tag: (field.name, _field_reader(field.type, field.nullable, flexible))
        for field in struct_schema.fields
        if field.tag is not None
    }
    tagged_defaults = [
        (field.name, field.default, _frozen_default_copier(field.default))
        for field in struct_schema.fields
        if field.tag is not None
    ]
    if tagged and not flexible:
        raise AssertionError(f"{struct_schema.name}: tagged fields in a non-flexible version")

    def read_tagged_fields(buf, pos, out):
        for name, default, copy_default in tagged_defaults:
            out[name] = default if copy_default is None else copy_default()
        count, pos = _read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = _read_uvarint(buf, pos)
            size, pos = _read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise _FieldError(
                    f"tagged field {tag}: {size} bytes but only {len(buf) - pos} left"
                )
            entry = tagged.get(tag)
            if entry is None:  # a tag from a newer version: skip it (KIP-482)
                pos = end
                continue
            name, read_value = entry
            try:
                value, value_end = read_value(buf, pos)
            except _DECODE_FAILURES as error:
                raise _as_field_error(error, name) from None
            if value_end != end:
                raise _FieldError(
                    f"tagged field {tag} is {size} bytes but its value took {value_end - pos}",
                    name,
                )
            out[name] = value
            pos = end
        return pos

    def read_struct(buf, pos):
        out = {}
        key = None
        try:
            for key, read_value in steps:
                value, pos = read_value(buf, pos)
                if key.__class__ is str:
                    out[key] = value
                else:
                    out.update(zip(key, value, strict=True))
            if flexible:
                key = None
                pos = read_tagged_fields(buf, pos, out)
        except _DECODE_FAILURES as error:
            if key.__class__ is str:
                raise _as_field_error(error, key) from None
            if isinstance(error, _FieldError):
                raise
            raise _FieldError(_reason(error)) from None
        return out, pos

    return read_struct


# ------------------------------------------------------------------------------ writers


def _field_writer(field_type, nullable: bool, flexible: bool) -> Writer:
    if isinstance(field_type, StructSchema):
        write_struct = _struct_writer(field_type, flexible)
        return _nullable_struct_writer(write_struct) if nullable else write_struct
    if isinstance(field_type, ArraySchema):
        return _array_writer(field_type, nullable, flexible)
    return _primitive_writer(field_type, nullable, flexible)


def _primitive_writer(kafka_type: str, nullable: bool, flexible: bool) -> Writer:
    if kafka_type == "bool":
        return _write_bool
    fmt = _FIXED_FORMATS.get(kafka_type)
    if fmt is not None:
        return _fixed_writer(struct.Struct(">" + fmt), kafka_type)
    if kafka_type == "uuid":
        return _write_uuid
    if kafka_type == "string":
        return _string_writer(flexible, nullable)
    if kafka_type in ("bytes", "records"):
        return _bytes_writer(flexible, nullable, kafka_type)
    raise AssertionError(kafka_type)


def _write_bool(value, parts):
    if value is True:
        parts.append(b"\x01")
    elif value is False:
        parts.append(b"\x00")
    else:
        raise _bad_value(value, "bool")


def _fixed_writer(packer: struct.Struct, kafka_type: str) -> Writer:
    pack = packer.pack

    def write_fixed(value, parts):
        try:
            parts.append(pack(value))
        except struct.error:
            raise _bad_value(value, kafka_type) from None

    return write_fixed


def _write_uuid(value, parts):
    if value.__class__ is not _UUID and not isinstance(value, _UUID):
        raise _bad_value(value, "uuid")
    parts.append(value.bytes)


def _string_writer(compact: bool, nullable: bool) -> Writer:
    def write_string(value, parts):
        if value is None:
            if not nullable:
                raise _bad_value(value, "string")
            parts.append(_NULL_COMPACT if compact else _NULL_LEGACY_STRING)
            return
        if not isinstance(value, str):
            raise _bad_value(value, "string")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise _FieldError(f"not encodable as UTF-8 ({error.reason})") from None
        if compact:
            parts.append(_uvarint(len(data) + 1) + data)
        else:
            if len(data) > _MAX_INT16:
                raise _FieldError(
                    f"{len(data)} bytes of UTF-8 is too long for a string ({_MAX_INT16} max)"
                )
            parts.append(_I16.pack(len(data)) + data)

    return write_string


# The request header's client_id (see _write_client_id).
_write_legacy_nullable_string = _string_writer(compact=False, nullable=True)


def _byte_parts(value, kafka_type: str):
    """A bytes-like value as a part to join (a memoryview is made a flat byte view)."""
    cls = value.__class__
    if cls is bytes or cls is bytearray:
        return value
    if cls is memoryview:
        if not value.c_contiguous:
            return value.tobytes()
        if value.itemsize != 1 or value.ndim != 1:
            return value.cast("B")
        return value
    if isinstance(value, bytes | bytearray):
        return value
    raise _bad_value(value, kafka_type)


def _bytes_writer(compact: bool, nullable: bool, kafka_type: str) -> Writer:
    def write_bytes(value, parts):
        if value is None:
            if not nullable:
                raise _bad_value(value, kafka_type)
            parts.append(_NULL_COMPACT if compact else _NULL_LEGACY_BYTES)
            return
        data = _byte_parts(value, kafka_type)
        if compact:
            parts.append(_uvarint(len(data) + 1))
        else:
            if len(data) > _MAX_INT32:
                raise _FieldError(f"{len(data)} bytes is too long ({_MAX_INT32} max)")
            parts.append(_I32.pack(len(data)))
        parts.append(data)

    return write_bytes


def _array_writer(array: ArraySchema, nullable: bool, flexible: bool) -> Writer:
    element = array.element
    fmt = _FIXED_FORMATS.get(element) if isinstance(element, str) else None
    null = _NULL_COMPACT if flexible else _NULL_LEGACY_BYTES
    write_element = None if fmt is not None else _field_writer(element, False, flexible)
    element_name = element if isinstance(element, str) else element.name

    def write_array(value, parts):
        if value is None:
            if not nullable:
                raise _FieldError("None in an array that is not nullable")
            parts.append(null)
            return
        if value.__class__ is not list and value.__class__ is not tuple:
            raise _FieldError(f"expected a list of {element_name}, got {_type_name(value)}")
        length = len(value)
        parts.append(_uvarint(length + 1) if flexible else _I32.pack(length))
        if fmt is not None:
            if fmt == "?":
                for index, item in enumerate(value):
                    if item is not True and item is not False:
                        raise _FieldError(_bad_value(item, element).reason, f"[{index}]")
            try:
                parts.append(_sequence_struct(fmt, length).pack(*value))
            except struct.error:
                for index, item in enumerate(value):
                    try:
                        struct.pack(">" + fmt, item)
                    except struct.error:
                        raise _FieldError(_bad_value(item, element).reason, f"[{index}]") from None
                raise _FieldError(f"cannot encode as {element}: {value!r}") from None
            return
        index = 0
        try:
            for index, item in enumerate(value):  # noqa: B007 (read in the except clause)
                write_element(item, parts)
        except _ENCODE_FAILURES as error:
            raise _as_encode_error(error, f"[{index}]") from None

    return write_array


def _nullable_struct_writer(write_struct: Writer) -> Writer:
    def write_nullable_struct(value, parts):
        if value is None:
            parts.append(_NULL_STRUCT)
            return
        parts.append(_PRESENT_STRUCT)
        write_struct(value, parts)

    return write_nullable_struct


def _run_writer(fields: list[FieldSchema]) -> Writer:
    pack = _run_struct(fields).pack
    bool_positions = [index for index, field in enumerate(fields) if field.type == "bool"]

    def write_run(values, parts):
        for index in bool_positions:
            value = values[index]
            if value is not True and value is not False:
                raise _FieldError(_bad_value(value, "bool").reason, fields[index].name)
        try:
            parts.append(pack(*values))
        except struct.error:
            for field, value in zip(fields, values, strict=True):
                try:
                    struct.pack(">" + _FIXED_FORMATS[field.type], value)
                except struct.error:
                    raise _FieldError(_bad_value(value, field.type).reason, field.name) from None
            raise

    return write_run


def _struct_writer(struct_schema: StructSchema, flexible: bool) -> Writer:
    # steps: (name, default, writer) for a field; (names, defaults, writer) for a run of
    # fixed-width fields, whose writer takes the list of their values.
    steps: list[tuple] = []
    for group in _fixed_runs(struct_schema):
        if len(group) > 1:
            steps.append(
                (
                    tuple(field.name for field in group),
                    tuple(field.default for field in group),
                    _run_writer(group),
                )
            )
        else:
            (field,) = group
            steps.append(
                (field.name, field.default, _field_writer(field.type, field.nullable, flexible))
            )
    # Tagged fields go out in ascending tag order (KIP-482), each skipped when it holds
    # its default; the comparison is against a thawed copy so a list equals a default tuple.
    tagged = [
        (
            _uvarint(field.tag),
            field.name,
            _thaw(field.default),
            _field_writer(field.type, field.nullable, flexible),
        )
        for field in sorted(
            (field for field in struct_schema.fields if field.tag is not None),
            key=lambda field: field.tag,
        )
    ]
    struct_name = struct_schema.name

    def write_tagged_fields(get, parts):
        if not tagged:
            parts.append(_NO_TAGGED_FIELDS)
            return
        count = 0
        tagged_parts: list = []
        for tag_bytes, name, default, write_value in tagged:
            value = get(name, _MISSING)
            if value is _MISSING or value == default:
                continue
            value_parts: list = []
            try:
                write_value(value, value_parts)
            except _ENCODE_FAILURES as error:
                raise _as_encode_error(error, name) from None
            size = 0
            for part in value_parts:
                size += len(part)
            tagged_parts.append(tag_bytes)
            tagged_parts.append(_uvarint(size))
            tagged_parts.extend(value_parts)
            count += 1
        parts.append(_uvarint(count))
        parts.extend(tagged_parts)

    def write_struct(value, parts):
        if value.__class__ is not dict and not isinstance(value, Mapping):
            raise _FieldError(f"expected a dict for {struct_name}, got {_type_name(value)}")
        get = value.get
        key = None
        try:
            for key, default, write_value in steps:
                if key.__class__ is str:
                    write_value(get(key, default), parts)
                else:
                    write_value([get(name, d) for name, d in zip(key, default, strict=True)], parts)
            if flexible:
                key = None
                write_tagged_fields(get, parts)
        except _ENCODE_FAILURES as error:
            if key.__class__ is str:
                raise _as_encode_error(error, key) from None
            if isinstance(error, _FieldError):
                raise
            raise _as_encode_error(error) from None

    return write_struct
