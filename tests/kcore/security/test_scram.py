"""SCRAM-SHA-256/512 as sans-IO state machines: RFC 7677's exchange byte for byte, Kafka's
stored credential form, and refusals that name no secret."""

import random

import pytest

from kcore.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_password,
    new_credential,
)

# RFC 7677, section 3.
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc_7677_client_side():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", random.Random(0))
    assert client.first(nonce=CLIENT_NONCE) == CLIENT_FIRST
    assert client.evaluate(SERVER_FIRST) == CLIENT_FINAL
    assert not client.complete
    assert client.evaluate(SERVER_FINAL) == b""
    assert client.complete


def test_rfc_7677_server_side():
    import base64

    credential = credential_from_password("SCRAM-SHA-256", "pencil", base64.b64decode(SALT), 4096)
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, random.Random(0))
    server_first = server.evaluate(CLIENT_FIRST)
    assert server_first.startswith(b"r=" + CLIENT_NONCE.encode())
    assert server_first.endswith(b",s=" + SALT.encode() + b",i=4096")
    # With the RFC's server nonce the client's final message and the proof are the RFC's.
    server._nonce = CLIENT_NONCE + SERVER_NONCE
    server._server_first = SERVER_FIRST.decode()
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_stored_credential_authenticates_its_password_and_not_another(mechanism):
    rng = random.Random(1)
    stored = new_credential(mechanism, "alice-secret", rng=rng).to_config()
    assert stored.startswith("salt=") and stored.endswith(",iterations=4096")
    credential = ScramCredential.from_config(stored)

    def exchange(password: str) -> ScramServer:
        server = ScramServer(mechanism, {"alice": credential}.get, rng)
        client = ScramClient(mechanism, "alice", password, rng)
        client.evaluate(server.evaluate(client.evaluate(server.evaluate(client.first()))))
        return server

    assert exchange("alice-secret").complete
    with pytest.raises(ScramError, match="Invalid user credentials") as info:
        exchange("wrong-secret")
    assert "secret" not in str(info.value).replace("credentials", "")


def test_unknown_users_and_too_few_iterations_are_refused():
    rng = random.Random(2)
    server = ScramServer("SCRAM-SHA-256", {}.get, rng)
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.evaluate(ScramClient("SCRAM-SHA-256", "bob", "pw", rng).first())
    with pytest.raises(ScramError, match="4096"):
        new_credential("SCRAM-SHA-256", "pw", rng=rng, iterations=1000)
    client = ScramClient("SCRAM-SHA-256", "bob", "pw", rng)
    client.first(nonce="abc")
    with pytest.raises(ScramError, match="fewer than 4096"):
        client.evaluate(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024")
