"""The conformance suite: every test runs on real TCP (127.0.0.1) and on SimNetwork.

Each test takes `(kit, clock)`; see conftest.py for why the clock is a separate argument.
"""

import random

import pytest
import trio
import trio.testing

import transport
from actors.testing import poll_until
from transport import (
    ConnectError,
    ConnectionClosedError,
    FrameTooLargeError,
    RequestTimeoutError,
    Response,
    RpcError,
    encode_frame,
    encode_frames,
)

# -- message connections ------------------------------------------------------------------


async def echo_connection(conn: transport.MessageConnection) -> None:
    while True:
        await conn.send(await conn.receive())


async def test_messages_round_trip_in_order(kit, clock, nursery):
    served = await kit.start_server(nursery, echo_connection)
    conn = await kit.node("alice").connect(served.address)
    sent = [[i, "x" * i, {"k": b"\x00" * i}] for i in range(200)]
    await conn.send_many(sent[:100])
    for message in sent[100:]:
        await conn.send(message)
    assert [await conn.receive() for _ in sent] == sent
    await conn.aclose()


async def test_large_message_crosses_many_reads(kit, clock, nursery):
    served = await kit.start_server(nursery, echo_connection)
    conn = await kit.node("alice").connect(served.address)
    big = bytes(range(256)) * 4096  # 1 MiB: 16 reads of 64 KiB
    await conn.send(big)
    assert await conn.receive() == big


async def test_addresses_and_peer_names(kit, clock, nursery):
    seen = trio.Event()
    server_side = []

    async def handler(conn):
        server_side.append(conn)
        seen.set()
        await trio.sleep_forever()

    served = await kit.start_server(nursery, handler)
    conn = await kit.node("alice").connect(served.address)
    await seen.wait()
    (accepted,) = server_side
    assert conn.peer_address == served.address
    assert accepted.peer_address == conn.local_address
    assert accepted.local_address == served.address
    assert accepted.peer_name == kit.name_seen_by_server(conn)
    assert conn.peer_name == f"{served.address[0]}" + (
        "" if kit.kind == "sim" else f":{served.address[1]}"
    )


async def test_receive_raises_connection_closed_when_the_peer_closes(kit, clock, nursery):
    async def close_at_once(conn):
        await conn.aclose()

    served = await kit.start_server(nursery, close_at_once)
    conn = await kit.node("alice").connect(served.address)
    with pytest.raises(ConnectionClosedError):
        await conn.receive()
    with pytest.raises(ConnectionClosedError):
        await conn.receive()  # and keeps saying so
    await conn.aclose()
    await conn.aclose()  # idempotent


async def test_closing_locally_wakes_a_blocked_receiver(kit, clock, nursery):
    served = await kit.start_server(nursery, echo_connection)
    conn = await kit.node("alice").connect(served.address)
    outcome = []

    async def receiver():
        try:
            await conn.receive()
        except ConnectionClosedError as exc:
            outcome.append(str(exc))

    async with trio.open_nursery() as inner:
        inner.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        await conn.aclose()
    assert outcome and "closed locally" in outcome[0]
    with pytest.raises(ConnectionClosedError):
        await conn.send("late")


async def test_handler_exception_closes_that_connection_only(kit, clock, nursery, warnings_from):
    async def picky(conn):
        message = await conn.receive()
        if message == "boom":
            raise ValueError("boom")
        await conn.send(message)

    served = await kit.start_server(nursery, picky)
    bad = await kit.node("mallory").connect(served.address)
    await bad.send("boom")
    with pytest.raises(ConnectionClosedError):
        await bad.receive()
    good = await kit.node("alice").connect(served.address)
    await good.send("hello")
    assert await good.receive() == "hello"
    (line,) = [w for w in warnings_from("transport._sim") + warnings_from("transport._tcp")]
    assert kit.name_seen_by_server(bad) in line


async def test_sending_more_than_the_frame_limit_raises_and_keeps_the_connection(
    kit, clock, nursery
):
    served = await kit.start_server(nursery, echo_connection)
    conn = await kit.node("alice").connect(served.address)
    conn.max_frame_bytes = 1000
    with pytest.raises(FrameTooLargeError):
        await conn.send(b"x" * 1000)
    await conn.send(b"x" * 10)
    assert await conn.receive() == b"x" * 10


async def test_connect_to_an_address_nobody_serves_raises_connect_error(kit, clock, nursery):
    served = await kit.start_server(nursery, echo_connection)
    served.stop()
    await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(ConnectError, match=str(served.address[1])):
        await kit.node("alice").connect(served.address)


