"""SASL as Kafka's brokers configure and run it (SaslServerAuthenticator, SaslChannelBuilder),
sans-IO: settings in, per-listener configuration and per-connection state machines out.

Mechanisms: PLAIN (RFC 4616: users and passwords from the listener's PlainLoginModule
`user_<name>="<password>"` options) and SCRAM-SHA-256 / SCRAM-SHA-512 (credentials in
ZooKeeper, `kcore.security.scram`). GSSAPI (Kafka's default `sasl.enabled.mechanisms`) and
OAUTHBEARER are refused at start-up, naming the setting.

JAAS: `listener.name.<listener>.<mechanism>.sasl.jaas.config` (mechanism in lower case),
else `sasl.jaas.config`. The inter-broker listener's entry for
`sasl.mechanism.inter.broker.protocol` also holds the broker's own `username`/`password`,
which it authenticates with to other brokers.

A connection's principal, once authenticated, is `User:<username>`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kcore.common import EndPoint
from kcore.config import ConfigError, Password, inter_broker_listener_name, security_protocols
from kcore.security.jaas import JaasEntry, parse_jaas_config
from kcore.security.scram import (
    MECHANISMS as SCRAM_MECHANISMS,
)
from kcore.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_MECHANISMS = ["GSSAPI"]  # Kafka's sasl.enabled.mechanisms
DEFAULT_INTER_BROKER_MECHANISM = "GSSAPI"  # Kafka's sasl.mechanism.inter.broker.protocol
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100  # connection.failed.authentication.delay.ms

# Kafka's error codes and messages.
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58
PLAIN_INVALID = "Authentication failed: Invalid username or password"


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is what the client is told (no secret)."""


@attrs.frozen
class ListenerSasl:
    """A SASL listener's mechanisms and the PLAIN users its JAAS entry lists."""

    listener_name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = attrs.field(factory=dict, repr=False)


@attrs.frozen
class SaslCredentials:
    """How a client (or a broker, to other brokers) authenticates."""

    mechanism: str
    username: str
    password: str = attrs.field(repr=False)


@attrs.frozen
class BrokerSasl:
    """A broker's SASL, built once at start-up: per SASL listener its mechanisms, and the
    broker's own credentials when the inter-broker listener is a SASL one."""

    listeners: Mapping[str, ListenerSasl] = attrs.field(factory=dict)
    inter_broker: SaslCredentials | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> BrokerSasl:
        protocols = security_protocols(values)
        listeners = {}
        for listener in values["listeners"]:
            name = EndPoint.parse(listener).listener_name
            if protocols.get(name) in SASL_PROTOCOLS:
                listeners[name] = _listener_sasl(values, name)
        inter_broker_name = inter_broker_listener_name(values)
        credentials = None
        if protocols.get(inter_broker_name) in SASL_PROTOCOLS:
            mechanism = (
                values.get("sasl.mechanism.inter.broker.protocol") or DEFAULT_INTER_BROKER_MECHANISM
            )
            enabled = listeners[inter_broker_name].mechanisms
            if mechanism not in enabled:
                raise ConfigError(
                    f"sasl.mechanism.inter.broker.protocol={mechanism} must be one of the "
                    f"inter-broker listener {inter_broker_name}'s sasl.enabled.mechanisms "
                    f"({','.join(enabled)})"
                )
            entry = jaas_entry(values, inter_broker_name, mechanism)
            if entry is None or entry.username is None or entry.password is None:
                raise ConfigError(
                    f"listener {inter_broker_name}: the {mechanism} JAAS entry "
                    f"({_jaas_setting(inter_broker_name, mechanism)} or sasl.jaas.config) "
                    "must give the broker's own username and password for inter-broker "
                    "authentication"
                )
            credentials = SaslCredentials(mechanism, entry.username, entry.password)
        return cls(listeners, credentials)


def _jaas_setting(listener_name: str, mechanism: str) -> str:
    return f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"


def _text(value: Any) -> str | None:
    return value.value if isinstance(value, Password) else value


def jaas_entry(values: Mapping[str, Any], listener_name: str, mechanism: str) -> JaasEntry | None:
    """The JAAS entry a listener uses for `mechanism` (Kafka's JaasContext: the
    listener-and-mechanism one, else `sasl.jaas.config`), None when neither is set."""
    setting = _jaas_setting(listener_name, mechanism)
    text = _text(values.get(setting))
    if text is None:
        setting, text = "sasl.jaas.config", _text(values.get("sasl.jaas.config"))
    return None if text is None else parse_jaas_config(text, setting=setting)


def enabled_mechanisms(values: Mapping[str, Any], listener_name: str) -> list[str]:
    prefix = f"listener.name.{listener_name.lower()}."
    mechanisms = values.get(prefix + "sasl.enabled.mechanisms")
    if mechanisms is None:
        mechanisms = values.get("sasl.enabled.mechanisms")
    if mechanisms is None:
        mechanisms = DEFAULT_MECHANISMS
    if isinstance(mechanisms, str):
        mechanisms = [item.strip() for item in mechanisms.split(",") if item.strip()]
    return [str(m).strip().upper() for m in mechanisms]


