"""kcore's side of SASL as a client (its Producer, Consumer and Admin, and a broker reaching
other brokers): a `transport.Network` whose connections have authenticated before they are
handed out, so nothing above it knows SASL is there.

The exchange is Kafka's (SaslHandshake v1, then SaslAuthenticate until the mechanism
completes) with Kafka's request and response bodies, sent in kcore's msgpack envelope;
the broker serves them on both protocols (`kcore.server.sasl_authenticator`).
"""

from __future__ import annotations

import random
from typing import Any

import transport
from kcore.security.sasl import SaslCredentials, sasl_client
from kcore.security.scram import ScramError

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class SaslAuthenticationFailed(transport.ConnectError):
    """The broker refused the credentials (or the mechanism); a ConnectError, as the
    connection is never handed out, but one a retry will not cure."""

    error_code = 58


class SaslNetwork:
    """`network`, with every connection it opens authenticated with `credentials`."""

    def __init__(
        self, network: Any, credentials: SaslCredentials, rng: random.Random, client_id: str = ""
    ) -> None:
        self._network = network
        self.credentials = credentials
        self._rng = rng
        self._client_id = client_id or "kcore-sasl"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._network, name)

    def node(self, name: str) -> SaslNetwork:
        return SaslNetwork(self._network.node(name), self.credentials, self._rng, self._client_id)

    def with_tls(self, context: Any) -> SaslNetwork:
        return SaslNetwork(
            self._network.with_tls(context), self.credentials, self._rng, self._client_id
        )

    async def serve(self, *args: Any, **kwargs: Any) -> None:
        await self._network.serve(*args, **kwargs)

    async def connect(
        self, address: transport.Address, *, timeout: float | None = None
    ) -> transport.MessageConnection:
        connection = await self._network.connect(address, timeout=timeout)
        try:
            await self._authenticate(connection)
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def _authenticate(self, connection: transport.MessageConnection) -> None:
        where = f"{connection.peer_name}"
        mechanism = self.credentials.mechanism
        body = await self._call(connection, SASL_HANDSHAKE_KEY, 1, {"mechanism": mechanism})
        if body.get("error_code"):
            enabled = ",".join(body.get("mechanisms") or [])
            raise SaslAuthenticationFailed(
                f"{where}: SASL mechanism {mechanism} is not enabled there ({enabled} are)"
            )
        client = sasl_client(self.credentials, self._rng)
        token = client.first()
        while True:
            body = await self._call(connection, SASL_AUTHENTICATE_KEY, 2, {"auth_bytes": token})
            if body.get("error_code"):
                raise SaslAuthenticationFailed(
                    f"{where}: {body.get('error_message') or 'SASL authentication failed'}"
                )
            try:
                token = client.evaluate(bytes(body.get("auth_bytes") or b""))
            except ScramError as error:
                raise SaslAuthenticationFailed(f"{where}: {error}") from None
            if client.complete:
                return

    async def _call(
        self, connection: transport.MessageConnection, api_key: int, version: int, body: dict
    ) -> dict:
        # Far above the ids an RpcConnection starts counting from on this connection.
        correlation_id = 0x7FFF0000 + api_key
        await connection.send([api_key, version, correlation_id, self._client_id, body])
        try:
            message = await connection.receive()
            _, error_code, answer = message  # type: ignore[misc]
        except transport.TransportError as error:
            raise transport.ConnectError(
                f"{connection.peer_name}: connection lost during SASL authentication: {error}"
            ) from None
        except (TypeError, ValueError):
            raise transport.ConnectError(
                f"{connection.peer_name}: malformed answer during SASL authentication"
            ) from None
        if error_code or not isinstance(answer, dict):
            message = answer.get("error_message") if isinstance(answer, dict) else None
            raise SaslAuthenticationFailed(
                f"{connection.peer_name}: SASL authentication refused: {message or error_code}"
            )
        return answer
