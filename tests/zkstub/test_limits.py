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
