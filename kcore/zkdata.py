"""Kafka's ZooKeeper layout: every path it uses and the JSON it stores there, byte for byte as
Kafka 3.5 writes it (`kafka.zk.ZkData`), so a user with a ZooKeeper shell sees what they
would see under Kafka. Pure: encoders take what they stamp (timestamps) as arguments.

Data read back from ZooKeeper is a trust boundary: decoders raise ZkDataError naming the
path and the content instead of failing somewhere later.
"""

from __future__ import annotations

import json
import string
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from kcore.common import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQUENCE_ID = "/brokers/seqid"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
CONSUMERS = "/consumers"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# ACLs (Kafka's ZkAclStore / ZkAclChangeStore; kcore.security.acl reads and writes them):
# literal patterns under /kafka-acl/<ResourceType>/<name>, the others under
# /kafka-acl-extended/<pattern type>/..., and a change notification for each.
KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_EXTENDED = "/kafka-acl-extended"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
PRODUCER_ID_BLOCK_SIZE = 1000

# /controller_epoch as the first controller creates it, and that znode's first version.
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0

# What a broker creates at start-up (KafkaZkClient.createTopLevelPaths), in Kafka's order.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{config_type}" for config_type in CONFIG_TYPES),
)


class ZkDataError(ValueError):
    """A znode holds something that is not what Kafka writes there."""

    def __init__(self, path: str, data: bytes | None, reason: str) -> None:
        shown = data[:200] if data is not None else None
        super().__init__(f"bad data at {path}: {reason}: {shown!r}")
        self.path = path


def _encode(value: Mapping[str, Any]) -> bytes:
    # Jackson's compact form, which Kafka's Json.encodeAsBytes produces.
    return json.dumps(value, separators=(",", ":")).encode()


