"""Bad input never takes a server down: each kind gets an error response, or that
connection closed with one log line naming the peer and the reason; other connections
keep working. Runs on both networks."""

import struct
from types import SimpleNamespace

import pytest
import trio

import transport
from actors.testing import poll_until
from transport import ConnectionClosedError, encode_frame, pack

SERVER_LOG = "transport._server"


@pytest.fixture
async def rpc_server(kit, nursery, handlers):
    """A running RpcServer (max frame 64 KiB) with one healthy client connected before
    any bad input arrives; `check_still_serving()` proves both old and new connections
    still work."""
    _, served = await kit.start_rpc(nursery, handlers, max_frame_bytes=64 * 1024)
    healthy = await kit.node("healthy").connect(served.address)

    async def check_still_serving():
        await healthy.send([1, 0, 99, "healthy", "still here"])
        assert await healthy.receive() == [99, 0, "still here"]
        async with transport.open_rpc_connection(
            kit.node("newcomer"), served.address, client_id="newcomer"
        ) as rpc:
            assert (await rpc.request(1, "hi")).body == "hi"

    return SimpleNamespace(address=served.address, check_still_serving=check_still_serving)


async def assert_closed_by_server(conn):
    with pytest.raises(ConnectionClosedError), trio.fail_after(30):
        while True:
            await conn.receive()


def the_one_line(warnings_from, kit, conn) -> str:
    (line,) = warnings_from(SERVER_LOG)
    assert kit.name_seen_by_server(conn) in line
    return line


async def test_truncated_frame(kit, clock, rpc_server, warnings_from):
    conn = await kit.node("mallory").connect(rpc_server.address)
    frame = encode_frame([1, 0, 1, "mallory", "x" * 100])
    await conn.send_bytes(frame[:50])
    await conn.aclose()
    await poll_until(lambda: warnings_from(SERVER_LOG), timeout=30, every=0.001)
    line = the_one_line(warnings_from, kit, conn)
    assert "middle of a frame" in line and "50 bytes of an unfinished frame" in line
    await rpc_server.check_still_serving()


async def test_frame_over_the_limit_closes_before_the_body_is_sent(
    kit, clock, rpc_server, warnings_from
):
    conn = await kit.node("mallory").connect(rpc_server.address)
    await conn.send_bytes(struct.pack(">I", 100 * 1024 * 1024))  # announces 100 MiB, sends none
    await assert_closed_by_server(conn)
    line = the_one_line(warnings_from, kit, conn)
    assert "104857600 bytes exceeds max_frame_bytes=65536" in line
    await rpc_server.check_still_serving()


async def test_garbage_bytes(kit, clock, rpc_server, warnings_from):
    conn = await kit.node("mallory").connect(rpc_server.address)
    await conn.send_bytes(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
    await assert_closed_by_server(conn)
    line = the_one_line(warnings_from, kit, conn)
    assert "exceeds max_frame_bytes" in line  # "GET " read as a length: 1.1 GB
    await rpc_server.check_still_serving()


async def test_body_that_is_not_msgpack(kit, clock, rpc_server, warnings_from):
    conn = await kit.node("mallory").connect(rpc_server.address)
    await conn.send_bytes(struct.pack(">I", 3) + b"\xc1\xc1\xc1")
    await assert_closed_by_server(conn)
    line = the_one_line(warnings_from, kit, conn)
    assert "not one valid msgpack object" in line
    await rpc_server.check_still_serving()


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [
        ("just a string", "expected a list of 5 items, got str"),
        ([1, 0, 1, "x"], "expected a list of 5 items, got a list of 4"),
        (["1", 0, 1, "x", None], "api_key '1' is not an int"),
        ([1, -1, 1, "x", None], "api_version -1"),
        ([1, 0, -5, "x", None], "correlation_id -5"),
        ([1, 0, 1, 42, None], "client_id 42 is not a str"),
    ],
)
async def test_malformed_envelope(kit, clock, rpc_server, warnings_from, envelope, reason):
    conn = await kit.node("mallory").connect(rpc_server.address)
    await conn.send(envelope)
    await assert_closed_by_server(conn)
    line = the_one_line(warnings_from, kit, conn)
    assert "malformed request envelope" in line and reason in line
    await rpc_server.check_still_serving()


async def test_unknown_api_key_gets_invalid_request(kit, clock, rpc_server, warnings_from):
    conn = await kit.node("mallory").connect(rpc_server.address)
    await conn.send([777, 0, 5, "mallory", None])
    assert await conn.receive() == [
        5,
        transport.INVALID_REQUEST,
        {"error_message": "unknown api key 777"},
    ]
    line = the_one_line(warnings_from, kit, conn)
    assert "unknown api key 777" in line
    await conn.send([1, 0, 6, "mallory", "same connection"])  # not closed
    assert await conn.receive() == [6, 0, "same connection"]
    await rpc_server.check_still_serving()


async def test_body_of_the_wrong_shape_gets_invalid_request(kit, clock, rpc_server, warnings_from):
    async with transport.open_rpc_connection(
        kit.node("mallory"), rpc_server.address, client_id="mallory"
    ) as rpc:
        response = await rpc.request(4, {"name": "x"})
        assert response.error_code == transport.INVALID_REQUEST
        assert "body must be [name: str, count: int]" in response.body["error_message"]
        assert (await rpc.request(4, ["ok", 2])).body == "okok"
        line = the_one_line(warnings_from, kit, rpc.connection)
        assert "invalid request (api key 4)" in line and "body must be" in line
    await rpc_server.check_still_serving()


async def test_map_with_integer_keys_is_a_decode_error(kit, clock, rpc_server, warnings_from):
    conn = await kit.node("mallory").connect(rpc_server.address)
    await conn.send_bytes(_int_key_frame())
    await assert_closed_by_server(conn)
    assert "map key" in the_one_line(warnings_from, kit, conn)
    await rpc_server.check_still_serving()


def _int_key_frame() -> bytes:
    body = pack([1, 0, 1, "mallory", {1: "a"}])
    return struct.pack(">I", len(body)) + body
