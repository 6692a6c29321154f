"""A second protocol on the RpcServer's port (what Kafka's binary protocol uses): the first
frame decides which one a connection speaks, and a foreign connection's requests go through
the same ordered pipeline. Runs on both networks.

The toy protocol here: a request body is `0x00, api_key: int8, correlation_id: int32, text`;
a response frame is `size, correlation_id: int32, error_code: int16, text`."""

from __future__ import annotations

import struct

import pytest
import trio

import transport
from transport import ConnectionClosedError

_REQUEST = struct.Struct(">xbi")
_RESPONSE = struct.Struct(">ih")


def toy_request(api_key: int, correlation_id: int, text: bytes) -> bytes:
    body = _REQUEST.pack(api_key, correlation_id) + text
    return struct.pack(">I", len(body)) + body


def toy_response(frame: bytes) -> tuple[int, int, bytes]:
    correlation_id, error_code = _RESPONSE.unpack_from(frame)
    return correlation_id, error_code, frame[_RESPONSE.size :]


class ToyProtocol:
    name = "toy"

    def __init__(self, handlers: dict) -> None:
        self.handlers = handlers

    def claims(self, first_frame_body: bytes) -> bool:
        return first_frame_body[:1] == b"\x00"

    def parse_request(self, frame_body: bytes) -> tuple[int, int, int, str | None, object]:
        if len(frame_body) < _REQUEST.size:
            raise transport.RemoteProtocolError(f"toy request of {len(frame_body)} bytes")
        api_key, correlation_id = _REQUEST.unpack_from(frame_body)
        return api_key, 0, correlation_id, None, frame_body[_REQUEST.size :]

    def encode_response(self, request: transport.Request, body: object) -> bytes | None:
        if body is None:
            return None
        assert isinstance(body, bytes)
        return self._frame(request.correlation_id, 0, body)

    def encode_error(
        self, request: transport.Request, error_code: int, message: str
    ) -> bytes | None:
        return self._frame(request.correlation_id, error_code, message.encode())

    def _frame(self, correlation_id: int, error_code: int, text: bytes) -> bytes:
        body = _RESPONSE.pack(correlation_id, error_code) + text
        return struct.pack(">I", len(body)) + body


@pytest.fixture
async def toy_server(kit, nursery):
    async def echo(request: transport.Request) -> object:
        return request.body

    async def sleep_then_echo(request: transport.Request) -> object:
        await trio.sleep(float(request.body))
        return request.body

    async def silent(request: transport.Request) -> object:
        return None  # no answer, as Kafka's Produce with acks=0

    async def refuse(request: transport.Request) -> object:
        raise transport.RpcError(42, "refused: " + request.body.decode())

    async def crash(request: transport.Request) -> object:
        raise RuntimeError("handler bug")

    async def msgpack_echo(request: transport.Request) -> object:
        return request.body

    protocol = ToyProtocol({1: echo, 2: sleep_then_echo, 3: silent, 4: refuse, 5: crash})
    _, served = await kit.start_rpc(nursery, {1: msgpack_echo}, foreign_protocol=protocol)
    return served


async def toy_connection(kit, served, name="toy-client") -> transport.MessageConnection:
    conn = await kit.node(name).connect(served.address)
    conn.claims_raw = lambda first_frame_body: True  # the client reads raw frames too
    return conn


async def test_foreign_requests_are_answered_in_arrival_order(kit, clock, toy_server):
    conn = await toy_connection(kit, toy_server)
    await conn.send_bytes(
        toy_request(2, 1, b"0.5") + toy_request(1, 2, b"fast") + toy_request(2, 3, b"0.1")
    )
    answers = [toy_response(await conn.receive()) for _ in range(3)]
    assert answers == [(1, 0, b"0.5"), (2, 0, b"fast"), (3, 0, b"0.1")]


async def test_a_request_without_an_answer_does_not_hold_back_the_next(kit, clock, toy_server):
    conn = await toy_connection(kit, toy_server)
    await conn.send_bytes(toy_request(3, 1, b"") + toy_request(1, 2, b"after"))
    assert toy_response(await conn.receive()) == (2, 0, b"after")


async def test_errors_are_answered_in_the_foreign_encoding(kit, clock, toy_server):
    conn = await toy_connection(kit, toy_server)
    await conn.send_bytes(
        toy_request(4, 1, b"no") + toy_request(5, 2, b"") + toy_request(9, 3, b"")
    )
    refused, crashed, unknown = [toy_response(await conn.receive()) for _ in range(3)]
    assert refused == (1, 42, b"refused: no")
    assert crashed[:2] == (2, transport.UNKNOWN_SERVER_ERROR)
    assert b"handler bug" in crashed[2]
    assert unknown == (3, 35, b"unknown api key 9")


async def test_msgpack_and_foreign_connections_share_the_port(kit, clock, toy_server):
    conn = await toy_connection(kit, toy_server)
    async with transport.open_rpc_connection(
        kit.node("msgpack-client"), toy_server.address, client_id="m"
    ) as rpc:
        await conn.send_bytes(toy_request(1, 7, b"toy"))
        assert (await rpc.request(1, "msgpack")).body == "msgpack"
        assert toy_response(await conn.receive()) == (7, 0, b"toy")


async def test_an_unparsable_foreign_frame_closes_only_that_connection(
    kit, clock, toy_server, warnings_from
):
    conn = await toy_connection(kit, toy_server, "mallory")
    await conn.send_bytes(toy_request(1, 1, b"fine"))
    assert toy_response(await conn.receive()) == (1, 0, b"fine")
    await conn.send_bytes(struct.pack(">I", 2) + b"\x00\x01")
    with pytest.raises(ConnectionClosedError), trio.fail_after(30):
        await conn.receive()
    (line,) = warnings_from("transport._server")
    assert "toy request of 2 bytes" in line
    healthy = await toy_connection(kit, toy_server, "healthy")
    await healthy.send_bytes(toy_request(1, 1, b"still here"))
    assert toy_response(await healthy.receive()) == (1, 0, b"still here")
