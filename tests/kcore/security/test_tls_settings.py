"""Kafka's ssl.* settings in, TLS contexts out: PEM key material as Kafka reads it (a file,
or PEM text in the configuration, an encrypted key and its password), everything else
refused with a message naming the setting and never a secret; and TLS principals written
as Kafka writes them."""

import datetime
import ssl

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import transport
from kcore.client._config import ClientConfigError, security_network
from kcore.config import ConfigError, KafkaConfig
from kcore.security import BrokerTls, listener_settings, principal, server_context, subject_name
from kcore.security.tls import client_context


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def pem_files(ca, tmp_path_factory):
    directory = tmp_path_factory.mktemp("pem")
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    keystore = directory / "broker.pem"
    leaf.private_key_and_cert_chain_pem.write_to_path(keystore)
    truststore = directory / "ca.pem"
    ca.cert_pem.write_to_path(truststore)
    return leaf, str(keystore), str(truststore)


def pem_keystore(location):
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": location}


def test_a_pem_keystore_file_or_pem_text_serves_and_the_client_auth_setting_is_honoured(
    pem_files,
):
    leaf, keystore, truststore = pem_files
    from_file = server_context(pem_keystore(keystore))
    assert from_file.verify_mode == ssl.CERT_NONE  # Kafka's default: ssl.client.auth=none
    from_text = server_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": leaf.private_key_pem.bytes().decode(),
            "ssl.keystore.certificate.chain": leaf.cert_chain_pems[0].bytes().decode(),
            "ssl.client.auth": "required",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": truststore,
        }
    )
    assert from_text.verify_mode == ssl.CERT_REQUIRED
    requested = server_context({**pem_keystore(keystore), "ssl.client.auth": "requested"})
    assert requested.verify_mode == ssl.CERT_OPTIONAL


def test_an_encrypted_key_needs_its_password_which_no_message_shows(pem_files, tmp_path):
    leaf, _, _ = pem_files
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret-pw"),
    )
    keystore = tmp_path / "encrypted.pem"
    keystore.write_bytes(encrypted + leaf.cert_chain_pems[0].bytes())
    settings = pem_keystore(str(keystore))
    server_context({**settings, "ssl.key.password": "s3cret-pw"})
    for password in (None, "wrong-pw"):
        with pytest.raises(ConfigError, match="cannot load the PEM keystore") as info:
            server_context({**settings, "ssl.key.password": password})
        assert "s3cret" not in str(info.value) and "wrong-pw" not in str(info.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "needs its key and certificate"),
        # Kafka's default store type is JKS: a keystore written for Kafka that way is refused.
        ({"ssl.keystore.location": "/etc/kafka/broker.jks"}, "ssl.keystore.type=JKS is not"),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/etc/kafka/broker.p12"},
            "ssl.keystore.type=PKCS12 is not supported: kcore reads PEM",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "k"}, "certificate.chain is not"),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/k.pem",
                "ssl.keystore.key": "k",
                "ssl.keystore.certificate.chain": "c",
            },
            "give one",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/k.pem",
                "ssl.keystore.password": "s3cret-pw",
            },
            "ssl.keystore.password cannot be set for a PEM keystore",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nowhere.pem"}, "no such file"),
    ],
)
def test_a_keystore_kcore_cannot_read_is_refused_naming_the_setting(settings, message):
    with pytest.raises(ConfigError, match=message) as info:
        server_context(settings)
    assert "s3cret" not in str(info.value)


def test_a_truststore_must_be_pem_and_the_protocols_tls_1_2_or_1_3(pem_files):
    _, keystore, truststore = pem_files
    with pytest.raises(ConfigError, match=r"ssl.truststore.type=JKS is not supported"):
        client_context({"ssl.truststore.location": truststore})
    with pytest.raises(ConfigError, match=r"TLSv1.1 refused"):
        server_context({**pem_keystore(keystore), "ssl.enabled.protocols": ["TLSv1.1"]})
    only_1_2 = server_context({**pem_keystore(keystore), "ssl.enabled.protocols": ["TLSv1.2"]})
    assert only_1_2.maximum_version == ssl.TLSVersion.TLSv1_2
    client = client_context(
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": truststore,
         "ssl.endpoint.identification.algorithm": ""}
    )  # fmt: skip
    assert client.check_hostname is False and client.verify_mode == ssl.CERT_REQUIRED
    assert client_context({}).check_hostname is True  # Kafka's default: https