async def test_stopping_a_server_closes_its_connections(kit, clock, nursery):
    served = await kit.start_server(nursery, echo_connection)
    conn = await kit.node("alice").connect(served.address)
    await conn.send("ping")
    assert await conn.receive() == "ping"
    served.stop()
    with pytest.raises(ConnectionClosedError):
        await conn.receive()


# -- RPC ----------------------------------------------------------------------------------


async def test_request_response(kit, clock, nursery, handlers):
    _, served = await kit.start_rpc(nursery, handlers)
    async with transport.open_rpc_connection(
        kit.node("alice"), served.address, client_id="alice"
    ) as rpc:
        assert await rpc.request(1, {"hello": [1, b"2"]}) == Response(0, {"hello": [1, b"2"]})
        assert (await rpc.request(4, ["ab", 3])).body == "ababab"


async def test_pipelining_1000_requests_in_flight(kit, clock, nursery, gated):
    _, served = await kit.start_rpc(nursery, {1: gated.handler})
    async with transport.open_rpc_connection(
        kit.node("alice"), served.address, client_id="alice"
    ) as rpc:
        results = {}

        async def one(i):
            results[i] = await rpc.request(1, i)

        async with trio.open_nursery() as requests:
            for i in range(1000):
                requests.start_soon(one, i)
            await poll_until(
                lambda: rpc.in_flight >= 1000 and len(gated.started) >= 128, timeout=30, every=0.001
            )
            # The server runs at most max_in_flight_per_connection (128) at once.
            await trio.testing.wait_all_tasks_blocked()
            assert len(gated.started) == 128
            gated.gate.set()
        assert results == {i: Response(0, i) for i in range(1000)}


async def test_responses_go_out_in_the_order_requests_arrived(kit, clock, nursery, handlers):
    """Handlers finish in a scrambled order; the raw connection sees correlation ids in
    the order it sent them (Kafka's per-connection ordering)."""
    _, served = await kit.start_rpc(nursery, handlers)
    conn = await kit.node("alice").connect(served.address)
    delays = [0.05 * ((7 * i) % 10) for i in range(30)]
    await conn.send_many([[2, 0, i, "alice", [d, i]] for i, d in enumerate(delays)])
    responses = [await conn.receive() for _ in delays]
    assert responses == [[i, 0, i] for i in range(30)]


async def test_unordered_server_runs_a_connections_handlers_concurrently(kit, clock, nursery):
    running = []
    both = trio.Event()

    async def meet(request):
        running.append(request.body)
        if len(running) == 2:
            both.set()
        await both.wait()
        return request.body

    _, served = await kit.start_rpc(nursery, {1: meet})
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        async with trio.open_nursery() as requests:
            requests.start_soon(rpc.request, 1, "first")
            requests.start_soon(rpc.request, 1, "second")
    assert sorted(running) == ["first", "second"]


async def test_ordered_server_runs_handlers_one_at_a_time_in_arrival_order(kit, clock, nursery):
    log = []

    async def step(request):
        log.append(("start", request.body))
        await trio.sleep(0.01 * (5 - request.body))
        log.append(("end", request.body))
        return request.body

    _, served = await kit.start_rpc(nursery, {1: step}, ordered=True)
    conn = await kit.node("alice").connect(served.address)
    await conn.send_many([[1, 0, i, "alice", i] for i in range(5)])
    assert [await conn.receive() for _ in range(5)] == [[i, 0, i] for i in range(5)]
    assert log == [(event, i) for i in range(5) for event in ("start", "end")]


async def test_reading_pauses_at_max_in_flight(kit, clock, nursery, gated):
    _, served = await kit.start_rpc(nursery, {1: gated.handler}, max_in_flight_per_connection=4)
    conn = await kit.node("alice").connect(served.address)
    await conn.send_many([[1, 0, i, "alice", i] for i in range(20)])
    await poll_until(lambda: len(gated.started) >= 4, timeout=30, every=0.001)
    await trio.testing.wait_all_tasks_blocked()
    assert gated.started == [0, 1, 2, 3]
    gated.gate.set()
    assert [await conn.receive() for _ in range(20)] == [[i, 0, i] for i in range(20)]


async def test_rpc_error_answers_with_its_code_and_body(kit, clock, nursery):
    async def refuse(request):
        if request.body == "with-body":
            raise RpcError(6, body={"leader": 3})
        raise RpcError(41, "not the controller")

    _, served = await kit.start_rpc(nursery, {1: refuse})
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        assert await rpc.request(1, "with-body") == Response(6, {"leader": 3})
        assert await rpc.request(1, "x") == Response(41, {"error_message": "not the controller"})


