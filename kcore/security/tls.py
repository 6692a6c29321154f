"""TLS from Kafka's `ssl.*` settings: configuration in, `ssl.SSLContext` out (no I/O but
reading the PEM files the settings name, once, as Kafka does at start-up).

PEM only, with Kafka's names and rules (DefaultSslEngineFactory): a keystore is
`ssl.keystore.type=PEM` with `ssl.keystore.location` (one file: the private key and its
certificate chain) or `ssl.keystore.key` + `ssl.keystore.certificate.chain` (PEM text in the
configuration); `ssl.key.password` decrypts an encrypted key; a PEM keystore takes no
`ssl.keystore.password`. A truststore is `ssl.truststore.type=PEM` with
`ssl.truststore.location` or `ssl.truststore.certificates`. JKS and PKCS12 stores (Kafka's
default type is JKS) are refused with a message saying what to write instead, never
accepted and ignored. Messages name settings and files, never a secret.

`listener.name.<listener>.ssl.*` overrides `ssl.*` for one listener (`listener_settings`).

A peer's principal is Kafka's: `User:` and the subject of the certificate it presented as
Java's X500Principal.getName() writes it (RFC 2253: `CN=client,OU=eng,O=org`), or
`User:ANONYMOUS` when it presented none (`principal`).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

import transport
from kcore.common import EndPoint
from kcore.config import ConfigError, Password, inter_broker_listener_name, security_protocols
from zkstub.tls import (
    TlsSettings,
    TlsSettingsError,
    load_key_and_chain,
    load_trusted_certificates,
    private_file,
    set_protocol_versions,
)

PEM = "PEM"
ANONYMOUS = "User:ANONYMOUS"

# Kafka's defaults (SslConfigs, BrokerSecurityConfigs).
SSL_DEFAULTS: dict[str, Any] = {
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.client.auth": "none",
}
# The ssl.* settings kcore reads (the others Kafka has, cipher suites, providers, key
# manager algorithms, are Java's and unknown here).
SSL_SETTINGS = (
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.endpoint.identification.algorithm",
    "ssl.client.auth",
)
# The secrets among them (Kafka's Password type).
SSL_PASSWORDS = (
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def listener_prefix(listener_name: str) -> str:
    """Kafka's per-listener prefix: `listener.name.` + the listener name in lower case."""
    return f"listener.name.{listener_name.lower()}."


def listener_settings(values: Mapping[str, Any], listener_name: str) -> dict[str, Any]:
    """The ssl.* settings of one listener: `listener.name.<listener>.ssl.*` where given,
    else `ssl.*`, else Kafka's default."""
    prefix = listener_prefix(listener_name)
    settings = {name: values.get(name) for name in SSL_SETTINGS}
    for name in SSL_SETTINGS:
        if values.get(prefix + name) is not None:
            settings[name] = values[prefix + name]
    return settings


def server_context(settings: Mapping[str, Any], *, where: str = "") -> ssl.SSLContext:
    """A TLS server's context: a keystore is required; `ssl.client.auth` says whether a
    client must (required), may (requested) or need not (none) present a certificate,
    checked against the truststore (the system's CAs when none is configured, as Java's
    default truststore). `where` prefixes messages (the listener's name)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, settings, where)
    if not _load_keystore(context, settings, where):
        raise ConfigError(
            f"{where}a TLS listener needs its key and certificate: ssl.keystore.type=PEM with "
            "ssl.keystore.location (a PEM file holding the key and its chain), or "
            "ssl.keystore.key + ssl.keystore.certificate.chain"
        )
    auth = _get(settings, "ssl.client.auth")
    auth = auth.lower() if isinstance(auth, str) else auth
    if auth not in CLIENT_AUTH:
        raise ConfigError(
            f"{where}Invalid value {auth!r} for configuration ssl.client.auth: String must be "
            f"one of: {', '.join(CLIENT_AUTH)}"
        )
    context.verify_mode = CLIENT_AUTH[auth]
    if auth != "none":
        _load_truststore(context, settings, where)
    return context


def client_context(settings: Mapping[str, Any], *, where: str = "") -> ssl.SSLContext:
    """A TLS client's context: the server is verified against the truststore (the
    system's CAs when none is configured), and its name checked when
    `ssl.endpoint.identification.algorithm` is `https` (Kafka's default; empty: no
    check); a keystore, when configured, is presented to servers that ask (mutual TLS)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_versions(context, settings, where)
    algorithm = _get(settings, "ssl.endpoint.identification.algorithm") or ""
    if algorithm.lower() not in ("https", ""):
        raise ConfigError(
            f"{where}Invalid value {algorithm!r} for configuration "
            "ssl.endpoint.identification.algorithm: https (check the server's name against "
            "its certificate) or empty (do not)"
        )
    context.check_hostname = algorithm.lower() == "https"
    _load_truststore(context, settings, where)
    _load_keystore(context, settings, where)
    return context


