"""The reconnecting RpcClient and its backoff, in virtual time on SimNetwork."""

import itertools
import math
import random

import attrs
import pytest
import trio
import trio.testing

import transport
from transport import ConnectError, ConnectionClosedError, ExponentialBackoff, Response


@attrs.define
class RecordingNetwork:
    """Wraps a network and records when each connect was attempted."""

    inner: transport.Network
    attempts: list[float] = attrs.field(factory=list)

    def node(self, name):
        return RecordingNetwork(self.inner.node(name), self.attempts)

    async def serve(self, address, handler, *, task_status=trio.TASK_STATUS_IGNORED):
        await self.inner.serve(address, handler, task_status=task_status)

    async def connect(self, address, *, timeout=None):
        self.attempts.append(trio.current_time())
        return await self.inner.connect(address, timeout=timeout)


async def echo(request):
    return request.body


async def serve_rpc(nursery, network, handlers, port=9092):
    server = transport.RpcServer(handlers, name="server")
    scope = trio.CancelScope()

    async def run(task_status):
        with scope:
            await network.node("server").serve(
                ("server", port), server.handle_connection, task_status=task_status
            )

    await nursery.start(run)
    return scope


def test_backoff_grows_exponentially_up_to_the_cap_with_jitter():
    backoff = ExponentialBackoff(0.05, 1.0, random.Random(4))
    for failures in range(12):
        expected = min(0.05 * 2**failures, 1.0)
        assert 0.8 * expected <= backoff.delay(failures) <= 1.2 * expected
    assert backoff.delay(10_000) <= 1.2  # no overflow after a long outage


def test_backoff_jitter_comes_from_the_injected_rng():
    first = ExponentialBackoff(0.05, 1.0, random.Random(9))
    second = ExponentialBackoff(0.05, 1.0, random.Random(9))
    assert [first.delay(n) for n in range(8)] == [second.delay(n) for n in range(8)]
    other = ExponentialBackoff(0.05, 1.0, random.Random(10))
    assert [first.delay(n) for n in range(8)] != [other.delay(n) for n in range(8)]


def test_backoff_rejects_nonsense():
    with pytest.raises(ValueError, match="initial"):
        ExponentialBackoff(2.0, 1.0, random.Random(0))


async def attempt_times(seed: int) -> list[float]:
    """When a client retried connecting to nothing for 10 s (seconds since it began)."""
    start = trio.current_time()
    network = RecordingNetwork(transport.SimNetwork(1, latency=(0.0, 0.0)))
    async with transport.open_rpc_client(
        network.node("a"), ("server", 9092), client_id="a", rng=random.Random(seed)
    ) as client:
        with pytest.raises(ConnectError, match="could not connect to server:9092 within 10s"):
            await client.request(1, "x", timeout=10)
        assert not client.connected
    return [t - start for t in network.attempts]


async def test_reconnect_attempts_back_off_exponentially_up_to_the_cap(autojump_clock):
    times = await attempt_times(seed=1)
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert times[0] == 0.0  # the first attempt is immediate
    for failures, gap in enumerate(gaps):
        expected = min(0.05 * 2**failures, 1.0)
        assert 0.8 * expected <= gap <= 1.2 * expected, (failures, gap)
    assert len(times) > 10  # the cap kept attempts coming over 10 s


async def test_reconnect_jitter_is_seeded(autojump_clock):
    first = await attempt_times(seed=1)
    assert await attempt_times(seed=1) == pytest.approx(first, abs=1e-9)
    assert await attempt_times(seed=2) != pytest.approx(first, abs=1e-9)


async def test_fail_fast_makes_one_attempt_per_request_and_keeps_the_backoff(
    autojump_clock, nursery
):
    network = RecordingNetwork(transport.SimNetwork(1, latency=(0.0, 0.0)))
    client = transport.RpcClient(
        network.node("a"), ("server", 9092), client_id="a", rng=random.Random(5),
        nursery=nursery, fail_fast=True,
    )  # fmt: skip
    for _ in range(3):
        with pytest.raises(ConnectError, match=r"could not connect to server:9092: .*refused"):
            await client.request(1, "x", timeout=30)
    # One attempt each, not 30 s of retries, and each after the previous one's backoff.
    assert len(network.attempts) == 3
    assert trio.current_time() < 1.0
    assert network.attempts[2] - network.attempts[1] >= 0.8 * 0.1
    await serve_rpc(nursery, network.inner, {1: echo})
    assert await client.request(1, "up", timeout=30) == Response(0, "up")
    await client.aclose()


