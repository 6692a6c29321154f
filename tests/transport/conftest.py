"""Fixtures for the transport tests.

The conformance tests take `(kit, clock)`: `kit` is parametrized over both networks, and
`clock` is a MockClock(autojump_threshold=0) for the simulation (virtual time) and None
for real TCP on 127.0.0.1 (an autojumping clock would fire timeouts while a task waits for
real socket I/O). pytest-trio only picks up a clock passed as a test argument, hence the
separate fixture.
"""

from __future__ import annotations

import logging

import attrs
import pytest
import trio
import trio.testing

import transport


@attrs.define
class Served:
    """A running server: its bound address, and `stop()` (cancels serving and its
    connections' handlers, as a stopping process would)."""

    address: transport.Address
    scope: trio.CancelScope

    def stop(self) -> None:
        self.scope.cancel()


@attrs.define
class NetworkKit:
    """One network under test, and how the tests address it."""

    kind: str
    network: transport.Network
    server_host: str
    short_timeout: float  # for tests about timeouts: virtual seconds in sim, real in tcp

    def node(self, name: str) -> transport.Network:
        return self.network.node(name)

    async def start_server(
        self,
        nursery: trio.Nursery,
        handler: transport.ConnectionHandler,
        *,
        port: int = 0,
    ) -> Served:
        scope = trio.CancelScope()
        network = self.network.node(self.server_host)

        async def serve(task_status: trio.TaskStatus) -> None:
            with scope:
                await network.serve((self.server_host, port), handler, task_status=task_status)

        listener = await nursery.start(serve)
        return Served(listener.address, scope)

    async def start_rpc(
        self, nursery: trio.Nursery, handlers: dict, **server_options: object
    ) -> tuple[transport.RpcServer, Served]:
        server = transport.RpcServer(handlers, name="test-server", **server_options)
        return server, await self.start_server(nursery, server.handle_connection)

    def name_seen_by_server(self, conn: transport.MessageConnection) -> str:
        """How the server names the client at the other end of `conn` in its logs."""
        host, port = conn.local_address
        return host if self.kind == "sim" else f"{host}:{port}"


@pytest.fixture(params=["tcp", "sim"])
def network_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def clock(network_kind: str) -> trio.testing.MockClock | None:
    return trio.testing.MockClock(autojump_threshold=0) if network_kind == "sim" else None


@pytest.fixture
def kit(network_kind: str) -> NetworkKit:
    if network_kind == "sim":
        return NetworkKit("sim", transport.SimNetwork(seed=7), "server", short_timeout=5.0)
    return NetworkKit("tcp", transport.TcpNetwork(), "127.0.0.1", short_timeout=0.2)


@pytest.fixture
def sim() -> transport.SimNetwork:
    return transport.SimNetwork(seed=11, trace=True)


@pytest.fixture
def warnings_from(caplog: pytest.LogCaptureFixture):
    """`warnings_from(logger_name)`: the WARNING-or-worse messages that logger wrote."""
    caplog.set_level(logging.DEBUG, logger="transport")

    def collect(logger_name: str) -> list[str]:
        return [
            record.getMessage()
            for record in caplog.records
            if record.name == logger_name and record.levelno >= logging.WARNING
        ]

    return collect


@pytest.fixture
def handlers():
    """A small RPC API used across tests: 1 echo, 2 sleep-then-echo, 3 never answers,
    4 validates its body ([str, int]) the way a real handler should."""

    async def echo(request: transport.Request) -> object:
        return request.body

    async def sleep_then_echo(request: transport.Request) -> object:
        delay, value = request.body
        await trio.sleep(delay)
        return value

    async def never(request: transport.Request) -> object:
        await trio.sleep_forever()

    async def typed(request: transport.Request) -> object:
        body = request.body
        if not (
            isinstance(body, list)
            and len(body) == 2
            and isinstance(body[0], str)
            and isinstance(body[1], int)
        ):
            raise transport.RpcError(
                transport.INVALID_REQUEST, f"body must be [name: str, count: int], got {body!r}"
            )
        return body[0] * body[1]

    return {1: echo, 2: sleep_then_echo, 3: never, 4: typed}


@attrs.define
class Gate:
    """An RPC handler that records each request's body, then waits for `gate` to open."""

    gate: trio.Event = attrs.field(factory=trio.Event)
    started: list = attrs.field(factory=list)

    async def handler(self, request: transport.Request) -> object:
        self.started.append(request.body)
        await self.gate.wait()
        return request.body


@pytest.fixture
def gated() -> Gate:
    return Gate()