def _decode(path: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise ZkDataError(path, data, "no data")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ZkDataError(path, data, f"not JSON ({error})") from None
    if not isinstance(value, dict):
        raise ZkDataError(path, data, "not a JSON object")
    return value


def _field(path: str, data: bytes | None, obj: Mapping[str, Any], key: str, kind: type) -> Any:
    value = obj.get(key)
    if kind is int and isinstance(value, bool):
        value = None  # JSON true is not a number
    if not isinstance(value, kind):
        raise ZkDataError(path, data, f"field {key!r} is missing or not a {kind.__name__}")
    return value


def _int_list(path: str, data: bytes | None, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZkDataError(path, data, f"{what} is not a list of broker ids")
    return tuple(value)


# /controller and /controller_epoch


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _encode({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> int:
    return _field(CONTROLLER, data, _decode(CONTROLLER, data), "brokerid", int)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError):
        raise ZkDataError(CONTROLLER_EPOCH, data, "not an integer") from None


# /brokers/ids/N


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def encode_broker(broker: Broker, timestamp_ms: int, jmx_port: int = -1) -> bytes:
    """Version 5 of the registration (Kafka >= 2.7): top-level host/port of the first
    PLAINTEXT endpoint for old clients, every endpoint, the listener -> protocol map."""
    plaintext = next((e for e in broker.endpoints if e.security_protocol == "PLAINTEXT"), None)
    registration: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {
            e.listener_name: e.security_protocol for e in broker.endpoints
        },
        "endpoints": [e.connection_string for e in broker.endpoints],
        "jmx_port": jmx_port,
        "port": plaintext.port if plaintext else -1,
        "host": plaintext.host if plaintext else None,
        "version": 5,
        "timestamp": str(timestamp_ms),
    }
    if broker.rack is not None:
        registration["rack"] = broker.rack
    return _encode(registration)


def decode_broker(broker_id: int, data: bytes | None, czxid: int = -1) -> Broker:
    """The registration of broker `broker_id`; `czxid` (the znode's) is its broker epoch."""
    path = broker_path(broker_id)
    obj = _decode(path, data)
    version = _field(path, data, obj, "version", int)
    if version < 1:
        raise ZkDataError(path, data, f"unsupported registration version {version}")
    if version == 1:
        endpoints = (EndPoint(_field(path, data, obj, "host", str), obj.get("port", -1)),)
    else:
        protocol_map = obj.get("listener_security_protocol_map") or {}
        listeners = obj.get("endpoints")
        if not isinstance(listeners, list):
            raise ZkDataError(path, data, "field 'endpoints' is not a list")
        try:
            endpoints = tuple(EndPoint.parse(text, protocol_map) for text in listeners)
        except ValueError as error:
            raise ZkDataError(path, data, str(error)) from None
    return Broker(broker_id, endpoints, obj.get("rack"), czxid)


# /brokers/topics/T and its partitions


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{partitions_path(tp.topic)}/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def encode_topic(topic_id: str | None, assignment: Mapping[int, ReplicaAssignment]) -> bytes:
    ordered = sorted(assignment.items())
    value: dict[str, Any] = {
        "partitions": {str(p): list(a.replicas) for p, a in ordered},
        "adding_replicas": {
            str(p): list(a.adding_replicas) for p, a in ordered if a.adding_replicas
        },
        "removing_replicas": {
            str(p): list(a.removing_replicas) for p, a in ordered if a.removing_replicas
        },
        "version": 3,
    }
    if topic_id is not None:
        value["topic_id"] = topic_id
    return _encode(value)


def decode_topic(topic: str, data: bytes | None) -> tuple[str | None, dict[int, ReplicaAssignment]]:
    """(topic id, partition -> assignment)."""
    path = topic_path(topic)
    obj = _decode(path, data)
    partitions = obj.get("partitions") or {}
    adding = obj.get("adding_replicas") or {}
    removing = obj.get("removing_replicas") or {}
    if not all(isinstance(x, dict) for x in (partitions, adding, removing)):
        raise ZkDataError(path, data, "partitions are not JSON objects")
    assignment = {}
    for key, replicas in partitions.items():
        if not key.isdigit():
            raise ZkDataError(path, data, f"partition {key!r} is not a number")
        assignment[int(key)] = ReplicaAssignment(
            _int_list(path, data, replicas, f"partition {key}"),
            _int_list(path, data, adding.get(key, []), f"adding replicas of {key}"),
            _int_list(path, data, removing.get(key, []), f"removing replicas of {key}"),
        )
    topic_id = obj.get("topic_id")
    return (topic_id if isinstance(topic_id, str) else None), dict(sorted(assignment.items()))


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    leader_and_isr = state.leader_and_isr
    return _encode(
        {
            "controller_epoch": state.controller_epoch,
            "leader": leader_and_isr.leader,
            "version": 1,
            "leader_epoch": leader_and_isr.leader_epoch,
            "isr": list(leader_and_isr.isr),
        }
    )


def decode_partition_state(
    tp: TopicPartition, data: bytes | None, znode_version: int
) -> LeaderIsrAndControllerEpoch:
    """The state znode's version becomes the partition epoch every later write is fenced on."""
    # The usual case checked in one expression (a controller decodes 10 000 of these in an
    # election; the checked path below built the error's path name for each): exact types
    # only, so that JSON true, floats and anything malformed take the checked path.
    try:
        obj = json.loads(data)  # type: ignore[arg-type]
        leader, epoch, isr = obj["leader"], obj["leader_epoch"], obj["isr"]
        controller_epoch = obj["controller_epoch"]
    except Exception:  # the checked path below names what is wrong
        pass
    else:
        if (
            type(leader) is int
            and type(epoch) is int
            and type(controller_epoch) is int
            and type(isr) is list
            and all(type(broker) is int for broker in isr)
        ):
            return LeaderIsrAndControllerEpoch(
                LeaderAndIsr(leader, epoch, tuple(isr), znode_version), controller_epoch
            )
    path = partition_state_path(tp)
    obj = _decode(path, data)
    leader_and_isr = LeaderAndIsr(
        leader=_field(path, data, obj, "leader", int),
        leader_epoch=_field(path, data, obj, "leader_epoch", int),
        isr=_int_list(path, data, obj.get("isr"), "isr"),
        partition_epoch=znode_version,
    )
    return LeaderIsrAndControllerEpoch(
        leader_and_isr, _field(path, data, obj, "controller_epoch", int)
    )


# /admin


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _encode_partitions(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]


def _decode_partitions(path: str, data: bytes | None) -> set[TopicPartition]:
    obj = _decode(path, data)
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise ZkDataError(path, data, "field 'partitions' is not a list")
    result = set()
    for entry in entries:
        if not isinstance(entry, dict):
            raise ZkDataError(path, data, "a partition entry is not an object")
        result.add(
            TopicPartition(
                _field(path, data, entry, "topic", str),
                _field(path, data, entry, "partition", int),
            )
        )
    return result


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode({"version": 1, "partitions": _encode_partitions(partitions)})


def decode_preferred_replica_election(data: bytes | None) -> set[TopicPartition]:
    return _decode_partitions(PREFERRED_REPLICA_ELECTION, data)


def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return _encode({"version": 1, "partitions": partitions})


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    path = REASSIGN_PARTITIONS
    obj = _decode(path, data)
    entries = obj.get("partitions")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ZkDataError(path, data, "field 'partitions' is not a list of objects")
    return {
        TopicPartition(
            _field(path, data, e, "topic", str), _field(path, data, e, "partition", int)
        ): _int_list(path, data, e.get("replicas"), "replicas")
        for e in entries
    }


# /isr_change_notification


def isr_change_path(sequence_name: str = "") -> str:
    """`/isr_change_notification/isr_change_` to create (sequential); with a child name, its
    path."""
    if sequence_name.startswith(ISR_CHANGE_PREFIX):
        return f"{ISR_CHANGE_NOTIFICATION}/{sequence_name}"
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}{sequence_name}"


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode({"version": 1, "partitions": _encode_partitions(partitions)})


def decode_isr_change(data: bytes | None) -> set[TopicPartition]:
    return _decode_partitions(ISR_CHANGE_NOTIFICATION, data)


# /config


def config_path(entity_type: str, entity_name: str) -> str:
    if entity_type not in CONFIG_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    return f"{CONFIG}/{entity_type}/{entity_name}"


def encode_config(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(config)})


