"""SASL on a broker's listeners (Kafka's SaslServerAuthenticator), the Trio shell around
`kcore.security.sasl.SaslServerSession`.

A connection to a SASL listener gets a session when it opens; until it has authenticated,
only ApiVersions, SaslHandshake (17) and SaslAuthenticate (36) are served, and any other
request closes the connection (Kafka: IllegalSaslStateException). Both of the listener's
protocols are guarded the same way: Kafka clients send the two requests in Kafka's
encoding, kcore's clients and brokers send the same bodies (Kafka's field names) in kcore's
msgpack envelope (`kcore.security.sasl_network`). A failed authentication is logged once
at INFO (claimed user, address), answered SASL_AUTHENTICATION_FAILED after
`connection.failed.authentication.delay.ms`, and the connection closed.

SaslHandshake v0 is Kafka's legacy exchange (clients before Kafka 1.0, and kafka-python or
aiokafka told to speak to an old broker): after it, the SASL tokens go both ways as bare
size-prefixed frames instead of SaslAuthenticate requests (`kcore.server.kafka_protocol`
hands each one here as a `RawFrame`), and a failed authentication is answered with nothing:
the connection is closed after the same delay, as Kafka closes it.

SCRAM credentials come from /config/users/<user> (`ScramCredentialCache`), read at
start-up and re-read on each `users/<user>` config change notification.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping

import attrs
import trio

import transport
from kcore.security.sasl import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    BrokerSasl,
    SaslAuthenticationError,
    SaslServerSession,
)
from kcore.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kcore.security.scram import ScramCredential, ScramError
from kcore.server.kafka_protocol import READS_RAW_FRAMES, RawAnswer, RawFrame
from kcore.zk_client import KafkaZkClient
from kcore.zkdata import desanitized_entity_name

logger = logging.getLogger("kcore.server.sasl_authenticator")

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
API_VERSIONS_KEY = 18
SESSION = "sasl"  # connection.context key of a SASL connection's session


@attrs.define
class ScramCredentialCache:
    """(mechanism, user) -> the SCRAM credential stored in ZooKeeper (Kafka's
    CredentialCache, kept by its UserConfigHandler)."""

    credentials: dict[tuple[str, str], ScramCredential] = attrs.field(factory=dict)

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get((mechanism, user))

    def update(self, user: str, configs: Mapping[str, str]) -> None:
        for mechanism in SCRAM_MECHANISMS:
            text = configs.get(mechanism)
            if text is None:
                self.credentials.pop((mechanism, user), None)
                continue
            try:
                self.credentials[(mechanism, user)] = ScramCredential.from_config(text)
            except ScramError as error:
                logger.error("Ignoring the %s credential of user %s: %s", mechanism, user, error)
                self.credentials.pop((mechanism, user), None)

    async def load(self, zk_client: KafkaZkClient) -> None:
        for user, configs in (await zk_client.get_all_user_configs()).items():
            self.update(user, configs)

    async def reload(self, zk_client: KafkaZkClient, entity_name: str) -> None:
        """`entity_name` as a config change names it: the znode's (sanitized) name, so
        `bob@example.com` arrives as `bob%40example.com`."""
        user = desanitized_entity_name(entity_name)
        self.update(user, await zk_client.read_user_configs(user))


@attrs.define(eq=False)
class SaslAuthenticator:
    """`on_connect` gives a SASL listener's connections their session; `guard` wraps a
    protocol's handlers (api key -> handler) so unauthenticated connections reach only
    ApiVersions and the two SASL requests."""

    sasl: BrokerSasl
    # The listener a connection came in on (None: unknown, served without SASL).
    listener_of: Callable[[transport.ServerConnection], str | None]
    rng: random.Random
    failed_authentication_delay: float = 0.1  # seconds
    credentials: ScramCredentialCache = attrs.field(factory=ScramCredentialCache)

    def on_connect(self, connection: transport.ServerConnection) -> None:
        listener = self.sasl.listeners.get(self.listener_of(connection) or "")
        if listener is None:
            return
        connection.context[SESSION] = SaslServerSession(listener, self.credentials.get, self.rng)
        # No principal until the client has authenticated.
        connection.context["principal"] = None

    def guard(self, handlers: Mapping[int, transport.Handler]) -> dict[int, transport.Handler]:
        guarded = {api_key: self._guarded(api_key, h) for api_key, h in handlers.items()}
        guarded[SASL_HANDSHAKE_KEY] = self.handle_sasl_handshake
        guarded[SASL_AUTHENTICATE_KEY] = self.handle_sasl_authenticate
        return guarded

    def _guarded(self, api_key: int, handler: transport.Handler) -> transport.Handler:
        if api_key == API_VERSIONS_KEY:
            return handler

        async def guarded(request: transport.Request) -> object:
            session = request.connection.context.get(SESSION)
            if session is not None and not session.authenticated:
                logger.info(
                    "Closing the connection from %s: api key %d before SASL authentication "
                    "completed",
                    request.connection.peer_name,
                    request.api_key,
                )
                request.connection.close()
                raise transport.RpcError(ILLEGAL_SASL_STATE, "SASL authentication is required")
            return await handler(request)

        return guarded

    async def handle_sasl_handshake(self, request: transport.Request) -> dict:
        session: SaslServerSession | None = request.connection.context.get(SESSION)
        if session is None or session.authenticated:
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}
        body: dict = request.body  # type: ignore[assignment]
        mechanism = str(body.get("mechanism") or "")
        error_code, enabled = session.handshake(mechanism)
        if error_code:
            logger.info(
                "Closing the connection from %s: SASL mechanism %r is not enabled (%s are)",
                request.connection.peer_name, mechanism, ",".join(enabled),
            )  # fmt: skip
            request.connection.close_after_answer()
        elif request.api_version == 0 and request.connection.speaks_foreign_protocol:
            # Kafka's v0: the tokens follow as bare frames (kcore's own protocol has no such
            # thing: its clients send SaslAuthenticate whatever the version).
            request.connection.context[READS_RAW_FRAMES] = True
        return {"error_code": error_code, "mechanisms": enabled}

    async def handle_sasl_authenticate(self, request: transport.Request) -> dict | RawAnswer | None:
        if isinstance(request.body, RawFrame):
            return await self._authenticate_raw_token(request.connection, request.body.data)
        connection = request.connection
        session: SaslServerSession | None = connection.context.get(SESSION)
        if session is None or session.authenticated:
            return _authenticate_body(
                ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful "
                "authentication",
            )  # fmt: skip
        body: dict = request.body  # type: ignore[assignment]
        token = body.get("auth_bytes") or b""
        try:
            answer = session.authenticate(bytes(token))
        except SaslAuthenticationError as error:
            logger.info(
                "Failed authentication with %s (principal User:%s, mechanism %s): %s",
                connection.peer_name, session.claimed_username or "", session.mechanism, error,
            )  # fmt: skip
            # Kafka's connection.failed.authentication.delay.ms: a client guessing
            # passwords waits for each answer.
            await trio.sleep(self.failed_authentication_delay)
            connection.close_after_answer()
            return _authenticate_body(SASL_AUTHENTICATION_FAILED, str(error))
        if session.authenticated:
            connection.context["principal"] = session.principal
            logger.debug(
                "Authenticated %s as %s (mechanism %s)",
                connection.peer_name, session.principal, session.mechanism,
            )  # fmt: skip
        return _authenticate_body(0, None, answer)

    async def _authenticate_raw_token(
        self, connection: transport.ServerConnection, token: bytes
    ) -> RawAnswer | None:
        """One SASL token after a SaslHandshake v0 (Kafka's handleSaslToken without
        SaslAuthenticate headers): the mechanism's answer goes back bare, PLAIN's empty one
        included; a failure is answered by closing the connection after the delay."""
        session: SaslServerSession | None = connection.context.get(SESSION)
        if session is None:  # not a SASL listener: nothing set READS_RAW_FRAMES
            connection.context.pop(READS_RAW_FRAMES, None)
            connection.close()
            return None
        try:
            answer = session.authenticate(token)
        except SaslAuthenticationError as error:
            connection.context.pop(READS_RAW_FRAMES, None)
            logger.info(
                "Failed authentication with %s (principal User:%s, mechanism %s, "
                "SaslHandshake v0): %s",
                connection.peer_name, session.claimed_username or "", session.mechanism, error,
            )  # fmt: skip
            await trio.sleep(self.failed_authentication_delay)
            connection.close()
            return None
        if session.authenticated:
            # Kafka requests from now on.
            connection.context.pop(READS_RAW_FRAMES, None)
            connection.context["principal"] = session.principal
            logger.debug(
                "Authenticated %s as %s (mechanism %s, SaslHandshake v0)",
                connection.peer_name, session.principal, session.mechanism,
            )  # fmt: skip
        return RawAnswer(answer)


def _authenticate_body(error_code: int, message: str | None, token: bytes = b"") -> dict:
    return {
        "error_code": error_code,
        "error_message": message,
        "auth_bytes": token,
        "session_lifetime_ms": 0,
    }
