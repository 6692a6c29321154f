"""zkstub against bad input and greedy clients: session timeouts, ill-typed requests, slow
readers, oversized requests and too many connections (issue 21), on virtual time."""

import contextlib
import math
import random

import pytest

import transport
import zkstub
from zkstub import _protocol as proto
from zkstub._errors import BadArgumentsError
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
