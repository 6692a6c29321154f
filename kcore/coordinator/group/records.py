"""The `__consumer_offsets` record keys and values, byte for byte as Kafka 3.5 writes them.

Each key and value is a 2-byte big-endian version followed by the struct of that version
from Kafka's `group-coordinator/src/main/resources/common/message/`:

- key version 0 or 1: OffsetCommitKey (group, topic, partition), a committed offset;
- key version 2: GroupMetadataKey (group), a group's metadata;
- OffsetCommitValue v0-4: offset, leader_epoch (v3+), metadata, commit_timestamp,
  expire_timestamp (v1 only);
- GroupMetadataValue v0-4: protocol_type, generation, protocol, leader,
  current_state_timestamp (v2+), members (group_instance_id v3+, rebalance_timeout v1+).

Versions 0-3 are not flexible; v4 (KIP-915) is flexible (compact lengths, tagged fields),
which Kafka 3.5 reads but does not write. A record with a null value is a tombstone:
`decode_*_value(None)` is None.

What is written follows GroupMetadataManager.scala at 3.5.0 (with the current
inter-broker protocol): keys at their highest version (offset key v1, group key v2), offset
values at v1 when they carry an expire timestamp (a v1 OffsetCommit's retention) and at v3
otherwise, group values at v3.

The value classes are `kcore.coordinator.group.stored`'s, whose field names are the
snake_case of these schemas. The structs go through the Kafka codec
(`kcore.protocol.kafka.data.encode_struct`), so a malformed record is a `RecordError`
naming the field.
"""

from __future__ import annotations

import struct

import attrs

from kcore.coordinator.group.stored import (
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitValue,
)
from kcore.protocol.kafka.data import decode_struct, encode_struct
from kcore.protocol.kafka.schema import ArraySchema, FieldSchema, KafkaCodecError, StructSchema

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitValue",
    "OffsetKey",
    "RecordError",
    "UnknownKey",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_value",
    "encode_key",
    "encode_offset_value",
    "offset_value_version",
]

# The versions Kafka 3.5 writes.
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
_OFFSET_VALUE_VERSION_WITH_EXPIRE = 1
_OFFSET_VALUE_VERSION = 3

_FIRST_FLEXIBLE_VERSION = 4
_HIGHEST_VALUE_VERSION = 4
_NO_TIMESTAMP = -1  # OffsetCommitRequest.DEFAULT_TIMESTAMP, and the schemas' defaults
_NO_LEADER_EPOCH = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH

_VERSION = struct.Struct(">h")


class RecordError(KafkaCodecError):
    """Bytes that are not a `__consumer_offsets` key or value of a known version, or a
    value that cannot be written as one."""


@attrs.frozen
class OffsetKey:
    """The key of a committed offset (key version 0 or 1; both have the same fields)."""

    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@attrs.frozen
class GroupMetadataKey:
    """The key of a group's metadata record."""

    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@attrs.frozen
class UnknownKey:
    """A key of a version neither kind has (Kafka's UnknownKey): a newer broker's record,
    which a loader skips."""

    version: int


# --------------------------------------------------------------------------- schemas


def _field(name: str, kafka_type, default, *, nullable: bool = False) -> FieldSchema:
    return FieldSchema(name=name, type=kafka_type, nullable=nullable, tag=None, default=default)


_OFFSET_KEY = StructSchema(
    "OffsetCommitKey",
    (_field("group", "string", ""), _field("topic", "string", ""), _field("partition", "int32", 0)),
)
_GROUP_KEY = StructSchema("GroupMetadataKey", (_field("group", "string", ""),))


def _offset_value_schema(version: int) -> StructSchema:
    fields = [_field("offset", "int64", 0)]
    if version >= 3:
        fields.append(_field("leader_epoch", "int32", _NO_LEADER_EPOCH))
    fields += [_field("metadata", "string", ""), _field("commit_timestamp", "int64", 0)]
    if version == 1:
        fields.append(_field("expire_timestamp", "int64", _NO_TIMESTAMP))
    return StructSchema("OffsetCommitValue", tuple(fields))