def _listener_sasl(values: Mapping[str, Any], listener_name: str) -> ListenerSasl:
    mechanisms = enabled_mechanisms(values, listener_name)
    if not mechanisms:
        raise ConfigError(f"listener {listener_name}: sasl.enabled.mechanisms is empty")
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            why = (
                "Kerberos is not implemented"
                if mechanism == "GSSAPI"
                else f"{mechanism} is not implemented"
            )
            raise ConfigError(
                f"listener {listener_name}: sasl.enabled.mechanisms={','.join(mechanisms)} is "
                f"not supported: {why}; kcore supports {', '.join(SUPPORTED_MECHANISMS)} "
                "(Kafka's default is GSSAPI: set sasl.enabled.mechanisms)"
            )
    plain_users: dict[str, str] = {}
    if PLAIN in mechanisms:
        entry = jaas_entry(values, listener_name, PLAIN)
        if entry is None:
            raise ConfigError(
                f"listener {listener_name}: PLAIN needs a JAAS entry listing its users "
                f"({_jaas_setting(listener_name, PLAIN)} or sasl.jaas.config, e.g. "
                'PlainLoginModule required user_alice="...";)'
            )
        plain_users = entry.plain_users()
    for mechanism in mechanisms:
        jaas_entry(values, listener_name, mechanism)  # a malformed entry stops start-up
    return ListenerSasl(listener_name, tuple(mechanisms), plain_users)


# -- per-connection state (server) -----------------------------------------------------------


@attrs.define
class SaslServerSession:
    """One connection's authentication on a SASL listener (Kafka's SaslServerAuthenticator
    states): ApiVersions and SaslHandshake first, then SaslAuthenticate tokens until the
    mechanism completes (`principal` is then `User:<name>`) or fails."""

    listener: ListenerSasl
    scram_credentials: Callable[[str, str], ScramCredential | None]  # (mechanism, user)
    rng: random.Random
    mechanism: str | None = None
    principal: str | None = None
    claimed_username: str | None = None
    failed: bool = False
    _scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def handshake(self, mechanism: str) -> tuple[int, list[str]]:
        """SaslHandshake: (error code, the enabled mechanisms)."""
        enabled = list(self.listener.mechanisms)
        if self.mechanism is not None:
            return ILLEGAL_SASL_STATE, enabled
        if mechanism not in enabled:
            return UNSUPPORTED_SASL_MECHANISM, enabled
        self.mechanism = mechanism
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramServer(
                mechanism, lambda user: self.scram_credentials(mechanism, user), self.rng
            )
        return 0, enabled

    def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate token in, the mechanism's answer out; raises
        SaslAuthenticationError (and the session is failed) when authentication fails."""
        if self.mechanism is None or self.failed or self.authenticated:
            raise SaslAuthenticationError("Unexpected SASL token in the connection's state")
        try:
            if self._scram is not None:
                try:
                    answer = self._scram.evaluate(token)
                finally:
                    self.claimed_username = self._scram.username
                if self._scram.complete:
                    self.principal = f"User:{self._scram.username}"
                return answer
            return self._plain(token)
        except (SaslAuthenticationError, ScramError) as error:
            self.failed = True
            raise SaslAuthenticationError(str(error)) from None

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, username, password = (part.decode("utf-8", errors="replace") for part in parts)
        self.claimed_username = username
        if not username or not password:
            raise SaslAuthenticationError(PLAIN_INVALID)
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self.listener.plain_users.get(username)
        if expected is None or not _equal(expected, password):
            raise SaslAuthenticationError(PLAIN_INVALID)
        self.principal = f"User:{username}"
        return b""


def _equal(a: str, b: str) -> bool:
    import hmac

    return hmac.compare_digest(a.encode(), b.encode())


# -- clients ---------------------------------------------------------------------------------


@attrs.define
class PlainClient:
    username: str
    password: str = attrs.field(repr=False)
    complete: bool = False

    def first(self) -> bytes:
        return b"\0" + self.username.encode() + b"\0" + self.password.encode()

    def evaluate(self, token: bytes) -> bytes:
        self.complete = True
        return b""


def sasl_client(credentials: SaslCredentials, rng: random.Random) -> PlainClient | ScramClient:
    """The client side of `credentials.mechanism`: `first()`, then `evaluate(challenge)`
    until `complete`."""
    if credentials.mechanism == PLAIN:
        return PlainClient(credentials.username, credentials.password)
    if credentials.mechanism in SCRAM_MECHANISMS:
        return ScramClient(credentials.mechanism, credentials.username, credentials.password, rng)
    raise ConfigError(
        f"sasl_mechanism={credentials.mechanism} is not supported: one of "
        f"{', '.join(SUPPORTED_MECHANISMS)}"
    )
