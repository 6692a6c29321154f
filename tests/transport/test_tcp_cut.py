"""CuttableTcpNetwork: real loopback TCP whose links between named nodes can be cut."""

import pytest
import trio

import transport


async def _echo(conn: transport.MessageConnection) -> None:
    while True:
        await conn.send(await conn.receive())


async def test_a_cut_resets_open_connections_and_refuses_new_ones_until_healed():
    network = transport.CuttableTcpNetwork()
    server, client, bystander = network.node("b"), network.node("a"), network.node("c")
    async with trio.open_nursery() as nursery:
        listener = await nursery.start(server.serve, ("127.0.0.1", 0), _echo)
        conn = await client.connect(listener.address)
        other = await bystander.connect(listener.address)
        await conn.send(b"before")
        assert await conn.receive() == b"before"

        network.partition("a", "b")
        with trio.fail_after(5), pytest.raises(transport.ConnectionClosedError):
            await conn.receive()
        with pytest.raises(transport.ConnectError, match="cut"):
            await client.connect(listener.address)
        await other.send(b"unaffected")  # c's link to b was not cut
        assert await other.receive() == b"unaffected"

        network.heal()
        again = await client.connect(listener.address)
        await again.send(b"after")
        assert await again.receive() == b"after"
        nursery.cancel_scope.cancel()
