"""What only the real network does: where it listens."""

import trio

import transport


async def echo(conn):
    await conn.send(await conn.receive())


async def test_listens_on_loopback_unless_told_otherwise(nursery):
    network = transport.TcpNetwork()
    listener = await nursery.start(network.serve, ("", 0), echo)
    assert listener.address[0] == "127.0.0.1" and listener.address[1] > 0
    conn = await network.connect(listener.address)
    await conn.send("hi")
    assert await conn.receive() == "hi"
    assert conn.peer_name == f"127.0.0.1:{listener.address[1]}"


async def test_node_views_are_equivalent_networks(nursery):
    network = transport.TcpNetwork(connect_timeout=3.0)
    view = network.node("broker-1")
    assert isinstance(view, transport.TcpNetwork) and view.connect_timeout == 3.0
    listener = await nursery.start(view.serve, ("127.0.0.1", 0), echo)
    conn = await network.node("client").connect(listener.address)
    await conn.send(b"bytes")
    with trio.fail_after(10):
        assert await conn.receive() == b"bytes"
