"""The consumer protocol's bytes: what a member of a consumer group puts in JoinGroup's
protocol metadata (its `Subscription`) and what the leader puts in SyncGroup for each
member (its `Assignment`), as Kafka's ConsumerProtocol writes them.

Each is a 2-byte big-endian version followed by Kafka's ConsumerProtocolSubscription /
ConsumerProtocolAssignment struct of that version (`clients/src/main/resources/common/
message/ConsumerProtocol*.json`, versions 0-3, never flexible):

- subscription v0: topics, user_data; v1 adds owned_partitions; v2 generation_id; v3 rack_id;
- assignment v0-3: assigned_partitions, user_data (v1-3 only exist to track the
  subscription's versions).

Decoding follows ConsumerProtocol.deserialize*: a version above 3 is read as v3 (a newer
member's extra fields come after the ones we know, and are ignored), bytes after the struct
are ignored, a negative version is an error. These bytes come from other members of the
group, so anything malformed raises `ConsumerProtocolError` naming the field, never an
IndexError or a struct.error.
"""

from __future__ import annotations

import struct

from kcore.client.assignors import DEFAULT_GENERATION, Assignment, Subscription
from kcore.common import TopicPartition
from kcore.protocol.kafka.data import decode_data, encode_data
from kcore.protocol.kafka.schema import KafkaCodecError

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "HIGHEST_VERSION",
    "LOWEST_VERSION",
    "ConsumerProtocolError",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

# JoinGroup's protocol_type for consumer groups (ConsumerProtocol.PROTOCOL_TYPE).
CONSUMER_PROTOCOL_TYPE = "consumer"
LOWEST_VERSION = 0
HIGHEST_VERSION = 3

_SUBSCRIPTION = "consumer_protocol_subscription"
_ASSIGNMENT = "consumer_protocol_assignment"
_VERSION = struct.Struct(">h")


class ConsumerProtocolError(KafkaCodecError):
    """Bytes that are not a consumer protocol subscription or assignment (Kafka's
    SchemaException), or a version we cannot write."""


def encode_subscription(subscription: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    """The JoinGroup protocol metadata for `subscription`. Topics and owned partitions are
    written sorted, as Kafka does; fields the version lacks are left out."""
    _check_encode_version(version, "subscription")
    owned = sorted(subscription.owned_partitions)
    owned_by_topic: list[dict] = []
    for tp in owned:
        if not owned_by_topic or owned_by_topic[-1]["topic"] != tp.topic:
            owned_by_topic.append({"topic": tp.topic, "partitions": []})
        owned_by_topic[-1]["partitions"].append(tp.partition)
    body = {
        "topics": sorted(subscription.topics),
        "user_data": subscription.user_data,
        "owned_partitions": owned_by_topic,
        "generation_id": subscription.generation_id
        if subscription.generation is not None
        else DEFAULT_GENERATION,
        "rack_id": subscription.rack_id,
    }
    return _VERSION.pack(version) + _encode(_SUBSCRIPTION, version, body, "subscription")


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """A member's subscription from JoinGroup protocol metadata. An empty rack id reads as
    None, a missing or negative generation as DEFAULT_GENERATION."""
    _, body = _decode(_SUBSCRIPTION, data, "subscription")
    owned = [
        TopicPartition(entry["topic"], partition)
        for entry in body.get("owned_partitions", ())
        for partition in entry["partitions"]
    ]
    generation = body.get("generation_id", DEFAULT_GENERATION)
    return Subscription(
        topics=body["topics"],
        user_data=body["user_data"],
        owned_partitions=owned,
        generation_id=generation if generation >= 0 else DEFAULT_GENERATION,
        rack_id=body.get("rack_id") or None,
    )


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    """The SyncGroup assignment bytes for one member: partitions grouped by topic in the
    order each topic first appears, as Kafka's serializeAssignment groups them."""
    _check_encode_version(version, "assignment")
    by_topic: dict[str, list[int]] = {}
    for tp in assignment.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = {
        "assigned_partitions": [
            {"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()
        ],
        "user_data": assignment.user_data,
    }
    return _VERSION.pack(version) + _encode(_ASSIGNMENT, version, body, "assignment")


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """A member's assignment from SyncGroup's assignment bytes."""
    _, body = _decode(_ASSIGNMENT, data, "assignment")
    partitions = [
        TopicPartition(entry["topic"], partition)
        for entry in body["assigned_partitions"]
        for partition in entry["partitions"]
    ]
    return Assignment(partitions, body["user_data"])


def _check_encode_version(version: int, what: str) -> None:
    if not LOWEST_VERSION <= version <= HIGHEST_VERSION:
        raise ConsumerProtocolError(
            f"cannot write consumer protocol {what} version {version} "
            f"(versions {LOWEST_VERSION}-{HIGHEST_VERSION})"
        )


def _encode(name: str, version: int, body: dict, what: str) -> bytes:
    try:
        return encode_data(name, version, body)
    except KafkaCodecError as error:
        raise ConsumerProtocolError(f"consumer protocol {what}: {error}") from None


def _decode(name: str, data: bytes | bytearray | memoryview, what: str) -> tuple[int, dict]:
    view = memoryview(data).cast("B")
    if view.nbytes < _VERSION.size:
        raise ConsumerProtocolError(
            f"consumer protocol {what}: {view.nbytes} bytes, too short for the 2-byte version"
        )
    (version,) = _VERSION.unpack_from(view, 0)
    if version < LOWEST_VERSION:
        raise ConsumerProtocolError(f"consumer protocol {what}: unsupported version {version}")
    # A newer version starts with the fields of ours: read those, ignore the rest.
    readable = min(version, HIGHEST_VERSION)
    try:
        body, _ = decode_data(name, readable, view[_VERSION.size :], allow_trailing=True)
    except KafkaCodecError as error:
        raise ConsumerProtocolError(
            f"consumer protocol {what} (version {version}): {error}"
        ) from None
    return version, body
