"""The admin client: create / delete / describe topics, list topics, describe the cluster,
add partitions, elect leaders, reassign partitions, describe and alter configs, delete
records, describe and alter users' SCRAM credentials.

Topic creation and deletion, partition additions, leader elections, partition
reassignments and SCRAM credential alterations go to the controller (found in the
metadata); a broker that answers NOT_CONTROLLER makes the client refresh its metadata and
try the new controller.
`create_topic` and `create_partitions` return once every new partition has a leader, so it
can be produced to at once. A topic's configs are asked of any broker, a broker's of that
broker; records are deleted by each partition's leader.
Reference: Kafka's KafkaAdminClient.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

import actors
import transport
from kcore import errors
from kcore.client import group_admin
from kcore.client._config import (
    SECURITY_SETTINGS,
    check_int,
    check_no_unknown,
    parse_bootstrap,
    security_network,
    to_topic_partition,
)
from kcore.client._connections import Address, Connections
from kcore.client._metadata import BrokerInfo, Cluster, MetadataManager, PartitionInfo
from kcore.common import ElectionType, TopicPartition
from kcore.config import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AlterConfigOp,
    ConfigEntry,
    ConfigSourceCode,
    ConfigTypeCode,
)
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ConfigResource,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribedConfig,
    ElectionPartition,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListedPartition,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignablePartition,
    TopicResult,
)
from kcore.security import acl_admin, scram_admin
from kcore.security.acl import (
    ANY_ACL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
)
from kcore.security.scram_admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

__all__ = [
    "Admin",
    "ClusterDescription",
    "NewTopic",
    "PartitionReassignment",
    "ScramCredentialInfo",
    "TopicDescription",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]

log = logging.getLogger("kcore.client.admin")

_NOT_CONTROLLER = errors.NotControllerError.code
_REQUEST_TIMED_OUT = errors.RequestTimedOutError.code
_UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.code

# What each controller request is called (its response type names it).
_CONTROLLER_API_KEYS = {
    CreateTopicsResponse: ApiKey.CREATE_TOPICS,
    DeleteTopicsResponse: ApiKey.DELETE_TOPICS,
    CreatePartitionsResponse: ApiKey.CREATE_PARTITIONS,
}


@attrs.frozen
class NewTopic:
    """A topic to create: -1 partitions / replication factor mean the broker's defaults
    (`num.partitions`, `default.replication.factor`); `assignments` (partition -> broker
    ids) replaces both."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = attrs.field(factory=dict)
    assignments: Mapping[int, Sequence[int]] = attrs.field(factory=dict)


@attrs.frozen
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionInfo, ...]


