"""SaslHandshake v0, Kafka's legacy SASL exchange: after the handshake the SASL tokens go
both ways as bare size-prefixed frames, not SaslAuthenticate requests. kafka-python told the
broker is Kafka 0.11 (`api_version=(0, 11)`) speaks it, with PLAIN and SCRAM-SHA-256; a
raw client checks what kafka-python cannot show: PLAIN's empty answer frame, and a wrong
password answered by a closed connection and nothing else.

The cluster is embedded (in this process, real TCP on 127.0.0.1): a PLAINTEXT listener
between brokers, a SASL_PLAINTEXT one for clients."""

from __future__ import annotations

import importlib.util
import logging
import random
import struct
import time

import pytest
import trio

from kcore.protocol import kafka as codec
from kcore.security.scram import new_credential
from kcore.testing import open_cluster
from kcore.zk_client import KafkaZkClient

pytestmark = pytest.mark.timeout(120)

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)
SASL_LISTENER = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    # The failed authentication's delay, shorter than Kafka's 100 ms: the test waits it.
    "connection.failed.authentication.delay.ms": 10,
}


@pytest.fixture
async def sasl_cluster(tmp_path):
    async with open_cluster(
        brokers=1, network="tcp", data_dir=tmp_path, broker_config=SASL_LISTENER
    ) as cluster:
        await cluster.wait_for_controller()
        yield cluster


def _sasl_address(cluster) -> tuple[str, int]:
    (endpoint,) = [e for e in cluster.brokers[1].endpoints if e.listener_name == "SASL_PLAINTEXT"]
    return endpoint.host, endpoint.port


async def test_kafka_python_speaking_to_an_old_broker_authenticates_with_raw_tokens(
    sasl_cluster, require_external, caplog
) -> None:
    caplog.set_level(logging.DEBUG, logger="kcore.server.sasl_authenticator")
    require_external(
        "kafka",
        importlib.util.find_spec("kafka") is not None,
        "pip install -e '.[kafka-clients]'",
    )
    # SCRAM-SHA-256 for bob, where and as Kafka stores it.
    credential = new_credential("SCRAM-SHA-256", "bob-secret", rng=random.Random(7))
    await KafkaZkClient(sasl_cluster.zk, clock=time.time).change_entity_configs(
        "users", "bob", {"SCRAM-SHA-256": credential.to_config()}
    )
    await sasl_cluster.admin().create_topic("legacy", partitions=1, replication_factor=1)
    host, port = _sasl_address(sasl_cluster)

    def produce_and_consume(mechanism: str, username: str, password: str) -> list[bytes]:
        """Three records produced as `username`, then the topic read from its start."""
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        settings = {
            "bootstrap_servers": f"{host}:{port}",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": username,
            "sasl_plain_password": password,
            # A Kafka 0.11 broker: SaslHandshake v0, then bare SASL tokens.
            "api_version": (0, 11),
        }
        producer = KafkaProducer(**settings, acks="all")
        try:
            for i in range(3):
                producer.send("legacy", f"{username}-{i}".encode()).get(timeout=30)
        finally:
            producer.close()
        consumer = KafkaConsumer(**settings)
        partition = TopicPartition("legacy", 0)
        try:
            consumer.assign([partition])
            consumer.seek_to_beginning()
            end = consumer.end_offsets([partition])[partition]
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < end and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=1000).values():
                    values.extend(record.value for record in records)
            return values
        finally:
            consumer.close()

    plain = await trio.to_thread.run_sync(produce_and_consume, "PLAIN", "alice", "alice-secret")
    assert plain == [b"alice-0", b"alice-1", b"alice-2"]
    scram = await trio.to_thread.run_sync(produce_and_consume, "SCRAM-SHA-256", "bob", "bob-secret")
    assert scram[3:] == [b"bob-0", b"bob-1", b"bob-2"]
    # Both through SaslHandshake v0 and bare tokens (not SaslAuthenticate).
    authenticated = {r.getMessage() for r in caplog.records if "SaslHandshake v0" in r.getMessage()}
    assert any("as User:alice (mechanism PLAIN" in line for line in authenticated)
    assert any("as User:bob (mechanism SCRAM-SHA-256" in line for line in authenticated)


class RawConnection:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def send(self, payload: bytes) -> None:
        await self.stream.send_all(struct.pack(">i", len(payload)) + payload)

    async def receive(self) -> bytes | None:
        """The next frame's payload; None once the broker closed the connection."""
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack_from(">i", self.buffer)
                if len(self.buffer) >= 4 + size:
                    payload = bytes(self.buffer[4 : 4 + size])
                    del self.buffer[: 4 + size]
                    return payload
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                return None
            self.buffer += chunk

    async def request(self, api_key: int, version: int, body: dict) -> dict:
        await self.stream.send_all(codec.encode_request(api_key, version, 7, "raw", body))
        payload = await self.receive()
        assert payload is not None
        correlation_id, answer = codec.decode_response(api_key, version, payload)
        assert correlation_id == 7
        return answer


async def test_raw_plain_tokens_answered_bare_and_a_wrong_password_by_closing(
    sasl_cluster,
) -> None:
    host, port = _sasl_address(sasl_cluster)
    versions = await _versions(host, port)
    assert versions[17] == (0, 1)  # SaslHandshake: v0 is served

    good = RawConnection(await trio.open_tcp_stream(host, port))
    handshake = await good.request(17, 0, {"mechanism": "PLAIN"})
    assert (handshake["error_code"], handshake["mechanisms"]) == (0, ["PLAIN", "SCRAM-SHA-256"])
    # A token that reads as a request header (api key 0x0061, "\0a..."): a token all the same.
    await good.send(b"\0alice\0alice-secret")
    assert await good.receive() == b""  # PLAIN's empty answer, as a bare frame
    # Authenticated: Kafka requests from now on.
    metadata = await good.request(3, 1, {"topics": []})
    assert [b["node_id"] for b in metadata["brokers"]] == [1]

    bad = RawConnection(await trio.open_tcp_stream(host, port))
    await bad.request(17, 0, {"mechanism": "PLAIN"})
    await bad.send(b"\0alice\0wrong")
    with trio.fail_after(10):
        assert await bad.receive() is None  # closed, after the delay, with no answer

    # Outside such an exchange, a frame without a readable request header (a client id
    # longer than the frame) closes the connection: there is no correlation id to answer.
    garbage = RawConnection(await trio.open_tcp_stream(host, port))
    await garbage.send(struct.pack(">hhih", 3, 1, 9, 200) + b"short")
    with trio.fail_after(10):
        assert await garbage.receive() is None


async def _versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    connection = RawConnection(await trio.open_tcp_stream(host, port))
    answer = await connection.request(18, 0, {})
    await connection.stream.aclose()
    return {a["api_key"]: (a["min_version"], a["max_version"]) for a in answer["api_keys"]}
