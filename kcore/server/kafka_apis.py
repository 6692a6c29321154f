"""The Kafka-protocol face of a broker's request handling: each handler turns the codec's
request dict (Kafka's nesting, topic -> partitions) into kcore's request value, calls the
same code the msgpack handlers call (`KafkaApis`, the replica manager), and turns kcore's
answer back into Kafka's response dict. Nothing here decides anything a msgpack client
would get decided differently: this module is translation.

Kafka-protocol connections are clients, never replicas: kcore's brokers replicate over
kcore's own protocol, so a Fetch or ListOffsets that names a replica id is served as a
consumer's (with an authorizer, a Fetch naming one needs ClusterAction first, as in Kafka;
the Fetch handler checks that itself, with the fetch's session, and the door,
kcore.security.request_authorization, every other api).
"""

from __future__ import annotations

import base64
import logging
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio

import transport
from kcore import errors
from kcore.common import ElectionType, TopicPartition
from kcore.config import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigSourceCode,
)
from kcore.coordinator.group import GROUP_API_KEYS
from kcore.metrics import FetchSessionMetrics
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    CONSUMER_REPLICA_ID,
    NO_EPOCH,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    ProducePartitionData,
    ProduceRequest,
)
from kcore.security import acl_admin, scram_admin
from kcore.security.acl import CLUSTER_NAME, AclOperation, ResourceType, authorized_operations
from kcore.security.request_authorization import MESSAGES, RequestAuthorization
from kcore.server.fetch_session import (
    FINAL_EPOCH,
    FetchManager,
    FetchSessionCache,
    PartitionFetch,
    TopicIdPartition,
)
from kcore.server.kafka_versions import api_versions_body
from kcore.topic_creation import PartitionAddition

if TYPE_CHECKING:
    from kcore.server.apis import KafkaApis

logger = logging.getLogger("kcore.server.kafka_apis")

_ZERO_UUID = uuid.UUID(int=0)
_INT32_MAX = 2**31 - 1
_NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's "not requested" marker
_DESCRIBE_GROUPS_KEY = 15


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """kcore's topic id (Kafka's Uuid.toString: URL-safe base64, no padding) as a UUID."""
    if not topic_id:
        return _ZERO_UUID
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
    except ValueError:
        return _ZERO_UUID