# The security protocols in TLS (SASL_SSL: SASL inside the TLS session).
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


@attrs.frozen
class BrokerTls:
    """A broker's TLS, built once at start-up so that bad key material stops it there:
    each SSL or SASL_SSL listener's server context, and the client context of the
    inter-broker listener when that one is in TLS (the broker then verifies its peers with
    the same `ssl.*` settings, as Kafka does)."""

    listener_contexts: Mapping[str, ssl.SSLContext] = attrs.field(factory=dict)
    inter_broker_context: ssl.SSLContext | None = None
    # The client context of the ZooKeeper connection (zookeeper.ssl.client.enable).
    zookeeper_context: ssl.SSLContext | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> BrokerTls:
        """From a broker's parsed settings (`KafkaConfig.values`)."""
        protocols = security_protocols(values)
        contexts = {}
        for listener in values["listeners"]:
            name = EndPoint.parse(listener).listener_name
            if protocols.get(name) in TLS_PROTOCOLS:
                where = f"listener {name}: "
                contexts[name] = server_context(listener_settings(values, name), where=where)
        inter_broker = inter_broker_listener_name(values)
        client = None
        if protocols.get(inter_broker) in TLS_PROTOCOLS:
            client = client_context(
                listener_settings(values, inter_broker),
                where=f"inter-broker listener {inter_broker}: ",
            )
        return cls(contexts, client, zookeeper_context(values))

    def check_network(self, network: transport.Network) -> None:
        """ConfigError unless `network` can do TLS where it is needed (the simulated
        network cannot)."""
        if (
            self.listener_contexts or self.inter_broker_context or self.zookeeper_context
        ) and not hasattr(network, "with_tls"):
            names = ", ".join(sorted(self.listener_contexts)) or (
                "the inter-broker listener" if self.inter_broker_context else "ZooKeeper's"
            )
            raise ConfigError(
                f"SSL listeners ({names}) need a network that does TLS (real TCP); "
                f"{type(network).__name__} does not"
            )

    def listener_network(self, network: transport.Network, listener_name: str) -> Any:
        """The network a listener serves on: in TLS when it is an SSL listener."""
        return _with_tls(network, self.listener_contexts.get(listener_name))

    def inter_broker_network(self, network: transport.Network) -> Any:
        """The network a broker reaches other brokers through (fetchers, the controller's
        channel, a controlled shutdown request): in TLS when the inter-broker listener is
        SSL."""
        return _with_tls(network, self.inter_broker_context)

    def zookeeper_network(self, network: transport.Network) -> Any:
        """The network the broker reaches ZooKeeper through: in TLS with
        zookeeper.ssl.client.enable=true."""
        return _with_tls(network, self.zookeeper_context)


