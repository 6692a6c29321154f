"""What an operator asks of consumer groups (Kafka's Admin: listConsumerGroups,
describeConsumerGroups, listConsumerGroupOffsets, deleteConsumerGroups, and the log end
offsets a lag needs), over kcore's msgpack RPC: the group requests carry Kafka's request
bodies at a pinned version, answered by each group's coordinator."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from kcore import errors
from kcore.client.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
from kcore.common import TopicPartition
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

if TYPE_CHECKING:
    from kcore.client._connections import Address, Connections
    from kcore.client._metadata import MetadataManager


class _Session(Protocol):
    """An Admin call's connections and metadata (`admin._Session`)."""

    connections: Connections
    metadata: MetadataManager


class Admin(Protocol):
    """What these calls use of `kcore.client.Admin` (named here, not imported: the Admin
    imports this module)."""

    client_id: str
    request_timeout_ms: int
    retry_backoff_ms: int

    async def _broker_address(self, session: Any, node_id: int | None) -> Address: ...


log = logging.getLogger("kcore.client.admin")

LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_FETCH, DELETE_GROUPS = 16, 15, 9, 42
# The versions asked (their bodies below carry exactly those versions' fields).
_VERSIONS = {LIST_GROUPS: 4, DESCRIBE_GROUPS: 5, OFFSET_FETCH: 8, DELETE_GROUPS: 2}
# Answers that mean "ask again, perhaps elsewhere": the coordinator is moving or loading.
_COORDINATOR_MOVED = {
    14,  # COORDINATOR_LOAD_IN_PROGRESS
    errors.CoordinatorNotAvailableError.code,
    errors.NotCoordinatorError.code,
}
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1


@attrs.frozen
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@attrs.frozen
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]  # decoded for consumer groups, else empty


@attrs.frozen
class GroupDescription:
    group_id: str
    state: str  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol: str  # the assignor, for a consumer group
    members: tuple[MemberDescription, ...]
    coordinator: int


async def list_groups(admin: Admin, session: _Session) -> list[GroupListing]:
    """Every group of every coordinator: each broker lists the groups it coordinates."""
    cluster = await session.metadata.refresh(())
    listings: dict[str, GroupListing] = {}
    for node in sorted(cluster.brokers):
        address = cluster.address_of(node)
        assert address is not None
        body = await _ask(admin, session, address, LIST_GROUPS, {"states_filter": []})
        _raise_for(body["error_code"], f"ListGroups to broker {node}")
        for group in body["groups"]:
            listings[group["group_id"]] = GroupListing(
                group["group_id"], group["protocol_type"], group.get("group_state") or ""
            )
    return [listings[name] for name in sorted(listings)]


async def describe_group(admin: Admin, session: _Session, group_id: str) -> GroupDescription:
    body = {"groups": [group_id], "include_authorized_operations": False}
    answer, coordinator = await _to_coordinator(admin, session, group_id, DESCRIBE_GROUPS, body)
    (group,) = answer["groups"]
    _raise_for(group["error_code"], f"DescribeGroups of {group_id}")
    consumer = group["protocol_type"] == CONSUMER_PROTOCOL_TYPE
    members = []
    for member in group["members"]:
        assignment: tuple[TopicPartition, ...] = ()
        if consumer and member["member_assignment"]:
            assignment = tuple(sorted(decode_assignment(member["member_assignment"]).partitions))
        members.append(
            MemberDescription(
                member["member_id"], member.get("group_instance_id"), member["client_id"],
                member["client_host"], assignment,
            )
        )  # fmt: skip
    return GroupDescription(
        group_id, group["group_state"], group["protocol_type"], group["protocol_data"],
        tuple(members), coordinator,
    )  # fmt: skip


