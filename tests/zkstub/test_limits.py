"""zkstub against bad input and greedy clients: session timeouts, ill-typed requests, slow
readers, oversized requests and too many connections (issue 21), on virtual time."""

import contextlib
import math
import random

import pytest
import trio

import transport
import zkstub
from zkstub import _protocol as proto
from zkstub._connections import GuardedConnection
from zkstub._errors import BadArgumentsError, MarshallingError
from zkstub._sessions import SessionTable

BAD_ARGUMENTS = BadArgumentsError.code


@contextlib.asynccontextmanager
async def sim_server(**settings):
    network = transport.SimNetwork(0)
    settings.setdefault("tick_time", 1.0)
    async with zkstub.open_server(
        network=network.node("zk"), address=("zk", 2181), **settings
    ) as server:
        yield network, server


@contextlib.asynccontextmanager
async def raw_connection(network, name="raw", **options):
    """A bare RPC connection to the server, to send what no zkstub client would."""
    async with transport.open_rpc_connection(
        network.node(name), ("zk", 2181), client_id=name, **options
    ) as connection:
        yield connection


# -- session timeouts -------------------------------------------------------------------------


@pytest.mark.parametrize("requested", [math.nan, math.inf, -math.inf, "6", None, True, b"6"])
def test_a_timeout_that_is_not_a_finite_number_is_refused(requested):
    sessions = SessionTable(tick_time=2.0, rng=random.Random(1))
    with pytest.raises(BadArgumentsError, match="session timeout"):
        sessions.create(requested, now=0.0)
    assert sessions.sessions == {}


@pytest.mark.parametrize("requested", [-5.0, 0, 0.001])
def test_a_negative_or_zero_timeout_gets_the_minimum_as_zookeeper_gives(requested):
    sessions = SessionTable(tick_time=2.0, rng=random.Random(1))
    assert sessions.create(requested, now=0.0).timeout == 4.0


def test_min_and_max_session_timeout_settings_override_the_ticks():
    sessions = SessionTable(
        tick_time=2.0, rng=random.Random(1), min_session_timeout=1.0, max_session_timeout=10.0
    )
    assert sessions.create(0.5, now=0.0).timeout == 1.0
    assert sessions.create(100, now=0.0).timeout == 10.0
    with pytest.raises(ValueError, match="min_session_timeout"):
        SessionTable(tick_time=2.0, rng=random.Random(1), min_session_timeout=50.0)
    with pytest.raises(ValueError, match="max_session_timeout"):
        SessionTable(tick_time=2.0, rng=random.Random(1), max_session_timeout=math.nan)


def test_a_recovered_session_with_a_non_finite_timeout_still_expires():
    sessions = SessionTable(tick_time=2.0, rng=random.Random(1))
    sessions.restore(7, b"pw", math.nan, now=100.0)
    sessions.restore(8, b"pw", math.inf, now=100.0)
    assert sessions.due(100.0 + 40.0) == [7, 8]


async def test_a_connect_with_a_nan_timeout_is_answered_bad_arguments(autojump_clock):
    async with sim_server() as (network, server), raw_connection(network) as connection:
        response = await connection.request(proto.CONNECT, [math.nan, 0, b""])
        assert response.error_code == BAD_ARGUMENTS
        assert "session timeout" in response.body["error_message"]
        assert server.sessions.sessions == {}


@pytest.mark.parametrize("requested", [math.nan, math.inf])
async def test_an_in_process_session_with_a_non_finite_timeout_is_refused(
    autojump_clock, requested
):
    async with sim_server() as (_, server):
        with pytest.raises(BadArgumentsError, match="session timeout"):
            server.open_session(requested)
        assert server.sessions.sessions == {}


# -- ill-typed requests -----------------------------------------------------------------------

