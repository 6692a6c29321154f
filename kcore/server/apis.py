"""The broker's request handlers (Kafka's KafkaApis): decode, check, delegate to the replica
manager, the metadata cache, ZooKeeper or the controller, encode. One method per API key.

The handlers get their collaborators at construction and nothing else of the broker's: the
controller is asked its questions through its event queue (`live_broker_ids`,
`controlled_shutdown`), never by reading its state from a request's task."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

import transport
from kcore import errors
from kcore.common import NO_LEADER, OFFSETS_TOPIC, ReplicaAssignment, TopicPartition
from kcore.config import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigEntry,
    TopicConfig,
    apply_incremental_alterations,
    apply_incremental_broker_alterations,
    describe_topic_config,
)
from kcore.controller.preferred_election import ElectionOutcome, ElectionType
from kcore.controller.reassignment import ReassignmentResult
from kcore.coordinator.group import GROUP_API_KEYS, partition_for
from kcore.protocol import kafka as kafka_codec
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartitionEntry,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kcore.protocol.data import (
    AlterConfigsResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribedConfig,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    OffsetForLeaderEpochRequest,
    OngoingPartitionReassignment,
    ProduceRequest,
    ReassignablePartitionResponse,
    TopicResult,
)
from kcore.security import acl, acl_admin, scram_admin
from kcore.security.acl import AclAuthorizer
from kcore.security.scram_admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kcore.server.control_requests import control_request_error
from kcore.server.controller_epochs import ControllerEpochGate
from kcore.server.dynamic_broker_config import (
    DynamicBrokerConfig,
    alter_broker_configs,
    describe_broker_resource,
)
from kcore.topic_creation import NewTopic, PartitionAddition, plan_partition_addition, plan_topic
from kcore.wire import WireError, from_wire, to_wire
from kcore.zk_client import ZooKeeperError

if TYPE_CHECKING:
    from kcore.controller.controller import KafkaController
    from kcore.server.group_coordinator import GroupCoordinator
    from kcore.server.metadata_cache import MetadataCache
    from kcore.server.replica_manager import ReplicaManager
    from kcore.zk_client import KafkaZkClient

logger = logging.getLogger("kcore.server.apis")


def decode_body(message_type: type, request: transport.Request) -> Any:
    try:
        return from_wire(message_type, request.body)
    except WireError as error:
        raise transport.RpcError(transport.INVALID_REQUEST, str(error)) from None


@attrs.define(eq=False)
class KafkaApis:
    # The broker's config as it is now (a static KafkaConfig is taken as one with no
    # dynamic layer).
    config: DynamicBrokerConfig = attrs.field(converter=DynamicBrokerConfig.of)
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    zk_client: KafkaZkClient
    controller: KafkaController  # this broker's, active or not
    # This broker's current registration epoch: it changes when a new session re-registers.
    broker_epoch: Callable[[], int]
    cluster_id: str
    rng: random.Random  # the start index of new topics' replica assignments
    new_topic_id: Callable[[], str]
    group_coordinator: GroupCoordinator | None = None
    # The ACL authorizer (authorizer.class.name), None without one.
    authorizer: AclAuthorizer | None = None
    # The name of the listener a connection came in on, by the listeners as bound (the
    # broker's); None: by this broker's registered endpoints, which are the bound ones
    # unless advertised.listeners says otherwise.
    listener_name_of: Callable[[transport.ServerConnection], str | None] | None = None
    # Beyond Kafka: the controller epochs this broker obeys, verified in ZooKeeper.
    controller_epochs: ControllerEpochGate = attrs.field(
        default=attrs.Factory(
            lambda apis: ControllerEpochGate(apis.zk_client, apis.broker_id), takes_self=True
        ),
        init=False,
    )

    # The unused part of the block of producer ids this broker last claimed.
    _producer_ids: tuple[int, int] | None = attrs.field(default=None, init=False)
    _producer_id_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    # One SCRAM alteration at a time reads and rewrites users' configs: two at once could
    # each write back what the other removed.
    _user_configs_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    # One ACL change at a time from this broker (Kafka's AclAuthorizer lock); writers on
    # other brokers are met by the znodes' conditional writes.
    _acls_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _metadata_updated: trio.Event = attrs.field(factory=trio.Event, init=False)

    def handlers(self) -> dict[int, Any]:
        return {
            ApiKey.UPDATE_METADATA: self.handle_update_metadata,
            ApiKey.LEADER_AND_ISR: self.handle_leader_and_isr,
            ApiKey.STOP_REPLICA: self.handle_stop_replica,
            ApiKey.CONTROLLED_SHUTDOWN: self.handle_controlled_shutdown,
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offsets_for_leader_epoch,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions,
            ApiKey.ELECT_LEADERS: self.handle_elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.handle_list_partition_reassignments,
            ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs,
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (self.handle_describe_user_scram_credentials),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials,
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.CREATE_ACLS: self.handle_create_acls,
            ApiKey.DELETE_ACLS: self.handle_delete_acls,
            **{api_key: self.handle_group_request for api_key in GROUP_API_KEYS},
        }

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    async def _control_error(
        self, api_name: str, message: Any, request: transport.Request, current_controller_epoch: int
    ) -> int:
        """Kafka's epoch checks, then (beyond Kafka) a controller epoch newer than this
        broker has verified is checked against ZooKeeper before the request is obeyed."""
        error = control_request_error(
            broker_epoch_in_request=message.broker_epoch,
            current_broker_epoch=self.broker_epoch(),
            controller_epoch_in_request=message.controller_epoch,
            current_controller_epoch=current_controller_epoch,
        )
        if error:
            logger.warning(
                "Broker %d refuses %s from controller %d epoch %d (error %d)",
                self.broker_id, api_name, message.controller_id, message.controller_epoch, error,
            )  # fmt: skip
            return error
        return await self.controller_epochs.check(
            api_name, message.controller_id, message.controller_epoch, request.connection
        )

    # -- from the controller -------------------------------------------------------------

    async def handle_update_metadata(self, request: transport.Request) -> Any:
        update = decode_body(UpdateMetadataRequest, request)
        error = await self._control_error(
            "UpdateMetadata", update, request, self.metadata_cache.controller_epoch
        )
        if not error:
            self.metadata_cache.update(update)
            self._metadata_updated.set()
            self._metadata_updated = trio.Event()
            await self.replica_manager.stop_stray_replicas(update)
        return to_wire(UpdateMetadataResponse(error))

    async def handle_leader_and_isr(self, request: transport.Request) -> Any:
        message = decode_body(LeaderAndIsrRequest, request)
        error = await self._control_error(
            "LeaderAndIsr", message, request, self.replica_manager.controller_epoch
        )
        if error:
            return to_wire(LeaderAndIsrResponse(error))
        return to_wire(await self.replica_manager.become_leader_or_follower(message))

    async def handle_stop_replica(self, request: transport.Request) -> Any:
        message = decode_body(StopReplicaRequest, request)
        error = await self._control_error(
            "StopReplica", message, request, self.replica_manager.controller_epoch
        )
        if error:
            return to_wire(StopReplicaResponse(error))
        return to_wire(await self.replica_manager.stop_replicas(message))

    async def handle_controlled_shutdown(self, request: transport.Request) -> Any:
        message = decode_body(ControlledShutdownRequest, request)
        if not self.controller.is_active:
            return to_wire(ControlledShutdownResponse(errors.NotControllerError.code))
        code, remaining = await self.controller.controlled_shutdown(
            message.broker_id, message.broker_epoch
        )
        entries = tuple(TopicPartitionEntry(tp.topic, tp.partition) for tp in remaining)
        return to_wire(ControlledShutdownResponse(code, entries))

    # -- produce and fetch ---------------------------------------------------------------

    async def handle_produce(self, request: transport.Request) -> Any:
        message = decode_body(ProduceRequest, request)
        return to_wire(await self.replica_manager.append_records(message))

    async def handle_fetch(self, request: transport.Request) -> Any:
        message = decode_body(FetchRequest, request)
        return to_wire(await self.replica_manager.fetch_messages(message))

    async def handle_list_offsets(self, request: transport.Request) -> Any:
        message = decode_body(ListOffsetsRequest, request)
        return to_wire(self.replica_manager.list_offsets(message))

    async def handle_offsets_for_leader_epoch(self, request: transport.Request) -> Any:
        message = decode_body(OffsetForLeaderEpochRequest, request)
        return to_wire(self.replica_manager.last_offsets_for_leader_epochs(message))

    # -- metadata and admin --------------------------------------------------------------

    async def handle_metadata(self, request: transport.Request) -> Any:
        message = decode_body(MetadataRequest, request)
        return to_wire(self.metadata_response(message.topics, self.listener_of(request.connection)))

    def listener_of(self, connection: transport.ServerConnection) -> str | None:
        """The name of the listener a client connected to (by the port it reached), so that
        metadata names every broker by that same listener, as Kafka answers."""
        if self.listener_name_of is not None:
            return self.listener_name_of(connection)
        own = self.metadata_cache.brokers.get(self.broker_id)
        port = connection.connection.local_address[1]
        if own is not None:
            for endpoint in own.endpoints:
                if endpoint.port == port:
                    return endpoint.listener_name
        return None

    def metadata_response(
        self, topics: tuple[str, ...] | None, listener_name: str | None = None
    ) -> MetadataResponse:
        """The cluster as this broker's cache has it, brokers named by their endpoint on
        `listener_name` (their first listener when None); a broker without that listener is
        left out, as Kafka leaves it out."""
        cache = self.metadata_cache
        names = cache.topics() if topics is None else list(topics)
        described = []
        for name in names:
            states = cache.partitions_of(name)
            if not states:
                described.append(MetadataTopic(name, errors.UnknownTopicOrPartitionError.code))
                continue
            partitions = []
            for state in states:
                leader_alive = state.leader != NO_LEADER and state.leader in cache.brokers
                partitions.append(
                    MetadataPartition(
                        state.partition,
                        0 if leader_alive else errors.LeaderNotAvailableError.code,
                        state.leader if leader_alive else NO_LEADER,
                        state.leader_epoch,
                        state.replicas,
                        state.isr,
                        state.offline_replicas,
                    )
                )
            described.append(MetadataTopic(name, 0, tuple(partitions), cache.topic_ids.get(name)))
        brokers = []
        for broker_id in sorted(cache.brokers):
            endpoints = cache.brokers[broker_id].endpoints
            endpoint = next(
                (e for e in endpoints if e.listener_name == listener_name),
                endpoints[0] if listener_name is None else None,
            )
            if endpoint is None:
                continue
            brokers.append(
                MetadataBroker(
                    broker_id, endpoint.host, endpoint.port, cache.brokers[broker_id].rack
                )
            )
        controller_id = cache.controller_id if cache.controller_id is not None else -1
        return MetadataResponse(tuple(brokers), controller_id, tuple(described), self.cluster_id)

    async def handle_create_topics(self, request: transport.Request) -> Any:
        message = decode_body(CreateTopicsRequest, request)
        return to_wire(await self.create_topics(message))

    async def create_topics(self, message: CreateTopicsRequest) -> CreateTopicsResponse:
        if not self.controller.is_active:
            return CreateTopicsResponse(
                tuple(
                    TopicResult(
                        t.name,
                        errors.NotControllerError.code,
                        "this broker is not the controller",
                    )
                    for t in message.topics
                )
            )
        results = []
        created = []
        for topic in message.topics:
            try:
                await self._create_topic(topic, message.validate_only)
            except errors.KafkaError as error:
                results.append(TopicResult(topic.name, error.code, str(error)))
                continue
            results.append(TopicResult(topic.name, 0))
            if not message.validate_only:
                created.append(topic.name)
        if created:
            await self._wait_for_leaders(created, results, message.timeout_ms)
        return CreateTopicsResponse(tuple(results))

    async def auto_create_topic(self, name: str) -> int:
        """Kafka's auto.create.topics.enable: a Metadata request that names a topic nobody
        created creates it (num.partitions, default.replication.factor), on any broker, with
        the live brokers this broker knows of. The error code the topic is answered with:
        LEADER_NOT_AVAILABLE while its partitions get leaders (the client asks again), or
        why it could not be created (INVALID_REPLICATION_FACTOR, INVALID_TOPIC_EXCEPTION)."""
        creatable = CreatableTopic(name, -1, -1)
        try:
            await self._create_topic(creatable, False, self.metadata_cache.brokers.keys())
        except errors.TopicAlreadyExistsError:
            pass  # another client's request created it first
        except errors.KafkaError as error:
            logger.info("Auto-creation of topic %s refused: %s", name, error)
            return error.code
        except ZooKeeperError as error:
            logger.warning("Auto-creation of topic %s failed: %r", name, error)
            return errors.LeaderNotAvailableError.code
        return errors.LeaderNotAvailableError.code

    async def handle_find_coordinator(self, request: transport.Request) -> Any:
        """kcore's own clients: `{"key": group}` -> `{error_code, node_id, host, port}`."""
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("key"), str):
            raise transport.RpcError(transport.INVALID_REQUEST, "FindCoordinator takes {key}")
        code, node_id, host, port = await self.group_coordinator_for(
            body["key"], self.listener_of(request.connection)
        )
        return {"error_code": code, "node_id": node_id, "host": host, "port": port}

    async def handle_group_request(self, request: transport.Request) -> Any:
        """kcore's own clients' group requests (JoinGroup, SyncGroup, ...): the body is
        Kafka's request body at `request.api_version`, checked against Kafka's schema (a
        round trip through its codec: a trust boundary) before the coordinator sees it,
        and answered with Kafka's response body."""
        try:
            frame = kafka_codec.encode_request(
                request.api_key, request.api_version, 0, request.client_id,
                request.body,  # type: ignore[arg-type]
            )  # fmt: skip
            _, body = kafka_codec.decode_request(frame[4:])
        except (kafka_codec.KafkaCodecError, TypeError, ValueError, AttributeError) as error:
            raise transport.RpcError(transport.INVALID_REQUEST, str(error)) from None
        assert self.group_coordinator is not None  # every broker runs one
        return await self.group_coordinator.handle(
            request.api_key, request.api_version, body, client_id=request.client_id or "",
            client_host=f"/{request.connection.peer_address[0]}",
        )  # fmt: skip

    async def group_coordinator_for(
        self, group_id: str, listener_name: str | None
    ) -> tuple[int, int, str, int]:
        """FindCoordinator for a group: `(error_code, node_id, host, port)` of the leader of
        the group's `__consumer_offsets` partition (`abs(javaHash(group)) % partitions`),
        named by `listener_name`. The topic is created on first use, and until its
        partition has a live leader the answer is COORDINATOR_NOT_AVAILABLE (retriable)."""
        unavailable = (errors.CoordinatorNotAvailableError.code, -1, "", -1)
        partition = partition_for(group_id, self.config.offsets_topic_num_partitions)
        described = self.metadata_response((OFFSETS_TOPIC,), listener_name)
        topic = described.topics[0]
        if topic.error_code == errors.UnknownTopicOrPartitionError.code:
            await self.create_offsets_topic()
            return unavailable
        leader = next((p.leader for p in topic.partitions if p.partition == partition), -1)
        broker = next((b for b in described.brokers if b.node_id == leader), None)
        if broker is None:
            return unavailable
        return 0, broker.node_id, broker.host, broker.port

    async def create_offsets_topic(self) -> None:
        """Kafka's internal `__consumer_offsets`: `offsets.topic.num.partitions` partitions,
        `offsets.topic.replication.factor` replicas, refused while fewer brokers are alive
        (a cluster still starting; the clients ask again). A compacted topic with
        `offsets.topic.segment.bytes` segments (Kafka's GroupCoordinator.offsetsTopicConfigs):
        the log cleaner keeps each group's last metadata record and last commit per
        partition, so a new coordinator reads little more than what is current; a tombstone
        (a deleted group, an expired offset) goes after `delete.retention.ms`. kcore's
        topic configs have no `compression.type`, whose `producer` Kafka sets here (its
        default anyway)."""
        config = self.config
        live = sorted(self.metadata_cache.brokers)
        factor = config.offsets_topic_replication_factor
        if not live:
            return  # this broker has not heard from the controller yet: nothing to judge by
        if len(live) < factor:
            logger.error(
                "Number of alive brokers '%d' does not meet the required replication factor "
                "'%d' for the offsets topic (configured via 'offsets.topic.replication.factor')."
                " This error can be ignored if the cluster is starting up and not all brokers "
                "are up yet.", len(live), factor,
            )  # fmt: skip
            return
        topic = CreatableTopic(
            OFFSETS_TOPIC, config.offsets_topic_num_partitions, factor,
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
            },
        )  # fmt: skip
        try:
            await self._create_topic(topic, False, live)
        except errors.TopicAlreadyExistsError:
            pass
        except (errors.KafkaError, ZooKeeperError) as error:
            logger.warning("Creating %s failed: %r", OFFSETS_TOPIC, error)

    async def _create_topic(
        self, topic: Any, validate_only: bool, live_brokers: Iterable[int] | None = None
    ) -> None:
        existing = await self.zk_client.get_all_topics()
        if live_brokers is None:
            # The controller's own view, fresher than the metadata cache it feeds;
            # NOT_CONTROLLER if it resigned since the check above.
            live_brokers = await self.controller.live_broker_ids()
        assignment = plan_topic(
            NewTopic(
                topic.name,
                topic.num_partitions,
                topic.replication_factor,
                dict(topic.assignments),
                dict(topic.configs),
            ),
            live_brokers=live_brokers,
            existing_topics=existing,
            default_partitions=self.config.num_partitions,
            default_replication_factor=self.config.default_replication_factor,
            rng=self.rng,
        )
        if validate_only:
            return
        await self.zk_client.create_topic(
            topic.name, self.new_topic_id(), assignment, dict(topic.configs)
        )
        logger.info("Created topic %s with assignment %s", topic.name, assignment)

    async def _wait_for_leaders(
        self,
        names: list[str],
        results: list[TopicResult],
        timeout_ms: int,
        partition_counts: dict[str, int] | None = None,
    ) -> None:
        """Kafka's DelayedCreatePartitions: answer once this broker's metadata shows a
        leader for every new partition (and, for `partition_counts`, that many partitions),
        or REQUEST_TIMED_OUT."""

        def ready(name: str) -> bool:
            states = self.metadata_cache.partitions_of(name)
            wanted = (partition_counts or {}).get(name, 1)
            return len(states) >= wanted and all(s.leader >= 0 for s in states)

        with trio.move_on_after(timeout_ms / 1000):
            while not all(ready(name) for name in names):
                await self._metadata_updated.wait()
            return
        for index, result in enumerate(results):
            if result.name in names and not ready(result.name):
                results[index] = TopicResult(
                    result.name,
                    errors.RequestTimedOutError.code,
                    "the topic was created but its partitions have no leader yet",
                )

    async def create_partitions(
        self, additions: list[PartitionAddition], timeout_ms: int, validate_only: bool
    ) -> list[TopicResult]:
        """Kafka's CreatePartitions on the controller: each topic's new partitions are
        planned and written to its znode (the controller's PartitionModifications watch
        creates them); answered once every new partition has a leader, or timed out."""
        if not self.controller.is_active:
            return [
                TopicResult(a.topic, errors.NotControllerError.code, "not the controller")
                for a in additions
            ]
        results = []
        counts = {}
        for addition in additions:
            try:
                await self._add_partitions(addition, validate_only)
            except errors.KafkaError as error:
                results.append(TopicResult(addition.topic, error.code, str(error)))
                continue
            results.append(TopicResult(addition.topic, 0))
            counts[addition.topic] = addition.count
        if counts and not validate_only:
            await self._wait_for_leaders(list(counts), results, timeout_ms, counts)
        return results

    async def elect_leaders(
        self,
        partitions: list[TopicPartition] | None,
        election_type: ElectionType,
        timeout_ms: int,
    ) -> dict[TopicPartition, ElectionOutcome] | None:
        """ElectLeaders on the controller (None when this broker is not it): each
        partition's outcome; the elected ones are answered once this broker's metadata
        shows their new leader epoch (Kafka's DelayedElectLeader), or REQUEST_TIMED_OUT."""
        if not self.controller.is_active:
            return None
        answers = await self.controller.elect_leaders(partitions, election_type)
        elected = {tp: outcome for tp, outcome in answers.items() if outcome.error_code == 0}

        def shown(tp: TopicPartition) -> bool:
            states = self.metadata_cache.partitions_of(tp.topic)
            state = next((s for s in states if s.partition == tp.partition), None)
            return state is not None and state.leader_epoch >= elected[tp].leader_epoch

        with trio.move_on_after(timeout_ms / 1000):
            while not all(shown(tp) for tp in elected):
                await self._metadata_updated.wait()
            return answers
        for tp in elected:
            if not shown(tp):
                answers[tp] = ElectionOutcome(
                    errors.RequestTimedOutError.code,
                    "elected, but this broker's metadata does not show it yet",
                )
        return answers

    async def handle_elect_leaders(self, request: transport.Request) -> Any:
        message = decode_body(ElectLeadersRequest, request)
        try:
            election_type = ElectionType(message.election_type)
        except ValueError:
            raise transport.RpcError(
                transport.INVALID_REQUEST, f"unknown election type {message.election_type}"
            ) from None
        partitions = (
            None
            if message.partitions is None
            else [TopicPartition(p.topic, p.partition) for p in message.partitions]
        )
        answers = await self.elect_leaders(partitions, election_type, message.timeout_ms)
        if answers is None:
            return to_wire(ElectLeadersResponse(errors.NotControllerError.code))
        return to_wire(
            ElectLeadersResponse(
                0,
                tuple(
                    ElectionResult(tp.topic, tp.partition, outcome.error_code, outcome.message)
                    for tp, outcome in sorted(answers.items())
                ),
            )
        )

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult] | None:
        """AlterPartitionReassignments on the controller (None when this broker is not it):
        each partition's result once its reassignment (None: its cancellation) started.
        Kafka answers then, without waiting for the reassignment to complete."""
        try:
            return await self.controller.alter_partition_reassignments(reassignments)
        except errors.NotControllerError:
            return None

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment] | None:
        """ListPartitionReassignments on the controller (None when this broker is not it):
        the asked partitions (None: all) being reassigned, with replicas, adding, removing."""
        try:
            return await self.controller.list_partition_reassignments(partitions)
        except errors.NotControllerError:
            return None

    async def handle_alter_partition_reassignments(self, request: transport.Request) -> Any:
        message = decode_body(AlterPartitionReassignmentsRequest, request)
        results = await self.alter_partition_reassignments(
            {TopicPartition(p.topic, p.partition): p.replicas for p in message.partitions}
        )
        if results is None:
            return to_wire(AlterPartitionReassignmentsResponse(errors.NotControllerError.code))
        return to_wire(
            AlterPartitionReassignmentsResponse(
                0,
                None,
                tuple(
                    ReassignablePartitionResponse(
                        tp.topic, tp.partition, result.error_code, result.message
                    )
                    for tp, result in sorted(results.items())
                ),
            )
        )

    async def handle_list_partition_reassignments(self, request: transport.Request) -> Any:
        message = decode_body(ListPartitionReassignmentsRequest, request)
        partitions = (
            None
            if message.partitions is None
            else [TopicPartition(p.topic, p.partition) for p in message.partitions]
        )
        listed = await self.list_partition_reassignments(partitions)
        if listed is None:
            return to_wire(ListPartitionReassignmentsResponse(errors.NotControllerError.code))
        return to_wire(
            ListPartitionReassignmentsResponse(
                0,
                None,
                tuple(
                    OngoingPartitionReassignment(
                        tp.topic,
                        tp.partition,
                        a.replicas,
                        a.adding_replicas,
                        a.removing_replicas,
                    )
                    for tp, a in sorted(listed.items())
                ),
            )
        )

    async def _add_partitions(self, addition: PartitionAddition, validate_only: bool) -> None:
        found = await self.zk_client.get_replica_assignment(addition.topic)
        if found is None:
            raise errors.UnknownTopicOrPartitionError(
                f"The topic '{addition.topic}' does not exist."
            )
        _, assignment = found
        if any(a.is_being_reassigned for a in assignment.values()):
            raise errors.ReassignmentInProgressError(
                f"A partition reassignment is in progress for the topic '{addition.topic}'."
            )
        live_brokers = await self.controller.live_broker_ids()
        added = plan_partition_addition(
            addition.topic,
            {p: a.replicas for p, a in assignment.items()},
            addition.count,
            dict(enumerate(addition.assignments, start=len(assignment)))
            if addition.assignments
            else None,
            live_brokers=live_brokers or (),
        )
        if validate_only:
            return
        await self.zk_client.add_partitions(addition.topic, added, len(assignment))
        logger.info("Adding partitions %s to topic %s", added, addition.topic)

    async def describe_configs(self, kind: int, name: str) -> list[ConfigEntry]:
        """DescribeConfigs of one resource: a topic's configs (2) or this broker's (4);
        raises the KafkaError its response carries."""
        if kind == TOPIC_RESOURCE:
            if not self.metadata_cache.partitions_of(name):
                raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist")
            overrides = await self.zk_client.read_topic_configs(name)
            return describe_topic_config(overrides, self.config.view)
        if kind == BROKER_RESOURCE:
            return describe_broker_resource(self.config, name)
        raise errors.InvalidRequestError(
            f"resource type {kind} is not supported (2 = topic, 4 = broker)"
        )

    async def alter_topic_config(
        self,
        topic: str,
        overrides: Callable[[dict[str, str]], dict[str, str]],
        validate_only: bool,
    ) -> None:
        """Replaces `topic`'s overrides by `overrides(current)` once they validate (Kafka's
        AdminZkClient.changeTopicConfig): every broker reloads the topic's config from its
        change notification. Raises the KafkaError an AlterConfigs response carries."""
        if not self.metadata_cache.partitions_of(topic):
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        new = overrides(await self.zk_client.read_topic_configs(topic))
        TopicConfig.from_dict(new, self.config)  # INVALID_CONFIG, naming the key
        if validate_only:
            return
        await self.zk_client.change_topic_config(topic, new)
        logger.info("Changed the config of topic %s to %s", topic, new)

    async def alter_broker_config(
        self,
        name: str,
        new_configs: Callable[[dict[str, str]], dict[str, str]],
        validate_only: bool,
    ) -> None:
        """Replaces a broker's dynamic configs ("": the cluster-wide default) by
        `new_configs(current)` once they validate (`dynamic_broker_config`): every broker
        applies them from the change notification. Raises the KafkaError an AlterConfigs
        response carries."""
        await alter_broker_configs(self.config, self.zk_client, name, new_configs, validate_only)

    # -- SCRAM users (kcore.security.scram_admin decides) ---------------------------------

    async def handle_describe_user_scram_credentials(self, request: transport.Request) -> Any:
        message = decode_body(DescribeUserScramCredentialsRequest, request)
        return to_wire(await self.describe_user_scram_credentials(message.users))

    async def handle_alter_user_scram_credentials(self, request: transport.Request) -> Any:
        message = decode_body(AlterUserScramCredentialsRequest, request)
        return to_wire(await self.alter_user_scram_credentials(message))

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None
    ) -> DescribeUserScramCredentialsResponse:
        """DescribeUserScramCredentials, on any broker (Kafka's ZK mode reads ZooKeeper):
        the named users' mechanisms and iterations, or every user's for None or []."""
        wanted = scram_admin.users_to_read(users)
        try:
            if wanted is None:
                configs = await self.zk_client.get_all_user_configs()
            else:
                configs = {user: await self.zk_client.read_user_configs(user) for user in wanted}
        except ZooKeeperError as error:
            logger.error("Describing SCRAM credentials failed: %r", error)
            return DescribeUserScramCredentialsResponse(
                errors.UnknownServerError.code, scram_admin.UNEXPECTED_ERROR
            )
        return scram_admin.describe_credentials(users, configs)

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        """AlterUserScramCredentials, on the controller (NOT_CONTROLLER for every user
        elsewhere, as Kafka's ZK-mode brokers answer): each user's credentials upserted or
        deleted in /config/users/<user>, other configs kept, and every broker told by the
        change notification. Each user answers for itself: one refused or failed user does
        not stop the others."""
        if not self.controller.is_active:
            return scram_admin.answer_all(
                request, errors.NotControllerError, scram_admin.NOT_CONTROLLER
            )
        plan = scram_admin.plan_alteration(request)
        async with self._user_configs_lock:
            try:
                configs = {u: await self.zk_client.read_user_configs(u) for u in plan.users}
            except ZooKeeperError as error:
                logger.error("Reading users' configs failed: %r", error)
                return scram_admin.answer_all(
                    request, errors.UnknownServerError, scram_admin.UNEXPECTED_ERROR
                )
            alteration = scram_admin.apply_alteration(request, plan, configs)
            written = [
                await self._write_user_configs(user, new_configs)
                for user, new_configs in alteration.writes.items()
            ]
        return AlterUserScramCredentialsResponse((*plan.refused, *alteration.refused, *written))

    async def _write_user_configs(
        self, user: str, configs: dict[str, str]
    ) -> AlterUserScramCredentialsResult:
        try:
            await self.zk_client.change_user_configs(user, configs)
        except ZooKeeperError as error:
            logger.info("Error encountered while altering user SCRAM credentials: %r", error)
            return AlterUserScramCredentialsResult(
                user, errors.UnknownServerError.code, scram_admin.UNEXPECTED_ERROR
            )
        logger.info("Altered the SCRAM credentials of user %s", user)
        return AlterUserScramCredentialsResult(user)

    # -- ACLs (kcore.security.acl_admin decides) -----------------------------------------

    async def handle_describe_acls(self, request: transport.Request) -> Any:
        return to_wire(self.describe_acls(decode_body(acl_admin.DescribeAclsRequest, request)))

    async def handle_create_acls(self, request: transport.Request) -> Any:
        message = decode_body(acl_admin.CreateAclsRequest, request)
        return to_wire(await self.create_acls(message))

    async def handle_delete_acls(self, request: transport.Request) -> Any:
        message = decode_body(acl_admin.DeleteAclsRequest, request)
        return to_wire(await self.delete_acls(message))

    def describe_acls(
        self, request: acl_admin.DescribeAclsRequest
    ) -> acl_admin.DescribeAclsResponse:
        """DescribeAcls, from this broker's ACL cache (SECURITY_DISABLED without an
        authorizer, as Kafka answers)."""
        if self.authorizer is None:
            return acl_admin.DescribeAclsResponse(
                errors.SecurityDisabledError.code, acl_admin.NO_AUTHORIZER_DESCRIBE
            )
        return acl_admin.describe(self.authorizer, request)

    async def create_acls(
        self, request: acl_admin.CreateAclsRequest
    ) -> acl_admin.CreateAclsResponse:
        """CreateAcls, on any broker (Kafka's AclAuthorizer writes ZooKeeper wherever it
        runs): each resource pattern's new entries added to its znode, every broker told by
        the change notification. Each creation is answered by its pattern's write."""
        if self.authorizer is None:
            return acl_admin.creations_refused(
                request, errors.SecurityDisabledError.code, acl_admin.NO_AUTHORIZER
            )
        plan = acl_admin.plan_creations(request)
        failed: dict[acl.ResourcePattern, tuple[int, str]] = {}
        async with self._acls_lock:
            for pattern, added in plan.additions.items():
                entries = frozenset(entry for _, entry in added)
                try:
                    written = await self.zk_client.update_resource_acls(
                        pattern, lambda current, entries=entries: current | entries
                    )
                except (ZooKeeperError, acl.AclError) as error:
                    logger.error("Adding ACLs to %s failed: %r", pattern, error)
                    failed[pattern] = (errors.UnknownServerError.code, acl_admin.UNEXPECTED_ERROR)
                    continue
                self.authorizer.set_acls(pattern, written)
                logger.info("Added ACLs %s to %s", sorted(entries), pattern)
        return acl_admin.creation_results(request, plan, failed)

    async def delete_acls(
        self, request: acl_admin.DeleteAclsRequest
    ) -> acl_admin.DeleteAclsResponse:
        """DeleteAcls, on any broker: every ACL a filter matches removed from its znode
        (the znode deleted once empty), every broker told; each filter answered with the
        ACLs it deleted."""
        if self.authorizer is None:
            return acl_admin.deletions_refused(
                request, errors.SecurityDisabledError.code, acl_admin.NO_AUTHORIZER
            )
        filters = acl_admin.deletion_filters(request)
        deleted: dict[acl.AclBinding, int] = {}
        failed: dict[acl.AclBinding, tuple[int, str]] = {}
        async with self._acls_lock:
            targets = acl_admin.deletion_targets(filters, list(self.authorizer.acls))
            for pattern, matching in targets.items():
                removed: dict[acl.AclBinding, int] = {}

                def remove(current, pattern=pattern, matching=matching, removed=removed):
                    kept, gone = acl_admin.apply_deletion(pattern, current, filters, matching)
                    removed.clear()
                    removed.update(gone)
                    return kept

                try:
                    written = await self.zk_client.update_resource_acls(pattern, remove)
                except (ZooKeeperError, acl.AclError) as error:
                    logger.error("Deleting ACLs of %s failed: %r", pattern, error)
                    deleted.update(removed)
                    failed.update(
                        dict.fromkeys(
                            removed, (errors.UnknownServerError.code, acl_admin.UNEXPECTED_ERROR)
                        )
                    )
                    continue
                self.authorizer.set_acls(pattern, written)
                deleted.update(removed)
                if removed:
                    logger.info("Deleted ACLs %s", sorted(removed))
        return acl_admin.deletion_results(filters, deleted, failed)

    async def handle_delete_topics(self, request: transport.Request) -> Any:
        """Marks topics for deletion under /admin/delete_topics (the controller deletes
        them) and answers once they are gone, or REQUEST_TIMED_OUT."""
        message = decode_body(DeleteTopicsRequest, request)
        return to_wire(await self.delete_topics(message))

    async def delete_topics(self, message: DeleteTopicsRequest) -> DeleteTopicsResponse:
        if not self.controller.is_active:
            return DeleteTopicsResponse(
                tuple(
                    TopicResult(name, errors.NotControllerError.code, "not the controller")
                    for name in message.names
                )
            )
        results: dict[str, TopicResult] = {}
        existing = set(await self.zk_client.get_all_topics())
        for name in message.names:
            if name not in existing:
                results[name] = TopicResult(
                    name, errors.UnknownTopicOrPartitionError.code, f"Topic '{name}' does not exist"
                )
            elif not self.config.delete_topic_enable:
                results[name] = TopicResult(
                    name, errors.TopicDeletionDisabledError.code, "delete.topic.enable is false"
                )
            else:
                await self.zk_client.mark_topic_for_deletion(name)
                results[name] = TopicResult(name, 0)
        pending = [name for name, result in results.items() if result.error_code == 0]
        with trio.move_on_after(message.timeout_ms / 1000):
            while pending:
                await self._metadata_updated.wait()
                pending = [n for n in pending if self.metadata_cache.partitions_of(n)]
        for name in pending:
            results[name] = TopicResult(
                name, errors.RequestTimedOutError.code, "marked for deletion; not deleted yet"
            )
        return DeleteTopicsResponse(tuple(results[name] for name in message.names))

    async def handle_init_producer_id(self, request: transport.Request) -> Any:
        decode_body(InitProducerIdRequest, request)
        return to_wire(await self.init_producer_id())

    async def init_producer_id(self) -> InitProducerIdResponse:
        """A new producer id for an idempotent producer (no transactions: epoch 0)."""
        async with self._producer_id_lock:
            if self._producer_ids is None or self._producer_ids[0] > self._producer_ids[1]:
                self._producer_ids = await self.zk_client.allocate_producer_id_block(self.broker_id)
            producer_id = self._producer_ids[0]
            self._producer_ids = (producer_id + 1, self._producer_ids[1])
        return InitProducerIdResponse(0, producer_id, 0)

    # -- partitions, configs and records: kcore's Admin over msgpack ----------------------

    async def handle_create_partitions(self, request: transport.Request) -> Any:
        message = decode_body(CreatePartitionsRequest, request)
        additions = [PartitionAddition(t.name, t.count, t.assignments) for t in message.topics]
        results = await self.create_partitions(additions, message.timeout_ms, message.validate_only)
        return to_wire(CreatePartitionsResponse(tuple(results)))

    async def handle_describe_configs(self, request: transport.Request) -> Any:
        message = decode_body(DescribeConfigsRequest, request)
        results = []
        for resource in message.resources:
            kind, name = resource.resource_type, resource.resource_name
            try:
                entries = await self.describe_configs(kind, name)
            except errors.KafkaError as error:
                results.append(DescribeConfigsResult(kind, name, error.code, str(error)))
                continue
            described = tuple(
                DescribedConfig(
                    e.name, e.value, int(e.source), int(e.config_type), e.is_sensitive, e.read_only
                )
                for e in entries
            )
            results.append(DescribeConfigsResult(kind, name, 0, None, described))
        return to_wire(DescribeConfigsResponse(tuple(results)))

    async def handle_incremental_alter_configs(self, request: transport.Request) -> Any:
        message = decode_body(IncrementalAlterConfigsRequest, request)
        results = []
        for resource in message.resources:
            kind, name = resource.resource_type, resource.resource_name
            alterations = [(c.name, c.operation, c.value) for c in resource.configs]
            try:
                await self.incremental_alter_configs(kind, name, alterations, message.validate_only)
            except errors.KafkaError as error:
                results.append(AlterConfigsResult(kind, name, error.code, str(error)))
                continue
            results.append(AlterConfigsResult(kind, name, 0))
        return to_wire(IncrementalAlterConfigsResponse(tuple(results)))

    async def incremental_alter_configs(
        self,
        kind: int,
        name: str,
        alterations: list[tuple[str, int, str | None]],
        validate_only: bool,
    ) -> None:
        """IncrementalAlterConfigs of one resource: `(name, op, value)` alterations (SET,
        DELETE, APPEND, SUBTRACT) applied to a topic's overrides or to a broker's dynamic
        configs ("" for the cluster-wide default). Raises the KafkaError its result
        carries."""
        if kind == BROKER_RESOURCE:
            await self.alter_broker_config(
                name,
                lambda current: apply_incremental_broker_alterations(current, alterations),
                validate_only,
            )
            return
        if kind != TOPIC_RESOURCE:
            raise errors.InvalidRequestError(
                f"Unknown resource type {kind}: kcore alters topic (2) and broker (4) configs"
            )
        await self.alter_topic_config(
            name, lambda current: apply_incremental_alterations(current, alterations), validate_only
        )

    async def handle_delete_records(self, request: transport.Request) -> Any:
        """Each partition's records before an offset deleted, on this broker as its leader
        (NOT_LEADER_OR_FOLLOWER otherwise), answered once every live replica has followed."""
        message = decode_body(DeleteRecordsRequest, request)
        offsets = {TopicPartition(p.topic, p.partition): p.offset for p in message.partitions}
        answers = await self.replica_manager.delete_records(
            offsets, message.timeout_ms, lambda: self.metadata_cache.brokers.keys()
        )
        return to_wire(
            DeleteRecordsResponse(
                tuple(
                    DeleteRecordsPartitionResponse(tp.topic, tp.partition, code, low_watermark)
                    for tp, (low_watermark, code) in answers.items()
                )
            )
        )
