"""TLS for ZooKeeper's secure client port (`secureClientPort`) and its clients, with
ZooKeeper's settings and PEM key material; and the PEM loading that kcore's `ssl.*`
settings share (`kcore.security.tls` builds on the helpers here: they live in the lower
layer).

ZooKeeper 3.8's names (zoo.cfg, or the `zookeeper.`-prefixed system properties; X509Util):

- `ssl.keyStore.location`: one PEM file holding the private key and its certificate chain;
  `ssl.keyStore.password` decrypts the key when it is encrypted (ZooKeeper's PEM loader
  reads it so), `ssl.keyStore.passwordPath` names a file holding it;
- `ssl.keyStore.type` / `ssl.trustStore.type`: PEM (JKS, PKCS12 and BCFKS stores are
  refused, naming the setting); unset, the type comes from the file's extension, as
  ZooKeeper's does (`.pem`);
- `ssl.trustStore.location`: the PEM certificates of the CAs that verify the peer (unset:
  the system's, as Java's default truststore);
- `ssl.clientAuth` (a server's): `need` (ZooKeeper's default: a client without a trusted
  certificate is refused in the handshake), `want` or `none`;
- `ssl.protocol` (TLSv1.2, ZooKeeper's default) and `ssl.enabledProtocols` (default: the
  protocol alone; `TLS` enables TLSv1.2 and TLSv1.3);
- `ssl.hostnameVerification` (a client's, default true): the server's certificate must name
  the host connected to. A server does not check its clients' names (ZooKeeper checks them
  on its quorum port only).

Messages name settings and files, never a password. Pure but for reading the files the
settings name, once, when a context is built.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Sequence

import attrs

__all__ = [
    "CLIENT_AUTH",
    "PEM",
    "TLS_VERSIONS",
    "TlsSettings",
    "TlsSettingsError",
    "load_key_and_chain",
    "load_trusted_certificates",
    "private_file",
    "set_protocol_versions",
    "store_type",
]

PEM = "PEM"
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# ZooKeeper's ssl.clientAuth (X509Util.ClientAuth) as the ssl module says it.
CLIENT_AUTH = {"need": ssl.CERT_REQUIRED, "want": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
# KeyStoreFileType.fromFilename: the store type a file's extension implies.
_EXTENSIONS = {".pem": "PEM", ".jks": "JKS", ".p12": "PKCS12", ".pfx": "PKCS12", ".bcfks": "BCFKS"}


class TlsSettingsError(ValueError):
    """TLS settings that cannot be used: the message names the setting or the file."""


def store_type(configured: str | None, location: str | None, setting: str) -> str:
    """A store's type, upper case: as configured, else (ZooKeeper's rule) what the file's
    extension says. TlsSettingsError, naming `setting`, for a type other than PEM."""
    if configured:
        found = configured.upper()
    else:
        extension = os.path.splitext(location or "")[1].lower()
        found = _EXTENSIONS.get(extension, "")
        if not found:
            raise TlsSettingsError(
                f"{setting} is not set and the type of {location} cannot be told from its "
                f"name: set {setting}=PEM"
            )
    if found != PEM:
        raise TlsSettingsError(
            f"{setting}={configured or found} is not supported: only PEM key material is read "
            f"(set {setting}=PEM; a {found} store converts with keytool -importkeystore and "
            "openssl pkcs12)"
        )
    return found


def set_protocol_versions(
    context: ssl.SSLContext,
    protocol: str,
    enabled: str | Sequence[str] | None,
    *,
    names: tuple[str, str] = ("ssl.protocol", "ssl.enabledProtocols"),
    where: str = "",
) -> None:
    """The TLS versions `context` speaks: `enabled` (a list, or comma-separated), else
    `protocol` alone (`TLS`: TLSv1.2 and TLSv1.3). `names` are the two settings' names,
    for messages; `where` prefixes them."""
    protocol_name, enabled_name = names
    if protocol not in (*TLS_VERSIONS, "TLS"):
        raise TlsSettingsError(
            f"{where}{protocol_name}={protocol} is not supported: kcore speaks TLSv1.2 and TLSv1.3"
        )
    if isinstance(enabled, str):
        enabled = [item.strip() for item in enabled.split(",") if item.strip()]
    if not enabled:
        enabled = list(TLS_VERSIONS) if protocol == "TLS" else [protocol]
    unknown = [version for version in enabled if version not in TLS_VERSIONS]
    if unknown:
        raise TlsSettingsError(
            f"{where}{enabled_name}={','.join(enabled)} is not supported: kcore enables "
            f"TLSv1.2 and TLSv1.3 only ({', '.join(unknown)} refused)"
        )
    versions = sorted(TLS_VERSIONS[version] for version in enabled)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def load_key_and_chain(
    context: ssl.SSLContext, path: str, password: str | None, what: str, hint: str
) -> None:
    """Loads a PEM private key and its certificate chain from `path`. The message of a
    failure names `what` (the setting or file) and ends with `hint` (what was expected)."""
    try:
        # A password given for an unencrypted key is ignored by OpenSSL; none given for an
        # encrypted key must not make OpenSSL prompt on the terminal.
        context.load_cert_chain(path, password=password if password is not None else "")
    except FileNotFoundError:
        raise TlsSettingsError(f"cannot load {what}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error.__class__.__name__
        raise TlsSettingsError(f"cannot load {what}: {reason} ({hint})") from None


def load_trusted_certificates(
    context: ssl.SSLContext, *, location: str | None = None, certificates: str | None = None,
    what: str,
) -> None:  # fmt: skip
    """Trusts the PEM certificates in the file `location`, or in the text `certificates`,
    or, given neither, the system's CAs."""
    if location is None and certificates is None:
        context.load_default_certs(
            ssl.Purpose.SERVER_AUTH
            if context.protocol == ssl.PROTOCOL_TLS_CLIENT
            else ssl.Purpose.CLIENT_AUTH
        )
        return
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=certificates)
    except FileNotFoundError:
        raise TlsSettingsError(f"cannot load {what}: no such file") from None
    except (ssl.SSLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error.__class__.__name__
        raise TlsSettingsError(
            f"cannot load {what}: {reason} (PEM certificates expected)"
        ) from None


@contextlib.contextmanager
def private_file(text: str) -> Iterator[str]:
    """A file only this user can read holding `text`, for as long as the block runs: the
    ssl module loads a key and chain from files only."""
    with tempfile.TemporaryDirectory(prefix="kcore-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        yield path


@attrs.frozen
class TlsSettings:
    """ZooKeeper's `ssl.*` settings of a secure client port or of a client of one (see the
    module's docstring for each). `server_context()` and `client_context()` read the files
    and raise TlsSettingsError naming the setting that cannot be used."""

    keystore_location: str | None = None
    keystore_password: str | None = attrs.field(default=None, repr=False)
    keystore_type: str | None = None
    truststore_location: str | None = None
    truststore_type: str | None = None
    client_auth: str = "need"
    protocol: str = "TLSv1.2"
    enabled_protocols: tuple[str, ...] = ()
    hostname_verification: bool = True

    def server_context(self) -> ssl.SSLContext:
        """A secure client port's context: a keystore is required; `client_auth` says
        whether a client must (need), may (want) or need not (none) present a
        certificate, verified against the truststore."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        set_protocol_versions(context, self.protocol, self.enabled_protocols)
        if self.keystore_location is None:
            raise TlsSettingsError(
                "a secure client port needs its key and certificate: ssl.keyStore.location "
                "(a PEM file holding the private key and its certificate chain)"
            )
        self._load_keystore(context)
        auth = self.client_auth.lower()
        if auth not in CLIENT_AUTH:
            raise TlsSettingsError(
                f"ssl.clientAuth={self.client_auth} is not one of {', '.join(CLIENT_AUTH)}"
            )
        context.verify_mode = CLIENT_AUTH[auth]
        if auth != "none":
            self._load_truststore(context)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client's context: the server verified against the truststore (the system's
        CAs when none is set) and, with `hostname_verification`, its name checked; the
        keystore, when set, presented to a server that asks for a certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        set_protocol_versions(context, self.protocol, self.enabled_protocols)
        context.check_hostname = self.hostname_verification
        self._load_truststore(context)
        if self.keystore_location is not None:
            self._load_keystore(context)
        return context

    def _load_keystore(self, context: ssl.SSLContext) -> None:
        location = self.keystore_location
        assert location is not None
        store_type(self.keystore_type, location, "ssl.keyStore.type")
        load_key_and_chain(
            context, location, self.keystore_password, f"the PEM keystore {location}",
            "a PEM private key, decrypted by ssl.keyStore.password if it is encrypted, and "
            "its certificate chain",
        )  # fmt: skip

    def _load_truststore(self, context: ssl.SSLContext) -> None:
        location = self.truststore_location
        if location is not None:
            store_type(self.truststore_type, location, "ssl.trustStore.type")
        load_trusted_certificates(context, location=location, what=f"the PEM truststore {location}")
