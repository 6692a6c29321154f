"""SimNetwork's own behaviour: latency, partitions, one-way blocks, isolation, heal, drops,
delays and crashed nodes, all in virtual time."""

import pytest
import trio
import trio.testing

import transport
from transport import ConnectError, ConnectionClosedError, Response, SimNetwork


async def echo(conn):
    while True:
        await conn.send(await conn.receive())


async def start_echo(nursery, network, node="server", port=9000):
    return await nursery.start(network.node(node).serve, (node, port), echo)


async def start_rpc(nursery, network, handlers, node="server", port=9092):
    server = transport.RpcServer(handlers, name=node)
    await nursery.start(network.node(node).serve, (node, port), server.handle_connection)
    return (node, port)


async def echo_handler(request):
    return request.body


async def test_latency_is_drawn_from_the_configured_range(autojump_clock, nursery):
    network = SimNetwork(seed=3, latency=(0.010, 0.020))
    listener = await start_echo(nursery, network)
    conn = await network.node("a").connect(listener.address)
    for _ in range(20):
        start = trio.current_time()
        await conn.send("ping")
        await conn.receive()
        assert 0.020 <= trio.current_time() - start <= 0.040


async def test_per_link_latency(autojump_clock, nursery):
    network = SimNetwork(seed=3, latency=(0.001, 0.001))
    network.set_latency(2.0, 2.0, src="a", dst="server")
    listener = await start_echo(nursery, network)
    conn = await network.node("a").connect(listener.address)
    start = trio.current_time()
    await conn.send("ping")
    assert await conn.receive() == "ping"
    assert trio.current_time() - start == pytest.approx(2.001)


async def test_a_connection_keeps_order_whatever_the_latencies(autojump_clock, nursery):
    network = SimNetwork(seed=5, latency=(0.0, 0.5), delay_rate=0.3, extra_delay=(1, 3))
    listener = await start_echo(nursery, network)
    conn = await network.node("a").connect(listener.address)
    for i in range(200):
        await conn.send(i)
    assert [await conn.receive() for _ in range(200)] == list(range(200))


async def test_delay_rate_adds_extra_delay(autojump_clock, nursery):
    network = SimNetwork(seed=3, latency=(0.001, 0.001))
    listener = await start_echo(nursery, network)
    conn = await network.node("a").connect(listener.address)
    network.set_delay(1.0, (5.0, 5.0))
    start = trio.current_time()
    await conn.send("slow")
    await conn.receive()
    assert trio.current_time() - start == pytest.approx(10.002)  # both ways delayed


async def test_partition_holds_messages_and_heal_lets_them_flow(autojump_clock, nursery, sim):
    address = await start_rpc(nursery, sim, {1: echo_handler})
    async with transport.open_rpc_connection(sim.node("a"), address, client_id="a") as rpc:
        assert (await rpc.request(1, "before")).body == "before"
        sim.partition(["a"], ["server"])
        with pytest.raises(transport.RequestTimeoutError):
            await rpc.request(1, "during", timeout=10)
        result = []

        async def held_request():
            result.append(await rpc.request(1, "held", timeout=100))

        async with trio.open_nursery() as inner:
            inner.start_soon(held_request)
            await trio.sleep(20)
            assert result == []  # held, not lost and not delivered
            healed_at = trio.current_time()
            sim.heal()
        assert result == [Response(0, "held")]
        assert trio.current_time() > healed_at
        assert rpc.is_usable


async def test_one_way_block(autojump_clock, nursery, sim):
    received = []

    async def record(request):
        received.append(request.body)
        return request.body

    address = await start_rpc(nursery, sim, {1: record})
    async with transport.open_rpc_connection(sim.node("a"), address, client_id="a") as rpc:
        sim.block("server", "a")
        assert sim.is_blocked("server", "a") and not sim.is_blocked("a", "server")
        with pytest.raises(transport.RequestTimeoutError):
            await rpc.request(1, "one way", timeout=5)
        assert received == ["one way"]  # the request got through, the answer did not
        sim.unblock("server", "a")
        assert await rpc.request(1, "both ways") == Response(0, "both ways")


async def test_partition_is_between_groups_only(autojump_clock, nursery, sim):
    address = await start_rpc(nursery, sim, {1: echo_handler})
    sim.partition(["a", "b"], ["server"])
    assert sim.is_blocked("a", "server") and sim.is_blocked("server", "b")
    assert not sim.is_blocked("a", "b")
    async with transport.open_rpc_connection(sim.node("c"), address, client_id="c") as rpc:
        assert (await rpc.request(1, "c is fine")).body == "c is fine"


async def test_connect_across_a_partition_times_out(autojump_clock, nursery, sim):
    address = await start_rpc(nursery, sim, {1: echo_handler})
    sim.isolate("server")
    start = trio.current_time()
    with pytest.raises(ConnectError, match=r"timed out connecting to server:9092 after 10\.0s"):
        await sim.node("a").connect(address)
    assert trio.current_time() - start == pytest.approx(sim.connect_timeout)
    with pytest.raises(ConnectError, match="after 2s"):
        await sim.node("a").connect(address, timeout=2)


async def test_connect_waits_for_a_heal_within_its_timeout(autojump_clock, nursery, sim):
    address = await start_rpc(nursery, sim, {1: echo_handler})
    sim.isolate("a")

    async def heal_later():
        await trio.sleep(3)
        sim.heal()

    nursery.start_soon(heal_later)
    conn = await sim.node("a").connect(address)
    assert trio.current_time() >= 3
    await conn.aclose()


