"""The authorizer at the door: Kafka 3.5's KafkaApis checks (which operation on which
resource each api needs, and what a refused request is answered), around the handlers of
both codecs, so the handlers below never see what the principal may not do.

The broker wraps each codec's handler table with `RequestAuthorization.guard(handlers,
kafka_protocol=...)` when `authorizer.class.name` is set (and not otherwise: no authorizer,
no checks, as in Kafka). The principal is the connection's (`connection.context
["principal"]`, set by TLS or SASL), the host its peer's address.

Per api, as Kafka does it:

- control requests from the controller (LeaderAndIsr, UpdateMetadata, StopReplica,
  ControlledShutdown) need CLUSTER_ACTION on the cluster, refused with
  CLUSTER_AUTHORIZATION_FAILED; so do replica fetches (a Fetch naming a replica id: its
  partitions answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers them; over Kafka's
  protocol the Fetch handler checks fetches, with their sessions: kcore.server.kafka_apis);
- Produce needs WRITE, Fetch READ, ListOffsets / OffsetForLeaderEpoch (unless the caller
  holds ClusterAction) / Metadata DESCRIBE on each topic: a refused topic's partitions are
  answered TOPIC_AUTHORIZATION_FAILED and the others served; Metadata for every topic
  leaves out the topics not described, and a topic it would auto-create needs CREATE (on
  the cluster or the topic);
- CreateTopics CREATE (cluster or topic), DeleteTopics and DeleteRecords DELETE,
  CreatePartitions ALTER, DescribeConfigs DESCRIBE_CONFIGS and (Incremental)AlterConfigs
  ALTER_CONFIGS (on the topic, or the cluster for a broker's configs), DescribeProducers
  READ;
- InitProducerId (idempotent) IDEMPOTENT_WRITE on the cluster or WRITE on some topic;
- group requests READ (join, sync, heartbeat, leave, commit), DESCRIBE (find coordinator,
  fetch offsets, describe), DELETE (delete groups) on the group, and the topics' READ for
  commits, DESCRIBE for offset fetches; ListGroups lists only the groups described unless
  the cluster may be described;
- the cluster's admin requests: ElectLeaders, AlterPartitionReassignments,
  AlterUserScramCredentials, CreateAcls, DeleteAcls need ALTER; ListPartitionReassignments,
  DescribeUserScramCredentials, DescribeAcls DESCRIBE.

ApiVersions, SASL and DescribeCluster are not checked (nor are they in Kafka). Any other api
a codec serves is a super user's only (CLUSTER_AUTHORIZATION_FAILED for anyone else):
nothing new is served unchecked by mistake.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

import transport
from kcore import errors
from kcore.protocol import data
from kcore.protocol import kafka as kafka_codec
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import CONTROL_RESPONSE_TYPES
from kcore.security import acl_admin, scram_admin
from kcore.security.acl import CLUSTER_NAME, AclAuthorizer, ResourceType
from kcore.security.acl import AclOperation as Op
from kcore.wire import WireError, from_wire, to_wire

logger = logging.getLogger("kcore.security.request_authorization")

TOPIC_DENIED = errors.TopicAuthorizationFailedError.code
GROUP_DENIED = errors.GroupAuthorizationFailedError.code
CLUSTER_DENIED = errors.ClusterAuthorizationFailedError.code
# Kafka's default messages of those errors.
MESSAGES = {
    TOPIC_DENIED: "Topic authorization failed.",
    GROUP_DENIED: "Group authorization failed.",
    CLUSTER_DENIED: "Cluster authorization failed.",
}
_TOPIC_CONFIGS, _BROKER_CONFIGS = 2, 4  # DescribeConfigs' resource types
_NO_AUTHORIZED_OPERATIONS = -(2**31)
_ZERO_UUID = uuid.UUID(int=0)
# Not checked, in Kafka neither.
_UNCHECKED = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_CLUSTER}
)
# The group coordinator's apis (Kafka's request bodies on both codecs).
_OFFSET_COMMIT, _OFFSET_FETCH = 8, 9
_JOIN_GROUP, _HEARTBEAT, _LEAVE_GROUP, _SYNC_GROUP = 11, 12, 13, 14
_DESCRIBE_GROUPS, _LIST_GROUPS, _DELETE_GROUPS = 15, 16, 42

Handler = Callable[[transport.Request], Awaitable[Any]]
Policy = Callable[[transport.Request, Handler], Awaitable[Any]]


def error_body(api_key: int, version: int, code: int) -> dict:
    """A Kafka response body refusing a whole request: every top-level field at its
    schema's default (lists empty) and the error code (and Kafka's message, where the
    response carries one)."""
    schema = kafka_codec.message_schema(api_key, version, "response")
    body: dict[str, Any] = {}
    for field in schema.body.fields:
        if isinstance(field.type, kafka_codec.ArraySchema):
            body[field.name] = []
        elif isinstance(field.type, kafka_codec.StructSchema):
            continue  # none at the top level of the responses refused whole
        else:
            body[field.name] = field.default
    body["error_code"] = code
    if "error_message" in body:
        body["error_message"] = MESSAGES.get(code)
    if "node_id" in body:  # FindCoordinator: no coordinator
        body.update(node_id=-1, host="", port=-1)
    return body


@attrs.define(eq=False)
class RequestAuthorization:
    authorizer: AclAuthorizer
    # Does the topic exist (the broker's metadata)? For Metadata's auto-creation.
    topic_exists: Callable[[str], bool]
    # auto.create.topics.enable, as configured now.
    auto_create_topics: Callable[[], bool]

    def guard(self, handlers: Mapping[int, Handler], *, kafka_protocol: bool) -> dict[int, Handler]:
        policies = self._kafka_policies() if kafka_protocol else self._msgpack_policies()
        policies.update(self._group_policies())
        guarded: dict[int, Handler] = {}
        for api_key, handler in handlers.items():
            if api_key in _UNCHECKED:
                guarded[api_key] = handler
                continue
            policy = policies.get(api_key, self._super_users_only())
            guarded[api_key] = _bound(policy, handler)
        return guarded

    # -- the decision for one request ----------------------------------------------------

    def may(
        self,
        request: transport.Request,
        operation: Op,
        kind: ResourceType,
        name: str,
        *,
        quiet: bool = False,
    ) -> bool:
        """Is the request's principal allowed `operation` on the resource? A denial is
        logged unless `quiet` (a listing that leaves out what may not be seen)."""
        principal = request.connection.context.get("principal")
        host = _host(request)
        allowed = self.authorizer.authorize(principal, host, operation, kind, name)
        if not allowed and not quiet:
            # Kafka's kafka.authorizer.logger, at INFO for denials.
            logger.info(
                "Principal = %s is Denied Operation = %s from host = %s on resource = "
                "%s:LITERAL:%s for request = %s",
                principal, operation.name, host, kind.name, name,
                _api_name(request.api_key),
            )  # fmt: skip
        return allowed

    def may_cluster(
        self, request: transport.Request, operation: Op, *, quiet: bool = False
    ) -> bool:
        return self.may(request, operation, ResourceType.CLUSTER, CLUSTER_NAME, quiet=quiet)

    def _topic_check(self, operation: Op) -> Callable[[transport.Request, str], int]:
        def check(request: transport.Request, topic: str) -> int:
            return 0 if self.may(request, operation, ResourceType.TOPIC, topic) else TOPIC_DENIED

        return check

    def _may_write_idempotently(self, request: transport.Request) -> bool:
        if self.authorizer.authorize(
            request.connection.context.get("principal"), _host(request),
            Op.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME,
        ):  # fmt: skip
            return True
        return self.authorizer.authorize_by_resource_type(
            request.connection.context.get("principal"), _host(request), Op.WRITE,
            ResourceType.TOPIC,
        )  # fmt: skip

    def _super_users_only(self) -> Policy:
        async def policy(request: transport.Request, handler: Handler) -> Any:
            if self.authorizer.is_super_user(request.connection.context.get("principal")):
                return await handler(request)
            logger.info(
                "Refusing api key %d to %s: kcore checks no ACL for it, so only super users "
                "may use it", request.api_key, request.connection.peer_name,
            )  # fmt: skip
            # Kafka's codec answers this with the error code in the response's first field.
            raise transport.RpcError(CLUSTER_DENIED, MESSAGES[CLUSTER_DENIED])

        return policy

    def _cluster_policy(self, operation: Op, refused: Callable[[transport.Request], Any]) -> Policy:
        async def policy(request: transport.Request, handler: Handler) -> Any:
            if self.may_cluster(request, operation):
                return await handler(request)
            return refused(request)

        return policy

    # -- Kafka's protocol ----------------------------------------------------------------

    def _kafka_policies(self) -> dict[int, Policy]:
        refused_whole = _refused_whole_kafka
        return {
            ApiKey.PRODUCE: self._kafka_produce,
            ApiKey.FETCH: self._kafka_fetch,
            ApiKey.LIST_OFFSETS: self._kafka_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._kafka_offsets_for_leader_epoch,
            ApiKey.METADATA: self._kafka_metadata,
            ApiKey.CREATE_TOPICS: self._kafka_create_topics,
            ApiKey.DELETE_TOPICS: self._kafka_delete_topics,
            ApiKey.CREATE_PARTITIONS: self._kafka_topic_results(Op.ALTER, "results"),
            ApiKey.DELETE_RECORDS: self._kafka_delete_records,
            ApiKey.DESCRIBE_CONFIGS: self._kafka_configs(Op.DESCRIBE_CONFIGS, "results"),
            ApiKey.ALTER_CONFIGS: self._kafka_configs(Op.ALTER_CONFIGS, "responses"),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._kafka_configs(Op.ALTER_CONFIGS, "responses"),
            ApiKey.DESCRIBE_PRODUCERS: self._kafka_describe_producers,
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id(kafka_protocol=True),
            ApiKey.FIND_COORDINATOR: self._kafka_find_coordinator,
            ApiKey.ELECT_LEADERS: self._cluster_policy(Op.ALTER, refused_whole),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._cluster_policy(Op.ALTER, refused_whole),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._cluster_policy(Op.DESCRIBE, refused_whole),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self._cluster_policy(
                Op.DESCRIBE, refused_whole
            ),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self._cluster_policy(
                Op.ALTER, _refused_scram_alteration_kafka
            ),
            ApiKey.DESCRIBE_ACLS: self._cluster_policy(Op.DESCRIBE, refused_whole),
            ApiKey.CREATE_ACLS: self._cluster_policy(
                Op.ALTER,
                lambda request: {
                    "throttle_time_ms": 0,
                    "results": [_error(CLUSTER_DENIED) for _ in request.body["creations"]],
                },
            ),
            ApiKey.DELETE_ACLS: self._cluster_policy(
                Op.ALTER,
                lambda request: {
                    "throttle_time_ms": 0,
                    "filter_results": [
                        {**_error(CLUSTER_DENIED), "matching_acls": []}
                        for _ in request.body["filters"]
                    ],
                },
            ),
        }

    async def _kafka_produce(self, request: transport.Request, handler: Handler) -> Any:
        body = request.body
        if not isinstance(body, dict) or body.get("transactional_id") is not None:
            return await handler(request)  # refused below: kcore has no transactions
        answer = await self._split_kafka(
            request, handler, "topic_data", "responses", self._topic_check(Op.WRITE),
            lambda topic, code: {
                "name": topic["name"],
                "partition_responses": [
                    {"index": p["index"], "error_code": code, "base_offset": -1,
                     "log_append_time_ms": -1, "log_start_offset": -1, "record_errors": [],
                     "error_message": MESSAGES[code]}
                    for p in topic["partition_data"]
                ],
            },
            {"throttle_time_ms": 0},
        )  # fmt: skip
        return None if body.get("acks") == 0 else answer

    async def _kafka_fetch(self, request: transport.Request, handler: Handler) -> Any:
        """Checked by the Fetch handler (kcore.server.kafka_apis), as in Kafka's
        handleFetchRequest: a fetch in a session (KIP-227) reads partitions its request
        does not name, so only the session's context knows what to check."""
        return await handler(request)

    async def _kafka_list_offsets(self, request: transport.Request, handler: Handler) -> Any:
        return await self._split_kafka(
            request, handler, "topics", "topics", self._topic_check(Op.DESCRIBE),
            lambda topic, code: {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code,
                     "old_style_offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1}
                    for p in topic["partitions"]
                ],
            },
            {"throttle_time_ms": 0},
        )  # fmt: skip

    async def _kafka_offsets_for_leader_epoch(
        self, request: transport.Request, handler: Handler
    ) -> Any:
        """Kafka's rule since KIP-320: ClusterAction (a broker) may ask for every topic,
        anyone else for the topics it may describe."""
        if self.may_cluster(request, Op.CLUSTER_ACTION, quiet=True):
            return await handler(request)
        return await self._split_kafka(
            request, handler, "topics", "topics", self._topic_check(Op.DESCRIBE),
            lambda topic, code: {
                "topic": topic["topic"],
                "partitions": [
                    {"error_code": code, "partition": p["partition"], "leader_epoch": -1,
                     "end_offset": -1}
                    for p in topic["partitions"]
                ],
            },
            {"throttle_time_ms": 0},
            name_key="topic",
        )  # fmt: skip

    async def _kafka_metadata(self, request: transport.Request, handler: Handler) -> Any:
        body = request.body
        if not isinstance(body, dict):
            return await handler(request)
        asked = body.get("topics")
        every_topic = asked is None or (request.api_version == 0 and not asked)
        refused: list[str] = []
        none_left = False
        if not every_topic:
            creating = self.auto_create_topics() and body.get("allow_auto_topic_creation", True)
            may_create_all: bool | None = None
            kept = []
            for topic in asked:
                name = topic.get("name")
                if name is not None:
                    if not self.may(request, Op.DESCRIBE, ResourceType.TOPIC, name):
                        refused.append(name)
                        continue
                    if creating and not self.topic_exists(name):
                        if may_create_all is None:
                            may_create_all = self.may_cluster(request, Op.CREATE)
                        if not may_create_all and not self.may(
                            request, Op.CREATE, ResourceType.TOPIC, name
                        ):
                            refused.append(name)
                            continue
                kept.append(topic)  # one named by id is checked on the answer
            if refused:
                request = attrs.evolve(request, body={**body, "topics": kept})
                # v0 takes an empty list for every topic: what it answers is not wanted.
                none_left = request.api_version == 0 and not kept
        response = await handler(request)
        answered = []
        for topic in [] if none_left else response["topics"]:
            name = topic["name"]
            if self.may(request, Op.DESCRIBE, ResourceType.TOPIC, name or "", quiet=every_topic):
                answered.append(topic)
            elif not every_topic:
                answered.append(_refused_metadata_topic(name, topic.get("topic_id")))
        response["topics"] = answered + [_refused_metadata_topic(name) for name in refused]
        return response

    async def _kafka_create_topics(self, request: transport.Request, handler: Handler) -> Any:
        if self.may_cluster(request, Op.CREATE):
            return await handler(request)
        return await self._split_kafka(
            request, handler, "topics", "topics", self._topic_check(Op.CREATE),
            lambda topic, code: {
                "name": topic["name"], "topic_id": _ZERO_UUID, "error_code": code,
                "error_message": MESSAGES[code], "num_partitions": -1, "replication_factor": -1,
                "configs": None,
            },
            {"throttle_time_ms": 0},
        )  # fmt: skip

    async def _kafka_delete_topics(self, request: transport.Request, handler: Handler) -> Any:
        by_name = request.api_version < 6
        check = self._topic_check(Op.DELETE)
        return await self._split_kafka(
            request, handler, "topic_names" if by_name else "topics", "responses",
            # A topic named by id alone goes on: the handler resolves the id and checks
            # DESCRIBE and DELETE on the name (kcore.server.kafka_apis), as Kafka does.
            lambda request, name: 0 if name is None else check(request, name),
            lambda topic, code: {
                "name": topic if by_name else topic.get("name"),
                "topic_id": _ZERO_UUID if by_name else (topic.get("topic_id") or _ZERO_UUID),
                "error_code": code, "error_message": MESSAGES[code],
            },
            {"throttle_time_ms": 0},
            name_key=None if by_name else "name",
        )  # fmt: skip

    def _kafka_topic_results(self, operation: Op, results_key: str) -> Policy:
        async def policy(request: transport.Request, handler: Handler) -> Any:
            return await self._split_kafka(
                request, handler, "topics", results_key, self._topic_check(operation),
                lambda topic, code: {
                    "name": topic["name"], "error_code": code, "error_message": MESSAGES[code],
                },
                {"throttle_time_ms": 0},
            )  # fmt: skip

        return policy

    async def _kafka_delete_records(self, request: transport.Request, handler: Handler) -> Any:
        return await self._split_kafka(
            request, handler, "topics", "topics", self._topic_check(Op.DELETE),
            lambda topic, code: {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "low_watermark": -1,
                     "error_code": code}
                    for p in topic["partitions"]
                ],
            },
            {"throttle_time_ms": 0},
        )  # fmt: skip

    async def _kafka_describe_producers(self, request: transport.Request, handler: Handler) -> Any:
        return await self._split_kafka(
            request, handler, "topics", "topics", self._topic_check(Op.READ),
            lambda topic, code: {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": index, "error_code": code,
                     "error_message": MESSAGES[code], "active_producers": []}
                    for index in topic["partition_indexes"]
                ],
            },
            {"throttle_time_ms": 0},
        )  # fmt: skip

    def _kafka_configs(self, operation: Op, results_key: str) -> Policy:
        async def policy(request: transport.Request, handler: Handler) -> Any:
            def answer(resource: dict, code: int) -> dict:
                answered = {
                    "error_code": code, "error_message": MESSAGES[code],
                    "resource_type": resource["resource_type"],
                    "resource_name": resource["resource_name"],
                }  # fmt: skip
                if results_key == "results":  # DescribeConfigs
                    answered["configs"] = []
                return answered

            return await self._split_kafka(
                request, handler, "resources", results_key,
                lambda request, resource: self._config_check(
                    request, operation, resource["resource_type"], resource["resource_name"]
                ),
                answer, {"throttle_time_ms": 0}, name_key=None,
            )  # fmt: skip

        return policy

    def _config_check(self, request: transport.Request, operation: Op, kind: int, name: str) -> int:
        if kind == _TOPIC_CONFIGS:
            return 0 if self.may(request, operation, ResourceType.TOPIC, name) else TOPIC_DENIED
        if kind == _BROKER_CONFIGS:
            return 0 if self.may_cluster(request, operation) else CLUSTER_DENIED
        return 0  # refused by the handler: kcore has no other config resources

    def _init_producer_id(self, *, kafka_protocol: bool) -> Policy:
        async def policy(request: transport.Request, handler: Handler) -> Any:
            body = request.body
            transactional = isinstance(body, dict) and body.get("transactional_id") is not None
            if transactional or self._may_write_idempotently(request):
                return await handler(request)  # a transactional one is refused below
            if kafka_protocol:
                return error_body(request.api_key, request.api_version, CLUSTER_DENIED)
            return to_wire(data.InitProducerIdResponse(CLUSTER_DENIED))

        return policy

    async def _kafka_find_coordinator(self, request: transport.Request, handler: Handler) -> Any:
        body = request.body
        if not isinstance(body, dict):
            return await handler(request)
        key_type = body.get("key_type", 0)
        if request.api_version < 4:
            code = self._coordinator_key_check(request, key_type, body.get("key", ""))
            if code:
                return error_body(request.api_key, request.api_version, code)
            return await handler(request)
        return await self._split_kafka(
            request, handler, "coordinator_keys", "coordinators",
            lambda request, key: self._coordinator_key_check(request, key_type, key),
            lambda key, code: {
                "key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
                "error_message": MESSAGES.get(code),
            },
            {**error_body(request.api_key, request.api_version, 0), "error_message": None},
            name_key=None,
        )  # fmt: skip

    def _coordinator_key_check(self, request: transport.Request, key_type: int, key: str) -> int:
        if key_type == 0:
            return 0 if self.may(request, Op.DESCRIBE, ResourceType.GROUP, key) else GROUP_DENIED
        if self.may(request, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return 0
        return errors.TransactionalIdAuthorizationError.code

    async def _split_kafka(
        self,
        request: transport.Request,
        handler: Handler,
        items_key: str,
        answers_key: str,
        check: Callable[[transport.Request, Any], int],
        answer: Callable[[Any, int], dict],
        base: dict,
        *,
        name_key: str | None = "name",
    ) -> Any:
        """Serves the items of a Kafka request body (topics, resources, keys) the check
        allows, and answers the others with `answer(item, error code)` in the response's
        `answers_key` list (`base` + that list when none is allowed)."""
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get(items_key), list):
            return await handler(request)
        allowed, refused = [], []
        try:
            for item in body[items_key]:
                code = check(request, item if name_key is None else item.get(name_key))
                if code:
                    refused.append(answer(item, code))
                else:
                    allowed.append(item)
        except (KeyError, TypeError, AttributeError) as error:
            # Only a msgpack body (group requests) gets here unchecked by a codec.
            raise transport.RpcError(transport.INVALID_REQUEST, f"malformed: {error!r}") from None
        if not refused:
            return await handler(request)
        if not allowed:
            return {**base, answers_key: refused}
        response = await handler(attrs.evolve(request, body={**body, items_key: allowed}))
        if response is None:
            return None
        response[answers_key] = [*response[answers_key], *refused]
        return response

    # -- the group coordinator's apis (Kafka's bodies on both codecs) ---------------------

    def _group_policies(self) -> dict[int, Policy]:
        return {
            **dict.fromkeys((_JOIN_GROUP, _HEARTBEAT, _LEAVE_GROUP, _SYNC_GROUP), self._group_read),
            _OFFSET_COMMIT: self._offset_commit,
            _OFFSET_FETCH: self._offset_fetch,
            _DESCRIBE_GROUPS: self._describe_groups,
            _LIST_GROUPS: self._list_groups,
            _DELETE_GROUPS: self._delete_groups,
        }

    def _group_code(self, request: transport.Request, operation: Op, group: str) -> int:
        return 0 if self.may(request, operation, ResourceType.GROUP, group) else GROUP_DENIED

    async def _group_read(self, request: transport.Request, handler: Handler) -> Any:
        body = request.body
        if isinstance(body, dict) and self._group_code(request, Op.READ, body.get("group_id", "")):
            return error_body(request.api_key, request.api_version, GROUP_DENIED)
        return await handler(request)

    async def _offset_commit(self, request: transport.Request, handler: Handler) -> Any:
        body = request.body
        if not isinstance(body, dict):
            return await handler(request)

        def refused_topic(topic: dict, code: int) -> dict:
            return {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code}
                    for p in topic["partitions"]
                ],
            }

        if self._group_code(request, Op.READ, body.get("group_id", "")):
            return {
                "throttle_time_ms": 0,
                "topics": [refused_topic(t, GROUP_DENIED) for t in body.get("topics", [])],
            }
        return await self._split_kafka(
            request, handler, "topics", "topics", self._topic_check(Op.READ), refused_topic,
            {"throttle_time_ms": 0},
        )  # fmt: skip

    async def _offset_fetch(self, request: transport.Request, handler: Handler) -> Any:
        """A group not described: GROUP_AUTHORIZATION_FAILED (the whole answer before v8,
        that group's with v8's several groups); a topic not described: left out of an
        answer for every topic, TOPIC_AUTHORIZATION_FAILED for each partition named."""
        body = request.body
        if not isinstance(body, dict):
            return await handler(request)
        if request.api_version < 8:
            if self._group_code(request, Op.DESCRIBE, body.get("group_id", "")):
                return error_body(request.api_key, request.api_version, GROUP_DENIED)
            response = await handler(request)
            response["topics"] = self._described_offsets(
                request, response["topics"], named=body.get("topics") is not None
            )
            return response
        groups = body.get("groups") or []
        refused = [g["group_id"] for g in groups if self._group_code(request, Op.DESCRIBE,
                                                                      g["group_id"])]  # fmt: skip
        if refused:
            kept = [g for g in groups if g["group_id"] not in refused]
            if not kept:
                response = {"throttle_time_ms": 0, "groups": []}
            else:
                response = await handler(attrs.evolve(request, body={**body, "groups": kept}))
        else:
            response = await handler(request)
        named = {g["group_id"]: g.get("topics") is not None for g in groups}
        for group in response["groups"]:
            group["topics"] = self._described_offsets(
                request, group["topics"], named=named.get(group["group_id"], False)
            )
        response["groups"] = [
            *response["groups"],
            *({"group_id": g, "topics": [], "error_code": GROUP_DENIED} for g in refused),
        ]
        return response

    def _described_offsets(
        self, request: transport.Request, topics: Sequence[dict], *, named: bool
    ) -> list[dict]:
        answered = []
        for topic in topics:
            if self.may(request, Op.DESCRIBE, ResourceType.TOPIC, topic["name"]):
                answered.append(topic)
            elif named:
                answered.append(
                    {
                        "name": topic["name"],
                        "partitions": [
                            {
                                **p,
                                "committed_offset": -1,
                                "committed_leader_epoch": -1,
                                "metadata": "",
                                "error_code": TOPIC_DENIED,
                            }
                            for p in topic["partitions"]
                        ],
                    }
                )
        return answered

    async def _describe_groups(self, request: transport.Request, handler: Handler) -> Any:
        return await self._split_kafka(
            request, handler, "groups", "groups",
            lambda request, group: self._group_code(request, Op.DESCRIBE, group),
            lambda group, code: {
                "error_code": code, "group_id": group, "group_state": "", "protocol_type": "",
                "protocol_data": "", "members": [],
                "authorized_operations": _NO_AUTHORIZED_OPERATIONS,
            },
            {"throttle_time_ms": 0},
            name_key=None,
        )  # fmt: skip

    async def _list_groups(self, request: transport.Request, handler: Handler) -> Any:
        response = await handler(request)
        if isinstance(response, dict) and not self.may_cluster(request, Op.DESCRIBE):
            response["groups"] = [
                g for g in response.get("groups", [])
                if self.may(request, Op.DESCRIBE, ResourceType.GROUP, g["group_id"], quiet=True)
            ]  # fmt: skip
        return response

    async def _delete_groups(self, request: transport.Request, handler: Handler) -> Any:
        return await self._split_kafka(
            request, handler, "groups_names", "results",
            lambda request, group: self._group_code(request, Op.DELETE, group),
            lambda group, code: {"group_id": group, "error_code": code},
            {"throttle_time_ms": 0},
            name_key=None,
        )  # fmt: skip

    # -- kcore's msgpack ------------------------------------------------------------------

    def _msgpack_policies(self) -> dict[int, Policy]:
        control = self._cluster_policy(
            Op.CLUSTER_ACTION,
            lambda request: to_wire(
                CONTROL_RESPONSE_TYPES[ApiKey(request.api_key)](CLUSTER_DENIED)
            ),
        )
        denied = MESSAGES[CLUSTER_DENIED]
        return {
            **dict.fromkeys(CONTROL_RESPONSE_TYPES, control),
            ApiKey.PRODUCE: self._msgpack_split(
                data.ProduceRequest,
                data.ProduceResponse,
                self._topic_check(Op.WRITE),
                lambda p, code: data.ProducePartitionResponse(
                    p.topic, p.partition, code, error_message=MESSAGES[code]
                ),
            ),
            ApiKey.FETCH: self._msgpack_fetch,
            ApiKey.LIST_OFFSETS: self._msgpack_split(
                data.ListOffsetsRequest,
                data.ListOffsetsResponse,
                self._topic_check(Op.DESCRIBE),
                lambda p, code: data.ListOffsetsPartitionResponse(p.topic, p.partition, code),
            ),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._msgpack_offsets_for_leader_epoch,
            ApiKey.METADATA: self._msgpack_metadata,
            ApiKey.CREATE_TOPICS: self._msgpack_create_topics,
            ApiKey.DELETE_TOPICS: self._msgpack_split(
                data.DeleteTopicsRequest,
                data.DeleteTopicsResponse,
                self._topic_check(Op.DELETE),
                lambda name, code: data.TopicResult(name, code, MESSAGES[code]),
                items="names",
                topics=None,
                answers="topics",
            ),
            ApiKey.CREATE_PARTITIONS: self._msgpack_split(
                data.CreatePartitionsRequest,
                data.CreatePartitionsResponse,
                self._topic_check(Op.ALTER),
                lambda t, code: data.TopicResult(t.name, code, MESSAGES[code]),
                items="topics",
                topics=lambda t: t.name,
                answers="topics",
            ),
            ApiKey.DELETE_RECORDS: self._msgpack_split(
                data.DeleteRecordsRequest,
                data.DeleteRecordsResponse,
                self._topic_check(Op.DELETE),
                lambda p, code: data.DeleteRecordsPartitionResponse(p.topic, p.partition, code),
            ),
            ApiKey.DESCRIBE_CONFIGS: self._msgpack_split(
                data.DescribeConfigsRequest,
                data.DescribeConfigsResponse,
                lambda request, r: self._config_check(
                    request, Op.DESCRIBE_CONFIGS, r.resource_type, r.resource_name
                ),
                lambda r, code: data.DescribeConfigsResult(
                    r.resource_type, r.resource_name, code, MESSAGES[code]
                ),
                items="resources",
                topics=None,
                answers="results",
            ),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self._msgpack_split(
                data.IncrementalAlterConfigsRequest,
                data.IncrementalAlterConfigsResponse,
                lambda request, r: self._config_check(
                    request, Op.ALTER_CONFIGS, r.resource_type, r.resource_name
                ),
                lambda r, code: data.AlterConfigsResult(
                    r.resource_type, r.resource_name, code, MESSAGES[code]
                ),
                items="resources",
                topics=None,
                answers="results",
            ),
            ApiKey.INIT_PRODUCER_ID: self._init_producer_id(kafka_protocol=False),
            ApiKey.FIND_COORDINATOR: self._msgpack_find_coordinator,
            ApiKey.ELECT_LEADERS: self._cluster_policy(
                Op.ALTER, lambda _: to_wire(data.ElectLeadersResponse(CLUSTER_DENIED))
            ),
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._cluster_policy(
                Op.ALTER,
                lambda _: to_wire(data.AlterPartitionReassignmentsResponse(CLUSTER_DENIED, denied)),
            ),
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._cluster_policy(
                Op.DESCRIBE,
                lambda _: to_wire(data.ListPartitionReassignmentsResponse(CLUSTER_DENIED, denied)),
            ),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self._cluster_policy(
                Op.DESCRIBE,
                lambda _: to_wire(
                    scram_admin.DescribeUserScramCredentialsResponse(CLUSTER_DENIED, denied)
                ),
            ),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self._cluster_policy(
                Op.ALTER, _refused_scram_alteration_msgpack
            ),
            ApiKey.DESCRIBE_ACLS: self._cluster_policy(
                Op.DESCRIBE,
                lambda _: to_wire(acl_admin.DescribeAclsResponse(CLUSTER_DENIED, denied)),
            ),
            ApiKey.CREATE_ACLS: self._cluster_policy(
                Op.ALTER,
                lambda request: to_wire(
                    acl_admin.creations_refused(
                        _decoded(acl_admin.CreateAclsRequest, request), CLUSTER_DENIED, denied
                    )
                ),
            ),
            ApiKey.DELETE_ACLS: self._cluster_policy(
                Op.ALTER,
                lambda request: to_wire(
                    acl_admin.deletions_refused(
                        _decoded(acl_admin.DeleteAclsRequest, request), CLUSTER_DENIED, denied
                    )
                ),
            ),
        }

    def _msgpack_split(
        self,
        request_type: type,
        response_type: type,
        check: Callable[[transport.Request, Any], int],
        answer: Callable[[Any, int], Any],
        *,
        items: str = "partitions",
        topics: Callable[[Any], Any] | None = lambda item: item.topic,
        answers: str = "partitions",
    ) -> Policy:
        """The msgpack twin of `_split_kafka`: the items (`request_type.<items>`) the check
        allows are served, the others answered in `response_type.<answers>`. `topics`
        gives what the check is asked about (None: the item itself)."""

        async def policy(request: transport.Request, handler: Handler) -> Any:
            try:
                message = from_wire(request_type, request.body)
            except WireError:
                return await handler(request)  # refused below as malformed
            allowed, refused = [], []
            for item in getattr(message, items):
                code = check(request, item if topics is None else topics(item))
                if code:
                    refused.append(answer(item, code))
                else:
                    allowed.append(item)
            if not refused:
                return await handler(request)
            if not allowed:
                return to_wire(response_type(tuple(refused)))
            served = attrs.evolve(message, **{items: tuple(allowed)})
            body = await handler(attrs.evolve(request, body=to_wire(served)))
            response = from_wire(response_type, body)
            return to_wire(
                attrs.evolve(response, **{answers: (*getattr(response, answers), *refused)})
            )

        return policy

    async def _msgpack_fetch(self, request: transport.Request, handler: Handler) -> Any:
        try:
            message = from_wire(data.FetchRequest, request.body)
        except WireError:
            return await handler(request)
        if message.replica_id >= 0:  # a follower: ClusterAction
            follower = self.may_cluster(request, Op.CLUSTER_ACTION)

            def check(request: transport.Request, topic: str) -> int:
                return 0 if follower else TOPIC_DENIED
        else:
            check = self._topic_check(Op.READ)
        policy = self._msgpack_split(
            data.FetchRequest, data.FetchResponse, check,
            lambda p, code: data.FetchPartitionResponse(p.topic, p.partition, code),
        )  # fmt: skip
        return await policy(request, handler)

    async def _msgpack_offsets_for_leader_epoch(
        self, request: transport.Request, handler: Handler
    ) -> Any:
        if self.may_cluster(request, Op.CLUSTER_ACTION, quiet=True):
            return await handler(request)
        policy = self._msgpack_split(
            data.OffsetForLeaderEpochRequest, data.OffsetForLeaderEpochResponse,
            self._topic_check(Op.DESCRIBE),
            lambda p, code: data.OffsetForLeaderEpochPartitionResponse(p.topic, p.partition, code),
        )  # fmt: skip
        return await policy(request, handler)

    async def _msgpack_metadata(self, request: transport.Request, handler: Handler) -> Any:
        try:
            message = from_wire(data.MetadataRequest, request.body)
        except WireError:
            return await handler(request)
        refused: list[str] = []
        if message.topics is not None:
            refused = [
                t for t in message.topics
                if not self.may(request, Op.DESCRIBE, ResourceType.TOPIC, t)
            ]  # fmt: skip
            if refused:
                kept = tuple(t for t in message.topics if t not in refused)
                request = attrs.evolve(request, body=to_wire(data.MetadataRequest(kept)))
        response = from_wire(data.MetadataResponse, await handler(request))
        every_topic = message.topics is None
        topics = tuple(
            t
            for t in response.topics
            if self.may(request, Op.DESCRIBE, ResourceType.TOPIC, t.name, quiet=every_topic)
        )
        refused_topics = tuple(data.MetadataTopic(name, TOPIC_DENIED) for name in refused)
        return to_wire(attrs.evolve(response, topics=topics + refused_topics))

    async def _msgpack_create_topics(self, request: transport.Request, handler: Handler) -> Any:
        if self.may_cluster(request, Op.CREATE):
            return await handler(request)
        policy = self._msgpack_split(
            data.CreateTopicsRequest, data.CreateTopicsResponse, self._topic_check(Op.CREATE),
            lambda t, code: data.TopicResult(t.name, code, MESSAGES[code]),
            items="topics", topics=lambda t: t.name, answers="topics",
        )  # fmt: skip
        return await policy(request, handler)

    async def _msgpack_find_coordinator(self, request: transport.Request, handler: Handler) -> Any:
        body = request.body
        if isinstance(body, dict) and isinstance(body.get("key"), str):
            if self._group_code(request, Op.DESCRIBE, body["key"]):
                return {"error_code": GROUP_DENIED, "node_id": -1, "host": "", "port": -1}
        return await handler(request)