def topic_id_string(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _nest(
    flat: Iterable[Any], make_partition: Callable[[Any], dict], topic_key: str = "name"
) -> list[dict]:
    """Kafka's topic -> partitions nesting of kcore's flat per-partition answers, topics in
    the order they first appear."""
    topics: dict[str, list[dict]] = {}
    for answer in flat:
        topics.setdefault(answer.topic, []).append(make_partition(answer))
    return [{topic_key: name, "partitions": parts} for name, parts in topics.items()]


@attrs.define(eq=False)
class KafkaProtocolApis:
    apis: KafkaApis
    # The broker's FetchSessionCache metrics, given the cache once it is made.
    fetch_session_metrics: FetchSessionMetrics | None = None
    # KIP-227's fetch sessions, made at the first fetch (so that a broker no Kafka client
    # fetches from draws nothing from its seeded rng).
    _fetch_manager: FetchManager | None = attrs.field(default=None, init=False)
    # The authorizer's checks of fetches, which need the fetch's session, so are made here
    # rather than at the door (kcore.security.request_authorization).
    _authorization: RequestAuthorization | None = attrs.field(default=None, init=False)
    # The metadata cache's topic ids as last seen, and their names by id (Fetch v13+).
    _topic_ids_seen: dict[str, str] = attrs.field(factory=dict, init=False)
    _topic_names: dict[uuid.UUID, str] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        if self.apis.authorizer is not None:
            cache = self.apis.metadata_cache
            self._authorization = RequestAuthorization(
                self.apis.authorizer,
                topic_exists=lambda topic: bool(cache.partitions_of(topic)),
                auto_create_topics=lambda: self.apis.config.auto_create_topics_enable,
            )

    @property
    def fetch_manager(self) -> FetchManager:
        if self._fetch_manager is None:
            self._fetch_manager = FetchManager(
                FetchSessionCache(
                    self.apis.config.get("max.incremental.fetch.session.cache.slots"),
                    random.Random(self.apis.rng.getrandbits(64)),
                )
            )
            if self.fetch_session_metrics is not None:
                self.fetch_session_metrics.attach(self._fetch_manager.cache)
        return self._fetch_manager

    def handlers(self) -> dict[int, transport.Handler]:
        return {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offsets_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator,
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
            ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs,
            ApiKey.ALTER_CONFIGS: self.handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions,
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.DESCRIBE_PRODUCERS: self.handle_describe_producers,
            ApiKey.ELECT_LEADERS: self.handle_elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.handle_list_partition_reassignments,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (self.handle_describe_user_scram_credentials),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials,
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.CREATE_ACLS: self.handle_create_acls,
            ApiKey.DELETE_ACLS: self.handle_delete_acls,
            **{api_key: self.handle_group_request for api_key in GROUP_API_KEYS},
        }

    # -- connection set-up ---------------------------------------------------------------

    async def handle_api_versions(self, request: transport.Request) -> dict:
        return api_versions_body()

    # -- metadata ------------------------------------------------------------------------

    async def handle_metadata(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        asked = body.get("topics")
        if asked is None or (request.api_version == 0 and not asked):
            names = None  # every topic (v0 said so with an empty list)
        else:
            names = []
            for topic in asked:
                name = topic.get("name")
                if name is None:
                    name = self._topic_name(topic.get("topic_id"))
                names.append(name if name is not None else "")
        cache = self.apis.metadata_cache
        described = self.apis.metadata_response(
            None if names is None else tuple(names), self.apis.listener_of(request.connection)
        )
        # Kafka's auto.create.topics.enable, when the client allows it (Metadata v4+ says;
        # older versions always did): an unknown topic named by name is created.
        auto_create = self.apis.config.auto_create_topics_enable and body.get(
            "allow_auto_topic_creation", True
        )
        created: dict[str, int] = {}
        for topic in described.topics:
            unknown = topic.error_code == errors.UnknownTopicOrPartitionError.code
            if auto_create and unknown and topic.name and topic.name not in created:
                created[topic.name] = await self.apis.auto_create_topic(topic.name)
        # Metadata v8+: the operations the principal may perform (Kafka's
        # authorizedOperations), on each topic when asked, on the cluster when asked up to v10
        # (DescribeCluster's since).
        topic_operations = request.api_version >= 8 and body.get(
            "include_topic_authorized_operations", False
        )
        cluster_operations = _NO_AUTHORIZED_OPERATIONS
        if 8 <= request.api_version <= 10 and body.get("include_cluster_authorized_operations"):
            cluster_operations = self._cluster_authorized_operations(request)
        topics = []
        for topic in described.topics:
            topics.append(
                {
                    "error_code": created.get(topic.name, topic.error_code),
                    "name": topic.name,
                    "topic_id": topic_uuid(topic.topic_id or cache.topic_ids.get(topic.name)),
                    "is_internal": topic.name.startswith("__"),
                    "partitions": [
                        {
                            "error_code": p.error_code,
                            "partition_index": p.partition,
                            "leader_id": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replica_nodes": list(p.replicas),
                            "isr_nodes": list(p.isr),
                            "offline_replicas": list(p.offline_replicas),
                        }
                        for p in topic.partitions
                    ],
                    "topic_authorized_operations": self._authorized_operations(
                        request, ResourceType.TOPIC, topic.name
                    )
                    if topic_operations
                    else _NO_AUTHORIZED_OPERATIONS,
                }
            )
        return {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in described.brokers
            ],
            "cluster_id": described.cluster_id,
            "controller_id": described.controller_id,
            "topics": topics,
            "cluster_authorized_operations": cluster_operations,
        }

    def _authorized_operations(
        self, request: transport.Request, kind: ResourceType, name: str
    ) -> int:
        """The bit field of the operations the request's principal may perform on the
        resource (every one of its type without an authorizer)."""
        address = request.connection.peer_address
        return authorized_operations(
            self.apis.authorizer, request.connection.context.get("principal"),
            str(address[0]) if address else "", kind, name,
        )  # fmt: skip

    def _cluster_authorized_operations(self, request: transport.Request) -> int:
        """Kafka's: 0 unless the principal may describe the cluster."""
        authorization = self._authorization
        if authorization is not None and not authorization.may_cluster(
            request, AclOperation.DESCRIBE
        ):
            return 0
        return self._authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)

    def _topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        if topic_id is None or topic_id == _ZERO_UUID:
            return None
        wanted = topic_id_string(topic_id)
        for name, known in self.apis.metadata_cache.topic_ids.items():
            if known == wanted:
                return name
        return None

    async def handle_describe_cluster(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        described = self.apis.metadata_response((), self.apis.listener_of(request.connection))
        operations = _NO_AUTHORIZED_OPERATIONS
        if body.get("include_cluster_authorized_operations"):
            operations = self._cluster_authorized_operations(request)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "cluster_id": described.cluster_id,
            "controller_id": described.controller_id,
            "brokers": [
                {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in described.brokers
            ],
            "cluster_authorized_operations": operations,
        }

    # -- produce and fetch ---------------------------------------------------------------

    async def handle_produce(self, request: transport.Request) -> dict | None:
        body: dict = request.body  # type: ignore[assignment]
        acks, timeout_ms = body["acks"], body["timeout_ms"]
        asked = [
            (topic["name"], part["index"], part["records"])
            for topic in body["topic_data"]
            for part in topic["partition_data"]
        ]
        if body.get("transactional_id") is not None:
            return self._produce_error(
                asked, errors.InvalidRequestError.code, "kcore has no transactions"
            )
        if acks not in (-1, 0, 1):
            return self._produce_error(
                asked, errors.InvalidRequiredAcksError.code, f"acks must be -1, 0 or 1, got {acks}"
            )
        produce = ProduceRequest(
            acks,
            max(timeout_ms, 0),
            tuple(
                ProducePartitionData(topic, partition, bytes(records or b""))
                for topic, partition, records in asked
            ),
        )
        response = await self.apis.replica_manager.append_records(produce)
        if acks == 0:
            return None
        return {
            "responses": [
                {"name": topic["name"], "partition_responses": topic["partitions"]}
                for topic in _nest(response.partitions, _produce_partition)
            ],
            "throttle_time_ms": 0,
        }

    @staticmethod
    def _produce_error(asked: list[tuple[str, int, Any]], code: int, message: str) -> dict:
        topics: dict[str, list[dict]] = {}
        for topic, partition, _ in asked:
            topics.setdefault(topic, []).append(
                {"index": partition, "error_code": code, "base_offset": -1,
                 "error_message": message}
            )  # fmt: skip
        return {
            "responses": [
                {"name": name, "partition_responses": parts} for name, parts in topics.items()
            ],
            "throttle_time_ms": 0,
        }

    async def handle_fetch(self, request: transport.Request) -> dict:
        """Kafka's handleFetchRequest: the request's fetch context (its session, KIP-227:
        kcore.server.fetch_session) lists the partitions to read; each is checked (an
        unknown topic id, the authorizer's READ, or ClusterAction for a replica's fetch, a
        topic id that is no longer the topic's) and the others read by the replica manager,
        as a consumer's; the context then says which answers the response carries."""
        body: dict = request.body  # type: ignore[assignment]
        version = request.api_version
        uses_topic_ids = version >= 13
        topic_ids = self.apis.metadata_cache.topic_ids
        topic_names = self._topic_names_by_id() if uses_topic_ids else {}

        def partition_of(topic: dict, partition: int) -> TopicIdPartition:
            if uses_topic_ids:
                topic_id = topic["topic_id"]
                return TopicIdPartition(topic_id, topic_names.get(topic_id), partition)
            return TopicIdPartition(_ZERO_UUID, topic["topic"], partition)

        fetch_data = {
            partition_of(topic, part["partition"]): PartitionFetch(
                part["fetch_offset"],
                max(part["partition_max_bytes"], 0),
                current_leader_epoch=part.get("current_leader_epoch", NO_EPOCH),
                last_fetched_epoch=part.get("last_fetched_epoch", NO_EPOCH),
                log_start_offset=part.get("log_start_offset", -1),
            )
            for topic in body["topics"]
            for part in topic["partitions"]
        }
        to_forget = [
            partition_of(topic, partition)
            for topic in body.get("forgotten_topics_data") or ()
            for partition in topic["partitions"]
        ]
        context = self.fetch_manager.new_context(
            version, body.get("session_id", 0), body.get("session_epoch", FINAL_EPOCH),
            False,  # a replica's fetch is served as a consumer's: its session unprivileged
            fetch_data, to_forget, topic_names, trio.current_time() * 1000,
        )  # fmt: skip
        refusal = self._fetch_refusal(request, body, version)
        erroneous: dict[TopicIdPartition, dict] = {}
        interesting: list[tuple[TopicIdPartition, PartitionFetch]] = []
        for tp, fetch in context.partitions():
            if tp.topic is None:
                code = errors.UnknownTopicIdError.code
            else:
                code = refusal(tp.topic)
                known_id = topic_ids.get(tp.topic)
                if not code and uses_topic_ids and known_id and topic_uuid(known_id) != tp.topic_id:
                    # The name now belongs to a topic made since (deleted and recreated).
                    code = errors.InconsistentTopicIdError.code
            if code:
                erroneous[tp] = _fetch_error(tp.partition, code)
            else:
                interesting.append((tp, fetch))
        answers: dict[TopicIdPartition, dict] = {}
        if interesting:
            max_bytes = body.get("max_bytes", _INT32_MAX) if version >= 3 else _INT32_MAX
            response = await self.apis.replica_manager.fetch_messages(
                FetchRequest(
                    CONSUMER_REPLICA_ID, -1, max(body["max_wait_ms"], 0),
                    max(body["min_bytes"], 0), max(max_bytes, 0),
                    tuple(
                        FetchPartition(
                            tp.topic, tp.partition, fetch.fetch_offset, fetch.max_bytes,  # type: ignore[arg-type]
                            current_leader_epoch=fetch.current_leader_epoch,
                            last_fetched_epoch=fetch.last_fetched_epoch,
                            log_start_offset=fetch.log_start_offset,
                        )
                        for tp, fetch in interesting
                    ),
                )
            )  # fmt: skip
            read = {(answer.topic, answer.partition): answer for answer in response.partitions}
            for tp, _ in interesting:
                answer = read.get((tp.topic, tp.partition))  # type: ignore[arg-type]
                if answer is not None:
                    answers[tp] = _fetch_partition(answer)
        answers.update(erroneous)
        result = context.respond(answers, trio.current_time() * 1000)
        topics: dict[object, dict] = {}
        for tp, partition in result.partitions.items():
            key = tp.topic_id if uses_topic_ids else tp.topic
            entry = topics.get(key)
            if entry is None:
                entry = topics[key] = {"topic": tp.topic, "topic_id": tp.topic_id, "partitions": []}
            entry["partitions"].append(partition)
        return {
            "throttle_time_ms": 0,
            "error_code": result.error_code,
            "session_id": result.session_id,
            "responses": list(topics.values()),
        }

    def _topic_names_by_id(self) -> dict[uuid.UUID, str]:
        """The metadata cache's topic ids, reversed; remade only when they changed (a
        comparison of two dicts is far cheaper than decoding every id per fetch)."""
        topic_ids = self.apis.metadata_cache.topic_ids
        if self._topic_ids_seen != topic_ids:
            self._topic_ids_seen = dict(topic_ids)
            self._topic_names = {topic_uuid(i): name for name, i in topic_ids.items()}
        return self._topic_names

    def _fetch_refusal(
        self, request: transport.Request, body: dict, version: int
    ) -> Callable[[str], int]:
        """The authorizer's answer for each topic of a fetch (0: allowed), as Kafka's
        handleFetchRequest checks: a replica's fetch (a replica id, v15's in ReplicaState)
        needs ClusterAction, a consumer's READ on the topic. Everything is allowed without
        an authorizer."""
        authorization = self._authorization
        if authorization is None:
            return lambda topic: 0
        if version >= 15:
            replica_id = (body.get("replica_state") or {}).get("replica_id", CONSUMER_REPLICA_ID)
        else:
            replica_id = body.get("replica_id", CONSUMER_REPLICA_ID)
        if replica_id >= 0:
            code = 0 if authorization.may_cluster(request, AclOperation.CLUSTER_ACTION) else (
                errors.TopicAuthorizationFailedError.code
            )  # fmt: skip
            return lambda topic: code
        decided: dict[str, int] = {}

        def refusal(topic: str) -> int:
            if topic not in decided:
                allowed = authorization.may(request, AclOperation.READ, ResourceType.TOPIC, topic)
                decided[topic] = 0 if allowed else errors.TopicAuthorizationFailedError.code
            return decided[topic]

        return refusal

    async def handle_delete_records(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        offsets = {
            TopicPartition(topic["name"], part["partition_index"]): part["offset"]
            for topic in body["topics"]
            for part in topic["partitions"]
        }
        cache = self.apis.metadata_cache
        answers = await self.apis.replica_manager.delete_records(
            offsets, max(body["timeout_ms"], 0), lambda: cache.brokers.keys()
        )
        topics: dict[str, list[dict]] = {}
        for tp, (low_watermark, error_code) in answers.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "low_watermark": low_watermark,
                 "error_code": error_code}
            )  # fmt: skip
        return {
            "throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        }

    async def handle_list_offsets(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        wanted = [
            ListOffsetsPartition(
                topic["name"],
                part["partition_index"],
                part["timestamp"],
                part.get("current_leader_epoch", NO_EPOCH),
            )
            for topic in body["topics"]
            for part in topic["partitions"]
        ]
        # A partition asked twice is answered INVALID_REQUEST, both times (as Kafka does).
        counts = Counter((w.topic, w.partition) for w in wanted)
        duplicated = {key for key, count in counts.items() if count > 1}
        response = self.apis.replica_manager.list_offsets(
            ListOffsetsRequest(
                CONSUMER_REPLICA_ID,
                tuple(w for w in wanted if (w.topic, w.partition) not in duplicated),
            )
        )
        answers = list(response.partitions) + [
            ListOffsetsPartitionResponse(w.topic, w.partition, errors.InvalidRequestError.code)
            for w in wanted
            if (w.topic, w.partition) in duplicated
        ]

        def partition(answer: Any) -> dict:
            found = answer.error_code == 0
            return {
                "partition_index": answer.partition,
                "error_code": answer.error_code,
                "old_style_offsets": [answer.offset] if found else [],
                "timestamp": answer.timestamp,
                "offset": answer.offset,
                "leader_epoch": answer.leader_epoch,
            }

        return {"throttle_time_ms": 0, "topics": _nest(answers, partition)}

    async def handle_offsets_for_leader_epoch(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        asked = OffsetForLeaderEpochRequest(
            CONSUMER_REPLICA_ID,
            tuple(
                OffsetForLeaderEpochPartition(
                    topic["topic"],
                    part["partition"],
                    part.get("current_leader_epoch", NO_EPOCH),
                    part["leader_epoch"],
                )
                for topic in body["topics"]
                for part in topic["partitions"]
            ),
        )
        response = self.apis.replica_manager.last_offsets_for_leader_epochs(asked)

        def partition(answer: Any) -> dict:
            return {
                "error_code": answer.error_code,
                "partition": answer.partition,
                "leader_epoch": answer.leader_epoch,
                "end_offset": answer.end_offset,
            }

        return {
            "throttle_time_ms": 0,
            "topics": _nest(response.partitions, partition, topic_key="topic"),
        }

    # -- producers and coordinators ------------------------------------------------------

    async def handle_init_producer_id(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        if body.get("transactional_id") is not None:
            logger.warning(
                "InitProducerId for transactional id %r from %s refused: kcore has no "
                "transactions (idempotent producers only)",
                body["transactional_id"],
                request.connection.peer_name,
            )
            return {"throttle_time_ms": 0, "error_code": errors.InvalidRequestError.code,
                    "producer_id": -1, "producer_epoch": -1}  # fmt: skip
        # Kafka gives an idempotent producer a new id whenever it asks, bumping nothing
        # (TransactionCoordinator.handleInitProducerId without a transactional id).
        answer = await self.apis.init_producer_id()
        return {
            "throttle_time_ms": 0,
            "error_code": answer.error_code,
            "producer_id": answer.producer_id,
            "producer_epoch": answer.producer_epoch,
        }

    async def handle_describe_producers(self, request: transport.Request) -> dict:
        """The idempotent producers a partition's leader knows (Kafka's DescribeProducers):
        id, epoch, last sequence and timestamp; no transactions, so no coordinator epoch."""
        body: dict = request.body  # type: ignore[assignment]
        partitions = self.apis.replica_manager.partitions
        topics = []
        for topic in body["topics"]:
            described = []
            for index in topic["partition_indexes"]:
                partition = partitions.get(TopicPartition(topic["name"], index))
                try:
                    if partition is None:
                        raise errors.UnknownTopicOrPartitionError(
                            f"{topic['name']}-{index} is not on broker {self.apis.broker_id}"
                        )
                    partition.check_leader()
                except errors.KafkaError as error:
                    described.append(
                        {"partition_index": index, "error_code": error.code,
                         "error_message": str(error), "active_producers": []}
                    )  # fmt: skip
                    continue
                producers = partition.log.producer_state.producers
                described.append(
                    {
                        "partition_index": index,
                        "error_code": 0,
                        "error_message": None,
                        "active_producers": [
                            {
                                "producer_id": producer_id,
                                "producer_epoch": entry.epoch,
                                "last_sequence": entry.last_seq,
                                "last_timestamp": entry.batches[-1].max_timestamp
                                if entry.batches
                                else -1,
                                "coordinator_epoch": -1,
                                "current_txn_start_offset": -1,
                            }
                            for producer_id, entry in sorted(producers.items())
                        ],
                    }
                )
            topics.append({"name": topic["name"], "partitions": described})
        return {"throttle_time_ms": 0, "topics": topics}

    async def handle_find_coordinator(self, request: transport.Request) -> dict:
        """A group's coordinator: the leader of its `__consumer_offsets` partition, by the
        listener the client came in on (v4 asks for several keys at once). No transaction
        coordinator runs on kcore's brokers: those keys get COORDINATOR_NOT_AVAILABLE."""
        body: dict = request.body  # type: ignore[assignment]
        listener = self.apis.listener_of(request.connection)
        keys = body.get("coordinator_keys")
        batched = request.api_version >= 4
        if not batched:
            keys = [body.get("key", "")]
        key_type = body.get("key_type", 0)
        answers = []
        for key in keys or []:
            if key_type == 0:
                code, node_id, host, port = await self.apis.group_coordinator_for(key, listener)
                message = None if code == 0 else "the group's coordinator is not available yet"
            else:
                code, node_id, host, port = errors.CoordinatorNotAvailableError.code, -1, "", -1
                message = "kcore has no transaction coordinator"
            answers.append({"key": key, "node_id": node_id, "host": host, "port": port,
                            "error_code": code, "error_message": message})  # fmt: skip
        first = answers[0] if answers else {"node_id": -1, "host": "", "port": -1,
                                            "error_code": 0, "error_message": None}  # fmt: skip
        return {
            "throttle_time_ms": 0,
            "error_code": first["error_code"],
            "error_message": first["error_message"],
            "node_id": first["node_id"],
            "host": first["host"],
            "port": first["port"],
            "coordinators": answers if batched else [],
        }

    # -- consumer groups -----------------------------------------------------------------

    async def handle_group_request(self, request: transport.Request) -> dict:
        """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
        ListGroups, DescribeGroups, DeleteGroups: the group coordinator answers (its core
        takes the codec's bodies as they are)."""
        coordinator = self.apis.group_coordinator
        assert coordinator is not None  # every broker runs one
        response = await coordinator.handle(
            request.api_key, request.api_version, request.body,  # type: ignore[arg-type]
            client_id=request.client_id or "", client_host=f"/{request.connection.peer_address[0]}",
        )  # fmt: skip
        body: dict = request.body  # type: ignore[assignment]
        if (
            request.api_key == _DESCRIBE_GROUPS_KEY
            and request.api_version >= 3
            and body.get("include_authorized_operations")
        ):
            # Kafka's handleDescribeGroupsRequest: each group found, its operations.
            for group in response.get("groups", ()):
                if group["error_code"] == 0:
                    group["authorized_operations"] = self._authorized_operations(
                        request, ResourceType.GROUP, group["group_id"]
                    )
        return response

    # -- leader elections ----------------------------------------------------------------

    async def handle_elect_leaders(self, request: transport.Request) -> dict:
        """ElectLeaders (to the controller): PREFERRED (v0's only type) or UNCLEAN, for the
        partitions named, or every partition when they are null."""
        body: dict = request.body  # type: ignore[assignment]
        election_type = ElectionType(body.get("election_type", 0))
        asked = body["topic_partitions"]
        partitions = (
            None
            if asked is None
            else [TopicPartition(t["topic"], p) for t in asked for p in t["partitions"]]
        )
        answers = await self.apis.elect_leaders(
            partitions, election_type, max(body["timeout_ms"], 0)
        )
        if answers is None:  # not the controller
            return {
                "throttle_time_ms": 0,
                "error_code": errors.NotControllerError.code,
                "replica_election_results": [],
            }
        topics: dict[str, list[dict]] = {}
        for tp, outcome in sorted(answers.items()):
            topics.setdefault(tp.topic, []).append(
                {"partition_id": tp.partition, "error_code": outcome.error_code,
                 "error_message": outcome.message}
            )  # fmt: skip
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "replica_election_results": [
                {"topic": topic, "partition_result": results} for topic, results in topics.items()
            ],
        }

    # -- partition reassignments ---------------------------------------------------------

    async def handle_alter_partition_reassignments(self, request: transport.Request) -> dict:
        """AlterPartitionReassignments (to the controller): each partition to its target
        replicas, null replicas cancelling its reassignment."""
        body: dict = request.body  # type: ignore[assignment]
        asked = {
            TopicPartition(t["name"], p["partition_index"]): p["replicas"]
            for t in body["topics"]
            for p in t["partitions"]
        }
        results = await self.apis.alter_partition_reassignments(asked)
        if results is None:  # not the controller
            return {
                "throttle_time_ms": 0,
                "error_code": errors.NotControllerError.code,
                "error_message": None,
                "responses": [],
            }
        topics: dict[str, list[dict]] = {}
        for tp, result in sorted(results.items()):
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": result.error_code,
                 "error_message": result.message}
            )  # fmt: skip
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "responses": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        }

    async def handle_list_partition_reassignments(self, request: transport.Request) -> dict:
        """ListPartitionReassignments (to the controller): the named partitions (null
        topics: all) that are being reassigned."""
        body: dict = request.body  # type: ignore[assignment]
        asked = body.get("topics")
        partitions = (
            None
            if asked is None
            else [TopicPartition(t["name"], p) for t in asked for p in t["partition_indexes"]]
        )
        listed = await self.apis.list_partition_reassignments(partitions)
        if listed is None:  # not the controller
            return {
                "throttle_time_ms": 0,
                "error_code": errors.NotControllerError.code,
                "error_message": None,
                "topics": [],
            }
        topics: dict[str, list[dict]] = {}
        for tp, assignment in sorted(listed.items()):
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": list(assignment.replicas),
                 "adding_replicas": list(assignment.adding_replicas),
                 "removing_replicas": list(assignment.removing_replicas)}
            )  # fmt: skip
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
        }

    # -- SCRAM users ---------------------------------------------------------------------

    async def handle_describe_user_scram_credentials(self, request: transport.Request) -> dict:
        """DescribeUserScramCredentials: the named users (null or empty: every user)."""
        body: dict = request.body  # type: ignore[assignment]
        asked = body.get("users")
        answer = await self.apis.describe_user_scram_credentials(
            None if asked is None else [user["name"] for user in asked]
        )
        return {
            "throttle_time_ms": 0,
            "error_code": answer.error_code,
            "error_message": answer.error_message,
            "results": [
                {"user": r.user, "error_code": r.error_code, "error_message": r.error_message,
                 "credential_infos": [
                     {"mechanism": i.mechanism, "iterations": i.iterations}
                     for i in r.credential_infos
                 ]}
                for r in answer.results
            ],
        }  # fmt: skip

    async def handle_alter_user_scram_credentials(self, request: transport.Request) -> dict:
        """AlterUserScramCredentials (to the controller): salted upsertions and deletions."""
        body: dict = request.body  # type: ignore[assignment]
        message = scram_admin.AlterUserScramCredentialsRequest(
            tuple(
                scram_admin.ScramCredentialDeletion(d["name"], d["mechanism"])
                for d in body["deletions"]
            ),
            tuple(
                scram_admin.ScramCredentialUpsertion(
                    u["name"], u["mechanism"], u["iterations"], u["salt"], u["salted_password"]
                )
                for u in body["upsertions"]
            ),
        )
        answer = await self.apis.alter_user_scram_credentials(message)
        return {
            "throttle_time_ms": 0,
            "results": [
                {"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
                for r in answer.results
            ],
        }

    # -- ACLs ----------------------------------------------------------------------------

    async def handle_describe_acls(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        answer = self.apis.describe_acls(
            acl_admin.DescribeAclsRequest(acl_admin.from_body(acl_admin.AclFilter, body))
        )
        return {"throttle_time_ms": 0, **acl_admin.as_body(answer)}

    async def handle_create_acls(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        creations = tuple(acl_admin.from_body(acl_admin.AclCreation, c) for c in body["creations"])
        answer = await self.apis.create_acls(acl_admin.CreateAclsRequest(creations))
        return {"throttle_time_ms": 0, **acl_admin.as_body(answer)}

    async def handle_delete_acls(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        filters = tuple(acl_admin.from_body(acl_admin.AclFilter, f) for f in body["filters"])
        answer = await self.apis.delete_acls(acl_admin.DeleteAclsRequest(filters))
        return {"throttle_time_ms": 0, **acl_admin.as_body(answer)}

    # -- configs -------------------------------------------------------------------------

    async def handle_describe_configs(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        results = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            try:
                entries = await self.apis.describe_configs(kind, name)
            except errors.KafkaError as error:
                results.append(
                    {"error_code": error.code, "error_message": str(error),
                     "resource_type": kind, "resource_name": name, "configs": []}
                )  # fmt: skip
                continue
            keys = resource.get("configuration_keys")
            if keys is not None:
                entries = [e for e in entries if e.name in set(keys)]
            with_synonyms = body.get("include_synonyms", False)
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": [
                        {
                            "name": entry.name,
                            "value": entry.value,
                            "read_only": entry.read_only,
                            "is_default": entry.source == ConfigSourceCode.DEFAULT_CONFIG,
                            "config_source": int(entry.source),
                            "is_sensitive": entry.is_sensitive,
                            "synonyms": [
                                {"name": s.name, "value": s.value, "source": int(s.source)}
                                for s in entry.synonyms
                            ]
                            if with_synonyms
                            else [],
                            "config_type": int(entry.config_type),
                            "documentation": None,
                        }
                        for entry in entries
                    ],
                }
            )
        return {"throttle_time_ms": 0, "results": results}

    async def handle_alter_configs(self, request: transport.Request) -> dict:
        """AlterConfigs: each topic's overrides, or broker's dynamic configs, replaced by the
        ones given."""
        body: dict = request.body  # type: ignore[assignment]
        validate_only = body.get("validate_only", False)

        async def alter(resource: dict) -> None:
            if resource["resource_type"] == BROKER_RESOURCE:
                # Kafka's ConfigAdminManager.preprocess checks, in its order.
                given = {c["name"]: c["value"] for c in resource["configs"]}
                if len(given) != len(resource["configs"]):
                    raise errors.InvalidRequestError("Error due to duplicate config keys")
                missing = [name for name, value in given.items() if value is None]
                if missing:
                    raise errors.InvalidRequestError(
                        f"Null value not supported for : {', '.join(missing)}"
                    )
                await self.apis.alter_broker_config(
                    resource["resource_name"], lambda _current: given, validate_only
                )
                return
            if resource["resource_type"] != TOPIC_RESOURCE:
                # The same refusal as the incremental request's (KafkaApis).
                await self.apis.incremental_alter_configs(
                    resource["resource_type"], resource["resource_name"], [], validate_only
                )
            given = {c["name"]: c["value"] for c in resource["configs"] if c["value"] is not None}
            await self.apis.alter_topic_config(
                resource["resource_name"], lambda _current: given, validate_only
            )

        return await self._alter_each(body["resources"], alter)

    async def handle_incremental_alter_configs(self, request: transport.Request) -> dict:
        """IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT on a topic's overrides
        or a broker's dynamic configs."""
        body: dict = request.body  # type: ignore[assignment]

        async def alter(resource: dict) -> None:
            await self.apis.incremental_alter_configs(
                resource["resource_type"],
                resource["resource_name"],
                [(c["name"], c["config_operation"], c["value"]) for c in resource["configs"]],
                body.get("validate_only", False),
            )

        return await self._alter_each(body["resources"], alter)

    @staticmethod
    async def _alter_each(resources: list[dict], alter: Callable[[dict], Awaitable[None]]) -> dict:
        responses = []
        for resource in resources:
            try:
                await alter(resource)
                code, message = 0, None
            except errors.KafkaError as error:
                code, message = error.code, str(error)
            responses.append(
                {"error_code": code, "error_message": message,
                 "resource_type": resource["resource_type"],
                 "resource_name": resource["resource_name"]}
            )  # fmt: skip
        return {"throttle_time_ms": 0, "responses": responses}

    # -- topic admin ---------------------------------------------------------------------

    async def handle_create_topics(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        topics = []
        for topic in body["topics"]:
            configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
            assignments = {
                a["partition_index"]: tuple(a["broker_ids"]) for a in topic["assignments"]
            }
            topics.append(
                CreatableTopic(
                    topic["name"],
                    topic["num_partitions"],
                    topic["replication_factor"],
                    assignments,
                    configs,
                )
            )
        response = await self.apis.create_topics(
            CreateTopicsRequest(
                tuple(topics), max(body["timeout_ms"], 0), body.get("validate_only", False)
            )
        )
        cache = self.apis.metadata_cache
        results = []
        for result in response.topics:
            partitions = cache.partitions_of(result.name) if result.error_code == 0 else []
            results.append(
                {
                    "name": result.name,
                    "topic_id": topic_uuid(cache.topic_ids.get(result.name)),
                    "error_code": result.error_code,
                    "error_message": result.error_message,
                    "num_partitions": len(partitions) if partitions else -1,
                    "replication_factor": len(partitions[0].replicas) if partitions else -1,
                    "configs": None,
                }
            )
        return {"throttle_time_ms": 0, "topics": results}

    async def handle_create_partitions(self, request: transport.Request) -> dict:
        body: dict = request.body  # type: ignore[assignment]
        additions = [
            PartitionAddition(
                topic["name"],
                topic["count"],
                None
                if topic["assignments"] is None
                else tuple(tuple(a["broker_ids"]) for a in topic["assignments"]),
            )
            for topic in body["topics"]
        ]
        results = await self.apis.create_partitions(
            additions, max(body["timeout_ms"], 0), body.get("validate_only", False)
        )
        return {
            "throttle_time_ms": 0,
            "results": [
                {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
                for r in results
            ],
        }

    async def handle_delete_topics(self, request: transport.Request) -> dict:
        """Kafka's handleDeleteTopicsRequest: topics by name, or (v6+) by id, resolved
        through the metadata cache (UNKNOWN_TOPIC_ID when no topic has it). With an
        authorizer, a topic named by id is checked here, on its name (the door lets it by):
        without DESCRIBE its name is not told and the answer is TOPIC_AUTHORIZATION_FAILED,
        without DELETE the answer is TOPIC_AUTHORIZATION_FAILED."""
        body: dict = request.body  # type: ignore[assignment]
        if request.api_version >= 6:
            asked = [(t.get("name"), t.get("topic_id") or _ZERO_UUID) for t in body["topics"]]
        else:
            asked = [(name, _ZERO_UUID) for name in body["topic_names"]]
        if any(name is not None and topic_id != _ZERO_UUID for name, topic_id in asked):
            message = "Topic name and topic ID can not both be specified."
            return {
                "throttle_time_ms": 0,
                "responses": [
                    {"name": name, "topic_id": topic_id,
                     "error_code": errors.InvalidRequestError.code, "error_message": message}
                    for name, topic_id in asked
                ],
            }  # fmt: skip
        answers: list[dict] = []  # in the order asked
        to_delete: dict[str, None] = {}  # names, each once
        denied = errors.TopicAuthorizationFailedError.code
        for name, topic_id in asked:
            answer = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
            answers.append(answer)
            if topic_id != _ZERO_UUID:
                name = answer["name"] = self._topic_name(topic_id)
                if name is None:
                    # Only the controller says an id is unknown: the request is its.
                    answer["error_code"] = (
                        errors.UnknownTopicIdError.code
                        if self.apis.controller.is_active
                        else errors.NotControllerError.code
                    )
                    answer["error_message"] = f"no topic has id {topic_id_string(topic_id)}"
                    continue
                if not self._may(request, AclOperation.DESCRIBE, name):
                    # Not told the name of a topic it may not describe (the id is no secret).
                    answer.update(name=None, error_code=denied, error_message=MESSAGES[denied])
                    continue
                if not self._may(request, AclOperation.DELETE, name):
                    answer.update(error_code=denied, error_message=MESSAGES[denied])
                    continue
            if name is None:  # neither a name nor an id: Kafka's answer
                answer.update(error_code=denied, error_message=MESSAGES[denied])
                continue
            to_delete[name] = None
        results = {}
        if to_delete:
            response = await self.apis.delete_topics(
                DeleteTopicsRequest(tuple(to_delete), max(body["timeout_ms"], 0))
            )
            results = {result.name: result for result in response.topics}
        topic_ids = self.apis.metadata_cache.topic_ids
        for answer in answers:
            result = results.get(answer["name"]) if answer["error_code"] == 0 else None
            if result is None:
                continue
            answer["error_code"], answer["error_message"] = result.error_code, result.error_message
            if answer["topic_id"] == _ZERO_UUID:
                answer["topic_id"] = topic_uuid(topic_ids.get(result.name))
        return {"throttle_time_ms": 0, "responses": answers}

    def _may(self, request: transport.Request, operation: AclOperation, topic: str) -> bool:
        authorization = self._authorization
        return authorization is None or authorization.may(
            request, operation, ResourceType.TOPIC, topic
        )


def _produce_partition(answer: Any) -> dict:
    return {
        "index": answer.partition,
        "error_code": answer.error_code,
        "base_offset": answer.base_offset,
        "log_append_time_ms": answer.log_append_time_ms,
        "log_start_offset": answer.log_start_offset,
        "record_errors": [],
        "error_message": answer.error_message,
    }


def _fetch_error(partition: int, code: int) -> dict:
    """Kafka's FetchResponse.partitionResponse: a partition answered with an error only."""
    return {
        "partition_index": partition, "error_code": code, "high_watermark": -1,
        "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": [],
        "preferred_read_replica": -1, "records": b"",
    }  # fmt: skip


def _fetch_partition(answer: Any) -> dict:
    partition = {
        "partition_index": answer.partition,
        "error_code": answer.error_code,
        "high_watermark": answer.high_watermark,
        # No transactions: everything below the high watermark is stable.
        "last_stable_offset": answer.high_watermark,
        "log_start_offset": answer.log_start_offset,
        "aborted_transactions": None if answer.error_code == 0 else [],
        "preferred_read_replica": -1,
        "records": answer.records,
    }
    if answer.diverging_epoch is not None:
        partition["diverging_epoch"] = {
            "epoch": answer.diverging_epoch.epoch,
            "end_offset": answer.diverging_epoch.end_offset,
        }
    if answer.error_code != 0 and answer.current_leader_epoch != NO_EPOCH:
        partition["current_leader"] = {
            "leader_id": answer.current_leader,
            "leader_epoch": answer.current_leader_epoch,
        }
    return partition
