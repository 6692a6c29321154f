"""Kafka's protocol on a kcore listener, request by request over real TCP: the same port
serves kcore's msgpack clients and Kafka-protocol requests, each answered at the version it
was asked in. (Real Kafka clients are the judges in tests/kcore/interop; this file checks
the answers field by field.)"""

from __future__ import annotations

import struct
import uuid

import pytest
import trio

from kcore.log import build_batch, iter_records
from kcore.protocol import kafka as codec
from kcore.testing import open_cluster

pytestmark = pytest.mark.timeout(120)


class RawKafkaClient:
    """One connection speaking Kafka's protocol through kcore's codec."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.correlation_id = 0
        self.buffer = bytearray()

    async def send_frame(self, frame: bytes) -> None:
        await self.stream.send_all(frame)

    async def read_frame(self) -> bytes:
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack_from(">i", self.buffer)
                if len(self.buffer) >= 4 + size:
                    frame = bytes(self.buffer[4 : 4 + size])
                    del self.buffer[: 4 + size]
                    return frame
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the broker closed the connection"
            self.buffer += chunk

    async def request(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation_id += 1
        await self.send_frame(
            codec.encode_request(api_key, version, self.correlation_id, "raw-test", body)
        )
        correlation_id, response = codec.decode_response(api_key, version, await self.read_frame())
        assert correlation_id == self.correlation_id
        return response


async def _connect(cluster, broker_id: int) -> RawKafkaClient:
    host, port = cluster.bootstrap_servers.split(",")[broker_id - 1].rsplit(":", 1)
    return RawKafkaClient(await trio.open_tcp_stream(host, int(port)))


@pytest.fixture
async def cluster(tmp_path):
    async with open_cluster(brokers=3, network="tcp", data_dir=tmp_path) as cluster:
        await cluster.wait_for_controller()
        yield cluster


async def test_api_versions_tells_the_truth_and_bad_versions_are_answered(cluster) -> None:
    client = await _connect(cluster, 1)
    answer = await client.request(
        18, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert answer["error_code"] == 0
    served = {a["api_key"]: (a["min_version"], a["max_version"]) for a in answer["api_keys"]}
    assert (
        served[0][1] == 9 and served[1][1] >= 11 and served[3][1] == 12
    )  # Produce, Fetch, Metadata
    assert served[11][1] == 9 and served[14][1] == 5  # JoinGroup, SyncGroup: groups work
    assert served[45] == (0, 0) and served[46] == (0, 0)  # Alter / ListPartitionReassignments
    # ApiVersions at a version the broker cannot read: a v0 answer with the list (KIP-511).
    await client.send_frame(_raw_request(18, 99, 7))
    correlation_id, answer = codec.decode_response(18, 0, await client.read_frame())
    assert (correlation_id, answer["error_code"]) == (7, 35)
    assert {a["api_key"] for a in answer["api_keys"]} == set(served)
    # An api nobody serves: UNSUPPORTED_VERSION, and the connection goes on.
    await client.send_frame(_raw_request(9999, 0, 8))
    assert struct.unpack_from(">ih", await client.read_frame()) == (8, 35)
    answer = await client.request(18, 0, {})
    assert answer["error_code"] == 0


def _raw_request(api_key: int, version: int, correlation_id: int) -> bytes:
    frame = struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw"
    return struct.pack(">i", len(frame)) + frame


async def test_topic_admin_produce_fetch_and_offsets_through_kafkas_protocol(cluster) -> None:
    controller = await cluster.wait_for_controller()
    admin_client = await _connect(cluster, controller)
    created = await admin_client.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": "k",
                    "num_partitions": 2,
                    "replication_factor": 3,
                    "assignments": [],
                    "configs": [{"name": "min.insync.replicas", "value": "2"}],
                }
            ],
            "timeout_ms": 30000,
        },
    )
    (topic,) = created["topics"]
    assert (topic["name"], topic["error_code"], topic["num_partitions"]) == ("k", 0, 2)
    assert topic["topic_id"] != uuid.UUID(int=0)

    metadata = await admin_client.request(
        3, 12, {"topics": [{"name": "k", "topic_id": uuid.UUID(int=0)}]}
    )
    assert sorted(b["node_id"] for b in metadata["brokers"]) == [1, 2, 3]
    assert metadata["controller_id"] == controller
    (described,) = metadata["topics"]
    assert described["topic_id"] == topic["topic_id"]
    leader = next(p for p in described["partitions"] if p["partition_index"] == 0)["leader_id"]
    assert sorted(described["partitions"][0]["isr_nodes"]) == [1, 2, 3]

    client = await _connect(cluster, leader)
    batch = build_batch([(1000, b"k1", b"v1", [("h", b"x")]), (1001, None, b"v2")])
    produced = await client.request(
        0,
        9,
        {
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [{"name": "k", "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    (answer,) = produced["responses"][0]["partition_responses"]
    assert (answer["index"], answer["error_code"], answer["base_offset"]) == (0, 0, 0)

    fetched = await client.request(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "k",
                    "partitions": [
                        {
                            "partition": 0,
                            "fetch_offset": 0,
                            "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    (part,) = fetched["responses"][0]["partitions"]
    assert (part["error_code"], part["high_watermark"]) == (0, 2)
    records = list(iter_records(part["records"]))
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k1", b"v1"), (1, None, b"v2")]
    assert tuple(records[0].headers) == (("h", b"x"),)

    offsets = await client.request(
        2,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "k",
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2},
                    ],
                }
            ],
        },
    )
    assert offsets["topics"][0]["partitions"][0]["offset"] == 0
    # A follower is not the leader: the consumer is told so, and who leads.
    follower = next(b for b in (1, 2, 3) if b != leader)
    other = await _connect(cluster, follower)
    offsets = await other.request(
        2,
        7,
        {
            "replica_id": -1,
            "topics": [{"name": "k", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    assert offsets["topics"][0]["partitions"][0]["error_code"] == 6  # NOT_LEADER_OR_FOLLOWER

    deleted = await admin_client.request(20, 6, {"topics": [{"name": "k"}], "timeout_ms": 30000})
    assert [(r["name"], r["error_code"]) for r in deleted["responses"]] == [("k", 0)]


async def test_msgpack_clients_share_the_port(cluster) -> None:
    """kcore's own client and a Kafka-protocol connection on the same listener at once."""
    kafka_client = await _connect(cluster, 1)
    async with cluster.admin() as admin:
        await admin.create_topic("shared", partitions=1, replication_factor=1)
    metadata = await kafka_client.request(3, 1, {"topics": None})
    assert "shared" in {t["name"] for t in metadata["topics"]}