def _group_value_schema(version: int) -> StructSchema:
    member_fields = [_field("member_id", "string", "")]
    if version >= 3:
        member_fields.append(_field("group_instance_id", "string", None, nullable=True))
    member_fields += [_field("client_id", "string", ""), _field("client_host", "string", "")]
    if version >= 1:
        member_fields.append(_field("rebalance_timeout", "int32", 0))
    member_fields += [
        _field("session_timeout", "int32", 0),
        _field("subscription", "bytes", b""),
        _field("assignment", "bytes", b""),
    ]
    fields = [
        _field("protocol_type", "string", ""),
        _field("generation", "int32", 0),
        _field("protocol", "string", None, nullable=True),
        _field("leader", "string", None, nullable=True),
    ]
    if version >= 2:
        fields.append(_field("current_state_timestamp", "int64", _NO_TIMESTAMP))
    fields.append(
        _field("members", ArraySchema(StructSchema("MemberMetadata", tuple(member_fields))), ())
    )
    return StructSchema("GroupMetadataValue", tuple(fields))


_OFFSET_VALUES = {version: _offset_value_schema(version) for version in range(5)}
_GROUP_VALUES = {version: _group_value_schema(version) for version in range(5)}


# ------------------------------------------------------------------------------ keys


def encode_key(key: OffsetKey | GroupMetadataKey) -> bytes:
    """The record key, at the key's version (by default the one Kafka 3.5 writes)."""
    if isinstance(key, OffsetKey):
        if key.version not in (0, 1):
            raise RecordError(f"offset commit keys have versions 0-1, not {key.version}")
        body = {"group": key.group, "topic": key.topic, "partition": key.partition}
        return _VERSION.pack(key.version) + _encode(_OFFSET_KEY, body, flexible=False)
    if isinstance(key, GroupMetadataKey):
        if key.version != GROUP_METADATA_KEY_VERSION:
            raise RecordError(f"group metadata keys have version 2 only, not {key.version}")
        return _VERSION.pack(key.version) + _encode(
            _GROUP_KEY, {"group": key.group}, flexible=False
        )
    raise TypeError(f"not a __consumer_offsets key: {key!r}")


def decode_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupMetadataKey | UnknownKey:
    """A record key: an OffsetKey (versions 0-1), a GroupMetadataKey (version 2), or an
    UnknownKey for any other version."""
    version, body = _split_version(data, "key")
    if version in (0, 1):
        fields = _decode(_OFFSET_KEY, body, flexible=False, what=f"offset commit key v{version}")
        return OffsetKey(fields["group"], fields["topic"], fields["partition"], version)
    if version == GROUP_METADATA_KEY_VERSION:
        fields = _decode(_GROUP_KEY, body, flexible=False, what=f"group metadata key v{version}")
        return GroupMetadataKey(fields["group"], version)
    return UnknownKey(version)


# ---------------------------------------------------------------------------- values


def offset_value_version(value: OffsetCommitValue) -> int:
    """The version Kafka 3.5 writes `value` at: v1 when it has an expire timestamp (the
    only version with that field), else v3."""
    if value.expire_timestamp != _NO_TIMESTAMP:
        return _OFFSET_VALUE_VERSION_WITH_EXPIRE
    return _OFFSET_VALUE_VERSION


def encode_offset_value(
    value: OffsetCommitValue | None, version: int | None = None
) -> bytes | None:
    """A committed offset's record value (None for a tombstone). `version` defaults to
    `offset_value_version(value)`; fields the version lacks are left out."""
    if value is None:
        return None
    if version is None:
        version = offset_value_version(value)
    schema = _value_schema(_OFFSET_VALUES, version, "offset commit value")
    body = {
        "offset": value.offset,
        "leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp,
        "expire_timestamp": value.expire_timestamp,
    }
    return _VERSION.pack(version) + _encode(
        schema, body, flexible=version >= _FIRST_FLEXIBLE_VERSION
    )


