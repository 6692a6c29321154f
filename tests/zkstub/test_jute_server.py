"""The zkstub server in ZooKeeper's protocol, byte for byte as a client sends it: what the
client contract (tests/conformance) cannot reach — bad input, unimplemented ops, limits —
and the protocol running on the simulated network under virtual time."""

import struct

import pytest
import trio
import trio.testing

import transport
import zkstub
from actors.testing import pinned_scheduler, poll_until
from zkstub import _jute as jute

OpCode = jute.OpCode


class RawJuteClient:
    """A jute session over a raw TCP stream: sends framed requests, reads framed replies."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def frame(self) -> bytes | None:
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack(">I", self.buffer[:4])
                if len(self.buffer) >= 4 + size:
                    body, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
                    return body
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                return None
            self.buffer += chunk

    async def connect(self) -> jute.ConnectResponse:
        await self.stream.send_all(
            jute.encode_connect_request(jute.ConnectRequest(0, 0, 10_000, 0, bytes(16)))
        )
        return jute.decode_connect_response(await self.frame())

    async def call(self, xid: int, op: int, request) -> tuple[jute.ReplyHeader, object]:
        await self.stream.send_all(jute.encode_request(xid, op, request))
        return await self.reply(op)

    async def reply(self, op: int) -> tuple[jute.ReplyHeader, object]:
        return jute.decode_reply(await self.frame(), lambda xid: op)


@pytest.fixture
async def raw_session():
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        stream = await trio.open_tcp_stream(*server.address)
        async with stream:
            client = RawJuteClient(stream)
            assert (await client.connect()).timeout_ms == 10_000
            yield server, client


async def test_an_unknown_op_is_answered_unimplemented_and_the_session_goes_on(raw_session):
    _, client = raw_session
    await client.stream.send_all(struct.pack(">Iii", 8, 1, 999))
    header, _ = await client.reply(999)
    assert (header.xid, header.err) == (1, zkstub.UnimplementedError.code)
    header, stat = await client.call(2, OpCode.EXISTS, jute.PathWatchRequest("/", False))
    assert header.err == 0 and stat.stat.numChildren == 1


async def test_a_truncated_request_is_answered_marshalling_error(raw_session):
    _, client = raw_session
    body = struct.pack(">ii", 1, OpCode.CREATE) + struct.pack(">i", 40) + b"/short"
    await client.stream.send_all(struct.pack(">I", len(body)) + body)
    header, _ = await client.reply(OpCode.CREATE)
    assert (header.xid, header.err) == (1, zkstub.MarshallingError.code)


@pytest.mark.parametrize(
    ("flags", "acl", "error"),
    [
        (4, jute.OPEN_ACL_UNSAFE, zkstub.UnimplementedError),  # a container
        (0, (jute.ACL(31, "sasl", "alice"),), zkstub.InvalidACLError),  # no such provider
        (0, (jute.ACL(31, "auth", ""),), zkstub.InvalidACLError),  # not authenticated
        (0, (), zkstub.InvalidACLError),
    ],
)
async def test_what_zkstub_cannot_honour_is_refused_not_half_done(raw_session, flags, acl, error):
    server, client = raw_session
    request = jute.CreateRequest("/refused", b"", acl, flags)
    header, _ = await client.call(1, OpCode.CREATE, request)
    assert header.err == error.code
    assert server.tree.exists("/refused") is None


async def test_a_request_over_jute_maxbuffer_closes_the_connection_as_zookeeper_does():
    async with zkstub.open_server(network=transport.TcpNetwork(), jute_maxbuffer=1000) as server:
        stream = await trio.open_tcp_stream(*server.address)
        async with stream:
            client = RawJuteClient(stream)
            await client.connect()
            request = jute.CreateRequest("/big", b"x" * 2000, jute.OPEN_ACL_UNSAFE, 0)
            await client.stream.send_all(jute.encode_request(1, OpCode.CREATE, request))
            assert await client.frame() is None  # closed, unanswered
        assert server.tree.exists("/big") is None


async def test_close_session_is_answered_and_removes_the_ephemerals(raw_session):
    server, client = raw_session
    request = jute.CreateRequest("/e", b"", jute.OPEN_ACL_UNSAFE, 1)
    header, _ = await client.call(1, OpCode.CREATE, request)
    assert header.err == 0 and server.tree.exists("/e") is not None
    header, _ = await client.call(2, OpCode.CLOSE_SESSION, None)
    assert (header.xid, header.err) == (2, 0)
    assert server.tree.exists("/e") is None
    assert await client.frame() is None


async def _jute_history(seed: int) -> list:
    network = transport.SimNetwork(seed, trace=True)
    seen: list = []
    async with zkstub.open_server(
        network=network.node("zk"), address=("zk", 2181), seed=seed
    ) as server:
        connect = "jute://zk:2181"
        client_network = network.node("client")
        async with (
            zkstub.connect(connect, network=client_network) as a,
            zkstub.connect(connect, network=client_network) as b,
        ):
            await a.create("/w", b"0")
            await a.get("/w", watch=seen.append)
            await b.set("/w", b"1")
            await b.create("/e", ephemeral=True)
            server.drop_connections(b.session_id)
            await poll_until(lambda: b.state is zkstub.ClientState.SUSPENDED)
            await poll_until(lambda: b.state is zkstub.ClientState.CONNECTED)
            seen += [a.session_id, b.session_id, server.tree.zxid, trio.current_time()]
    return [*seen, network.trace]


def test_jute_clients_on_the_simulated_network_replay_from_their_seed():
    """The same seed, the same history: events, session ids, zxids, times, every packet."""

    def run(seed: int) -> list:
        with pinned_scheduler(seed):
            clock = trio.testing.MockClock(autojump_threshold=0)
            return trio.run(_jute_history, seed, clock=clock)

    first = run(7)
    assert first[0] == zkstub.WatchedEvent(zkstub.EventType.CHANGED, "/w")
    assert run(7) == first
    assert run(8) != first


async def test_jute_sessions_expire_on_virtual_time(autojump_clock):
    """Cut off, the session expires after its timeout and its ephemeral goes; healed, the
    client learns of the expiry on reconnecting and opens a new session."""
    network = transport.SimNetwork(1)
    async with zkstub.open_server(
        network=network.node("zk"), address=("zk", 2181), tick_time=0.5
    ) as server:
        host, port = server.address
        async with zkstub.connect(
            f"jute://{host}:{port}", network=network.node("client"), session_timeout=4.0
        ) as zk:
            await zk.create("/e", ephemeral=True)
            first_session = zk.session_id
            states: list = []
            zk.add_listener(states.append)
            network.partition("zk", "client")
            await poll_until(lambda: server.tree.exists("/e") is None, timeout=60)
            network.heal()
            await poll_until(
                lambda: (
                    zkstub.ClientState.EXPIRED in states
                    and zk.state is zkstub.ClientState.CONNECTED
                ),
                timeout=60,
            )
            assert zk.session_id != first_session
            assert await zk.create("/e", ephemeral=True) == "/e"


async def test_auth_is_answered_with_zxid_0_and_a_failed_one_closes_the_connection(raw_session):
    server, client = raw_session
    digest = jute.AuthRequest(0, "digest", b"alice:alice-secret")
    header, _ = await client.call(jute.AUTH_XID, OpCode.AUTH, digest)
    assert (header.xid, header.zxid, header.err) == (jute.AUTH_XID, 0, 0)
    alice_only = (jute.ACL(31, "digest", zkstub.digest("alice:alice-secret")),)
    header, _ = await client.call(1, OpCode.CREATE, jute.CreateRequest("/a", b"", alice_only, 0))
    assert header.err == 0
    assert server.tree.nodes["/a"].acl == (zkstub.ACL(31, "digest", alice_only[0].id),)
    sasl = jute.AuthRequest(0, "sasl", b"bob")
    header, _ = await client.call(jute.AUTH_XID, OpCode.AUTH, sasl)
    assert header.err == zkstub.AuthFailedError.code
    assert await client.frame() is None  # closed after the answer, as ZooKeeper does