async def test_describe_producers_names_each_idempotent_producer(cluster) -> None:
    controller = await cluster.wait_for_controller()
    admin_client = await _connect(cluster, controller)
    await admin_client.request(
        19,
        7,
        {
            "topics": [{"name": "idem", "num_partitions": 1, "replication_factor": 1}],
            "timeout_ms": 30000,
        },
    )
    metadata = await admin_client.request(3, 12, {"topics": [{"name": "idem"}]})
    leader = metadata["topics"][0]["partitions"][0]["leader_id"]
    client = await _connect(cluster, leader)
    for sequence in (0, 2):
        batch = build_batch(
            [(5000 + sequence, None, b"a"), (5001 + sequence, None, b"b")],
            producer_id=7,
            producer_epoch=3,
            base_sequence=sequence,
        )
        produced = await client.request(
            0,
            9,
            {
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [
                    {"name": "idem", "partition_data": [{"index": 0, "records": batch}]}
                ],
            },
        )
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0
    described = await client.request(
        61, 0, {"topics": [{"name": "idem", "partition_indexes": [0, 5]}]}
    )
    found, missing = described["topics"][0]["partitions"]
    assert found["error_code"] == 0
    ((producer),) = found["active_producers"]
    assert (producer["producer_id"], producer["producer_epoch"]) == (7, 3)
    assert (producer["last_sequence"], producer["last_timestamp"]) == (3, 5003)
    assert missing["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION


async def test_metadata_names_brokers_by_the_listener_the_client_reached(tmp_path) -> None:
    two_listeners = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    }
    async with open_cluster(
        brokers=2, network="tcp", data_dir=tmp_path, broker_config=two_listeners
    ) as cluster:
        await cluster.wait_for_controller()
        ports = {
            broker_id: {e.listener_name: e.port for e in broker.endpoints}
            for broker_id, broker in cluster.brokers.items()
        }
        for listener in ("PLAINTEXT", "INTERNAL"):
            client = RawKafkaClient(await trio.open_tcp_stream("127.0.0.1", ports[1][listener]))
            metadata = await client.request(3, 12, {"topics": []})
            named = {b["node_id"]: b["port"] for b in metadata["brokers"]}
            assert named == {broker_id: ports[broker_id][listener] for broker_id in (1, 2)}