def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    if data is None:
        return {}
    config = _decode(path, data).get("config") or {}
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise ZkDataError(path, data, "field 'config' is not an object of strings")
    return config


def encode_config_change(entity_path: str) -> bytes:
    return _encode({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None) -> str:
    return _field(CONFIG_CHANGES, data, _decode(CONFIG_CHANGES, data), "entity_path", str)


# /cluster/id and /latest_producer_id_block


def encode_cluster_id(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _field(CLUSTER_ID, data, _decode(CLUSTER_ID, data), "id", str)


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    return _encode(
        {
            "version": 1,
            "broker": broker_id,
            "block_start": str(block_start),
            "block_end": str(block_end),
        }
    )


def decode_producer_id_block(data: bytes | None) -> tuple[int, int, int] | None:
    """(broker, block_start, block_end), or None when no block was ever handed out."""
    if not data:
        return None
    path = PRODUCER_ID_BLOCK
    obj = _decode(path, data)
    try:
        return (
            _field(path, data, obj, "broker", int),
            int(_field(path, data, obj, "block_start", str)),
            int(_field(path, data, obj, "block_end", str)),
        )
    except ValueError:
        raise ZkDataError(path, data, "block bounds are not integers") from None


# Kafka's Sanitizer: java.net.URLEncoder's unreserved characters stay, every other one is
# %-encoded (UTF-8), '*' and ' ' included.
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "._-")


def sanitized_entity_name(name: str) -> str:
    """A user's (or client id's) name as its znode under /config is named (Kafka's
    Sanitizer.sanitize): `alice` stays, `User:CN=a b` is `User%3ACN%3Da%20b`."""
    return "".join(
        char if char in _UNRESERVED else "".join(f"%{byte:02X}" for byte in char.encode())
        for char in name
    )


def desanitized_entity_name(name: str) -> str:
    """The name a znode under /config stands for (Kafka's Sanitizer.desanitize)."""
    return urllib.parse.unquote_plus(name)