def test_a_listener_override_wins_over_the_ssl_setting_for_that_listener_only(pem_files):
    _, keystore, truststore = pem_files
    config = KafkaConfig.from_dict(
        {
            "broker.id": 1,
            "zookeeper.connect": "zk:2181",
            "listeners": "SSL://:9093,MTLS://:9094",
            "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
            "security.inter.broker.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": keystore,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": truststore,
            "listener.name.mtls.ssl.client.auth": "required",
        }
    )
    assert listener_settings(config.values, "MTLS")["ssl.client.auth"] == "required"
    assert listener_settings(config.values, "SSL")["ssl.client.auth"] == "none"
    tls = BrokerTls.from_config(config.values)
    assert tls.listener_contexts["MTLS"].verify_mode == ssl.CERT_REQUIRED
    assert tls.listener_contexts["SSL"].verify_mode == ssl.CERT_NONE
    assert tls.inter_broker_context is not None
    with pytest.raises(ConfigError, match="SimNetwork does not"):
        tls.check_network(transport.SimNetwork(0))
    with pytest.raises(ConfigError, match="String must be one of"):
        KafkaConfig.from_dict(
            {**config.originals, "listener.name.mtls.ssl.client.auth": "sometimes"}
        )
    with pytest.raises(ConfigError, match="Unknown configuration"):
        KafkaConfig.from_dict({**config.originals, "listener.name.mtls.num.io.threads": 3})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"listeners": "SSL://:9093,PLAINTEXT://:9092"},
            "security.inter.broker.protocol=PLAINTEXT is not supported yet: brokers talk to "
            "each other over their first listener",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092",
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "SSL",
            },
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
    ],
)
def test_what_kcore_cannot_do_with_listeners_is_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        KafkaConfig.from_dict({"broker.id": 1, "zookeeper.connect": "zk:2181", **settings})


def test_clients_take_kafkas_names_and_pem_by_default(pem_files):
    _, _, truststore = pem_files
    network = security_network(security_protocol="SSL", ssl_truststore_location=truststore)
    assert network.ssl_context is not None and network.ssl_context.check_hostname
    assert security_network(security_protocol="PLAINTEXT").ssl_context is None
    with pytest.raises(ClientConfigError, match="set security_protocol=SSL"):
        security_network(ssl_truststore_location=truststore)
    with pytest.raises(ClientConfigError, match="ssl_truststore_type=JKS is not supported"):
        security_network(
            security_protocol="SSL", ssl_truststore_location="ts.jks", ssl_truststore_type="JKS"
        )
    with pytest.raises(ClientConfigError, match="needs sasl_plain_username"):
        security_network(security_protocol="SASL_SSL")
    with pytest.raises(ClientConfigError, match="SimNetwork does not"):
        security_network(transport.SimNetwork(0), security_protocol="SSL")


def _self_signed(name):
    key = ec.generate_private_key(ec.SECP256R1())
    day = datetime.datetime(2024, 1, 1)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(day)
        .not_valid_after(day + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.DER)


def test_a_principal_is_the_subject_as_kafka_writes_it():
    assert principal(None) == "User:ANONYMOUS"
    attribute = x509.NameAttribute
    simple = x509.Name(
        [
            attribute(NameOID.COUNTRY_NAME, "FR"),
            attribute(NameOID.ORGANIZATION_NAME, "kcore"),
            attribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            attribute(NameOID.COMMON_NAME, "client-1"),
        ]
    )
    assert principal(_self_signed(simple)) == "User:CN=client-1,OU=eng,O=kcore,C=FR"
    # Java's X500Principal.getName(): its escapes (= and # too, and edge spaces), several
    # attributes of one RDN joined by +, and a type without an RFC 2253 keyword (the
    # e-mail address) as its OID and the hex of its DER value.
    awkward = x509.Name(
        [
            x509.RelativeDistinguishedName([attribute(NameOID.EMAIL_ADDRESS, "a@b.c")]),
            x509.RelativeDistinguishedName(
                [
                    attribute(NameOID.COMMON_NAME, "x"),
                    attribute(NameOID.ORGANIZATIONAL_UNIT_NAME, " a=b,c#d "),
                ]
            ),
        ]
    )
    assert (
        subject_name(_self_signed(awkward))
        == "CN=x+OU=\\ a\\=b\\,c\\#d\\ ,1.2.840.113549.1.9.1=#16056140622e63"
    )