def zookeeper_context(values: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The TLS client context of a broker's ZooKeeper connection from Kafka's
    `zookeeper.ssl.*` settings (parsed, and checked by `kcore.config`: PEM stores, TLS
    versions), or None when `zookeeper.ssl.client.enable` is false. The PEM keystore (a
    client certificate, for a server whose ssl.clientAuth is need or want) is decrypted by
    zookeeper.ssl.keystore.password, as ZooKeeper's PEM loader does; the server's name is
    checked when zookeeper.ssl.endpoint.identification.algorithm is HTTPS (the default)."""
    if not values.get("zookeeper.ssl.client.enable"):
        return None
    if values.get("zookeeper.ssl.truststore.password") is not None:
        raise ConfigError(
            "zookeeper.ssl.truststore.password cannot be set for a PEM truststore (it has none)"
        )
    algorithm = values.get("zookeeper.ssl.endpoint.identification.algorithm") or ""
    settings = TlsSettings(
        keystore_location=values.get("zookeeper.ssl.keystore.location"),
        keystore_password=_secret(values, "zookeeper.ssl.keystore.password"),
        keystore_type=values.get("zookeeper.ssl.keystore.type"),
        truststore_location=values.get("zookeeper.ssl.truststore.location"),
        truststore_type=values.get("zookeeper.ssl.truststore.type"),
        protocol=values.get("zookeeper.ssl.protocol") or "TLSv1.2",
        enabled_protocols=tuple(values.get("zookeeper.ssl.enabled.protocols") or ()),
        hostname_verification=algorithm.upper() == "HTTPS",
    )
    try:
        return settings.client_context()
    except TlsSettingsError as error:
        raise ConfigError(f"TLS to ZooKeeper (zookeeper.ssl.*): {error}") from None


def _with_tls(network: Any, context: ssl.SSLContext | None) -> Any:
    return network if context is None else network.with_tls(context)


def _get(settings: Mapping[str, Any], name: str) -> Any:
    value = settings.get(name)
    return SSL_DEFAULTS.get(name) if value is None else value


def _secret(settings: Mapping[str, Any], name: str) -> str | None:
    value = settings.get(name)
    if isinstance(value, Password):
        return value.value
    return value


def _set_versions(context: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> None:
    with _config_error():
        set_protocol_versions(
            context,
            _get(settings, "ssl.protocol"),
            _get(settings, "ssl.enabled.protocols"),
            names=("ssl.protocol", "ssl.enabled.protocols"),
            where=where,
        )


@contextlib.contextmanager
def _config_error() -> Iterator[None]:
    """zkstub's TLS helpers' errors as kcore's configuration errors (same message)."""
    try:
        yield
    except TlsSettingsError as error:
        raise ConfigError(str(error)) from None


def _refuse_store_type(kind: str, store_type: str, where: str) -> ConfigError:
    return ConfigError(
        f"{where}ssl.{kind}.type={store_type} is not supported: kcore reads PEM key material "
        f"only (set ssl.{kind}.type=PEM; a {store_type} store converts with keytool "
        "-importkeystore and openssl pkcs12)"
    )


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> bool:
    """Loads the key and certificate chain, if configured; False when none is."""
    store_type = str(_get(settings, "ssl.keystore.type")).upper()
    location = settings.get("ssl.keystore.location")
    key = _secret(settings, "ssl.keystore.key")
    chain = _secret(settings, "ssl.keystore.certificate.chain")
    key_password = _secret(settings, "ssl.key.password")
    if key is None and chain is None and location is None:
        return False
    if store_type != PEM:
        raise _refuse_store_type("keystore", _get(settings, "ssl.keystore.type"), where)
    if key is not None and chain is None:
        raise ConfigError(
            f"{where}ssl.keystore.key is set but ssl.keystore.certificate.chain is not"
        )
    if chain is not None and key is None:
        raise ConfigError(
            f"{where}ssl.keystore.certificate.chain is set but ssl.keystore.key is not"
        )
    if key is not None and location is not None:
        raise ConfigError(
            f"{where}both ssl.keystore.location and ssl.keystore.key are set: give one"
        )
    if settings.get("ssl.keystore.password") is not None:
        raise ConfigError(
            f"{where}ssl.keystore.password cannot be set for a PEM keystore: only "
            "ssl.key.password (the private key's) may be"
        )
    if location is not None:
        _load_cert_chain(context, location, key_password, f"{where}the PEM keystore {location}")
    else:
        with private_file(f"{key}\n{chain}\n") as path:
            _load_cert_chain(
                context, path, key_password,
                f"{where}ssl.keystore.key + ssl.keystore.certificate.chain",
            )  # fmt: skip
    return True


def _load_cert_chain(context: ssl.SSLContext, path: str, password: str | None, what: str) -> None:
    with _config_error():
        load_key_and_chain(
            context, path, password, what,
            "a PEM private key, decrypted by ssl.key.password if it is encrypted, and its "
            "certificate chain",
        )  # fmt: skip


def _load_truststore(context: ssl.SSLContext, settings: Mapping[str, Any], where: str) -> None:
    """The CAs that verify peers: the configured truststore, else the system's."""
    store_type = str(_get(settings, "ssl.truststore.type")).upper()
    location = settings.get("ssl.truststore.location")
    certificates = _secret(settings, "ssl.truststore.certificates")
    if certificates is None and location is None:
        with _config_error():
            load_trusted_certificates(context, what="the system's CAs")
        return
    if store_type != PEM:
        raise _refuse_store_type("truststore", _get(settings, "ssl.truststore.type"), where)
    if certificates is not None and location is not None:
        raise ConfigError(
            f"{where}both ssl.truststore.location and ssl.truststore.certificates are set: give one"
        )
    if settings.get("ssl.truststore.password") is not None:
        raise ConfigError(f"{where}ssl.truststore.password cannot be set for a PEM truststore")
    what = (
        f"{where}the PEM truststore {location}"
        if location is not None
        else f"{where}ssl.truststore.certificates"
    )
    with _config_error():
        load_trusted_certificates(context, location=location, certificates=certificates, what=what)


# -- principals ------------------------------------------------------------------------------

# The attribute types RFC 2253 (and Java's X500Principal) write by keyword; any other is
# written as its dotted OID and the hex of its DER value.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.1": "UID",
    "0.9.2342.19200300.100.1.25": "DC",
}
# The ASN.1 string types Java writes as text (AVA.isDerString): Printable, T61, IA5,
# General, BMP and UTF8 strings; any other value is written in hex.
_STRING_TAGS = frozenset((0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C))
# What Java escapes with a backslash in an RFC 2253 value (AVA.toRFC2253String), besides
# leading and trailing spaces.
_ESCAPED = ',=+<>#;"\\'


