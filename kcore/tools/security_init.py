"""`kcore security init --dir D --brokers 3`: the key material and settings of a secured local
cluster, written once, ready to start.

What it writes in D (keys and files holding passwords are the user's alone, 0600):

- `ca.pem`, `ca-key.pem`: a new certificate authority (EC P-256), the one truststore of the
  cluster (`ssl.truststore.location`); its key signs the others (keep it, or delete it once
  no more certificates are needed);
- `zookeeper.pem`: the key and certificate chain of ZooKeeper's (zkstub's) secure client port;
- `broker-N.pem`: broker N's key and chain (subject `CN=broker-N`, for HOST): its TLS
  listeners' keystore, the certificate it presents to the other brokers (its principal is
  `User:CN=broker-N`, a super user) and to ZooKeeper;
- `client.pem`: a client's key and chain (`CN=admin`, a super user), for mutual TLS
  (ZooKeeper's `ssl.clientAuth=need`, the brokers' SSL listener);
- `broker-N.properties`: Kafka's settings for broker N: an SSL listener between brokers
  (certificates required), a SASL_SSL listener for clients (PLAIN with an `admin` user whose
  password is generated, SCRAM-SHA-512 for the users an operator adds), Kafka's
  AclAuthorizer with the brokers and `admin` as super users, TLS to ZooKeeper
  (`zookeeper.ssl.*`) and `zookeeper.set.acl=true` with a generated digest credential;
- `admin.properties`: the client settings of the admin (`--command-config` of kcore's and
  Kafka's tools; confluent-kafka reads the same names);
- `zookeeper-client.properties`: `kcore zookeeper-shell ... -zk-tls-config-file` settings
  (TLS with `client.pem`, and the brokers' ZooKeeper identity, to change their znodes).

It prints what it wrote and the commands that start the cluster. Nothing existing is
overwritten unless `--force` (the whole set is written anew: new CA, new passwords).

The certificates are made with the `cryptography` package. Deciding (what to write, where)
is `plan`; `write` writes the files.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import secrets
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ADMIN = "admin"
ZOOKEEPER_USER = "kafka"  # the brokers' ZooKeeper digest identity
CA_DAYS = 3650
LEAF_DAYS = 825
PRIVATE = 0o600
PUBLIC = 0o644


@attrs.frozen
class OutputFile:
    name: str
    content: bytes
    mode: int
    what: str  # one line for the summary


@attrs.frozen
class Layout:
    """A cluster's addresses: broker N's client listener (SASL_SSL) on `base_port + N - 1`,
    its inter-broker listener (SSL) 100 above, ZooKeeper's secure client port."""

    directory: Path
    brokers: int
    host: str = "127.0.0.1"
    base_port: int = 9092
    zookeeper_port: int = 2182

    def client_port(self, broker_id: int) -> int:
        return self.base_port + broker_id - 1

    def inter_broker_port(self, broker_id: int) -> int:
        return self.base_port + 100 + broker_id - 1

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.client_port(n)}" for n in range(1, self.brokers + 1))

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.host}:{self.zookeeper_port}"

    def path(self, name: str) -> str:
        return str(self.directory / name)


# -- certificates -----------------------------------------------------------------------------


