"""A broker's TLS listeners as its users meet them: kcore's clients reach an SSL listener
with the CA and Kafka's client settings; a listener requiring client certificates refuses
a client without one and knows the one with one by its certificate's subject; and key
material kcore cannot use stops the broker at start-up, saying why."""

import logging

import pytest
import trio
import trustme

import kcore
from kcore import errors
from kcore.client import Admin, Producer
from kcore.client._config import security_network
from kcore.config import ConfigError
from kcore.testing import open_cluster


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def pem(ca, tmp_path_factory):
    """PEM files: the broker's key and chain, the CA, and a client's key and chain."""
    directory = tmp_path_factory.mktemp("pem")
    paths = {name: str(directory / f"{name}.pem") for name in ("broker", "ca", "client")}
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        paths["broker"]
    )
    ca.cert_pem.write_to_path(paths["ca"])
    client = ca.issue_cert(
        "client.example", common_name="client", organization_unit_name="eng",
        organization_name="kcore",
    )  # fmt: skip
    client.private_key_and_cert_chain_pem.write_to_path(paths["client"])
    return paths


def tls_broker_config(pem, **more):
    return {
        "security.inter.broker.protocol": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pem["broker"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pem["ca"],
        **more,
    }


async def test_mutual_tls_required_on_one_listener_refuses_a_client_without_a_certificate(
    pem, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG, logger="kcore.server.broker")
    config = tls_broker_config(
        pem,
        listeners="SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        **{
            "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
            "listener.name.mtls.ssl.client.auth": "required",
        },
    )
    async with open_cluster(1, network="tcp", data_dir=tmp_path, broker_config=config) as cluster:
        await cluster.wait_for_controller(timeout=30)
        ports = {e.listener_name: e.port for e in cluster.brokers[1].endpoints}
        ssl_listener, mtls_listener = [("127.0.0.1", ports["SSL"])], [("127.0.0.1", ports["MTLS"])]
        trusting = security_network(security_protocol="SSL", ssl_truststore_location=pem["ca"])
        with trio.fail_after(30):
            async with Admin(ssl_listener, network=trusting) as admin:
                await admin.create_topic("t", partitions=1, replication_factor=1)
            async with Producer(ssl_listener, network=trusting) as producer:
                assert (await producer.send_and_wait("t", b"over TLS")).offset == 0

            with pytest.raises(errors.KafkaError, match="TLSV13_ALERT_CERTIFICATE_REQUIRED"):
                async with Admin(mtls_listener, network=trusting) as admin:
                    await admin.list_topics()

            with_certificate = security_network(
                security_protocol="SSL",
                ssl_truststore_location=pem["ca"],
                ssl_keystore_location=pem["client"],
            )
            async with Admin(mtls_listener, network=with_certificate) as admin:
                assert "t" in await admin.list_topics()
        principals = [r.getMessage() for r in caplog.records if "principal" in r.getMessage()]
        assert any("principal User:CN=client,OU=eng,O=kcore" in m for m in principals)
        assert any("principal User:ANONYMOUS" in m for m in principals)


async def test_key_material_kcore_cannot_use_stops_the_broker_at_start_up(pem, tmp_path):
    settings = {
        "broker.id": 1,
        "zookeeper.connect": "127.0.0.1:1",
        "listeners": "SSL://127.0.0.1:0",
        "log.dirs": str(tmp_path),
    }
    with pytest.raises(ConfigError, match="needs its key and certificate"):
        async with kcore.open_broker(settings):
            pass
    # Kafka's default store type is JKS: a keystore written for Kafka that way.
    jks = {**settings, "ssl.keystore.location": str(tmp_path / "broker.jks")}
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.type=JKS is not supported"):
        async with kcore.open_broker(jks):
            pass


async def test_a_simulated_cluster_refuses_a_tls_listener_clearly(pem, autojump_clock):
    config = {
        "listener.security.protocol.map": "PLAINTEXT:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pem["broker"],
    }
    with pytest.raises(ConfigError, match="need a network that does TLS"):
        async with open_cluster(1, broker_config=config):
            pass