def decode_offset_value(data: bytes | bytearray | memoryview | None) -> OffsetCommitValue | None:
    """A committed offset from its record value, any version 0-4 (None for a tombstone).
    Fields the version lacks are -1 (leader epoch, expire timestamp)."""
    if data is None:
        return None
    version, body = _split_version(data, "offset commit value")
    schema = _value_schema(_OFFSET_VALUES, version, "offset commit value")
    fields = _decode(
        schema,
        body,
        flexible=version >= _FIRST_FLEXIBLE_VERSION,
        what=f"offset commit value v{version}",
    )
    return OffsetCommitValue(
        offset=fields["offset"],
        leader_epoch=fields.get("leader_epoch", _NO_LEADER_EPOCH),
        metadata=fields["metadata"],
        commit_timestamp=fields["commit_timestamp"],
        expire_timestamp=fields.get("expire_timestamp", _NO_TIMESTAMP),
    )


def encode_group_value(
    value: GroupMetadataValue | None, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes | None:
    """A group's metadata record value (None for a tombstone), at v3 unless told."""
    if value is None:
        return None
    schema = _value_schema(_GROUP_VALUES, version, "group metadata value")
    body = {
        "protocol_type": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "current_state_timestamp": value.current_state_timestamp,
        "members": [attrs.asdict(member) for member in value.members],
    }
    return _VERSION.pack(version) + _encode(
        schema, body, flexible=version >= _FIRST_FLEXIBLE_VERSION
    )


def decode_group_value(data: bytes | bytearray | memoryview | None) -> GroupMetadataValue | None:
    """A group's metadata from its record value, any version 0-4 (None for a tombstone).

    As Kafka's readGroupMessageValue: a v0 member's rebalance timeout is its session
    timeout; a missing current state timestamp is -1, a missing instance id None."""
    if data is None:
        return None
    version, body = _split_version(data, "group metadata value")
    schema = _value_schema(_GROUP_VALUES, version, "group metadata value")
    fields = _decode(
        schema,
        body,
        flexible=version >= _FIRST_FLEXIBLE_VERSION,
        what=f"group metadata value v{version}",
    )
    members = tuple(
        MemberMetadataValue(
            member_id=member["member_id"],
            group_instance_id=member.get("group_instance_id"),
            client_id=member["client_id"],
            client_host=member["client_host"],
            rebalance_timeout=member.get("rebalance_timeout", member["session_timeout"]),
            session_timeout=member["session_timeout"],
            subscription=member["subscription"],
            assignment=member["assignment"],
        )
        for member in fields["members"]
    )
    return GroupMetadataValue(
        protocol_type=fields["protocol_type"],
        generation=fields["generation"],
        protocol=fields["protocol"],
        leader=fields["leader"],
        current_state_timestamp=fields.get("current_state_timestamp", _NO_TIMESTAMP),
        members=members,
    )


# --------------------------------------------------------------------------- helpers


def _value_schema(schemas: dict[int, StructSchema], version: int, what: str) -> StructSchema:
    schema = schemas.get(version)
    if schema is None:
        raise RecordError(f"unknown {what} version {version} (versions 0-{_HIGHEST_VALUE_VERSION})")
    return schema


def _split_version(data: bytes | bytearray | memoryview, what: str) -> tuple[int, memoryview]:
    view = memoryview(data).cast("B")
    if view.nbytes < _VERSION.size:
        raise RecordError(f"{what}: {view.nbytes} bytes, too short for the 2-byte version")
    (version,) = _VERSION.unpack_from(view, 0)
    return version, view[_VERSION.size :]


def _encode(schema: StructSchema, body: dict, *, flexible: bool) -> bytes:
    try:
        return encode_struct(schema, body, flexible=flexible)
    except KafkaCodecError as error:
        raise RecordError(str(error)) from None


def _decode(schema: StructSchema, body: memoryview, *, flexible: bool, what: str) -> dict:
    try:
        fields, _ = decode_struct(schema, body, flexible=flexible)
    except KafkaCodecError as error:
        # The codec names the struct and field; say which record version it was.
        raise RecordError(f"{what}: {error}") from None
    return fields
