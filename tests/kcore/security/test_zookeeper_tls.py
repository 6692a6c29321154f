"""A broker's connection to ZooKeeper in TLS, configured with Kafka's `zookeeper.ssl.*`
settings, to zkstub's secure client port (certificates made on the fly): it registers,
elects itself controller and serves, presenting its certificate where ZooKeeper needs one;
a broker trusting another CA is refused at start-up, naming the server and why; settings
kcore cannot honour are refused naming the key, never quoting a password."""

from __future__ import annotations

import pytest
import trio
import trustme

import kcore
import transport
import zkstub
from kcore.client import Admin, Consumer, Producer
from kcore.config import ConfigError, KafkaConfig
from kcore.zk_client import ZooKeeperUnreachableError
from zkstub.tls import TlsSettings

NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    paths = {n: str(directory / f"{n}.pem") for n in ("zookeeper", "broker", "ca", "other")}
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        paths["zookeeper"]
    )
    ca.issue_cert("broker-1", common_name="broker-1").private_key_and_cert_chain_pem.write_to_path(
        paths["broker"]
    )
    ca.cert_pem.write_to_path(paths["ca"])
    trustme.CA().cert_pem.write_to_path(paths["other"])
    return paths


def broker_settings(pem, zookeeper, tmp_path, **more):
    """The server.properties lines of Kafka's "ZooKeeper TLS" documentation, in PEM."""
    host, port = zookeeper.secure_address
    return {
        "broker.id": 1,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "logs"),
        "offsets.topic.replication.factor": 1,
        "zookeeper.connect": f"{host}:{port}",
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": NETTY,
        "zookeeper.ssl.keystore.location": pem["broker"],
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": pem["ca"],
        "zookeeper.ssl.truststore.type": "PEM",
        **more,
    }


def tls_only_zookeeper(pem):
    """zkstub with only a secureClientPort, needing a client certificate (ssl.clientAuth's
    default)."""
    tls = TlsSettings(keystore_location=pem["zookeeper"], truststore_location=pem["ca"])
    return zkstub.open_server(
        network=transport.TcpNetwork(), tls=tls.server_context(), plaintext=False
    )


async def test_a_broker_reaches_zookeeper_in_tls_elects_itself_and_serves(pem, tmp_path):
    async with tls_only_zookeeper(pem) as zookeeper:
        with trio.fail_after(60):
            async with kcore.open_broker(broker_settings(pem, zookeeper, tmp_path)) as broker:
                bootstrap = broker.bootstrap_servers
                async with Admin(bootstrap) as admin:
                    await admin.create_topic("t", partitions=1, replication_factor=1)
                async with Producer(bootstrap) as producer:
                    assert (await producer.send_and_wait("t", b"over TLS")).offset == 0
                async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
                    consumer.assign([("t", 0)])
                    records = []
                    while not records:
                        records = await consumer.poll(timeout=1.0)
                assert [r.value for r in records] == [b"over TLS"]
                controller, _ = zookeeper.tree.get("/controller", None)
                assert b'"brokerid":1' in controller


async def test_a_broker_trusting_another_ca_is_refused_naming_zookeeper(pem, tmp_path):
    async with tls_only_zookeeper(pem) as zookeeper:
        host, port = zookeeper.secure_address
        settings = broker_settings(
            pem, zookeeper, tmp_path,
            **{"zookeeper.ssl.truststore.location": pem["other"],
               "zookeeper.connection.timeout.ms": 500},
        )  # fmt: skip
        with pytest.raises(ZooKeeperUnreachableError) as refused:
            async with kcore.open_broker(settings):
                pass
    message = str(refused.value)
    assert f"cannot reach ZooKeeper at {host}:{port}" in message
    assert "certificate verify failed" in message