BAD_CONNECTS = [
    pytest.param([6.0, 0, 10**12], id="password-an-int"),
    pytest.param([6.0, 0, "pw"], id="password-a-str"),
    pytest.param([6.0, 0, [1, 2]], id="password-a-list"),
    pytest.param([6.0, 1.5, b""], id="session-id-a-float"),
    pytest.param([6.0, -1, b""], id="session-id-negative"),
    pytest.param([6.0, "1", b""], id="session-id-a-str"),
    pytest.param([6.0, 0, b"", [0, ["/a"], [], 5]], id="watches-not-a-list"),
    pytest.param([6.0, 0, b"", [0, [7], [], []]], id="watched-path-an-int"),
    pytest.param([6.0, 0, b"", [0, ["no-slash"], [], []]], id="watched-path-invalid"),
    pytest.param([6.0, 0, b"", [0.5, [], [], []]], id="watches-zxid-a-float"),
    pytest.param([6.0, 0, b"", [0, []]], id="watches-too-short"),
    pytest.param([6.0, 0], id="too-few-fields"),
    pytest.param({"timeout": 6.0}, id="a-map"),
]


@pytest.mark.parametrize("body", BAD_CONNECTS)
async def test_an_ill_typed_connect_is_answered_bad_arguments(autojump_clock, body, caplog):
    async with sim_server() as (network, server), raw_connection(network) as connection:
        response = await connection.request(proto.CONNECT, body)
        assert response.error_code == BAD_ARGUMENTS, response
        assert server.sessions.sessions == {}
        # The server is unharmed: the same connection can still open a session.
        response = await connection.request(proto.CONNECT, [6.0, 0, b""])
        assert response.error_code == 0
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info]


BAD_REQUESTS = [
    pytest.param(["get", ["/a"]], id="get-without-watch"),
    pytest.param(["get", [["/a"], False]], id="get-path-a-list"),
    pytest.param(["children", ["/a", "yes"]], id="children-watch-a-str"),
    pytest.param(["exists", "/a"], id="args-a-str"),
    pytest.param(["create", ["/b", "text", False, False]], id="create-data-a-str"),
    pytest.param(["create", ["/b", b"", 0, False]], id="create-ephemeral-an-int"),
    pytest.param(["set", ["/a", b"", 2**40]], id="set-version-beyond-int32"),
    pytest.param(["delete", ["/a", None]], id="delete-version-none"),
    pytest.param(["multi", [["check", "/a", "0"]]], id="multi-check-version-a-str"),
    pytest.param(["multi", [["nope", "/a"]]], id="multi-unknown-op"),
    pytest.param(["multi", "ops"], id="multi-ops-a-str"),
    pytest.param([["get"], ["/a", False]], id="op-a-list"),
    pytest.param(["get", ["/a", False], 3], id="three-fields"),
]


@pytest.mark.parametrize("body", BAD_REQUESTS)
async def test_an_ill_typed_request_is_answered_bad_arguments(autojump_clock, body, caplog):
    async with sim_server() as (network, server), raw_connection(network) as connection:
        response = await connection.request(proto.CONNECT, [6.0, 0, b""])
        assert response.error_code == 0
        response = await connection.request(proto.REQUEST, ["create", ["/a", b"x", False, False]])
        assert response.error_code == 0
        zxid = server.tree.zxid
        response = await connection.request(proto.REQUEST, body)
        assert response.error_code == BAD_ARGUMENTS, response
        assert server.tree.zxid == zxid  # nothing applied, no transaction spent
        response = await connection.request(proto.REQUEST, ["get", ["/a", False]])
        assert response.error_code == 0
        assert response.body[1][0] == b"x"
    assert not [r for r in caplog.records if r.exc_info]


# -- slow readers and expired sessions' connections --------------------------------------------


class _StuckConnection:
    """A MessageConnection whose peer never reads: every send blocks."""

    peer_name = "stuck"
    peer_address = ("stuck", 1)

    def __init__(self):
        self.closed = False

    async def send_frames(self, frames):
        await trio.sleep_forever()

    async def aclose(self):
        self.closed = True