async def test_rejoin_ends_an_isolation_but_keeps_other_blocks(autojump_clock, sim):
    sim.isolate("a")
    sim.block("b", "c")
    assert sim.is_blocked("a", "b") and sim.is_blocked("c", "a")
    sim.rejoin("a")
    assert not sim.is_blocked("a", "b") and not sim.is_blocked("c", "a")
    assert sim.is_blocked("b", "c")


async def test_a_node_reaches_itself_even_when_isolated(autojump_clock, nursery, sim):
    address = await start_rpc(nursery, sim, {1: echo_handler})
    sim.isolate("server")
    async with transport.open_rpc_connection(sim.node("server"), address, client_id="self") as rpc:
        assert (await rpc.request(1, "loopback")).body == "loopback"


async def test_drop_breaks_the_connection_for_both_ends(autojump_clock, nursery, sim):
    server_saw = []

    async def handler(conn):
        try:
            await conn.receive()
        except ConnectionClosedError as exc:
            server_saw.append(str(exc))

    listener = await nursery.start(sim.node("server").serve, ("server", 1), handler)
    conn = await sim.node("a").connect(listener.address)
    sim.set_drop_rate(1.0)
    await conn.send("lost")
    with pytest.raises(ConnectionClosedError, match="simulated drop"):
        await conn.receive()
    with pytest.raises(ConnectionClosedError):
        await conn.send("after")
    await trio.testing.wait_all_tasks_blocked()
    assert len(server_saw) == 1 and "simulated drop" in server_saw[0]
    assert any(event[1] == "drop" for event in sim.trace)


async def test_drops_fail_pending_requests(autojump_clock, nursery):
    network = SimNetwork(seed=1, drop_rate=0.05)
    address = await start_rpc(nursery, network, {1: echo_handler})
    closed = 0
    answered = 0
    for _ in range(40):
        async with transport.open_rpc_connection(network.node("a"), address, client_id="a") as rpc:
            for i in range(10):
                try:
                    assert (await rpc.request(1, i)).body == i
                    answered += 1
                except ConnectionClosedError:
                    closed += 1
                    break
    assert closed > 0 and answered > 0


async def test_kill_node_resets_connections_and_stops_listeners(autojump_clock, nursery, sim):
    serve_returned = trio.Event()

    async def serve_until_killed():
        await sim.node("server").serve(("server", 1), echo)
        serve_returned.set()

    nursery.start_soon(serve_until_killed)
    await trio.testing.wait_all_tasks_blocked()
    conn = await sim.node("a").connect(("server", 1))
    await conn.send("hi")
    assert await conn.receive() == "hi"
    sim.kill_node("server")
    with pytest.raises(ConnectionClosedError, match="node server was killed"):
        await conn.receive()
    await serve_returned.wait()
    with pytest.raises(ConnectError, match="connection refused by server:1"):
        await sim.node("a").connect(("server", 1))
    # The node can come back (a restarted process).
    listener = await start_echo(nursery, sim, port=1)
    conn = await sim.node("a").connect(listener.address)
    await conn.send("again")
    assert await conn.receive() == "again"


async def test_closing_after_sending_delivers_everything_then_eof(autojump_clock, nursery, sim):
    got = []
    done = trio.Event()

    async def drain(conn):
        try:
            while True:
                got.append(await conn.receive())
        except ConnectionClosedError:
            done.set()

    listener = await nursery.start(sim.node("server").serve, ("server", 1), drain)
    conn = await sim.node("a").connect(listener.address)
    await conn.send_many(range(50))
    await conn.aclose()
    await done.wait()
    assert got == list(range(50))


async def test_port_zero_picks_a_free_port_and_ports_are_exclusive(autojump_clock, nursery, sim):
    first = await start_echo(nursery, sim, port=0)
    second = await start_echo(nursery, sim, port=0)
    assert first.address[0] == "server" and first.address != second.address
    with pytest.raises(OSError, match="already in use"):
        await start_echo(nursery, sim, port=first.address[1])


async def test_a_node_view_serves_only_its_own_name(autojump_clock, nursery, sim):
    with pytest.raises(ValueError, match="node 'a' cannot serve on b:1"):
        await sim.node("a").serve(("b", 1), echo)


def test_bad_configuration_is_a_clear_error():
    with pytest.raises(ValueError, match="drop_rate"):
        SimNetwork(1, drop_rate=1.5)
    with pytest.raises(ValueError, match="latency"):
        SimNetwork(1, latency=(0.2, 0.1))
    with pytest.raises(ValueError, match="per-link"):
        SimNetwork(1).set_latency(0.1, 0.2, src="a")


def test_faults_can_be_set_up_before_the_run():
    network = SimNetwork(1)
    network.partition("a", ["b", "c"])
    assert network.is_blocked("b", "a") and network.is_blocked("a", "c")
    network.heal()
    assert not network.is_blocked("b", "a")


async def test_messages_go_through_the_codec(autojump_clock, nursery, sim):
    listener = await start_echo(nursery, sim)
    conn = await sim.node("a").connect(listener.address)
    with pytest.raises(TypeError):
        await conn.send({"set": {1, 2}})
    conn.max_frame_bytes = 100
    with pytest.raises(transport.FrameTooLargeError):
        await conn.send(b"x" * 200)
