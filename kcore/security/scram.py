"""SCRAM (RFC 5802, RFC 7677) as Kafka speaks it: SCRAM-SHA-256 and SCRAM-SHA-512, no
channel binding. Sans-IO: `ScramServer` and `ScramClient` take and give the SASL tokens
(bytes); nonces come from an injected `random.Random`.

Credentials are stored as Kafka stores them (ScramCredentialUtils): `salt=<b64>,stored_key=
<b64>,server_key=<b64>,iterations=<n>` under the mechanism's name in /config/users/<user>
(written through the admin API: `kcore.security.scram_admin`); Kafka refuses fewer than 4096
iterations, and more than 16384 from the admin API, and so does kcore.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import string
from collections.abc import Callable

import attrs

# Kafka's ScramMechanism: name -> (hash, minimum iterations).
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations
DEFAULT_ITERATIONS = 4096
# Kafka's messages (ScramSaslServer).
INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
_NONCE_CHARS = string.ascii_letters + string.digits


class ScramError(Exception):
    """The exchange failed: a malformed message, an unknown user, a wrong proof. The
    message never holds a secret."""


@attrs.frozen
class ScramCredential:
    salt: bytes = attrs.field(repr=False)
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)
    iterations: int

    def to_config(self) -> str:
        """Kafka's stored form."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as error:
            raise ScramError(f"not a SCRAM credential ({type(error).__name__})") from None


def check_mechanism(mechanism: str) -> str:
    if mechanism not in MECHANISMS:
        raise ScramError(f"unknown SCRAM mechanism {mechanism} (one of {', '.join(MECHANISMS)})")
    return MECHANISMS[mechanism]


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(check_mechanism(mechanism), password.encode(), salt, iterations)


def new_credential(
    mechanism: str,
    password: str,
    *,
    rng: random.Random,
    iterations: int = DEFAULT_ITERATIONS,
) -> ScramCredential:
    """A credential for `password` with a fresh 32-byte salt (Kafka's ScramFormatter)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(
            f"Invalid iterations {iterations} for {mechanism}: between {MIN_ITERATIONS} and "
            f"{MAX_ITERATIONS}"
        )
    return credential_from_password(mechanism, password, rng.randbytes(32), iterations)


def credential_from_salted(
    mechanism: str, salted: bytes, *, salt: bytes, iterations: int
) -> ScramCredential:
    digest = check_mechanism(mechanism)
    client_key = hmac.digest(salted, b"Client Key", digest)
    server_key = hmac.digest(salted, b"Server Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: str, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential for `password` with this salt (the broker's side of it:
    `credential_from_salted`, given what the client salted)."""
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted(mechanism, salted, salt=salt, iterations=iterations)


def _nonce(rng: random.Random) -> str:
    return "".join(rng.choice(_NONCE_CHARS) for _ in range(32))


def _attributes(message: str) -> dict[str, str]:
    attributes = {}
    for item in message.split(","):
        name, equals, value = item.partition("=")
        if not equals or len(name) != 1:
            raise ScramError("Invalid SCRAM message")
        attributes.setdefault(name, value)
    return attributes


