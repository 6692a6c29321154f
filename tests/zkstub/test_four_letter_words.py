"""ZooKeeper's four-letter words on zkstub's client port, as `echo ruok | nc` sends them."""

import pytest
import trio

import transport
import zkstub


async def ask(address, word: bytes) -> str:
    """Sends the word as nc does (with its newline) and reads until the server closes."""
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(word + b"\n")
        chunks = []
        while chunk := await stream.receive_some(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


async def test_only_srvr_is_answered_by_default_as_in_zookeeper():
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        assert "Mode: standalone" in await ask(server.address, b"srvr")
        assert await ask(server.address, b"ruok") == (
            "ruok is not executed because it is not in the whitelist.\n"
        )


async def test_a_whitelisted_word_is_answered_and_the_port_still_serves_clients():
    network = transport.TcpNetwork()
    async with zkstub.open_server(network=network, four_letter_words="ruok, mntr") as server:
        host, port = server.address
        async with zkstub.connect(f"{host}:{port}", network=network) as zk:
            await zk.create("/a", b"x", ephemeral=True)
            assert await ask(server.address, b"ruok") == "imok"
            mntr = dict(
                line.split("\t") for line in (await ask(server.address, b"mntr")).splitlines()
            )
            assert mntr["zk_server_state"] == "standalone"
            assert mntr["zk_ephemerals_count"] == "1"
            assert mntr["zk_global_sessions"] == "1"
            assert int(mntr["zk_znode_count"]) == 5  # /, /zookeeper and its two, /a
            assert mntr["zk_num_alive_connections"] == "2"  # the client and this one
            assert await zk.get("/a") == (b"x", await zk.exists("/a"))


async def test_star_answers_every_word():
    async with zkstub.open_server(network=transport.TcpNetwork(), four_letter_words="*") as server:
        for word in (b"stat", b"cons", b"conf", b"envi", b"wchs", b"dump"):
            assert await ask(server.address, word), word
        assert "tickTime=2000" in await ask(server.address, b"conf")


async def test_an_unknown_word_in_the_whitelist_is_refused_by_name():
    with pytest.raises(ValueError, match="rouk"):
        async with zkstub.open_server(four_letter_words="ruok,rouk"):
            pass