def _key_usage(*, certificate_signing: bool) -> x509.KeyUsage:
    """An EC key signs (TLS handshakes; certificates too, the CA's): nothing else."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=certificate_signing,
        crl_sign=certificate_signing,
        encipher_only=False,
        decipher_only=False,
    )


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,  # "BEGIN PRIVATE KEY": what Java's PEM readers take
        serialization.NoEncryption(),
    )


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=days)
    )


def make_ca() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    name = _name(f"kcore local CA {secrets.token_hex(4)}")
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(certificate_signing=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return key, _validity(builder, CA_DAYS).sign(key, hashes.SHA256())


def _subject_alternative_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):  # in order, once each
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca: x509.Certificate,
    common_name: str,
    hosts: Sequence[str],
) -> bytes:
    """A PEM keystore: a new private key, its certificate (subject `CN=common_name`, valid
    for `hosts`, for servers and clients) and the CA's, in that order."""
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(certificate_signing=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(_subject_alternative_names(hosts), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    certificate = _validity(builder, LEAF_DAYS).sign(ca_key, hashes.SHA256())
    return _key_pem(key) + _cert_pem(certificate) + _cert_pem(ca)


# -- settings ---------------------------------------------------------------------------------


def _escape(value: str) -> str:
    """A value as a properties file reads it back (backslashes doubled)."""
    return value.replace("\\", "\\\\")


def _properties(lines: Sequence[str | tuple[str, str]]) -> bytes:
    """Comment lines (str) and settings ((key, value)) as a properties file."""
    text = []
    for line in lines:
        if isinstance(line, str):
            text.append(f"# {line}" if line else "")
        else:
            key, value = line
            text.append(f"{key}={_escape(value)}")
    return ("\n".join(text) + "\n").encode()


def broker_properties(
    layout: Layout, broker_id: int, admin_password: str, zookeeper_password: str
) -> bytes:
    super_users = ";".join(
        [f"User:CN=broker-{n}" for n in range(1, layout.brokers + 1)]
        + [f"User:{ADMIN}", f"User:CN={ADMIN}"]  # by password (SASL_SSL), by certificate (SSL)
    )
    jaas = f'{PLAIN_LOGIN_MODULE} required user_{ADMIN}="{admin_password}";'
    return _properties([
        f"Broker {broker_id} of a secured local kcore cluster (kcore security init).",
        f"Start it with: kcore broker --config {layout.path(f'broker-{broker_id}.properties')}",
        "",
        ("broker.id", str(broker_id)),
        ("log.dirs", layout.path(f"data/broker-{broker_id}")),
        ("offsets.topic.replication.factor", str(min(3, layout.brokers))),
        "",
        "Brokers talk to each other over SSL (the first listener), each known by its",
        "certificate (User:CN=broker-N); clients log in over SASL_SSL.",
        ("listeners",
         f"SSL://{layout.host}:{layout.inter_broker_port(broker_id)},"
         f"SASL_SSL://{layout.host}:{layout.client_port(broker_id)}"),
        ("inter.broker.listener.name", "SSL"),
        ("listener.name.ssl.ssl.client.auth", "required"),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", layout.path(f"broker-{broker_id}.pem")),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", layout.path("ca.pem")),
        "",
        f"PLAIN for the {ADMIN} user below; SCRAM-SHA-512 for the users added with",
        "kcore configs --entity-type users (stored in ZooKeeper, applied without a restart).",
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
        ("listener.name.sasl_ssl.plain.sasl.jaas.config", jaas),
        "",
        "Kafka's authorizer: nobody but the super users may do anything without an ACL.",
        ("authorizer.class.name", AUTHORIZER),
        ("super.users", super_users),
        "",
        "ZooKeeper over TLS (zkstub's secure client port), the broker presenting its",
        "certificate; its znodes writable by the brokers' digest identity only.",
        ("zookeeper.connect", layout.zookeeper_connect),
        ("zookeeper.ssl.client.enable", "true"),
        ("zookeeper.clientCnxnSocket", NETTY),
        ("zookeeper.ssl.keystore.type", "PEM"),
        ("zookeeper.ssl.keystore.location", layout.path(f"broker-{broker_id}.pem")),
        ("zookeeper.ssl.truststore.type", "PEM"),
        ("zookeeper.ssl.truststore.location", layout.path("ca.pem")),
        ("zookeeper.set.acl", "true"),
        ("kcore.zookeeper.digest.credential", f"{ZOOKEEPER_USER}:{zookeeper_password}"),
    ])  # fmt: skip


def admin_properties(layout: Layout, admin_password: str) -> bytes:
    jaas = f'{PLAIN_LOGIN_MODULE} required username="{ADMIN}" password="{admin_password}";'
    return _properties([
        f"The cluster's {ADMIN} (a super user), for kcore's and Kafka's tools",
        "(--command-config, --producer.config, --consumer.config).",
        f"Bootstrap servers: {layout.bootstrap_servers}",
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.jaas.config", jaas),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", layout.path("ca.pem")),
    ])  # fmt: skip


def zookeeper_client_properties(layout: Layout, zookeeper_password: str) -> bytes:
    return _properties([
        f"kcore zookeeper-shell {layout.zookeeper_connect} -zk-tls-config-file <this file>",
        ("zookeeper.ssl.client.enable", "true"),
        ("zookeeper.clientCnxnSocket", NETTY),
        ("zookeeper.ssl.keystore.type", "PEM"),
        ("zookeeper.ssl.keystore.location", layout.path("client.pem")),
        ("zookeeper.ssl.truststore.type", "PEM"),
        ("zookeeper.ssl.truststore.location", layout.path("ca.pem")),
        "The brokers' ZooKeeper identity: the shell may change what they own.",
        ("kcore.zookeeper.digest.credential", f"{ZOOKEEPER_USER}:{zookeeper_password}"),
    ])  # fmt: skip


def plan(layout: Layout) -> list[OutputFile]:
    """Every file of a new secured cluster: new keys and new passwords each time."""
    ca_key, ca = make_ca()
    hosts = [layout.host, "localhost", "127.0.0.1"]
    admin_password = secrets.token_urlsafe(18)
    zookeeper_password = secrets.token_urlsafe(18)
    files = [
        OutputFile("ca.pem", _cert_pem(ca), PUBLIC,
                   "the CA's certificate: every truststore (ssl.truststore.location)"),
        OutputFile("ca-key.pem", _key_pem(ca_key), PRIVATE,
                   "the CA's private key (signs more certificates; delete it if none are needed)"),
        OutputFile("zookeeper.pem", issue(ca_key, ca, "zookeeper", hosts), PRIVATE,
                   "ZooKeeper's key and chain (zkstub serve --ssl-keystore-location)"),
    ]  # fmt: skip
    for n in range(1, layout.brokers + 1):
        files.append(
            OutputFile(f"broker-{n}.pem", issue(ca_key, ca, f"broker-{n}", hosts), PRIVATE,
                       f"broker {n}'s key and chain (User:CN=broker-{n})")
        )  # fmt: skip
    files.append(
        OutputFile("client.pem", issue(ca_key, ca, ADMIN, hosts), PRIVATE,
                   f"a client's key and chain (User:CN={ADMIN}), for mutual TLS")
    )  # fmt: skip
    for n in range(1, layout.brokers + 1):
        files.append(
            OutputFile(
                f"broker-{n}.properties",
                broker_properties(layout, n, admin_password, zookeeper_password), PRIVATE,
                f"broker {n}'s settings (kcore broker --config)",
            )
        )  # fmt: skip
    files.append(
        OutputFile("admin.properties", admin_properties(layout, admin_password), PRIVATE,
                   f"the {ADMIN} client's settings (--command-config)")
    )  # fmt: skip
    files.append(
        OutputFile(
            "zookeeper-client.properties", zookeeper_client_properties(layout, zookeeper_password),
            PRIVATE, "kcore zookeeper-shell's -zk-tls-config-file",
        )
    )  # fmt: skip
    return files


