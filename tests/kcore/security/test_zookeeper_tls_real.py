"""The same TLS against a real ZooKeeper 3.8 (Debian's package, Netty's server factory, the
settings of ZooKeeper's TLS guide) as against zkstub: the key material `kcore security init`
writes serves its secure client port; the client brokers use (zkstub's, in ZooKeeper's own
protocol) connects in TLS with a broker's keystore, and is refused without a certificate
(`ssl.clientAuth=need`, the default) or trusting another CA, as zkstub refuses it."""

from __future__ import annotations

import pytest
import trio
import trustme
from cryptography.hazmat.primitives import serialization

import transport
import zkstub
import zkstub._real_server as real_server
from kcore.tools.security_init import issue, make_ca
from zkstub.tls import TlsSettings

pytestmark = pytest.mark.timeout(120)

# Netty's jars (Debian's libnetty-java), which ZooKeeper's TLS needs.
NETTY_JARS = tuple(
    f"netty-{name}.jar"
    for name in ("common", "buffer", "transport", "handler", "codec", "resolver",
                 "transport-native-unix-common", "transport-native-epoll")
)  # fmt: skip


class TlsZooKeeper(real_server.RealZooKeeper):
    """A real ZooKeeper whose secure client port is `secure_port` (the plain one, which
    the fixture probes for readiness, stays)."""

    secure_port: int = 0
    keystore: str = ""
    truststore: str = ""

    def _write_config(self):
        config = super()._write_config()
        config.write_text(
            config.read_text() + f"secureClientPort={self.secure_port}\n"
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
            "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n"
            f"ssl.keyStore.location={self.keystore}\n"
            "ssl.keyStore.type=PEM\n"
            f"ssl.trustStore.location={self.truststore}\n"
            "ssl.trustStore.type=PEM\n"
        )
        return config


@pytest.fixture
async def real_tls_zookeeper(tmp_path, require_external, monkeypatch):
    classpath = real_server.find_zookeeper_classpath()
    netty = [real_server.JAVA_DIR / jar for jar in NETTY_JARS]
    require_external(
        "ZooKeeper with Netty",
        real_server.java_available() and classpath is not None and all(j.exists() for j in netty),
        "apt-get install zookeeper libnetty-java default-jre",
    )
    monkeypatch.setattr(
        real_server, "find_zookeeper_classpath",
        lambda: ":".join([classpath, *(str(jar) for jar in netty)]),
    )  # fmt: skip
    ca_key, ca = make_ca()
    files = {
        "zookeeper": issue(ca_key, ca, "zookeeper", ["127.0.0.1", "localhost"]),
        "broker": issue(ca_key, ca, "broker-1", ["127.0.0.1"]),
        "ca": ca.public_bytes(serialization.Encoding.PEM),
    }
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name}.pem"
        paths[name].write_bytes(content)
    (tmp_path / "data").mkdir()
    zookeeper = TlsZooKeeper(tmp_path, real_server._free_port(), 2000)
    zookeeper.secure_port = real_server._free_port()
    zookeeper.keystore, zookeeper.truststore = str(paths["zookeeper"]), str(paths["ca"])
    await zookeeper.start()
    try:
        yield zookeeper, {name: str(path) for name, path in paths.items()}
    finally:
        await zookeeper.stop()


async def test_a_broker_keystore_reaches_a_real_zookeeper_secure_port(real_tls_zookeeper, tmp_path):
    zookeeper, pem = real_tls_zookeeper
    secure = f"jute://127.0.0.1:{zookeeper.secure_port}"
    broker = TlsSettings(keystore_location=pem["broker"], truststore_location=pem["ca"])
    with trio.fail_after(60):
        network = transport.TcpNetwork().with_tls(broker.client_context())
        async with zkstub.connect(secure, network=network, session_timeout=10.0) as zk:
            await zk.create("/brokers", b"in TLS")
            assert (await zk.get("/brokers"))[0] == b"in TLS"

    anonymous = TlsSettings(truststore_location=pem["ca"]).client_context()
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    distrusting = TlsSettings(
        keystore_location=pem["broker"], truststore_location=str(other_ca)
    ).client_context()
    for context, why in ((anonymous, r"TLS handshake with 127\.0\.0\.1:\d+ failed"),
                         (distrusting, "certificate verify failed")):  # fmt: skip
        network = transport.TcpNetwork().with_tls(context)
        with pytest.raises(zkstub.ConnectionLossError, match=why):
            async with zkstub.connect(secure, network=network, connect_timeout=0.5):
                pass