@attrs.frozen
class PartitionReassignment:
    """A reassignment in progress (Kafka's PartitionReassignment): `replicas` is the full
    replica set while it runs, the target replicas first, then the original ones it still
    has; `adding_replicas` are joining, `removing_replicas` leave once it completes."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@attrs.frozen
class ClusterDescription:
    brokers: tuple[BrokerInfo, ...]
    controller_id: int
    cluster_id: str | None


class _Session:
    """What one admin call needs: connections and a metadata view."""

    def __init__(self, connections: Connections, metadata: MetadataManager) -> None:
        self.connections = connections
        self.metadata = metadata


_SETTINGS = ("client_id", "request_timeout_ms", "retry_backoff_ms")


class Admin:
    """An admin client. Use it as `async with Admin(...) as admin:` (one set of
    connections for every call), or call it directly: each call then opens and closes its
    own connections. `bootstrap`, `network` and `rng` as for the Producer (real TCP and a
    fresh random.Random when None)."""

    def __init__(
        self,
        bootstrap: Any,
        *,
        network: transport.Network | None = None,
        rng: random.Random | None = None,
        client_id: str = "admin",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        **unknown: Any,
    ) -> None:
        # Kafka's security.protocol and ssl.* settings: the network they describe.
        security = {k: unknown.pop(k) for k in SECURITY_SETTINGS if k in unknown}
        check_no_unknown("admin", unknown, _SETTINGS + SECURITY_SETTINGS)
        self.bootstrap = parse_bootstrap(bootstrap)
        self.request_timeout_ms = check_int("request_timeout_ms", request_timeout_ms, minimum=1)
        self.retry_backoff_ms = check_int("retry_backoff_ms", retry_backoff_ms, minimum=1)
        self.client_id = client_id
        self._network = security_network(network, **security)
        self._rng = rng if rng is not None else random.Random()
        self._stack: contextlib.AsyncExitStack | None = None
        self._session_open: _Session | None = None

    def __repr__(self) -> str:
        return f"<Admin {self.client_id}>"

    async def __aenter__(self) -> Admin:
        if self._stack is not None:
            raise RuntimeError("an Admin can be entered once at a time")
        stack = contextlib.AsyncExitStack()
        self._session_open = await stack.enter_async_context(self._open_session())
        self._stack = stack
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        stack, self._stack, self._session_open = self._stack, None, None
        assert stack is not None
        return await stack.__aexit__(exc_type, exc, tb)

    @contextlib.asynccontextmanager
    async def _open_session(self) -> AsyncIterator[_Session]:
        async with actors.open_background_nursery() as nursery:
            connections = Connections(
                self._network,
                client_id=self.client_id,
                rng=self._rng,
                nursery=nursery,
                request_timeout=self.request_timeout_ms / 1000,
                logger=log,
            )
            metadata = MetadataManager(
                connections,
                self.bootstrap,
                rng=self._rng,
                retry_backoff=self.retry_backoff_ms / 1000,
                request_timeout=self.request_timeout_ms / 1000,
                logger=log,
            )
            try:
                yield _Session(connections, metadata)
            finally:
                await connections.aclose()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[_Session]:
        if self._session_open is not None:
            yield self._session_open
            return
        async with self._open_session() as session:
            yield session

    # -- topics ------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        *,
        config: Mapping[str, str] | None = None,
        assignments: Mapping[int, Sequence[int]] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Creates a topic and waits (up to `timeout` seconds in all) until each of its
        partitions has a leader. Raises the broker's error as its `kcore.errors` class
        (`TopicAlreadyExistsError`, `InvalidReplicationFactorError`, ...), or
        `RequestTimedOutError` when the topic has no leaders in time."""
        await self.create_topics(
            [NewTopic(name, partitions, replication_factor, config or {}, assignments or {})],
            timeout=timeout,
        )

    async def create_topics(
        self, new_topics: Iterable[NewTopic | str], *, timeout: float = 30.0
    ) -> None:
        """Creates several topics in one request; raises the error of the first topic (in
        the given order) that failed, after the others were created."""
        topics = [t if isinstance(t, NewTopic) else NewTopic(t) for t in new_topics]
        names = [t.name for t in topics]
        creatable = {
            t.name: CreatableTopic(
                t.name,
                t.partitions,
                t.replication_factor,
                {int(p): tuple(r) for p, r in t.assignments.items()},
                {str(k): str(v) for k, v in t.config.items()},
            )
            for t in topics
        }
        await self._create_and_wait(
            names,
            lambda pending, timeout_ms: CreateTopicsRequest(
                tuple(creatable[n] for n in pending), timeout_ms
            ),
            CreateTopicsResponse,
            {name: 1 for name in names},
            timeout,
            f"creating {', '.join(names)}",
        )

    async def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        await self.delete_topics([name], timeout=timeout)

    async def delete_topics(self, names: Iterable[str], *, timeout: float = 30.0) -> None:
        """Deletes topics (through the controller); raises the first topic's error, e.g.
        `UnknownTopicOrPartitionError` for a topic that does not exist."""
        names = list(names)
        async with self._session() as session:
            with _deadline(timeout, f"deleting {', '.join(names)}"):
                results = await self._to_controller(
                    session,
                    names,
                    lambda pending, timeout_ms: DeleteTopicsRequest(tuple(pending), timeout_ms),
                    DeleteTopicsResponse,
                )
                _raise_first(results, names)

    async def describe_topic(self, name: str) -> TopicDescription:
        """The topic's partitions with leader, leader epoch, replicas, ISR and offline
        replicas; `UnknownTopicOrPartitionError` when it does not exist."""
        async with self._session() as session:
            await session.metadata.refresh([name])
            topic = session.metadata.cluster.topic(name)
            if topic is None:
                code = session.metadata.topic_errors.get(name, 3)
                raise errors.error_for_code(
                    code, f"topic {name!r}: {errors.ERROR_NAMES.get(code, code)}"
                )
            return TopicDescription(topic.name, topic.topic_id, topic.partitions)

    async def list_topics(self) -> list[str]:
        async with self._session() as session:
            return sorted((await session.metadata.refresh(None)).topics)

    async def describe_cluster(self) -> ClusterDescription:
        async with self._session() as session:
            cluster = await session.metadata.refresh(())
            return ClusterDescription(
                tuple(b for _, b in sorted(cluster.brokers.items())),
                cluster.controller_id,
                cluster.cluster_id,
            )

    # -- partitions ----------------------------------------------------------------------

    async def create_partitions(
        self,
        topic_counts: Mapping[str, int],
        *,
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Grows each topic to its count of partitions (through the controller) and waits
        (up to `timeout` seconds in all) until every new partition has a leader.
        `assignments[topic]` places that topic's new partitions: one list of broker ids per
        new partition, in partition order (Kafka's choice otherwise). Raises the error of the
        first topic that failed, as its `kcore.errors` class: `InvalidPartitionsError` for a
        count not above the topic's, `UnknownTopicOrPartitionError`,
        `InvalidReplicaAssignmentError`, or `RequestTimedOutError`."""
        placed = dict(assignments or {})
        strays = sorted(name for name in placed if name not in topic_counts)
        if strays:
            raise ValueError(f"assignments for topics not given a count: {', '.join(strays)}")
        names = list(topic_counts)
        additions = {
            name: CreatePartitionsTopic(
                name,
                count,
                tuple(tuple(replicas) for replicas in placed[name]) if name in placed else None,
            )
            for name, count in topic_counts.items()
        }
        await self._create_and_wait(
            names,
            lambda pending, timeout_ms: CreatePartitionsRequest(
                tuple(additions[n] for n in pending), timeout_ms
            ),
            CreatePartitionsResponse,
            dict(topic_counts),
            timeout,
            f"adding partitions to {', '.join(names)}",
        )

    # -- leader elections ----------------------------------------------------------------

    async def elect_leaders(
        self,
        partitions: Iterable[tuple[str, int] | TopicPartition] | None = None,
        *,
        election_type: str = "preferred",
        timeout: float = 30.0,
    ) -> dict[TopicPartition, errors.KafkaError | None]:
        """Asks the controller to elect leaders (Kafka's ElectLeaders): "preferred" moves
        each partition's leadership to its preferred replica (the first assigned) if that
        replica is in sync; "unclean" elects a leader for a partition that has none, from
        outside the ISR if need be. None: every partition. Each partition's outcome: None
        when elected, else its error (`ElectionNotNeededError` when the right replica leads
        already, `PreferredLeaderNotAvailableError`, `UnknownTopicOrPartitionError`, ...)."""
        kinds = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}
        if election_type not in kinds:
            raise ValueError(
                f"election_type must be 'preferred' or 'unclean', not {election_type!r}"
            )
        asked = (
            None
            if partitions is None
            else tuple(
                ElectionPartition(tp.topic, tp.partition)
                for tp in map(to_topic_partition, partitions)
            )
        )
        async with self._session() as session:
            with _deadline(timeout, "electing leaders"):
                refresh = False
                while True:
                    response = await self._ask_controller(
                        session,
                        ApiKey.ELECT_LEADERS,
                        lambda timeout_ms: ElectLeadersRequest(
                            int(kinds[election_type]), asked, timeout_ms
                        ),
                        ElectLeadersResponse,
                        refresh=refresh,
                    )
                    refresh = response is None or response.error_code == _NOT_CONTROLLER
                    if not refresh:
                        break
        if response.error_code:
            raise errors.error_for_code(response.error_code, "ElectLeaders failed")
        return {
            TopicPartition(r.topic, r.partition): None
            if r.error_code == 0
            else errors.error_for_code(
                r.error_code, r.error_message or errors.ERROR_NAMES.get(r.error_code, "")
            )
            for r in response.results
        }

    # -- partition reassignments ---------------------------------------------------------

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int] | TopicPartition, Sequence[int] | None],
        *,
        timeout: float = 30.0,
    ) -> dict[TopicPartition, errors.KafkaError | None]:
        """Asks the controller to move partitions to new replicas (Kafka's
        AlterPartitionReassignments, KIP-455): each partition to its target replica list,
        or None to cancel its reassignment in progress (its replicas go back to what they
        were). Returns once the controller started them, not once they completed (see
        `list_partition_reassignments`); a new target for a partition being reassigned
        replaces the old one. Each partition's outcome: None when started, else its error
        (`InvalidReplicaAssignmentError` for an empty list, duplicates or a broker that is
        not alive, `UnknownTopicOrPartitionError`, `NoReassignmentInProgressError` when
        cancelling what is not running)."""
        asked = tuple(
            ReassignablePartition(
                tp.topic, tp.partition, None if replicas is None else tuple(replicas)
            )
            for tp, replicas in (
                (to_topic_partition(p), replicas) for p, replicas in reassignments.items()
            )
        )
        async with self._session() as session:
            with _deadline(timeout, "reassigning partitions"):
                response = await self._until_the_controller_answers(
                    session,
                    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                    lambda timeout_ms: AlterPartitionReassignmentsRequest(asked, timeout_ms),
                    AlterPartitionReassignmentsResponse,
                )
        if response.error_code:
            raise errors.error_for_code(
                response.error_code,
                response.error_message or "AlterPartitionReassignments failed",
            )
        return {
            TopicPartition(r.topic, r.partition): None
            if r.error_code == 0
            else errors.error_for_code(
                r.error_code, r.error_message or errors.ERROR_NAMES.get(r.error_code, "")
            )
            for r in response.partitions
        }

    async def list_partition_reassignments(
        self,
        partitions: Iterable[tuple[str, int] | TopicPartition] | None = None,
        *,
        timeout: float = 30.0,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (Kafka's ListPartitionReassignments) of the given
        partitions, or of every partition for None; a partition not being reassigned is
        left out."""
        asked = (
            None
            if partitions is None
            else tuple(
                ListedPartition(tp.topic, tp.partition)
                for tp in map(to_topic_partition, partitions)
            )
        )
        async with self._session() as session:
            with _deadline(timeout, "listing partition reassignments"):
                response = await self._until_the_controller_answers(
                    session,
                    ApiKey.LIST_PARTITION_REASSIGNMENTS,
                    lambda timeout_ms: ListPartitionReassignmentsRequest(asked, timeout_ms),
                    ListPartitionReassignmentsResponse,
                )
        if response.error_code:
            raise errors.error_for_code(
                response.error_code,
                response.error_message or "ListPartitionReassignments failed",
            )
        return {
            TopicPartition(r.topic, r.partition): PartitionReassignment(
                r.replicas, r.adding_replicas, r.removing_replicas
            )
            for r in response.reassignments
        }

    # -- configs -------------------------------------------------------------------------

    async def describe_configs(
        self,
        topic: str | None = None,
        *,
        broker: int | str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, ConfigEntry]:
        """Every config of a topic (asked of any broker) or of a broker (asked of that
        broker), by name: its value as Kafka prints it (None when sensitive) and its source
        (`ConfigSourceCode.DYNAMIC_TOPIC_CONFIG` for a topic's own override,
        `DYNAMIC_BROKER_CONFIG` / `DYNAMIC_DEFAULT_BROKER_CONFIG` for a broker's dynamic
        config or the cluster-wide one, `STATIC_BROKER_CONFIG`, `DEFAULT_CONFIG`).
        `broker=""` (Kafka's resource name for it) gives the cluster-wide dynamic broker
        defaults. Raises `UnknownTopicOrPartitionError` for a topic that does not exist,
        `BrokerNotAvailableError` for a broker not in the cluster."""
        resource_type, resource_name, node_id, what = _config_resource(topic, broker)
        result = await self._ask_about_resource(
            ApiKey.DESCRIBE_CONFIGS,
            DescribeConfigsRequest((ConfigResource(resource_type, resource_name),)),
            DescribeConfigsResponse,
            broker=node_id,
            topic=topic,
            what=what,
            timeout=timeout,
        )
        return {described.name: _config_entry(described) for described in result.configs}

    async def alter_configs(
        self,
        topic: str | None = None,
        *,
        broker: int | str | None = None,
        set: Mapping[str, str] | None = None,  # Kafka's SET (shadows the builtin here)
        delete: Iterable[str] = (),
        timeout: float = 30.0,
    ) -> None:
        """Changes a topic's dynamic configs (asked of any broker), a broker's
        (`broker=<id>`, asked of that broker) or the cluster-wide broker defaults
        (`broker=""`, asked of any broker), with IncrementalAlterConfigs: `set` sets
        configs, `delete` removes them (back to the broker's setting, the cluster default,
        server.properties or Kafka's default). Every broker applies the change from
        ZooKeeper's change notification shortly after this returns, as in Kafka. Raises
        `InvalidConfigurationError` for an unknown topic config or a bad value (naming it),
        `InvalidRequestError` for a config both set and deleted or a broker config that
        cannot be changed without a restart (Kafka's "Cannot update these configs
        dynamically"), and `UnknownTopicOrPartitionError`."""
        resource_type, resource_name, node_id, what = _config_resource(topic, broker)
        alterations = [
            AlterableConfig(str(name), AlterConfigOp.SET, str(value))
            for name, value in (set or {}).items()
        ]
        alterations += [AlterableConfig(str(name), AlterConfigOp.DELETE) for name in delete]
        resource = AlterConfigsResource(resource_type, resource_name, tuple(alterations))
        await self._ask_about_resource(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            IncrementalAlterConfigsRequest((resource,)),
            IncrementalAlterConfigsResponse,
            broker=node_id,
            topic=topic,
            what=what,
            timeout=timeout,
        )

    # -- records -------------------------------------------------------------------------

    async def delete_records(
        self, offsets: Mapping[Any, int], *, timeout: float = 30.0
    ) -> dict[Any, int]:
        """Deletes each partition's records before its offset (-1: up to its high
        watermark). Keys are `(topic, partition)` pairs or `TopicPartition`s; each request
        goes to the partition's leader, which answers once every live replica has deleted as
        far (retried after a metadata refresh when the leader moved). Returns each
        partition's low watermark (its first offset now), keyed as `offsets` is. Raises the
        error of the first partition that failed: `OffsetOutOfRangeError` for an offset past
        the high watermark, `UnknownTopicOrPartitionError`, or `RequestTimedOutError`."""
        wanted = {to_topic_partition(key): (key, offset) for key, offset in offsets.items()}
        low_watermarks: dict[TopicPartition, int] = {}
        failures: dict[TopicPartition, errors.KafkaError] = {}
        async with self._session() as session:
            with _deadline(timeout, f"deleting records of {', '.join(map(str, wanted))}"):
                pending = list(wanted)
                while pending:
                    by_leader = await self._leaders_of(session, pending, failures)
                    for leader, tps in sorted(by_leader.items()):
                        await self._delete_records_on(
                            session,
                            leader,
                            {tp: wanted[tp][1] for tp in tps},
                            low_watermarks,
                            failures,
                        )
                    pending = [
                        tp for tp in pending if tp not in low_watermarks and tp not in failures
                    ]
        for tp in wanted:
            if tp in failures:
                raise failures[tp]
        return {key: low_watermarks[tp] for tp, (key, _) in wanted.items()}

    async def _leaders_of(
        self,
        session: _Session,
        tps: list[TopicPartition],
        failures: dict[TopicPartition, errors.KafkaError],
    ) -> dict[int, list[TopicPartition]]:
        """The partitions by their leader, from refreshed metadata (spaced by
        retry_backoff_ms); a partition that does not exist goes to `failures`, one without
        a leader waits for the next round."""
        try:
            cluster = await session.metadata.refresh({tp.topic for tp in tps})
        except errors.KafkaError as exc:
            log.info("%s: metadata refresh failed: %s", self.client_id, exc)
            return {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            leader = cluster.leader_for(tp)
            if leader is not None:
                by_leader.setdefault(leader, []).append(tp)
            elif cluster.topic(tp.topic) is not None and cluster.partition(tp) is None:
                failures[tp] = errors.UnknownTopicOrPartitionError(
                    f"{tp}: topic {tp.topic!r} has no partition {tp.partition}"
                )
            elif cluster.topic(tp.topic) is None:
                code = session.metadata.topic_errors.get(tp.topic, _UNKNOWN_TOPIC_OR_PARTITION)
                failures[tp] = errors.error_for_code(
                    code, f"{tp}: {errors.ERROR_NAMES.get(code, code)}"
                )
        return by_leader

    async def _delete_records_on(
        self,
        session: _Session,
        leader: int,
        offsets: dict[TopicPartition, int],
        low_watermarks: dict[TopicPartition, int],
        failures: dict[TopicPartition, errors.KafkaError],
    ) -> None:
        """One DeleteRecords request to `leader`; a retriable error (a moved leader, a lost
        connection, replicas not caught up in time) leaves its partitions for another round:
        deleting up to an offset twice deletes nothing more."""
        address = session.metadata.cluster.address_of(leader)
        assert address is not None
        rpc_timeout_ms, broker_timeout_ms = self._timeouts_ms()
        request = DeleteRecordsRequest(
            tuple(DeleteRecordsPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()),
            broker_timeout_ms,
        )
        response = await self._request_or_none(
            session,
            address,
            ApiKey.DELETE_RECORDS,
            request,
            DeleteRecordsResponse,
            rpc_timeout_ms,
            f"leader {leader}",
        )
        if response is None:
            return
        for answer in response.partitions:
            tp = TopicPartition(answer.topic, answer.partition)
            if tp not in offsets:
                continue
            if answer.error_code == 0:
                low_watermarks[tp] = answer.low_watermark
                continue
            error = errors.error_for_code(
                answer.error_code,
                f"deleting records of {tp} before offset {offsets[tp]} on broker {leader}: "
                f"{errors.ERROR_NAMES.get(answer.error_code, answer.error_code)}",
            )
            if error.retriable:
                log.info("%s: %s; retrying", self.client_id, error)
            else:
                failures[tp] = error

    # -- SCRAM users ---------------------------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout: float = 30.0
    ) -> dict[str, tuple[ScramCredentialInfo, ...]]:
        """The SCRAM credentials (mechanism and iterations, never a secret) of the named
        users, in the order named, or of every user that has one (None or no names),
        sorted; asked of any broker. Raises the first user's error, naming the user:
        `ResourceNotFoundError` for a named user without credentials,
        `DuplicateResourceError` for a user named twice."""
        asked = None if users is None else tuple(users)
        message = scram_admin.DescribeUserScramCredentialsRequest(asked or None)
        async with self._session() as session:
            with _deadline(timeout, "describing SCRAM credentials"):
                response = None
                while response is None:
                    address = await self._broker_address(session, None)
                    rpc_timeout_ms, _ = self._timeouts_ms()
                    response = await self._request_or_none(
                        session, address, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, message,
                        scram_admin.DescribeUserScramCredentialsResponse, rpc_timeout_ms,
                        f"{address[0]}:{address[1]}",
                    )  # fmt: skip
                    if response is None:
                        await self._refresh_quietly(session, ())
        if response.error_code:
            raise errors.error_for_code(
                response.error_code, response.error_message or "DescribeUserScramCredentials failed"
            )
        for result in response.results:
            if result.error_code:
                raise _user_error(result.user, result.error_code, result.error_message)
        return {r.user: scram_admin.credential_infos(r) for r in response.results}

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        timeout: float = 30.0,
    ) -> None:
        """Creates, replaces (`UserScramCredentialUpsertion(user, mechanism, iterations,
        password)`) and deletes (`UserScramCredentialDeletion(user, mechanism)`) users'
        SCRAM credentials, through the controller; brokers apply them from ZooKeeper's
        change notification, each on its own. Only a salt and the salted password travel.
        Each user's alterations apply or fail together; raises the first failed user's
        error (in the given order, after the others applied), naming the user:
        `UnacceptableCredentialError` (an empty name or password, iterations outside
        [4096, 16384]), `UnsupportedSaslMechanismError`, `DuplicateResourceError` (one
        credential altered twice), `ResourceNotFoundError` (deleting what does not
        exist)."""
        alterations = list(alterations)
        request, refused = scram_admin.alteration_request(alterations, self._rng)
        results = {}
        if request.deletions or request.upsertions:
            async with self._session() as session:
                with _deadline(timeout, "altering SCRAM credentials"):
                    refresh = False
                    while True:
                        response = await self._ask_controller(
                            session, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                            lambda _timeout_ms: request,
                            scram_admin.AlterUserScramCredentialsResponse, refresh=refresh,
                        )  # fmt: skip
                        refresh = response is None or any(
                            r.error_code == _NOT_CONTROLLER for r in response.results
                        )
                        if not refresh:
                            break
            results = {r.user: r for r in response.results}
        for user in dict.fromkeys(a.user for a in alterations):
            if user in refused:
                raise _user_error(user, refused[user].code, str(refused[user]))
            result = results.get(user)
            if result is None:
                raise errors.UnknownServerError(
                    f"The broker response did not contain a result for user {user}"
                )
            if result.error_code:
                raise _user_error(user, result.error_code, result.error_message)

    # -- ACLs (an authorizer on the brokers: authorizer.class.name) ----------------------

    async def create_acls(self, acls: Iterable[AclBinding], *, timeout: float = 30.0) -> None:
        """Creates ACLs (`AclBinding(ResourcePattern(ResourceType.TOPIC, "t"),
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))`);
        any broker writes them to ZooKeeper, and every broker's authorizer loads them from
        the change notification. Raises the first refused ACL's error, after the others
        were created: `SecurityDisabledError` without an authorizer,
        `ClusterAuthorizationFailedError` without ALTER on the cluster,
        `InvalidRequestError` for an ACL Kafka would not store."""
        request = acl_admin.CreateAclsRequest(tuple(acl_admin.creation_of(b) for b in acls))
        if not request.creations:
            return
        response = await self._ask_any_broker(
            ApiKey.CREATE_ACLS, request, acl_admin.CreateAclsResponse, "creating ACLs", timeout
        )
        for creation, result in zip(request.creations, response.results, strict=True):
            if result.error_code:
                raise errors.error_for_code(
                    result.error_code,
                    f"{acl_admin.binding_of(creation)}: {result.error_message or ''}",
                )

    async def describe_acls(
        self, acl_filter: AclBindingFilter = ANY_ACL, *, timeout: float = 30.0
    ) -> list[AclBinding]:
        """The ACLs the filter matches (every ACL by default), as a broker knows them."""
        request = acl_admin.DescribeAclsRequest(acl_admin.filter_of(acl_filter))
        response = await self._ask_any_broker(
            ApiKey.DESCRIBE_ACLS, request, acl_admin.DescribeAclsResponse, "describing ACLs",
            timeout,
        )  # fmt: skip
        if response.error_code:
            raise errors.error_for_code(response.error_code, response.error_message or "")
        return sorted(acl_admin.bindings_of_described(response))

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout: float = 30.0
    ) -> list[AclBinding]:
        """Deletes every ACL the filters match; returns those deleted. Raises the first
        filter's or deleted ACL's error."""
        request = acl_admin.DeleteAclsRequest(tuple(acl_admin.filter_of(f) for f in filters))
        if not request.filters:
            return []
        response = await self._ask_any_broker(
            ApiKey.DELETE_ACLS, request, acl_admin.DeleteAclsResponse, "deleting ACLs", timeout
        )
        deleted = []
        for result in response.filter_results:
            if result.error_code:
                raise errors.error_for_code(result.error_code, result.error_message or "")
            for matching in result.matching_acls:
                if matching.error_code:
                    raise errors.error_for_code(matching.error_code, matching.error_message or "")
                deleted.append(
                    AclBinding(
                        ResourcePattern(
                            matching.resource_type, matching.resource_name, matching.pattern_type
                        ),
                        AccessControlEntry(
                            matching.principal, matching.host, matching.operation,
                            matching.permission_type,
                        ),
                    )
                )  # fmt: skip
        return sorted(deleted)

    async def _ask_any_broker(
        self, api_key: ApiKey, message: object, response_type: type, what: str, timeout: float
    ) -> Any:
        """The answer of some broker, asking another after a retriable failure."""
        async with self._session() as session:
            with _deadline(timeout, what):
                while True:
                    address = await self._broker_address(session, None)
                    rpc_timeout_ms, _ = self._timeouts_ms()
                    response = await self._request_or_none(
                        session, address, api_key, message, response_type, rpc_timeout_ms,
                        f"{address[0]}:{address[1]}",
                    )  # fmt: skip
                    if response is not None:
                        return response
                    await self._refresh_quietly(session, ())

    # -- helpers -----------------------------------------------------------------------

    # -- consumer groups ---------------------------------------------------------------

    async def list_groups(self, *, timeout: float = 30.0) -> list[group_admin.GroupListing]:
        async with self._session() as session:
            with _deadline(timeout, "ListGroups"):
                return await group_admin.list_groups(self, session)

    async def describe_group(
        self, group_id: str, *, timeout: float = 30.0
    ) -> group_admin.GroupDescription:
        async with self._session() as session:
            with _deadline(timeout, f"DescribeGroups of {group_id}"):
                return await group_admin.describe_group(self, session, group_id)

    async def list_group_offsets(
        self, group_id: str, *, timeout: float = 30.0
    ) -> dict[TopicPartition, int]:
        """The offsets the group committed, by partition."""
        async with self._session() as session:
            with _deadline(timeout, f"OffsetFetch of {group_id}"):
                return await group_admin.list_group_offsets(self, session, group_id)

    async def delete_groups(self, group_ids: Iterable[str], *, timeout: float = 30.0) -> None:
        """Deletes empty groups and their offsets (NON_EMPTY_GROUP for a group with
        members, GROUP_ID_NOT_FOUND for one that does not exist)."""
        async with self._session() as session:
            with _deadline(timeout, "DeleteGroups"):
                await group_admin.delete_groups(self, session, group_ids)

    async def end_offsets(
        self, partitions: Iterable[Any], *, timeout: float = 30.0
    ) -> dict[TopicPartition, int]:
        """Each partition's end offset (the high watermark), from its leader."""
        wanted = [to_topic_partition(p) for p in partitions]
        async with self._session() as session:
            with _deadline(timeout, "ListOffsets"):
                return await group_admin.end_offsets(self, session, wanted)

    def _timeouts_ms(self) -> tuple[int, int]:
        """(the RPC timeout, the broker's own wait) for a request sent now: the request
        timeout cut to what is left of the caller's deadline. The broker's wait (for
        leaders, a deletion, replicas) ends a little before our RPC timeout, so its answer
        (e.g. REQUEST_TIMED_OUT: created, no leaders yet) arrives instead of a client-side
        timeout. A timeout would leave the outcome unknown, and a retry would then hit
        TOPIC_ALREADY_EXISTS."""
        remaining = trio.current_effective_deadline() - trio.current_time()
        rpc_timeout_ms = max(0, min(self.request_timeout_ms, int(remaining * 1000)))
        return rpc_timeout_ms, rpc_timeout_ms * 9 // 10

    async def _broker_address(self, session: _Session, node_id: int | None) -> Address:
        """Where broker `node_id` listens, or a random known broker for None (metadata
        refreshed when it does not know the broker, or any)."""
        cluster = session.metadata.cluster
        if not cluster.brokers or (node_id is not None and node_id not in cluster.brokers):
            cluster = await session.metadata.refresh(())
        if node_id is None:
            node_id = self._rng.choice(sorted(cluster.brokers))
        address = cluster.address_of(node_id)
        if address is None:
            raise errors.BrokerNotAvailableError(
                f"broker {node_id} is not in the cluster (brokers: "
                f"{', '.join(map(str, sorted(cluster.brokers)))})"
            )
        return address

    async def _ask_about_resource(
        self,
        api_key: ApiKey,
        message: object,
        response_type: type,
        *,
        broker: int | None,
        topic: str | None,
        what: str,
        timeout: float,
    ) -> Any:
        """Sends a one-resource config request to `broker` (any broker for None) and
        returns its one result, retrying retriable RPC failures on another broker; raises
        the result's error. A broker that has not heard of `topic` yet (its metadata lags
        the controller's) is asked again while the cluster's metadata shows the topic."""
        async with self._session() as session:
            with _deadline(timeout, f"{api_key.name} of {what}"):
                while True:
                    address = await self._broker_address(session, broker)
                    rpc_timeout_ms, _ = self._timeouts_ms()
                    response = await self._request_or_none(
                        session,
                        address,
                        api_key,
                        message,
                        response_type,
                        rpc_timeout_ms,
                        f"{address[0]}:{address[1]}",
                    )
                    if response is None:
                        await self._refresh_quietly(session, ())
                        continue
                    if len(response.results) != 1:
                        raise errors.UnknownServerError(
                            f"{api_key.name}: {len(response.results)} results for one resource"
                        )
                    (result,) = response.results
                    if (
                        topic is None
                        or result.error_code != _UNKNOWN_TOPIC_OR_PARTITION
                        or not await self._refresh_quietly(session, [topic])
                        or session.metadata.cluster.topic(topic) is None
                    ):
                        break
        if result.error_code != 0:
            reason = result.error_message or errors.ERROR_NAMES.get(result.error_code)
            raise errors.error_for_code(result.error_code, f"{what}: {reason}")
        return result

    async def _request_or_none(
        self,
        session: _Session,
        address: Address,
        api_key: ApiKey,
        message: object,
        response_type: type,
        rpc_timeout_ms: int,
        to: str,
    ) -> Any:
        """The response, or None after a retriable failure (a lost connection, a timeout,
        a broker that is down), which is logged for the caller to retry; other errors
        raise."""
        try:
            return await session.connections.request(
                address, api_key, message, response_type, timeout=rpc_timeout_ms / 1000
            )
        except errors.KafkaError as exc:
            if not exc.retriable:
                raise
            log.info("%s: %s to %s failed: %s", self.client_id, api_key.name, to, exc)
            return None

    async def _refresh_quietly(self, session: _Session, topics: Iterable[str]) -> bool:
        """Refreshes metadata (spaced by retry_backoff_ms); False when no broker answered."""
        try:
            await session.metadata.refresh(topics)
        except errors.KafkaError as exc:
            log.info("%s: metadata refresh failed: %s", self.client_id, exc)
            return False
        return True

    async def _controller(self, session: _Session, *, refresh: bool) -> tuple[int, Cluster]:
        """The controller's id and the metadata naming it (refreshed until one is known)."""
        metadata = session.metadata
        cluster = metadata.cluster
        if refresh or cluster.controller_id not in cluster.brokers:
            while True:
                try:
                    cluster = await metadata.refresh(())
                except errors.KafkaError as exc:
                    log.info("%s: metadata refresh failed: %s", self.client_id, exc)
                    continue  # the refresh itself backs off
                if cluster.controller_id in cluster.brokers:
                    break
        return cluster.controller_id, cluster

    async def _ask_controller(
        self,
        session: _Session,
        api_key: ApiKey,
        build: Callable[[int], object],
        response_type: type,
        *,
        refresh: bool,
    ) -> Any:
        """One request, `build(broker timeout ms)`, to the controller as the metadata
        names it (refreshed first when `refresh`): its response, or None after a retriable
        failure (the caller retries, refreshing)."""
        controller, cluster = await self._controller(session, refresh=refresh)
        address = cluster.address_of(controller)
        assert address is not None
        rpc_timeout_ms, broker_timeout_ms = self._timeouts_ms()
        return await self._request_or_none(
            session,
            address,
            api_key,
            build(broker_timeout_ms),
            response_type,
            rpc_timeout_ms,
            f"controller {controller}",
        )

    async def _until_the_controller_answers(
        self,
        session: _Session,
        api_key: ApiKey,
        build: Callable[[int], object],
        response_type: type,
    ) -> Any:
        """`_ask_controller` until a broker answers other than NOT_CONTROLLER (the
        metadata refreshed before each retry): a request whose answer has a top-level
        `error_code`, sent to the controller as a whole."""
        refresh = False
        while True:
            response = await self._ask_controller(
                session, api_key, build, response_type, refresh=refresh
            )
            if response is not None and response.error_code != _NOT_CONTROLLER:
                return response
            refresh = True

    async def _to_controller(
        self,
        session: _Session,
        names: list[str],
        build: Callable[[list[str], int], object],
        response_type: type,
    ) -> dict[str, TopicResult]:
        """Sends `build(pending names, timeout_ms)` to the controller until every topic
        has an answer other than NOT_CONTROLLER (retrying retriable RPC failures too)."""
        results: dict[str, TopicResult] = {}
        pending = list(dict.fromkeys(names))
        refresh = False
        while pending:
            asked = list(pending)
            response = await self._ask_controller(
                session,
                _CONTROLLER_API_KEYS[response_type],
                lambda timeout_ms, asked=asked: build(asked, timeout_ms),
                response_type,
                refresh=refresh,
            )
            if response is None:
                refresh = True
                continue
            refresh = False
            for result in response.topics:
                if result.name not in pending:
                    continue
                if result.error_code == _NOT_CONTROLLER:
                    refresh = True
                    continue
                results[result.name] = result
            pending = [n for n in pending if n not in results]
            if pending and not refresh:
                raise errors.UnknownServerError(
                    f"the controller did not answer for {', '.join(pending)}"
                )
        return results

    async def _create_and_wait(
        self,
        names: list[str],
        build: Callable[[list[str], int], object],
        response_type: type,
        counts: Mapping[str, int],
        timeout: float,
        what: str,
    ) -> None:
        """Sends a creation (topics, partitions) to the controller, then waits until each
        topic has its count of partitions, every one led, all within `timeout`."""
        async with self._session() as session:
            with _deadline(timeout, what):
                results = await self._to_controller(session, names, build, response_type)
                # REQUEST_TIMED_OUT: created, but the broker gave up waiting for leaders;
                # we keep waiting (below) within our own timeout.
                _raise_first(results, names, ignore=(_REQUEST_TIMED_OUT,))
                await self._wait_for_leaders(session, counts)

    async def _wait_for_leaders(self, session: _Session, counts: Mapping[str, int]) -> None:
        """Polls metadata (every retry_backoff_ms) until each topic has at least its count
        of partitions, every one with a live leader."""
        while True:
            try:
                cluster = await session.metadata.refresh(list(counts))
            except errors.KafkaError as exc:
                log.info("%s: metadata refresh failed: %s", self.client_id, exc)
                continue
            if all(_has_leaders(cluster, name, count) for name, count in counts.items()):
                return


def _has_leaders(cluster: Cluster, name: str, count: int) -> bool:
    topic = cluster.topic(name)
    return (
        topic is not None
        and len(topic.partitions) >= count
        and all(p.leader >= 0 and p.leader in cluster.brokers for p in topic.partitions)
    )


def _user_error(user: str, code: int, message: str | None) -> errors.KafkaError:
    reason = message or errors.ERROR_NAMES.get(code, code)
    return errors.error_for_code(code, f"user {user!r}: {reason}")


def _raise_first(
    results: dict[str, TopicResult], names: list[str], ignore: tuple[int, ...] = ()
) -> None:
    for name in names:
        result = results[name]
        if result.error_code != 0 and result.error_code not in ignore:
            reason = result.error_message or errors.ERROR_NAMES.get(result.error_code)
            raise errors.error_for_code(result.error_code, f"topic {name!r}: {reason}")


def _config_resource(
    topic: str | None, broker: int | str | None
) -> tuple[int, str, int | None, str]:
    """A config request's resource type and name, the broker to ask (None: any) and how
    errors name it, from `topic=` or `broker=` (an id, or "" for the cluster default)."""
    if (topic is None) == (broker is None):
        raise TypeError(
            'a config request takes a topic or broker=<id> ("" for the cluster default), one '
            "of the two"
        )
    if topic is not None:
        return TOPIC_RESOURCE, topic, None, f"topic {topic!r}"
    if broker == "":
        return BROKER_RESOURCE, "", None, "the cluster-wide broker defaults"
    node_id = int(broker)
    return BROKER_RESOURCE, str(node_id), node_id, f"broker {node_id}"


def _config_entry(described: DescribedConfig) -> ConfigEntry:
    """A described config with Kafka's numbers as kcore.config's enums (UNKNOWN for a
    number this client does not know)."""
    try:
        source = ConfigSourceCode(described.source)
    except ValueError:
        source = ConfigSourceCode.UNKNOWN
    try:
        config_type = ConfigTypeCode(described.config_type)
    except ValueError:
        config_type = ConfigTypeCode.UNKNOWN
    return ConfigEntry(
        described.name,
        described.value,
        source,
        config_type,
        is_sensitive=described.is_sensitive,
        read_only=described.read_only,
    )


@contextlib.contextmanager
def _deadline(timeout: float, what: str) -> Any:
    try:
        with trio.fail_after(timeout):
            yield
    except trio.TooSlowError:
        raise errors.RequestTimedOutError(f"{what}: not done within {timeout}s") from None