def principal(peer_certificate: bytes | None) -> str:
    """Kafka's principal for a TLS peer: `User:` + its certificate's subject (RFC 2253), or
    `User:ANONYMOUS` without a certificate."""
    if peer_certificate is None:
        return ANONYMOUS
    return "User:" + subject_name(peer_certificate)


def subject_name(certificate: bytes) -> str:
    """A DER certificate's subject as Java's X500Principal.getName() writes it: RFC 2253,
    the last RDN first (`CN=client,OU=eng,O=org`)."""
    try:
        rdns = _subject_rdns(certificate)
    except (IndexError, ValueError) as error:
        raise ValueError(f"not a DER X.509 certificate: {error}") from None
    return ",".join("+".join(_ava(*ava) for ava in rdn) for rdn in reversed(rdns))


def _tlv(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `offset`."""
    tag = data[offset]
    length = data[offset + 1]
    offset += 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4:
            raise ValueError("bad DER length")
        length = int.from_bytes(data[offset : offset + count], "big")
        offset += count
    end = offset + length
    if end > len(data):
        raise ValueError("DER element past the end")
    return tag, offset, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, value start, value end, element start) of each element in [start, end)."""
    elements = []
    while start < end:
        tag, value_start, value_end = _tlv(data, start)
        elements.append((tag, value_start, value_end, start))
        start = value_end
    return elements


def _subject_rdns(certificate: bytes) -> list[list[tuple[str, int, bytes, bytes]]]:
    """Per RDN of the subject, in certificate order: (OID, value tag, value, whole DER)."""
    _, start, end = _tlv(certificate, 0)  # Certificate
    tbs_tag, tbs_start, tbs_end = _children(certificate, start, end)[0][:3]
    if tbs_tag != 0x30:
        raise ValueError("no TBSCertificate")
    fields = _children(certificate, tbs_start, tbs_end)
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    tag, name_start, name_end, _ = fields[4]
    if tag != 0x30:
        raise ValueError("no subject Name")
    rdns = []
    for rdn_tag, rdn_start, rdn_end, _ in _children(certificate, name_start, name_end):
        if rdn_tag != 0x31:
            raise ValueError("an RDN is not a SET")
        rdn = []
        for _, ava_start, ava_end, _ in _children(certificate, rdn_start, rdn_end):
            (oid_tag, oid_start, oid_end, _), value = _children(certificate, ava_start, ava_end)
            if oid_tag != 0x06:
                raise ValueError("an attribute type is not an OID")
            value_tag, value_start, value_end, element_start = value
            rdn.append(
                (
                    _oid(certificate[oid_start:oid_end]),
                    value_tag,
                    certificate[value_start:value_end],
                    certificate[element_start:value_end],
                )
            )
        rdns.append(rdn)
    return rdns


def _oid(data: bytes) -> str:
    first = data[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in data[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(part) for part in parts)


def _ava(oid: str, tag: int, value: bytes, element: bytes) -> str:
    keyword = _KEYWORDS.get(oid, oid)
    if oid not in _KEYWORDS or tag not in _STRING_TAGS:
        return f"{keyword}=#{element.hex()}"
    # Java reads every string type's bytes as UTF-8 here, whatever the type.
    return f"{keyword}={_escape(value.decode('utf-8', errors='replace'))}"


def _escape(text: str) -> str:
    """Java's escaping: a backslash before each of `,=+<>#;"\\`, NUL as `\\00`, and before
    leading and trailing spaces (and carriage returns)."""
    chars = []
    for c in text:
        if c in _ESCAPED:
            chars.append("\\" + c)
        elif c == "\0":
            chars.append("\\00")
        else:
            chars.append(c)
    escaped = "".join(chars)
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped.rstrip(" \r"))
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(escaped))
