"""One reconnecting RPC client per broker address, and typed requests over them.

Clients reach brokers by address: bootstrap servers have no node id until metadata names
them, and a node id maps to an address through the metadata. Every failure below the Kafka
protocol becomes a `kcore.errors.KafkaError`, so the producer, consumer and admin handle
one family of exceptions:

- could not connect (nothing was sent): `NetworkError`, retriable;
- the connection died with the request in flight: `NetworkError`, retriable, and the
  outcome is unknown (the broker may have applied the request);
- no answer within the request timeout: `RequestTimedOutError`, retriable, outcome unknown;
- an error in the response envelope (e.g. INVALID_REQUEST): its Kafka error class;
- a body that does not decode as the expected response: `UnknownServerError`.
"""

from __future__ import annotations

import logging
import math
import random
from typing import Any, TypeVar

import trio

import transport
from kcore import errors
from kcore.wire import WireError, from_wire, to_wire

__all__ = ["Connections"]

T = TypeVar("T")
Address = tuple[str, int]


class Connections:
    """Lazily opened `transport.RpcClient`s, one per address, living in `nursery` (owned
    by the client object) and closed by `aclose`."""

    def __init__(
        self,
        network: transport.Network,
        *,
        client_id: str,
        rng: random.Random,
        nursery: trio.Nursery,
        request_timeout: float,
        logger: logging.Logger,
    ) -> None:
        self._network = network
        self._client_id = client_id
        self._rng = rng
        self._nursery = nursery
        self._request_timeout = request_timeout
        self._log = logger
        self._clients: dict[Address, transport.RpcClient] = {}

    def _client(self, address: Address) -> transport.RpcClient:
        client = self._clients.get(address)
        if client is None:
            client = transport.RpcClient(
                self._network,
                address,
                client_id=self._client_id,
                rng=self._rng,
                nursery=self._nursery,
                request_timeout=self._request_timeout,
                # Kafka's clients close a connection whose request timed out: the responses
                # queued behind it would only arrive late, if at all.
                close_on_timeout=True,
                # A broker that refuses connections is down: fail the request at once so
                # the caller refreshes its metadata (Kafka's NetworkClient does the same).
                fail_fast=True,
            )
            self._clients[address] = client
        return client

    def backing_off_until(self, address: Address) -> float:
        """When the reconnect backoff of `address` ends, while its last connection attempt
        failed; -inf otherwise (see `transport.RpcClient.backing_off_until`)."""
        client = self._clients.get(address)
        return -math.inf if client is None else client.backing_off_until()

    def in_flight(self, address: Address) -> int:
        """Requests sent to `address` and not yet answered."""
        client = self._clients.get(address)
        connection = None if client is None else client.connection
        return 0 if connection is None else connection.in_flight

    def backoff_ends(self) -> float:
        """The earliest end of the reconnect backoffs under way (inf when none is)."""
        ends = [c.backing_off_until() for c in self._clients.values()]
        return min((end for end in ends if end != -math.inf), default=math.inf)

    async def request(
        self,
        address: Address,
        api_key: int,
        message: object,
        response_type: type[T],
        *,
        timeout: float | None = None,
    ) -> T:
        """Sends `message` (an attrs request) and returns the decoded `response_type`."""
        name = getattr(api_key, "name", str(api_key))
        body = await self.request_body(address, api_key, to_wire(message), timeout=timeout)
        try:
            return from_wire(response_type, body)
        except WireError as exc:
            host, port = address
            raise errors.UnknownServerError(
                f"{name} to {host}:{port}: malformed response: {exc}"
            ) from exc

    async def request_body(
        self,
        address: Address,
        api_key: int,
        body: Any,
        *,
        api_version: int = 0,
        timeout: float | None = None,
    ) -> Any:
        """Sends a ready msgpack `body` (e.g. a Kafka request body dict, for the group
        APIs) at `api_version` and returns the response's body as it came."""
        host, port = address
        where = f"{host}:{port}"
        name = getattr(api_key, "name", str(api_key))
        try:
            response = await self._client(address).request(
                int(api_key), body, api_version=api_version, timeout=timeout
            )
        except transport.ConnectError as exc:
            raise errors.NetworkError(
                f"{name} to {where}: could not connect, the request was not sent: {exc}"
            ) from exc
        except transport.RequestTimeoutError as exc:
            raise errors.RequestTimedOutError(
                f"{name} to {where}: no response in time; the request may or may not have "
                f"been applied: {exc}"
            ) from exc
        except transport.TransportError as exc:
            raise errors.NetworkError(
                f"{name} to {where}: connection lost with the request in flight; it may or "
                f"may not have been applied: {exc}"
            ) from exc
        if response.error_code != 0:
            raise errors.error_for_code(
                response.error_code, f"{name} to {where}: {_error_message(response.body)}"
            )
        return response.body

    async def aclose(self) -> None:
        clients = [self._clients[address] for address in sorted(self._clients)]
        self._clients.clear()
        with trio.CancelScope(shield=True):
            for client in clients:
                await client.aclose()


def _error_message(body: Any) -> str:
    if isinstance(body, dict) and body.get("error_message"):
        return str(body["error_message"])
    return "the broker answered with an error"