async def test_metadata_creates_an_unknown_topic_only_when_the_client_allows(cluster) -> None:
    client = await _connect(cluster, 1)

    async def ask(allow: bool) -> dict:
        metadata = await client.request(
            3, 12, {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": allow}
        )
        return metadata["topics"][0]

    assert (await ask(False))["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION: not created
    assert (await ask(True))["error_code"] == 5  # LEADER_NOT_AVAILABLE: being created
    with trio.fail_after(30):
        while (topic := await ask(False))["error_code"] != 0:
            await trio.sleep(0.05)
    assert [p["partition_index"] for p in topic["partitions"]] == [0]  # num.partitions


async def test_a_log_append_time_topic_stamps_batches_with_the_brokers_clock(cluster) -> None:
    controller = await cluster.wait_for_controller()
    admin_client = await _connect(cluster, controller)
    configs = [
        {"name": "message.timestamp.type", "value": "LogAppendTime"},
    ]
    created = await admin_client.request(
        19, 7, {"topics": [{"name": "stamped", "num_partitions": 1, "replication_factor": 1,
                            "configs": configs}], "timeout_ms": 30000},
    )  # fmt: skip
    assert created["topics"][0]["error_code"] == 0
    metadata = await admin_client.request(3, 12, {"topics": [{"name": "stamped"}]})
    client = await _connect(cluster, metadata["topics"][0]["partitions"][0]["leader_id"])
    batch = build_batch([(1, None, b"old"), (2, None, b"older")])  # 1970: CreateTime ignored
    data = [{"name": "stamped", "partition_data": [{"index": 0, "records": batch}]}]
    produced = await client.request(0, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": data})
    answer = produced["responses"][0]["partition_responses"][0]
    assert answer["error_code"] == 0 and answer["log_append_time_ms"] > 1_000_000_000_000
    fetched = await client.request(
        1, 12, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                "topics": [{"topic": "stamped", "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
    )  # fmt: skip
    records = list(iter_records(fetched["responses"][0]["partitions"][0]["records"]))
    assert [r.timestamp for r in records] == [answer["log_append_time_ms"]] * 2


async def test_a_create_time_too_far_from_the_brokers_clock_is_refused(cluster) -> None:
    controller = await cluster.wait_for_controller()
    admin_client = await _connect(cluster, controller)
    configs = [{"name": "message.timestamp.difference.max.ms", "value": "60000"}]
    await admin_client.request(
        19, 7, {"topics": [{"name": "recent", "num_partitions": 1, "replication_factor": 1,
                            "configs": configs}], "timeout_ms": 30000},
    )  # fmt: skip
    metadata = await admin_client.request(3, 12, {"topics": [{"name": "recent"}]})
    client = await _connect(cluster, metadata["topics"][0]["partitions"][0]["leader_id"])
    produced = await client.request(
        0, 9, {"acks": 1, "timeout_ms": 1000,
               "topic_data": [{"name": "recent", "partition_data": [
                   {"index": 0, "records": build_batch([(5, None, b"1970")])}]}]},
    )  # fmt: skip
    answer = produced["responses"][0]["partition_responses"][0]
    assert answer["error_code"] == 32  # INVALID_TIMESTAMP
    assert "message.timestamp.difference.max.ms=60000" in answer["error_message"]