async def list_group_offsets(
    admin: Admin, session: _Session, group_id: str
) -> dict[TopicPartition, int]:
    """The group's committed offsets, every partition it committed for."""
    body = {"groups": [{"group_id": group_id, "topics": None}], "require_stable": False}
    answer, _ = await _to_coordinator(admin, session, group_id, OFFSET_FETCH, body)
    (group,) = answer["groups"]
    _raise_for(group["error_code"], f"OffsetFetch of {group_id}")
    offsets = {}
    for topic in group["topics"] or []:
        for partition in topic["partitions"]:
            _raise_for(partition["error_code"], f"OffsetFetch of {group_id}")
            if partition["committed_offset"] >= 0:
                offsets[TopicPartition(topic["name"], partition["partition_index"])] = partition[
                    "committed_offset"
                ]
    return dict(sorted(offsets.items()))


async def delete_groups(admin: Admin, session: _Session, group_ids: Iterable[str]) -> None:
    for group_id in group_ids:
        body = {"groups_names": [group_id]}
        answer, _ = await _to_coordinator(admin, session, group_id, DELETE_GROUPS, body)
        (result,) = answer["results"]
        _raise_for(result["error_code"], f"DeleteGroups of {group_id}")


async def end_offsets(
    admin: Admin, session: _Session, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """Each partition's log end offset (what a consumer could read next: the high
    watermark), from its leader."""
    wanted = sorted(set(partitions))
    answers: dict[TopicPartition, int] = {}
    while len(answers) < len(wanted):
        cluster = await session.metadata.refresh({tp.topic for tp in wanted})
        by_leader: dict[int, list[ListOffsetsPartition]] = {}
        for tp in wanted:
            leader = cluster.leader_for(tp)
            if tp not in answers and leader is not None:
                query = ListOffsetsPartition(tp.topic, tp.partition, LATEST_TIMESTAMP)
                by_leader.setdefault(leader, []).append(query)
        for leader, queries in sorted(by_leader.items()):
            address = cluster.address_of(leader)
            assert address is not None
            response = await session.connections.request(
                address, ApiKey.LIST_OFFSETS,
                ListOffsetsRequest(CONSUMER_REPLICA_ID, tuple(queries)), ListOffsetsResponse,
            )  # fmt: skip
            for answer in response.partitions:
                if answer.error_code == 0:
                    answers[TopicPartition(answer.topic, answer.partition)] = answer.offset
        if len(answers) < len(wanted):
            await trio.sleep(admin.retry_backoff_ms / 1000)
    return answers


async def _to_coordinator(
    admin: Admin, session: _Session, group_id: str, api_key: int, body: dict
) -> tuple[dict, int]:
    """`body` to the group's coordinator, found again while it moves or loads: the answer
    and the coordinator's id."""
    while True:
        address = await admin._broker_address(session, None)
        found = await session.connections.request_body(
            address, ApiKey.FIND_COORDINATOR, {"key": group_id}
        )
        if found["error_code"] in _COORDINATOR_MOVED:
            await trio.sleep(admin.retry_backoff_ms / 1000)
            continue
        _raise_for(found["error_code"], f"FindCoordinator of {group_id}")
        answer = await _ask(admin, session, (found["host"], found["port"]), api_key, body)
        codes = _error_codes(answer)
        if codes & _COORDINATOR_MOVED:
            log.info("%s: the coordinator of %s moved; asking again", admin.client_id, group_id)
            await trio.sleep(admin.retry_backoff_ms / 1000)
            continue
        return answer, found["node_id"]


async def _ask(admin: Admin, session: _Session, address: Any, api_key: int, body: dict) -> dict:
    return await session.connections.request_body(
        address, api_key, body, api_version=_VERSIONS[api_key],
        timeout=admin.request_timeout_ms / 1000,
    )  # fmt: skip


def _error_codes(answer: dict) -> set[int]:
    codes = {answer.get("error_code", 0)}
    for entry in answer.get("groups", []) + answer.get("results", []):
        codes.add(entry.get("error_code", 0))
    return codes


def _raise_for(code: int, what: str) -> None:
    if code:
        raise errors.error_for_code(code, f"{what}: {errors.ERROR_NAMES.get(code, code)}")
