"""A cluster started as a user starts one, with only SSL listeners: three `kcore broker`
processes replicating to each other over TLS, reached by confluent-kafka (librdkafka) with
`security.protocol=SSL` and `ssl.ca.location`, and by kcore's own clients with the CA;
a client trusting another CA is refused, saying why."""

from __future__ import annotations

import importlib.util
import ssl

import pytest
import trio
import trustme

from kcore import errors
from kcore.client import Admin, Consumer, Producer

from ..interop._cluster import start_cluster, wait_until_every_broker_knows


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    paths = {name: str(directory / f"{name}.pem") for name in ("broker", "ca", "other-ca")}
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        paths["broker"]
    )
    ca.cert_pem.write_to_path(paths["ca"])
    trustme.CA().cert_pem.write_to_path(paths["other-ca"])
    return paths


@pytest.fixture(scope="module")
def tls_cluster(pem, tmp_path_factory, require_external):
    # The server.properties lines a Kafka operator writes for a PEM-secured cluster.
    settings = (
        "security.inter.broker.protocol=SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pem['broker']}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pem['ca']}\n"
    )
    context = ssl.create_default_context(cafile=pem["ca"])
    cluster = start_cluster(
        tmp_path_factory.mktemp("tls-cluster"),
        listener="SSL",
        extra_config=settings,
        ssl_context=context,
    )
    try:
        yield cluster
    finally:
        cluster.stop()


def test_confluent_kafka_produces_and_consumes_over_tls_replicated_to_every_broker(
    tls_cluster, pem, require_external
):
    require_external(
        "confluent_kafka",
        importlib.util.find_spec("confluent_kafka") is not None,
        "pip install -e '.[kafka-clients]'",
    )
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    tls = {
        "bootstrap.servers": tls_cluster.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": pem["ca"],
    }
    admin = AdminClient(tls)
    # Every acknowledged record is on all three brokers: they replicate over TLS.
    topic = NewTopic("tls", 1, 3, config={"min.insync.replicas": "3"})
    admin.create_topics([topic])["tls"].result(timeout=30)
    wait_until_every_broker_knows(tls_cluster, "tls", 1)

    producer = Producer({**tls, "acks": "all"})
    delivered = []
    for i in range(10):
        producer.produce("tls", b"record-%d" % i, on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0
    assert delivered == [None] * 10

    consumer = Consumer({**tls, "group.id": "tls-readers", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("tls", 0, OFFSET_BEGINNING)])
        values = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 10:
                break
    finally:
        consumer.close()
    assert values == [b"record-%d" % i for i in range(10)]


async def test_kcore_clients_reach_the_cluster_with_the_ca_and_not_with_another(tls_cluster, pem):
    # Kafka's security settings, python-style, as keywords of each client.
    trusting = {"security_protocol": "SSL", "ssl_truststore_location": pem["ca"]}
    bootstrap = tls_cluster.bootstrap_servers
    with trio.fail_after(30):
        async with Admin(bootstrap, **trusting) as admin:
            await admin.create_topic(
                "kcore-tls", partitions=1, replication_factor=3,
                config={"min.insync.replicas": "3"},
            )  # fmt: skip
        async with Producer(bootstrap, acks="all", **trusting) as producer:
            for i in range(3):
                await producer.send_and_wait("kcore-tls", b"v%d" % i, partition=0)
        async with Consumer(bootstrap, **trusting) as consumer:
            consumer.assign([("kcore-tls", 0)])
            consumer.seek_to_beginning()
            values = []
            while len(values) < 3:
                values.extend(r.value for r in await consumer.poll(timeout=1.0))
        assert values == [b"v0", b"v1", b"v2"]

        stranger = {"security_protocol": "SSL", "ssl_truststore_location": pem["other-ca"]}
        with pytest.raises(errors.NetworkError, match="certificate verify failed"):
            async with Admin(bootstrap, **stranger) as admin:
                await admin.list_topics()