async def test_fail_fast_requests_waiting_on_an_attempt_fail_with_it(autojump_clock, nursery):
    # Five requests at once to a server that is down: the first one's attempt answers for
    # all of them, rather than each waiting out a backoff for an attempt of its own.
    network = RecordingNetwork(transport.SimNetwork(1, latency=(0.0, 0.0)))
    client = transport.RpcClient(
        network.node("a"), ("server", 9092), client_id="a", rng=random.Random(6),
        nursery=nursery, fail_fast=True,
    )  # fmt: skip
    with pytest.raises(ConnectError):
        await client.request(1, "x", timeout=30)  # a failure behind: backing off now
    assert client.backing_off_until() >= trio.current_time() + 0.8 * 0.05
    failed = []

    async def one() -> None:
        with pytest.raises(ConnectError):
            await client.request(1, "y", timeout=30)
        failed.append(trio.current_time())

    async with trio.open_nursery() as requests:
        for _ in range(5):
            requests.start_soon(one)
    assert len(network.attempts) == 2
    assert len(set(failed)) == 1 and failed[0] == network.attempts[1]
    await trio.sleep(2)
    assert client.backing_off_until() == -math.inf  # the backoff has passed
    await client.aclose()


def test_the_shortest_backoff_is_the_least_any_jitter_gives():
    backoff = ExponentialBackoff(0.05, 1.0, random.Random(4))
    for failures in range(8):
        shortest = backoff.shortest_delay(failures)
        assert all(backoff.delay(failures) >= shortest for _ in range(50))


async def test_a_request_waits_for_the_server_within_its_timeout(autojump_clock, nursery):
    network = transport.SimNetwork(2)
    async with transport.open_rpc_client(
        network.node("a"), ("server", 9092), client_id="a", rng=random.Random(3)
    ) as client:

        async def start_later():
            await trio.sleep(2.5)
            await serve_rpc(nursery, network, {1: echo})

        nursery.start_soon(start_later)
        assert await client.request(1, "eventually", timeout=30) == Response(0, "eventually")
        assert 2.5 <= trio.current_time() <= 2.5 + 1.2 + 0.01  # within one capped backoff
        assert client.connected


async def test_sent_requests_fail_on_connection_death_and_are_not_retried(autojump_clock, nursery):
    network = transport.SimNetwork(2)
    calls = []

    async def slow(request):
        calls.append(request.body)
        await trio.sleep(5)
        return request.body

    await serve_rpc(nursery, network, {1: slow})
    async with transport.open_rpc_client(
        network.node("a"), ("server", 9092), client_id="a", rng=random.Random(3)
    ) as client:

        async def kill_soon():
            await trio.sleep(1)
            network.kill_node("server")

        nursery.start_soon(kill_soon)
        with pytest.raises(ConnectionClosedError, match="node server was killed"):
            await client.request(1, "first")
        assert calls == ["first"]
        assert not client.connected
        await serve_rpc(nursery, network, {1: echo})
        assert await client.request(1, "second") == Response(0, "second")
        assert calls == ["first"]


async def test_close_on_timeout_makes_the_next_request_reconnect(autojump_clock, nursery):
    network = RecordingNetwork(transport.SimNetwork(2))

    async def stuck_once(request):
        if request.body == "stuck":
            await trio.sleep_forever()
        return request.body

    await serve_rpc(nursery, network, {1: stuck_once})
    async with transport.open_rpc_client(
        network.node("a"),
        ("server", 9092),
        client_id="a",
        rng=random.Random(3),
        close_on_timeout=True,
    ) as client:
        with pytest.raises(transport.RequestTimeoutError):
            await client.request(1, "stuck", timeout=3)
        assert not client.connected
        assert await client.request(1, "fresh") == Response(0, "fresh")
        assert len(network.attempts) == 2


async def test_pushes_reach_the_callback(autojump_clock, nursery):
    network = transport.SimNetwork(2)

    async def notify(request):
        request.connection.push(["watch", request.body])
        return "ok"

    await serve_rpc(nursery, network, {1: notify})
    pushes = []
    async with transport.open_rpc_client(
        network.node("a"),
        ("server", 9092),
        client_id="a",
        rng=random.Random(3),
        on_push=pushes.append,
    ) as client:
        await client.request(1, "/a")
    assert pushes == [["watch", "/a"]]


async def test_a_closed_client_refuses_requests(autojump_clock, nursery):
    network = transport.SimNetwork(2)
    await serve_rpc(nursery, network, {1: echo})
    async with transport.open_rpc_client(
        network.node("a"), ("server", 9092), client_id="a", rng=random.Random(3)
    ) as client:
        await client.request(1, "x")
        connection = client.connection
        await client.aclose()
        assert connection.closed.is_set()
        with pytest.raises(ConnectionClosedError, match="client is closed"):
            await client.request(1, "y")
