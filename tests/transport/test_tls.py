"""TLS on the real network: a server and its clients agree on a CA, or they do not talk;
a server that requires client certificates sees the one presented."""

import logging
import ssl

import pytest
import trio
import trustme

import transport


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture(scope="module")
def server_context(ca):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


def client_context(ca, *, check_hostname=True):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(context)
    context.check_hostname = check_hostname
    return context


def requiring_client_certificates(ca):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


async def serve_rpc(nursery, context, seen=None):
    """An RPC server over TLS answering api key 1 with the body it got; `seen` collects
    each request's connection's peer certificate."""

    async def echo(request):
        if seen is not None:
            seen.append(request.connection.peer_certificate)
        return request.body

    server = transport.RpcServer({1: echo}, name="tls-server")
    network = transport.TcpNetwork(connect_timeout=5.0).with_tls(context)
    listener = await nursery.start(network.serve, ("127.0.0.1", 0), server.handle_connection)
    return listener.address


async def ask(network, address, body="hello"):
    async with transport.open_rpc_connection(
        network, address, client_id="tls-client", request_timeout=5.0
    ) as connection:
        return (await connection.request(1, body)).body


async def test_a_client_trusting_the_ca_talks_and_one_trusting_another_is_refused(
    nursery, ca, server_context, caplog
):
    caplog.set_level(logging.INFO, logger="transport._tcp")
    seen = []
    address = await serve_rpc(nursery, server_context, seen)
    trusting = transport.TcpNetwork().with_tls(client_context(ca))
    assert await ask(trusting, address) == "hello"
    assert seen == [None]  # no client certificate was asked for

    stranger = transport.TcpNetwork().with_tls(client_context(trustme.CA()))
    with pytest.raises(transport.ConnectError, match="certificate verify failed"):
        await ask(stranger, address)
    plain = transport.TcpNetwork(connect_timeout=5.0)
    with pytest.raises(transport.TransportError):
        await ask(plain, address)
    with trio.fail_after(10):
        while sum("TLS handshake" in r.getMessage() for r in caplog.records) < 2:
            await trio.sleep(0.01)
    # The server goes on serving after refusing them.
    assert await ask(trusting, address, "again") == "again"


async def test_the_server_name_is_checked_unless_the_client_says_not_to(nursery, ca):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("kafka.example").configure_cert(context)
    address = await serve_rpc(nursery, context)
    checking = transport.TcpNetwork().with_tls(client_context(ca))
    with pytest.raises(transport.ConnectError, match=r"127\.0\.0\.1"):
        await ask(checking, address)
    trusting = transport.TcpNetwork().with_tls(client_context(ca, check_hostname=False))
    assert await ask(trusting, address) == "hello"


async def test_a_server_requiring_a_certificate_sees_it_and_refuses_a_client_without(nursery, ca):
    seen = []
    address = await serve_rpc(nursery, requiring_client_certificates(ca), seen)
    with_certificate = client_context(ca)
    client_cert = ca.issue_cert("client.example")
    client_cert.configure_cert(with_certificate)
    network = transport.TcpNetwork().with_tls(with_certificate)
    assert await ask(network, address) == "hello"
    presented = ssl.PEM_cert_to_DER_cert(client_cert.cert_chain_pems[0].bytes().decode())
    assert seen == [presented]

    # Under TLS 1.3 the client's handshake ends before the server checks its certificate:
    # the refusal comes on the connection, at the first request at the latest.
    without = transport.TcpNetwork().with_tls(client_context(ca))
    with pytest.raises(transport.TransportError):
        await ask(without, address)
    assert len(seen) == 1
