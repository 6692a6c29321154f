"""A fake Kafka cluster for the client tests: `transport.RpcServer`s on a `SimNetwork`
answering Metadata / Produce / Fetch / ListOffsets / CreateTopics / DeleteTopics /
InitProducerId / DeleteRecords from in-memory partitions, with hooks to inject per-partition
errors."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

import attrs
import pytest
import trio

import transport
from kcore.common import TopicPartition
from kcore.log import split_batches, with_base_offset
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.data import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    TopicResult,
)
from kcore.wire import from_wire, to_wire

NOT_LEADER = 6
FENCED_LEADER_EPOCH = 74


@attrs.define
class FakePartition:
    leader: int
    replicas: tuple[int, ...]
    leader_epoch: int = 0
    batches: list[bytes] = attrs.field(factory=list)  # stored with their base offsets
    log_start: int = 0
    next_offset: int = 0

    @property
    def isr(self) -> tuple[int, ...]:
        return self.replicas


@attrs.define
class FakeCluster:
    network: transport.SimNetwork
    broker_ids: tuple[int, ...] = (1, 2, 3)
    controller_id: int = 1
    topics: dict[str, list[FakePartition]] = attrs.field(factory=dict)
    requests: list[tuple[int, ApiKey, object]] = attrs.field(factory=list)
    # (topic, partition) -> error codes the next produce requests for it get, in order
    produce_errors: dict[tuple[str, int], deque[int]] = attrs.field(factory=dict)
    # (topic, partition) -> error codes the next DeleteRecords requests for it get, in order
    delete_records_errors: dict[tuple[str, int], deque[int]] = attrs.field(factory=dict)
    # called with (broker id, topic) for each CreateTopics: an error code to answer, or None
    create_hook: Callable[[int, str], int | None] | None = None
    # partitions a created topic gets no leader for until `elect` is called
    leaderless_on_create: bool = False
    next_producer_id: int = 1000

    def address(self, broker_id: int) -> tuple[str, int]:
        return (f"broker-{broker_id}", 9092)

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [self.address(b) for b in self.broker_ids]

    def add_topic(self, name: str, partitions: int = 1, leaders: list[int] | None = None) -> None:
        leaders = leaders or [self.broker_ids[p % len(self.broker_ids)] for p in range(partitions)]
        self.topics[name] = [FakePartition(leader, tuple(self.broker_ids)) for leader in leaders]

    def partition(self, topic: str, partition: int) -> FakePartition:
        return self.topics[topic][partition]

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        p = self.partition(topic, partition)
        p.leader = leader
        p.leader_epoch += 1

    def requests_of(self, api_key: ApiKey) -> list[tuple[int, object]]:
        return [(broker, message) for broker, key, message in self.requests if key == api_key]

    def append(self, topic: str, partition: int, batch: bytes) -> int:
        p = self.partition(topic, partition)
        base = p.next_offset
        for header, _ in split_batches(batch):
            p.next_offset = base + header.next_offset
        stamped = with_base_offset(batch, base)
        p.batches.append(stamped)
        return base

    # -- serving -----------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        for broker_id in self.broker_ids:
            server = transport.RpcServer(self._handlers(broker_id), name=f"broker-{broker_id}")
            node = self.network.node(f"broker-{broker_id}")
            await nursery.start(node.serve, self.address(broker_id), server.handle_connection)

    def _handlers(self, broker_id: int) -> dict[int, Callable]:
        def wrap(api_key: ApiKey, request_type: type, answer: Callable) -> Callable:
            async def handler(request: transport.Request) -> object:
                message = from_wire(request_type, request.body)
                self.requests.append((broker_id, api_key, message))
                return to_wire(await answer(broker_id, message))

            return handler

        return {
            ApiKey.METADATA: wrap(ApiKey.METADATA, MetadataRequest, self._metadata),
            ApiKey.PRODUCE: wrap(ApiKey.PRODUCE, ProduceRequest, self._produce),
            ApiKey.FETCH: wrap(ApiKey.FETCH, FetchRequest, self._fetch),
            ApiKey.LIST_OFFSETS: wrap(ApiKey.LIST_OFFSETS, ListOffsetsRequest, self._list_offsets),
            ApiKey.CREATE_TOPICS: wrap(
                ApiKey.CREATE_TOPICS, CreateTopicsRequest, self._create_topics
            ),
            ApiKey.DELETE_TOPICS: wrap(
                ApiKey.DELETE_TOPICS, DeleteTopicsRequest, self._delete_topics
            ),
            ApiKey.INIT_PRODUCER_ID: wrap(
                ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest, self._init_producer_id
            ),
            ApiKey.DELETE_RECORDS: wrap(
                ApiKey.DELETE_RECORDS, DeleteRecordsRequest, self._delete_records
            ),
        }

    async def _metadata(self, broker_id: int, request: MetadataRequest) -> MetadataResponse:
        names = sorted(self.topics) if request.topics is None else request.topics
        topics = []
        for name in names:
            if name not in self.topics:
                topics.append(MetadataTopic(name, 3))
                continue
            partitions = tuple(
                MetadataPartition(
                    i, 0 if p.leader >= 0 else 5, p.leader, p.leader_epoch, p.replicas, p.isr
                )
                for i, p in enumerate(self.topics[name])
            )
            topics.append(MetadataTopic(name, 0, partitions, f"id-{name}"))
        brokers = tuple(MetadataBroker(b, *self.address(b)) for b in self.broker_ids)
        return MetadataResponse(brokers, self.controller_id, tuple(topics), "fake-cluster")

    async def _produce(self, broker_id: int, request: ProduceRequest) -> ProduceResponse:
        answers = []
        for data in request.partitions:
            key = (data.topic, data.partition)
            injected = self.produce_errors.get(key)
            if data.topic not in self.topics or data.partition >= len(self.topics[data.topic]):
                answers.append(ProducePartitionResponse(data.topic, data.partition, 3))
            elif self.partition(*key).leader != broker_id:
                answers.append(ProducePartitionResponse(data.topic, data.partition, NOT_LEADER))
            elif injected:
                answers.append(
                    ProducePartitionResponse(data.topic, data.partition, injected.popleft())
                )
            else:
                base = self.append(data.topic, data.partition, data.records)
                answers.append(ProducePartitionResponse(data.topic, data.partition, 0, base))
        return ProduceResponse(tuple(answers))

    async def _fetch(self, broker_id: int, request: FetchRequest) -> FetchResponse:
        answers = []
        for f in request.partitions:
            p = self.partition(f.topic, f.partition)
            if p.leader != broker_id:
                answers.append(FetchPartitionResponse(f.topic, f.partition, NOT_LEADER))
                continue
            if f.current_leader_epoch not in (-1, p.leader_epoch):
                answers.append(FetchPartitionResponse(f.topic, f.partition, FENCED_LEADER_EPOCH))
                continue
            if not p.log_start <= f.fetch_offset <= p.next_offset:
                answers.append(FetchPartitionResponse(f.topic, f.partition, 1, p.next_offset))
                continue
            data = b""
            for batch in p.batches:
                ((header, _),) = split_batches(batch)
                if header.next_offset > f.fetch_offset and header.base_offset >= p.log_start:
                    data += batch
            answers.append(
                FetchPartitionResponse(f.topic, f.partition, 0, p.next_offset, p.log_start, data)
            )
        if not any(a.records for a in answers) and request.max_wait_ms:
            await trio.sleep(request.max_wait_ms / 1000)  # long poll: nothing arrives meanwhile
        return FetchResponse(tuple(answers))

    async def _list_offsets(
        self, broker_id: int, request: ListOffsetsRequest
    ) -> ListOffsetsResponse:
        answers = []
        for q in request.partitions:
            p = self.partition(q.topic, q.partition)
            if p.leader != broker_id:
                answers.append(ListOffsetsPartitionResponse(q.topic, q.partition, NOT_LEADER))
                continue
            offset = p.log_start if q.timestamp == -2 else p.next_offset
            answers.append(
                ListOffsetsPartitionResponse(q.topic, q.partition, 0, offset, p.leader_epoch)
            )
        return ListOffsetsResponse(tuple(answers))

    async def _create_topics(
        self, broker_id: int, request: CreateTopicsRequest
    ) -> CreateTopicsResponse:
        results = []
        for topic in request.topics:
            code = self.create_hook(broker_id, topic.name) if self.create_hook else None
            if code is None and broker_id != self.controller_id:
                code = 41
            if code is not None:
                results.append(TopicResult(topic.name, code, f"injected error {code}"))
            elif topic.name in self.topics:
                results.append(TopicResult(topic.name, 36, f"Topic '{topic.name}' already exists."))
            else:
                count = topic.num_partitions if topic.num_partitions > 0 else 1
                self.add_topic(topic.name, count)
                if self.leaderless_on_create:
                    for p in self.topics[topic.name]:
                        p.leader = -1
                    results.append(TopicResult(topic.name, 7, "no leaders yet"))
                else:
                    results.append(TopicResult(topic.name, 0))
        return CreateTopicsResponse(tuple(results))

    async def _delete_topics(
        self, broker_id: int, request: DeleteTopicsRequest
    ) -> DeleteTopicsResponse:
        results = []
        for name in request.names:
            if broker_id != self.controller_id:
                results.append(TopicResult(name, 41, "not the controller"))
            elif self.topics.pop(name, None) is None:
                results.append(TopicResult(name, 3, f"Topic '{name}' does not exist"))
            else:
                results.append(TopicResult(name, 0))
        return DeleteTopicsResponse(tuple(results))

    async def _delete_records(
        self, broker_id: int, request: DeleteRecordsRequest
    ) -> DeleteRecordsResponse:
        answers = []
        for asked in request.partitions:
            key = (asked.topic, asked.partition)
            injected = self.delete_records_errors.get(key)
            p = self.partition(*key)
            offset = p.next_offset if asked.offset == -1 else asked.offset
            if p.leader != broker_id:
                code = NOT_LEADER
            elif injected:
                code = injected.popleft()
            elif not p.log_start <= offset <= p.next_offset:
                code = 1  # OFFSET_OUT_OF_RANGE
            else:
                code, p.log_start = 0, offset
            answers.append(
                DeleteRecordsPartitionResponse(*key, code, p.log_start if code == 0 else -1)
            )
        return DeleteRecordsResponse(tuple(answers))

    async def _init_producer_id(
        self, broker_id: int, request: InitProducerIdRequest
    ) -> InitProducerIdResponse:
        self.next_producer_id += 1
        return InitProducerIdResponse(0, self.next_producer_id - 1, 0)


@pytest.fixture
async def fake_cluster(nursery: trio.Nursery, autojump_clock: object) -> FakeCluster:
    cluster = FakeCluster(transport.SimNetwork(seed=7))
    await cluster.start(nursery)
    return cluster


@pytest.fixture
def client_args(fake_cluster: FakeCluster) -> dict[str, object]:
    return {
        "network": fake_cluster.network.node("client-1"),
        "rng": random.Random(42),
    }


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)