async def test_handler_crash_is_unknown_server_error_and_logged(kit, clock, nursery, caplog):
    async def crash(request):
        raise KeyError("missing")

    _, served = await kit.start_rpc(nursery, {1: crash})
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        response = await rpc.request(1, None)
        assert response.error_code == transport.UNKNOWN_SERVER_ERROR
        assert "KeyError" in response.body["error_message"]
        assert (await rpc.request(1, None)).error_code == -1  # the connection lives on
    records = [r for r in caplog.records if r.name == "transport._server"]
    assert len(records) == 2  # one per failed request, each with its traceback
    assert all(r.exc_info is not None and "api key 1" in r.getMessage() for r in records)


async def test_a_response_that_cannot_be_encoded_becomes_an_error(kit, clock, nursery):
    async def bad_body(request):
        return {"not packable": object()} if request.body == "object" else b"x" * 5000

    _, served = await kit.start_rpc(nursery, {1: bad_body}, max_frame_bytes=1000)
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        unpackable = await rpc.request(1, "object")
        too_big = await rpc.request(1, "big")
    assert unpackable.error_code == too_big.error_code == transport.UNKNOWN_SERVER_ERROR
    assert "cannot be sent" in unpackable.body["error_message"]
    assert "exceeds max_frame_bytes=1000" in too_big.body["error_message"]


async def test_push_is_seen_before_the_response_queued_after_it(kit, clock, nursery):
    async def push_then_answer(request):
        request.connection.push({"event": request.body})
        return "done"

    _, served = await kit.start_rpc(nursery, {1: push_then_answer})
    seen = []
    async with transport.open_rpc_connection(
        kit.node("a"), served.address, client_id="a", on_push=lambda body: seen.append(body)
    ) as rpc:
        for i in range(3):
            response = await rpc.request(1, i)
            seen.append(response.body)
    assert seen == [{"event": 0}, "done", {"event": 1}, "done", {"event": 2}, "done"]


async def test_server_connection_hooks_context_and_close(kit, clock, nursery):
    connected, disconnected = [], []

    async def remember(request):
        request.connection.context.setdefault("calls", 0)
        request.connection.context["calls"] += 1
        return request.connection.context["calls"]

    async def goodbye(request):
        request.connection.push("bye")
        request.connection.close()
        await trio.sleep_forever()

    _, served = await kit.start_rpc(
        nursery,
        {1: remember, 2: goodbye},
        on_connect=connected.append,
        on_disconnect=disconnected.append,
    )
    pushes = []
    async with transport.open_rpc_connection(
        kit.node("a"), served.address, client_id="a", on_push=pushes.append
    ) as rpc:
        assert [(await rpc.request(1, None)).body for _ in range(3)] == [1, 2, 3]
        with pytest.raises(ConnectionClosedError):
            await rpc.request(2, None)
        await rpc.closed.wait()
    assert pushes == ["bye"]  # flushed before the close
    with trio.fail_after(30):
        await connected[0].closed.wait()
    assert connected == disconnected
    assert connected[0].push("after close") is False


async def test_connection_death_fails_every_pending_request(kit, clock, nursery, handlers):
    _, served = await kit.start_rpc(nursery, handlers)
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        failures = []

        async def pending():
            with pytest.raises(ConnectionClosedError) as info:
                await rpc.request(3, None)
            failures.append(str(info.value))

        async with trio.open_nursery() as requests:
            for _ in range(10):
                requests.start_soon(pending)
            await poll_until(lambda: rpc.in_flight >= 10, timeout=30, every=0.001)
            served.stop()
        assert len(failures) == 10
        assert all(rpc.peer_name in failure for failure in failures)
        with pytest.raises(ConnectionClosedError):
            await rpc.request(1, "after")
        assert rpc.closed.is_set()


async def test_request_timeout(kit, clock, nursery, handlers):
    _, served = await kit.start_rpc(nursery, handlers)
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        start = trio.current_time()
        with pytest.raises(RequestTimeoutError, match="api key 2"):
            await rpc.request(2, [kit.short_timeout * 2, "late"], timeout=kit.short_timeout)
        assert trio.current_time() - start >= kit.short_timeout
        assert rpc.in_flight == 0
        # The late response is dropped; the next one comes after it (in order) and the
        # connection stays usable.
        assert await rpc.request(1, "next") == Response(0, "next")
        assert rpc.is_usable