def _saslname(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid SCRAM username")
    return name.replace("=2C", ",").replace("=3D", "=")


def _to_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


@attrs.define
class ScramServer:
    """The server's side: `evaluate(client_first)` -> server-first, `evaluate(client_final)`
    -> server-final; then `complete` and `username` (the authenticated one). `credentials`
    looks a user's credential up (None: unknown user)."""

    mechanism: str
    credentials: Callable[[str], ScramCredential | None]
    rng: random.Random
    username: str | None = None  # claimed after the first message, proven once complete
    complete: bool = False
    _state: str = "first"
    _credential: ScramCredential | None = None
    _client_first_bare: str = ""
    _server_first: str = ""
    _nonce: str = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise ScramError("Unexpected SCRAM message after the exchange ended")

    def _first(self, message: str) -> bytes:
        gs2, _, bare = message.partition(",")
        authzid, _, bare = bare.partition(",")
        if gs2 not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise ScramError("Invalid SCRAM client-first message (channel binding unsupported)")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes:
            raise ScramError("Invalid SCRAM client-first message")
        self.username = _saslname(attributes["n"])
        if authzid and _saslname(authzid[2:]) != self.username:
            raise ScramError("Authentication failed: Invalid authorization id")
        self._credential = self.credentials(self.username)
        if self._credential is None:
            self._state = "failed"
            raise ScramError(INVALID_CREDENTIALS)
        self._client_first_bare = bare
        self._nonce = attributes["r"] + _nonce(self.rng)
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        self._state = "failed"
        without_proof, _, proof_part = message.rpartition(",p=")
        attributes = _attributes(without_proof)
        if not proof_part or attributes.get("r") != self._nonce:
            raise ScramError("Invalid SCRAM client-final message: nonce mismatch")
        credential = self._credential
        assert credential is not None
        digest = MECHANISMS[self.mechanism]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = hmac.digest(credential.stored_key, auth_message.encode(), digest)
        try:
            proof = base64.b64decode(proof_part, validate=True)
            client_key = _xor(proof, signature)
        except ValueError:
            raise ScramError(INVALID_CREDENTIALS) from None
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), credential.stored_key):
            raise ScramError(INVALID_CREDENTIALS)
        server_signature = hmac.digest(credential.server_key, auth_message.encode(), digest)
        self._state = "done"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


@attrs.define
class ScramClient:
    """The client's side: `first()` -> client-first, `evaluate(server_first)` ->
    client-final, `evaluate(server_final)` -> b"" once the server proved it knows the
    credential (`complete`)."""

    mechanism: str
    username: str
    password: str = attrs.field(repr=False)
    rng: random.Random
    complete: bool = False
    _nonce: str = ""
    _client_first_bare: str = ""
    _server_signature: bytes = attrs.field(default=b"", repr=False)

    def first(self, nonce: str | None = None) -> bytes:
        check_mechanism(self.mechanism)
        self._nonce = nonce if nonce is not None else _nonce(self.rng)
        self._client_first_bare = f"n={_to_saslname(self.username)},r={self._nonce}"
        return f"n,,{self._client_first_bare}".encode()

    def evaluate(self, token: bytes) -> bytes:
        message = token.decode("utf-8", errors="replace")
        if self._server_signature:
            return self._verify(message)
        attributes = _attributes(message)
        if "e" in attributes:
            raise ScramError(f"The server refused: {attributes['e']}")
        nonce, salt, iterations = attributes.get("r"), attributes.get("s"), attributes.get("i")
        if not nonce or not nonce.startswith(self._nonce) or salt is None or iterations is None:
            raise ScramError("Invalid SCRAM server-first message")
        if not iterations.isdigit() or int(iterations) < MIN_ITERATIONS:
            raise ScramError(f"The server asks for {iterations} iterations, fewer than 4096")
        digest = MECHANISMS[self.mechanism]
        salted = salted_password(
            self.mechanism, self.password, base64.b64decode(salt), int(iterations)
        )
        client_key = hmac.digest(salted, b"Client Key", digest)
        stored_key = hashlib.new(digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{message},{without_proof}"
        signature = hmac.digest(stored_key, auth_message.encode(), digest)
        server_key = hmac.digest(salted, b"Server Key", digest)
        self._server_signature = hmac.digest(server_key, auth_message.encode(), digest)
        proof = base64.b64encode(_xor(client_key, signature)).decode()
        return f"{without_proof},p={proof}".encode()

    def _verify(self, message: str) -> bytes:
        attributes = _attributes(message)
        if "e" in attributes:
            raise ScramError(f"The server refused: {attributes['e']}")
        if base64.b64decode(attributes.get("v", "")) != self._server_signature:
            raise ScramError("The server's signature is wrong: it does not know the credential")
        self.complete = True
        return b""
