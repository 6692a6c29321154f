"""An RPC client that (re)connects on demand, backing off between failed attempts."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

import actors
from transport._backoff import ExponentialBackoff
from transport._client import PushCallback, RpcConnection
from transport._codec import DEFAULT_MAX_FRAME_BYTES
from transport._connection import Address
from transport._envelope import Response
from transport._errors import ConnectError, ConnectionClosedError
from transport._network import Network

__all__ = ["RpcClient", "open_rpc_client"]

log = logging.getLogger(__name__)


class RpcClient:
    """`request` like `RpcConnection.request`, over a connection opened lazily.

    A request finding no live connection opens one, waiting `reconnect_backoff *
    2**failures` (capped at `reconnect_backoff_max`, jittered ±20% from `rng`) after the
    start of the previous attempt; if no connection can be had within the request's timeout
    it raises `ConnectError` (the request was never sent, so retrying is safe). Requests
    already sent on a connection that dies fail with `ConnectionClosedError`: they are not
    retried here, as only the caller knows whether that is safe. `close_on_timeout`: see
    `RpcConnection` (with it, the next request after a timeout opens a new connection).
    `fail_fast`: a request makes at most one connection attempt (after the backoff) and
    raises `ConnectError` as soon as it fails, as Kafka's clients do: they would rather
    refresh their metadata and find the partition's new leader than wait on a dead broker.
    """

    def __init__(
        self,
        network: Network,
        address: Address,
        *,
        client_id: str,
        rng: random.Random,
        nursery: trio.Nursery,
        request_timeout: float = 30.0,
        reconnect_backoff: float = 0.05,
        reconnect_backoff_max: float = 1.0,
        on_push: PushCallback | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        close_on_timeout: bool = False,
        fail_fast: bool = False,
    ) -> None:
        self.network = network
        self.address = address
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._backoff = ExponentialBackoff(reconnect_backoff, reconnect_backoff_max, rng)
        self._nursery = nursery
        self._on_push = on_push
        self._max_frame_bytes = max_frame_bytes
        self._close_on_timeout = close_on_timeout
        self._fail_fast = fail_fast
        self._connection: RpcConnection | None = None
        self._connecting = trio.Lock()
        self._failures = 0  # consecutive failed connection attempts
        self._last_attempt = -math.inf
        self._last_error: Exception | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<RpcClient {self.client_id} -> {self.address[0]}:{self.address[1]}>"

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.is_usable

    def backing_off_until(self) -> float:
        """While the last connection attempt failed and the backoff since it has not
        passed (at its shortest: no jitter drawn), when it passes; else -inf. A caller that
        has other places to send to (Kafka's NetworkClient.ready, leastLoadedNode) skips
        this address until then, rather than queue behind its backoff."""
        if self._failures == 0 or self.connected:
            return -math.inf
        until = self._last_attempt + self._backoff.shortest_delay(self._failures - 1)
        return until if trio.current_time() < until else -math.inf

    @property
    def connection(self) -> RpcConnection | None:
        """The current connection, if any (usable or not)."""
        return self._connection

    async def request(
        self,
        api_key: int,
        body: object,
        *,
        api_version: int = 0,
        timeout: float | None = None,
    ) -> Response:
        limit = self.request_timeout if timeout is None else timeout
        deadline = trio.current_time() + limit
        connection = await self._connect_before(deadline, limit)
        remaining = max(0.0, deadline - trio.current_time())
        return await connection.request(api_key, body, api_version=api_version, timeout=remaining)

    async def aclose(self) -> None:
        self._closed = True
        if self._connection is not None:
            await self._connection.aclose()

    async def _connect_before(self, deadline: float, limit: float) -> RpcConnection:
        with trio.move_on_at(deadline):
            failures = self._failures
            async with self._connecting:
                while True:
                    if self._closed:
                        raise ConnectionClosedError(f"{self.client_id}: the client is closed")
                    if self.connected:
                        return self._connection  # type: ignore[return-value]
                    # fail_fast: an attempt that failed while this request waited for the
                    # lock was its one attempt too. Each waiting request making its own,
                    # each after the backoff, queued them behind one another: a metadata
                    # request behind five produce requests to a dead leader waited 5 s.
                    if not (self._fail_fast and self._failures > failures):
                        await self._attempt(deadline)
                    if self._fail_fast and self._failures > failures:
                        raise ConnectError(
                            f"could not connect to {self.address[0]}:{self.address[1]}: "
                            f"{self._last_error}"
                        ) from self._last_error
        host, port = self.address
        reason = self._last_error or "no attempt finished in time"
        raise ConnectError(
            f"could not connect to {host}:{port} within {limit}s: {reason}"
        ) from self._last_error

    async def _attempt(self, deadline: float) -> None:
        """One connection attempt, after the backoff the previous failures ask for."""
        not_before = self._last_attempt + (
            self._backoff.delay(self._failures - 1) if self._failures else 0.0
        )
        await trio.sleep_until(not_before)
        self._last_attempt = trio.current_time()
        try:
            conn = await self.network.connect(self.address, timeout=deadline - self._last_attempt)
        except ConnectError as exc:
            self._failures += 1
            self._last_error = exc
            log.debug("%s: connect attempt %d failed: %s", self.client_id, self._failures, exc)
            return
        self._failures = 0
        self._last_error = None
        rpc = RpcConnection(
            conn,
            client_id=self.client_id,
            on_push=self._on_push,
            request_timeout=self.request_timeout,
            max_frame_bytes=self._max_frame_bytes,
            close_on_timeout=self._close_on_timeout,
        )
        with trio.CancelScope(shield=True):  # a connection we opened must not leak
            await self._nursery.start(rpc.run)
        self._connection = rpc


@asynccontextmanager
async def open_rpc_client(
    network: Network,
    address: Address,
    *,
    client_id: str,
    rng: random.Random,
    request_timeout: float = 30.0,
    reconnect_backoff: float = 0.05,
    reconnect_backoff_max: float = 1.0,
    on_push: PushCallback | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    close_on_timeout: bool = False,
    fail_fast: bool = False,
) -> AsyncIterator[RpcClient]:
    """A reconnecting RPC client; its connection (if any) is closed on exit."""
    async with actors.open_background_nursery() as nursery:
        client = RpcClient(
            network,
            address,
            client_id=client_id,
            rng=rng,
            nursery=nursery,
            request_timeout=request_timeout,
            reconnect_backoff=reconnect_backoff,
            reconnect_backoff_max=reconnect_backoff_max,
            on_push=on_push,
            max_frame_bytes=max_frame_bytes,
            close_on_timeout=close_on_timeout,
            fail_fast=fail_fast,
        )
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await client.aclose()