async def test_default_request_timeout_applies(kit, clock, nursery, handlers):
    _, served = await kit.start_rpc(nursery, handlers)
    async with transport.open_rpc_connection(
        kit.node("a"), served.address, client_id="a", request_timeout=kit.short_timeout
    ) as rpc:
        with pytest.raises(RequestTimeoutError):
            await rpc.request(3, None)


async def test_close_on_timeout_fails_the_requests_behind_the_stuck_one(
    kit, clock, nursery, handlers
):
    _, served = await kit.start_rpc(nursery, handlers)
    async with transport.open_rpc_connection(
        kit.node("a"), served.address, client_id="a", close_on_timeout=True
    ) as rpc:
        outcomes = {}

        async def call(name, api_key, timeout):
            try:
                await rpc.request(api_key, name, timeout=timeout)
            except transport.TransportError as exc:
                outcomes[name] = exc

        async with trio.open_nursery() as requests:
            requests.start_soon(call, "stuck", 3, kit.short_timeout)
            await trio.testing.wait_all_tasks_blocked()
            requests.start_soon(call, "behind", 1, 60)
        assert isinstance(outcomes["stuck"], RequestTimeoutError)
        assert isinstance(outcomes["behind"], ConnectionClosedError)
        assert "no response" in str(outcomes["behind"])
        assert not rpc.is_usable


async def test_cancelled_request_leaves_nothing_pending(kit, clock, nursery, handlers):
    _, served = await kit.start_rpc(nursery, handlers)
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        with trio.move_on_after(kit.short_timeout):
            await rpc.request(2, [kit.short_timeout * 2, "cancelled"])
        assert rpc.in_flight == 0
        assert await rpc.request(1, "next") == Response(0, "next")


async def test_client_reconnects_after_the_server_comes_back(kit, clock, nursery, handlers):
    server, served = await kit.start_rpc(nursery, handlers)
    port = served.address[1]
    async with transport.open_rpc_client(
        kit.node("a"), served.address, client_id="a", rng=random.Random(1), request_timeout=5.0
    ) as client:
        assert not client.connected
        assert await client.request(1, "one") == Response(0, "one")
        assert client.connected
        served.stop()
        await poll_until(lambda: not client.connected, timeout=30, every=0.001)
        with pytest.raises(ConnectError):
            await client.request(1, "nobody there", timeout=kit.short_timeout)
        await kit.start_server(nursery, server.handle_connection, port=port)
        assert await client.request(1, "two") == Response(0, "two")


async def test_send_many_is_one_write(kit, clock, nursery):
    """A burst sent with send_many arrives whole: the receiver gets every frame."""
    got = []
    done = trio.Event()

    async def collect(conn):
        while len(got) < 500:
            got.append(await conn.receive())
        done.set()

    served = await kit.start_server(nursery, collect)
    conn = await kit.node("a").connect(served.address)
    await conn.send_bytes(encode_frames(range(250)))
    await conn.send_bytes(b"".join(encode_frame(i) for i in range(250, 500)))
    await done.wait()
    assert got == list(range(500))


async def test_a_malformed_response_closes_the_client_connection(kit, clock, nursery, caplog):
    async def bad_server(conn):
        request = await conn.receive()
        await conn.send(["not", "a", "response", request[2]])
        await trio.sleep_forever()

    served = await kit.start_server(nursery, bad_server)
    async with transport.open_rpc_connection(kit.node("a"), served.address, client_id="a") as rpc:
        with pytest.raises(ConnectionClosedError, match="protocol error") as info:
            await rpc.request(1, None)
        assert "malformed response envelope" in str(info.value)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "transport._client"]
    assert rpc.peer_name in line


async def test_reading_pauses_while_queued_request_bytes_are_at_the_bound(
    kit, clock, nursery, gated
):
    # Requests of about 1000 bytes each against a 2500-byte bound: the third one read
    # reaches it, and nothing more is read until answers free some.
    server, served = await kit.start_rpc(nursery, {1: gated.handler}, max_queued_bytes=2500)
    conn = await kit.node("alice").connect(served.address)
    payload = b"x" * 1000
    await conn.send_many([[1, 0, i, "alice", [i, payload]] for i in range(10)])
    await poll_until(lambda: len(gated.started) >= 3, timeout=30, every=0.001)
    await trio.testing.wait_all_tasks_blocked()
    assert len(gated.started) == 3
    assert server.queued_request_bytes < 2500 + 1100
    gated.gate.set()
    answers = [await conn.receive() for _ in range(10)]
    assert [answer[0] for answer in answers] == list(range(10))
    # Released once each answer is written, which the client may see first.
    await poll_until(lambda: server.queued_request_bytes == 0, timeout=30, every=0.001)
