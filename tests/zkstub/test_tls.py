"""ZooKeeper's secure client port on zkstub (`secureClientPort`, `ssl.*` with PEM files made
on the fly): both of zkstub's protocols in TLS, the same tree as the plain port; a client
that trusts another CA, or brings no certificate where one is needed, is refused, told why
and where; settings that cannot work stop `zkstub serve` at start-up, naming them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trustme

import transport
import zkstub
from zkstub.cli import parse_args, server_tls
from zkstub.tls import TlsSettings, TlsSettingsError

REPO_ROOT = Path(zkstub.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    """The server's key and chain, its CA, a client's key and chain, another CA."""
    directory = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    paths = {name: str(directory / f"{name}.pem") for name in ("server", "ca", "client", "other")}
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        paths["server"]
    )
    ca.cert_pem.write_to_path(paths["ca"])
    ca.issue_cert("client", common_name="client").private_key_and_cert_chain_pem.write_to_path(
        paths["client"]
    )
    trustme.CA().cert_pem.write_to_path(paths["other"])
    return paths


def client_network(pem, *, trust="ca", certificate=True):
    settings = TlsSettings(
        keystore_location=pem["client"] if certificate else None,
        truststore_location=pem[trust],
        protocol="TLS",  # TLSv1.2 and TLSv1.3, whichever the server speaks
    )
    return transport.TcpNetwork().with_tls(settings.client_context())


def server_settings(pem, **more):
    return TlsSettings(
        keystore_location=pem["server"], truststore_location=pem["ca"], **more
    ).server_context()


def where(address):
    return f"{address[0]}:{address[1]}"


async def test_both_protocols_are_served_in_tls_on_the_secure_port_over_the_same_tree(pem):
    async with zkstub.open_server(
        network=transport.TcpNetwork(), tls=server_settings(pem)
    ) as server:
        secure = where(server.secure_address)
        assert server.secure_address != server.address
        with trio.fail_after(30):
            async with zkstub.connect(secure, network=client_network(pem)) as msgpack_client:
                await msgpack_client.create("/brokers", b"in TLS")
            async with zkstub.connect(f"jute://{secure}", network=client_network(pem)) as jute:
                assert (await jute.get("/brokers"))[0] == b"in TLS"
                await jute.create("/brokers/1", b"", ephemeral=True)
            async with zkstub.connect(where(server.address)) as plain:  # the plain port
                assert await plain.get_children("/brokers") == []  # the ephemeral went


async def test_a_client_that_trusts_another_ca_is_refused_naming_the_server(pem):
    async with zkstub.open_server(
        network=transport.TcpNetwork(), tls=server_settings(pem), plaintext=False
    ) as server:
        assert server.address is None  # no clientPort: TLS only
        secure = where(server.secure_address)
        for target in (secure, f"jute://{secure}"):
            with pytest.raises(zkstub.ConnectionLossError) as refused:
                async with zkstub.connect(
                    target, network=client_network(pem, trust="other"), connect_timeout=0.5
                ):
                    pass
            message = str(refused.value)
            assert f"cannot connect to {secure}" in message
            assert "certificate verify failed" in message


# What OpenSSL's alert says: TLS 1.2 fails the handshake, TLS 1.3 names the missing piece.
REFUSED_WITHOUT_CERTIFICATE = r"(?i)SSLV3_ALERT_HANDSHAKE_FAILURE|certificate.required"


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
async def test_client_auth_need_refuses_a_client_without_a_certificate_and_want_does_not(
    pem, protocol
):
    anonymous = client_network(pem, certificate=False)
    async with zkstub.open_server(
        network=transport.TcpNetwork(), tls=server_settings(pem, protocol=protocol)
    ) as server:
        with pytest.raises(zkstub.ConnectionLossError, match=REFUSED_WITHOUT_CERTIFICATE):
            async with zkstub.connect(
                where(server.secure_address), network=anonymous, connect_timeout=0.5
            ):
                pass
    wanting = server_settings(pem, client_auth="want", protocol=protocol)
    async with zkstub.open_server(network=transport.TcpNetwork(), tls=wanting) as server:
        with trio.fail_after(30):
            async with zkstub.connect(where(server.secure_address), network=anonymous) as zk:
                assert await zk.exists("/zookeeper") is not None


def test_settings_that_cannot_work_are_refused_naming_them(pem, tmp_path):
    with pytest.raises(TlsSettingsError, match="needs its key and certificate"):
        TlsSettings().server_context()
    # ZooKeeper tells a store's type by its extension when ssl.keyStore.type is not set.
    with pytest.raises(TlsSettingsError, match=r"ssl.keyStore.type=JKS is not supported"):
        TlsSettings(keystore_location="/etc/zookeeper/server.jks").server_context()
    with pytest.raises(TlsSettingsError, match=r"cannot be told from its name: set ssl"):
        TlsSettings(keystore_location="/etc/zookeeper/server.key").server_context()
    with pytest.raises(TlsSettingsError, match=r"ssl.trustStore.type=PKCS12 is not"):
        TlsSettings(truststore_location=pem["ca"], truststore_type="PKCS12").client_context()
    with pytest.raises(TlsSettingsError, match=r"the PEM keystore /nowhere\.pem: no such file"):
        TlsSettings(keystore_location="/nowhere.pem").server_context()
    with pytest.raises(TlsSettingsError, match=r"ssl\.clientAuth=required is not one of"):
        TlsSettings(keystore_location=pem["server"], client_auth="required").server_context()
    assert TlsSettings(keystore_location=pem["server"]).server_context().maximum_version == (
        TlsSettings(protocol="TLSv1.2").client_context().maximum_version
    )
    # zkstub serve's flags: a TLS setting without the port it is for is a mistake.
    lonely = parse_args(["serve", "--ssl-keystore-location", pem["server"]])
    with pytest.raises(TlsSettingsError, match="--ssl-keystore-location is set but --secure-p"):
        server_tls(lonely)
    password_file = tmp_path / "missing-password"
    flags = ["serve", "--secure-port", "0", "--ssl-keystore-location", pem["server"],
             "--ssl-keystore-password-path", str(password_file)]  # fmt: skip
    with pytest.raises(TlsSettingsError, match=r"cannot read ssl\.keyStore\.passwordPath"):
        server_tls(parse_args(flags))


async def test_zkstub_serve_with_only_a_secure_port_serves_tls_alone(pem):
    command = [sys.executable, "-m", "zkstub", "serve", "--secure-port", "0",
               "--ssl-keystore-location", pem["server"], "--ssl-keystore-type", "PEM",
               "--ssl-truststore-location", pem["ca"], "--log-level", "WARN"]  # fmt: skip
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT
    )
    try:
        with trio.fail_after(60):
            line = b""
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, f"zkstub serve exited after printing {line!r}"
                line += chunk
            serving = line.decode().strip()
            assert serving.startswith("zkstub serving TLS on 127.0.0.1:"), serving
            address = serving.rsplit(" ", 1)[1]
            async with zkstub.connect(f"jute://{address}", network=client_network(pem)) as zk:
                assert await zk.get_children("/") == ["zookeeper"]
    finally:
        process.terminate()
        await process.wait()


def test_zkstub_serve_refuses_a_keystore_it_cannot_read():
    done = subprocess.run(
        [sys.executable, "-m", "zkstub", "serve", "--secure-port", "0",
         "--ssl-keystore-location", "/etc/zookeeper/server.jks"],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert "ssl.keyStore.type=JKS is not supported" in done.stderr