BASE = {"broker.id": 1, "zookeeper.connect": "127.0.0.1:2281", "log.dirs": "/tmp/unused"}
TLS = {**BASE, "zookeeper.ssl.client.enable": "true"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({**TLS, "zookeeper.ssl.keystore.location": "/etc/kafka/zk.jks"},
         r"zookeeper\.ssl\.keystore\.type=JKS is not supported"),
        ({**TLS, "zookeeper.ssl.truststore.location": "/etc/kafka/ca.p12",
          "zookeeper.ssl.truststore.type": "PKCS12"},
         r"zookeeper\.ssl\.truststore\.type=PKCS12 is not supported"),
        ({**TLS, "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNIO"},
         "NIO socket has no TLS"),
        ({**BASE, "zookeeper.clientCnxnSocket": "com.example.Socket"},
         r"zookeeper\.clientCnxnSocket=com\.example\.Socket is not supported"),
        ({**TLS, "zookeeper.ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
         r"zookeeper\.ssl\.cipher\.suites=.* is not supported"),
        ({**TLS, "zookeeper.ssl.crl.enable": "true"}, "revocation lists"),
        ({**TLS, "zookeeper.ssl.ocsp.enable": "true"}, "OCSP"),
        ({**TLS, "zookeeper.ssl.protocol": "TLSv1.1"}, r"zookeeper\.ssl\.protocol=TLSv1\.1"),
        ({**TLS, "zookeeper.ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "TLSv1.2 and TLSv1.3"),
        ({**TLS, "zookeeper.ssl.endpoint.identification.algorithm": "HTTP"}, "HTTPS"),
        ({**BASE, "zookeeper.ssl.keystore.location": "/etc/kafka/zk.pem"},
         "zookeeper.ssl.client.enable is not true"),
        ({**TLS, "zookeeper.connect": "zookeeper://127.0.0.1:2281"}, "jute://host:port"),
    ],
)  # fmt: skip
def test_zookeeper_tls_settings_kcore_cannot_honour_are_refused_naming_the_key(settings, message):
    with pytest.raises(ConfigError, match=message):
        KafkaConfig.from_dict(settings)


def test_a_pem_keystore_is_decrypted_by_its_password_which_no_message_shows(pem, tmp_path):
    from cryptography.hazmat.primitives import serialization

    leaf = trustme.CA().issue_cert("broker-1")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret-pw"),
    )
    keystore = tmp_path / "encrypted.pem"
    keystore.write_bytes(encrypted + leaf.cert_chain_pems[0].bytes())
    settings = {**TLS, "zookeeper.ssl.keystore.location": str(keystore),
                "zookeeper.ssl.truststore.location": pem["ca"]}  # fmt: skip
    from kcore.security.tls import zookeeper_context

    config = KafkaConfig.from_dict({**settings, "zookeeper.ssl.keystore.password": "s3cret-pw"})
    assert zookeeper_context(config.values) is not None
    for password in (None, "wrong-pw"):
        config = KafkaConfig.from_dict({**settings, "zookeeper.ssl.keystore.password": password})
        with pytest.raises(ConfigError, match="cannot load the PEM keystore") as info:
            zookeeper_context(config.values)
        assert "s3cret" not in str(info.value) and "wrong-pw" not in str(info.value)
    with pytest.raises(ConfigError, match=r"truststore\.password cannot be set for a PEM"):
        config = KafkaConfig.from_dict({**settings, "zookeeper.ssl.truststore.password": "x"})
        zookeeper_context(config.values)


async def test_zookeeper_shell_reaches_a_secure_port_and_writes_as_the_brokers(
    pem, tmp_path, capsys
):
    """`kcore zookeeper-shell H:P -zk-tls-config-file F`: F's zookeeper.ssl.* make the
    connection TLS; its kcore.zookeeper.digest.credential lets an operator change a znode
    that zookeeper.set.acl made the brokers' alone."""
    from kcore.tools import zookeeper_shell

    tls_lines = (
        "zookeeper.ssl.client.enable=true\n"
        f"zookeeper.clientCnxnSocket={NETTY}\n"
        f"zookeeper.ssl.keystore.location={pem['broker']}\n"
        f"zookeeper.ssl.truststore.location={pem['ca']}\n"
    )
    tls_only = tmp_path / "zk-tls.properties"
    tls_only.write_text(tls_lines)
    as_brokers = tmp_path / "server.properties"  # other settings are ignored
    as_brokers.write_text(
        "broker.id=1\nlisteners=PLAINTEXT://:9092\n"
        + tls_lines
        + "kcore.zookeeper.digest.credential=kafka:broker-secret\n"
    )
    brokers_only = [
        zkstub.ACL(zkstub.Perms.ALL, "digest", zkstub.digest("kafka:broker-secret")),
        *zkstub.READ_ACL_UNSAFE,
    ]
    async with tls_only_zookeeper(pem) as zookeeper:
        host, port = zookeeper.secure_address
        where = f"{host}:{port}"
        async with zkstub.connect(
            where, network=transport.TcpNetwork().with_tls(
                TlsSettings(keystore_location=pem["broker"], truststore_location=pem["ca"])
                .client_context()
            ),
        ) as zk:  # fmt: skip
            await zk.add_auth("digest", "kafka:broker-secret")
            await zk.create("/controller_epoch", b"1", acl=brokers_only)
        capsys.readouterr()

        def shell(*argv, config=None):
            flags = [] if config is None else ["-zk-tls-config-file", str(config)]
            return zookeeper_shell.TOOL.main([where, *flags, *argv])

        with trio.fail_after(60):
            assert await shell("get", "/controller_epoch", config=tls_only) == 0
            assert capsys.readouterr().out.endswith("\n1\n")
            assert await shell("set", "/controller_epoch", "9", config=tls_only) == 1
            assert "Insufficient permission : /controller_epoch" in capsys.readouterr().err
            assert await shell("set", "/controller_epoch", "2", config=as_brokers) == 0
            assert zookeeper.tree.get("/controller_epoch", None)[0] == b"2"
            # Without the file: no TLS, and the secure port says nothing a shell can read.
            assert await shell("-timeout", "1000", "ls", "/") == 1
        err = capsys.readouterr().err
        assert f"no ZooKeeper session at {where}" in err
        assert "broker-secret" not in err
