"""SASL_SSL end to end, as a user sets it up: two `kcore broker` processes with only a
SASL_SSL listener (TLS from PEM files made on the fly, SCRAM and PLAIN inside it, brokers
authenticating to each other with PLAIN); an operator adds a SCRAM user with `kcore configs`
logging in through a client properties file (`--command-config`, the lines of Kafka's
security docs), and confluent-kafka (librdkafka) then produces and consumes as that user
over SASL_SSL with SCRAM-SHA-512."""

from __future__ import annotations

import importlib.util
import ssl
import time

import pytest
import trio
import trustme

from kcore.tools import configs

from ..interop._cluster import start_cluster, wait_until_every_broker_knows

pytestmark = pytest.mark.timeout(120)

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    paths = {name: str(directory / f"{name}.pem") for name in ("broker", "ca")}
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        paths["broker"]
    )
    ca.cert_pem.write_to_path(paths["ca"])
    return paths


@pytest.fixture(scope="module")
def sasl_ssl_cluster(pem, tmp_path_factory):
    settings = (
        "listener.security.protocol.map=SASL_SSL:SASL_SSL\n"
        "security.inter.broker.protocol=SASL_SSL\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pem['broker']}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pem['ca']}\n"
    )
    cluster = start_cluster(
        tmp_path_factory.mktemp("sasl-ssl-cluster"),
        broker_count=2,
        listener="SASL_SSL",
        extra_config=settings,
        ssl_context=ssl.create_default_context(cafile=pem["ca"]),
        sasl_plain=("admin", "admin-secret"),
    )
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_confluent_kafka_produces_and_consumes_with_scram_over_sasl_ssl(
    sasl_ssl_cluster, pem, tmp_path, capsys, require_external
):
    require_external(
        "confluent_kafka",
        importlib.util.find_spec("confluent_kafka") is not None,
        "pip install -e '.[kafka-clients]'",
    )
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    servers = sasl_ssl_cluster.bootstrap_servers
    admin_properties = tmp_path / "admin.properties"
    admin_properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pem['ca']}\n"
    )
    add_user = [
        "--bootstrap-server", servers, "--command-config", str(admin_properties),
        "--entity-type", "users", "--entity-name", "dave", "--alter",
        "--add-config", "SCRAM-SHA-512=[password=dave-secret]",
    ]  # fmt: skip
    assert await configs.TOOL.main(add_user) == 0
    assert capsys.readouterr().out == "Completed updating config for user dave.\n"

    scram = {
        "bootstrap.servers": servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": pem["ca"],
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "dave",
        "sasl.password": "dave-secret",
    }

    def produce_and_consume() -> list[bytes]:
        admin = AdminClient(scram)
        # Each broker applies the user's change notification on its own: retry until the
        # one asked has it.
        deadline = time.monotonic() + 60
        while True:
            try:
                admin.create_topics([NewTopic("secured", 1, 2)])["secured"].result(timeout=10)
                break
            except confluent_kafka.KafkaException:
                if time.monotonic() > deadline:
                    raise
        wait_until_every_broker_knows(sasl_ssl_cluster, "secured", 1)
        producer = confluent_kafka.Producer({**scram, "acks": "all"})
        delivered = []
        for i in range(5):
            producer.produce(
                "secured", b"record-%d" % i, on_delivery=lambda e, m: delivered.append(e)
            )
        assert producer.flush(30) == 0
        assert delivered == [None] * 5
        consumer = confluent_kafka.Consumer(
            {**scram, "group.id": "secured-readers", "enable.auto.commit": False}
        )
        values = []
        try:
            consumer.assign(
                [confluent_kafka.TopicPartition("secured", 0, confluent_kafka.OFFSET_BEGINNING)]
            )
            deadline = time.monotonic() + 30
            while len(values) < 5 and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    values.append(message.value())
        finally:
            consumer.close()
        return values

    values = await trio.to_thread.run_sync(produce_and_consume)
    assert values == [b"record-%d" % i for i in range(5)]