def start_commands(layout: Layout) -> list[str]:
    """The commands that start the cluster, in order (each in its own terminal)."""
    quoted = shlex.quote
    zookeeper = (
        f"python -m zkstub serve --secure-port {layout.zookeeper_port} --host {layout.host} "
        f"--ssl-keystore-location {quoted(layout.path('zookeeper.pem'))} "
        f"--ssl-truststore-location {quoted(layout.path('ca.pem'))} "
        f"--data-dir {quoted(layout.path('data/zookeeper'))}"
    )
    brokers = [
        f"kcore broker --config {quoted(layout.path(f'broker-{n}.properties'))}"
        for n in range(1, layout.brokers + 1)
    ]
    return [zookeeper, *brokers]


def write(directory: Path, files: Sequence[OutputFile], *, force: bool) -> None:
    """Writes every file, or none: FileExistsError naming those already there, unless
    `force`. A file's mode is set before anything is written into it."""
    existing = [f.name for f in files if (directory / f.name).exists()]
    if existing and not force:
        raise FileExistsError(
            f"{directory} already holds {', '.join(existing)}: nothing was written (--force "
            "writes a new set over them: a new CA, new keys and passwords)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    for output in files:
        path = directory / output.name
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, output.mode)
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), output.mode)  # an existing file keeps its mode otherwise
            file.write(output.content)


def summary(layout: Layout, files: Sequence[OutputFile]) -> str:
    width = max(len(f.name) for f in files)
    lines = [f"kcore security init: wrote {len(files)} files in {layout.directory}"]
    lines += [f"  {f.name:<{width}}  {f.what}" for f in files]
    lines += ["", "Start ZooKeeper, then each broker (each in its own terminal):"]
    lines += [f"  {command}" for command in start_commands(layout)]
    admin = shlex.quote(layout.path("admin.properties"))
    first = f"{layout.host}:{layout.client_port(1)}"
    lines += [
        "",
        f"Then, as {ADMIN} (the bootstrap servers are {layout.bootstrap_servers}):",
        f"  kcore topics --bootstrap-server {first} --command-config {admin} --create "
        f"--topic orders --partitions 3 --replication-factor {min(3, layout.brokers)}",
        f"  kcore acls --bootstrap-server {first} --command-config {admin} --add "
        "--allow-principal User:alice --producer --consumer --topic orders --group billing",
        f"  kcore zookeeper-shell {layout.zookeeper_connect} -zk-tls-config-file "
        f"{shlex.quote(layout.path('zookeeper-client.properties'))} ls /brokers/ids",
    ]
    return "\n".join(lines)


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", required=True, type=Path, help="where to write the files")
    parser.add_argument(
        "--brokers", type=int, default=3, help="how many brokers (ids 1..N; default 3)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1",
        help="the address every listener binds and the certificates name (default 127.0.0.1)",
    )  # fmt: skip
    parser.add_argument(
        "--base-port", type=int, default=9092,
        help="broker N's client listener (SASL_SSL) port is this + N - 1, its inter-broker "
        "listener (SSL) 100 above (default 9092: 9092.. and 9192..)",
    )  # fmt: skip
    parser.add_argument(
        "--zookeeper-port", type=int, default=2182,
        help="ZooKeeper's secure client port (default 2182)",
    )  # fmt: skip
    parser.add_argument(
        "--force", action="store_true",
        help="write over files of an earlier run (a new CA, new keys and passwords)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.brokers <= 99:
        print("kcore security init: --brokers must be between 1 and 99", file=sys.stderr)
        return 2
    top = args.base_port + 100 + args.brokers - 1
    if not 1 <= args.base_port or top > 65535 or not 1 <= args.zookeeper_port <= 65535:
        print("kcore security init: ports must be between 1 and 65535", file=sys.stderr)
        return 2
    layout = Layout(
        args.dir.resolve(), args.brokers, args.host, args.base_port, args.zookeeper_port
    )
    files = plan(layout)
    try:
        write(layout.directory, files, force=args.force)
    except OSError as error:  # FileExistsError included
        print(f"kcore security init: {error}", file=sys.stderr)
        return 1
    print(summary(layout, files))
    return 0