def _bound(policy: Policy, handler: Handler) -> Handler:
    async def guarded(request: transport.Request) -> Any:
        return await policy(request, handler)

    return guarded


def _host(request: transport.Request) -> str:
    address = request.connection.peer_address
    return str(address[0]) if address else ""


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def _error(code: int) -> dict:
    return {"error_code": code, "error_message": MESSAGES[code]}


def _decoded(message_type: type, request: transport.Request) -> Any:
    try:
        return from_wire(message_type, request.body)
    except WireError as error:
        raise transport.RpcError(transport.INVALID_REQUEST, str(error)) from None


def _refused_whole_kafka(request: transport.Request) -> dict:
    return error_body(request.api_key, request.api_version, CLUSTER_DENIED)


def _refused_metadata_topic(name: str | None, topic_id: Any = None) -> dict:
    return {
        "error_code": TOPIC_DENIED, "name": name, "topic_id": topic_id or _ZERO_UUID,
        "is_internal": False, "partitions": [],
        "topic_authorized_operations": _NO_AUTHORIZED_OPERATIONS,
    }  # fmt: skip


def _refused_scram_alteration_kafka(request: transport.Request) -> dict:
    body = request.body
    users = sorted({a["name"] for a in (*body.get("deletions", []), *body.get("upsertions", []))})
    return {
        "throttle_time_ms": 0,
        "results": [{"user": user, **_error(CLUSTER_DENIED)} for user in users],
    }


def _refused_scram_alteration_msgpack(request: transport.Request) -> Any:
    message = _decoded(scram_admin.AlterUserScramCredentialsRequest, request)
    return to_wire(
        scram_admin.answer_all(
            message, errors.ClusterAuthorizationFailedError, MESSAGES[CLUSTER_DENIED]
        )
    )