async def test_a_connection_whose_client_stops_reading_is_dropped_past_the_bound(
    autojump_clock,
):
    stuck = _StuckConnection()
    with trio.CancelScope() as scope:
        guarded = GuardedConnection(stuck, max_outbound_bytes=1000, scope=scope, linger=1.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(guarded.run_sender)
            for _ in range(9):
                await guarded.send_frames([b"x" * 100])
            assert not guarded.aborted  # 900 bytes queued: within the bound
            await guarded.send_frames([b"x" * 101, b"y" * 100])
            await trio.sleep_forever()  # the abort cancels the scope
    assert scope.cancelled_caught
    assert guarded.aborted and guarded.queued_bytes <= 1000


async def test_closing_a_connection_whose_client_stops_reading_ends_after_the_linger(
    autojump_clock,
):
    stuck = _StuckConnection()
    with trio.CancelScope() as scope:
        guarded = GuardedConnection(stuck, max_outbound_bytes=1000, scope=scope, linger=2.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(guarded.run_sender)
            await guarded.send_frames([b"x" * 100])
            started = trio.current_time()
            await guarded.aclose()
            assert trio.current_time() - started == pytest.approx(2.0)
            assert stuck.closed
            nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def tcp_server(**settings):
    async with zkstub.open_server(network=transport.TcpNetwork(), **settings) as server:
        yield server


async def open_silent_client(server, requests, rcvbuf=4096):
    """A raw TCP client that sends a connect and `requests`, and never reads."""
    sock = trio.socket.socket()
    sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, rcvbuf)
    await sock.connect(server.address)
    stream = trio.SocketStream(sock)
    messages = [[proto.CONNECT, 0, 0, "silent", [6.0, 0, b""]]]
    messages += [[proto.REQUEST, 0, i + 1, "silent", body] for i, body in enumerate(requests)]
    await stream.send_all(b"".join(transport.encode_frame(m) for m in messages))
    return stream


async def wait_until(predicate, timeout=60.0):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


async def test_a_client_that_stops_reading_is_disconnected_not_buffered():
    big = b"v" * (256 * 1024)
    async with tcp_server(max_outbound_bytes=1024 * 1024) as server:
        async with server.connect_local() as zk:
            await zk.create("/big", big)
        # 400 replies of 256 KiB: 100 MiB the client never takes.
        stream = await open_silent_client(server, [["get", ["/big", False]]] * 400)
        async with stream:
            await wait_until(lambda: not server.connection_guard.open_connections)
        async with server.connect_local() as zk:  # and the server serves on
            assert (await zk.get("/big"))[0] == big


async def test_an_expired_sessions_connection_is_closed_at_once_though_not_read():
    big = b"v" * (256 * 1024)
    # A close that waited for the queue to drain would wait out its linger (a tick).
    async with tcp_server(tick_time=30.0) as server:
        async with server.connect_local(session_timeout=60.0) as zk:
            await zk.create("/big", big)
        # 40 replies of 256 KiB: more than the socket buffers take, less than the bound.
        stream = await open_silent_client(server, [["get", ["/big", False]]] * 40)
        async with stream:
            await wait_until(lambda: len(server.sessions.sessions) == 1)
            (session_id,) = server.sessions.sessions
            await trio.sleep(0.2)  # (real time) the replies fill the socket buffers
            assert server.connection_guard.open_connections
            await server.expire_session(session_id)
            await wait_until(lambda: not server.connection_guard.open_connections, timeout=10.0)


# -- connections per address and sessionless connections ---------------------------------------


async def test_connections_beyond_max_client_cnxns_from_one_address_are_closed(
    autojump_clock, caplog
):
    async with sim_server(max_client_cnxns=2) as (network, server):
        async with raw_connection(network, "a") as first, raw_connection(network, "a") as second:
            for connection in (first, second):
                response = await connection.request(proto.CONNECT, [6.0, 0, b""])
                assert response.error_code == 0
            async with raw_connection(network, "a") as third:
                with pytest.raises(transport.TransportError):
                    await third.request(proto.CONNECT, [6.0, 0, b""])
            # Another address is not affected.
            async with raw_connection(network, "b") as other:
                response = await other.request(proto.CONNECT, [6.0, 0, b""])
                assert response.error_code == 0
        assert server.connection_guard.open_connections.get("a", 0) <= 2
    assert "Too many connections from a - max is 2" in caplog.text


async def test_a_connection_that_never_opens_a_session_is_closed_after_the_timeout(
    autojump_clock,
):
    async with sim_server(sessionless_timeout=10.0) as (network, server):
        async with raw_connection(network, "idle") as idle:
            await trio.sleep(5.0)
            assert server.connection_guard.open_connections == {"idle": 1}
            await trio.sleep(6.0)
            assert server.connection_guard.open_connections == {}
            assert not idle.is_usable


async def test_a_connection_with_a_session_outlives_the_sessionless_timeout(autojump_clock):
    async with sim_server(sessionless_timeout=10.0) as (network, server):
        async with raw_connection(network, "busy") as busy:
            response = await busy.request(proto.CONNECT, [6.0, 0, b""])
            assert response.error_code == 0
            for _ in range(10):  # pings within the session timeout, for 30 s
                await trio.sleep(3.0)
                assert (await busy.request(proto.PING, None)).error_code == 0
            assert server.connection_guard.open_connections == {"busy": 1}


# -- jute.maxbuffer ---------------------------------------------------------------------------


async def test_a_multi_of_a_million_checks_is_refused_as_larger_than_jute_maxbuffer(
    autojump_clock,
):
    async with sim_server() as (_, server):
        session = server.open_session(6.0)
        zxid = server.tree.zxid
        checks = [["check", "/", -1]] * 1_000_000
        with pytest.raises(MarshallingError, match=r"jute\.maxbuffer \(1048575\)"):
            server.handle(session.session_id, "multi", checks)
        assert server.tree.zxid == zxid


async def test_a_14_mib_multi_and_a_2_mib_create_are_refused(autojump_clock):
    async with sim_server() as (network, server), raw_connection(network) as connection:
        assert (await connection.request(proto.CONNECT, [6.0, 0, b""])).error_code == 0
        chunk = b"d" * (1024 * 1024)
        ops = [["create", f"/n{i}", chunk, False, False] for i in range(14)]
        response = await connection.request(proto.REQUEST, ["multi", ops])
        assert response.error_code == MarshallingError.code
        create = ["create", ["/big", chunk * 2, False, False]]
        response = await connection.request(proto.REQUEST, create)
        assert response.error_code == MarshallingError.code
        assert server.tree.get_children("/") == ["zookeeper"]
        # Just under the limit is fine.
        create = ["create", ["/fits", b"d" * 1_000_000, False, False]]
        assert (await connection.request(proto.REQUEST, create)).error_code == 0


async def test_children_whose_names_pass_jute_maxbuffer_fail_the_read_with_its_name(
    autojump_clock,
):
    async with sim_server(jute_maxbuffer=10_000) as (_, server):
        async with server.connect_local() as zk:
            await zk.create("/p", b"")
            for i in range(120):  # 120 names of 93 characters, 4 bytes of length each
                await zk.create(f"/p/{'c' * 90}{i:03d}", b"")
            with pytest.raises(MarshallingError, match=r"children of /p take 11640 bytes"):
                await zk.get_children("/p")
            for i in range(20):  # children known by name can still go
                await zk.delete(f"/p/{'c' * 90}{i:03d}")
            assert len(await zk.get_children("/p", watch=lambda event: None)) == 100


def test_serve_takes_the_limits_as_flags_and_refuses_bad_values(capsys):
    from zkstub.cli import parse_args

    args = parse_args(["serve", "--max-client-cnxns", "0", "--jute-maxbuffer", "4096"])
    assert (args.max_client_cnxns, args.jute_maxbuffer, args.sessionless_timeout) == (0, 4096, 10)
    for flag, value in [("--tick-time", "nan"), ("--min-session-timeout", "-1"),
                        ("--jute-maxbuffer", "0"), ("--max-session-timeout", "inf")]:  # fmt: skip
        with pytest.raises(SystemExit):
            parse_args(["serve", flag, value])
        assert flag.lstrip("-").split("-")[0] in capsys.readouterr().err


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0, "6", True])
async def test_the_client_refuses_a_session_timeout_that_is_no_duration(bad):
    with pytest.raises(ValueError, match=r"session_timeout must be a finite number of seconds"):
        async with zkstub.connect("127.0.0.1:1", session_timeout=bad):
            pass
