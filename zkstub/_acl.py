"""ZooKeeper's ACLs and authentication schemes, sans-IO (ZooKeeper 3.8's ZooDefs,
ZooKeeperServer.checkACL, PrepRequestProcessor.fixupACL and the digest, ip and world
providers).

An ACL entry grants `perms` to an identity, (scheme, id). A connection is authenticated as
a list of identities (ZooKeeper's ServerCnxn.authInfo): its client address as ("ip", host)
from the start, and one ("digest", "user:base64(sha1(user:password))") per `auth` of scheme
digest (which never fails: any user and password name an identity). A digest credential
matching the server's super digest adds ("super", ""), which passes every check. Schemes
zkstub does not know (sasl, x509, ...) fail authentication and are invalid in an ACL.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import ipaddress
from collections.abc import Iterable, Sequence

import attrs

from zkstub._errors import InvalidACLError, NoAuthError


class Perms(enum.IntFlag):
    """ZooDefs.Perms, as zkCli's letters: r w c d a."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


@attrs.frozen
class ACL:
    """One entry of a node's ACL (org.apache.zookeeper.data.ACL, its Id flattened)."""

    perms: int
    scheme: str
    id: str


# An authenticated identity: (scheme, id).
Identity = tuple[str, str]
SUPER: Identity = ("super", "")

# ZooDefs.Ids
OPEN_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perms.ALL, "world", "anyone"),)
READ_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perms.READ, "world", "anyone"),)
CREATOR_ALL_ACL: tuple[ACL, ...] = (ACL(Perms.ALL, "auth", ""),)

# Schemes whose identities `auth` expands to (ServerAuthenticationProvider.isAuthenticated:
# digest yes, ip no; super has no provider, so ZooKeeper skips it too).
_AUTHENTICATED_SCHEMES = frozenset(["digest"])
AUTH_SCHEMES = frozenset(["digest"])  # what an `auth` request may name


def digest(user_password: str) -> str:
    """ZooKeeper's DigestAuthenticationProvider.generateDigest: "user:password" to
    "user:base64(sha1("user:password"))"."""
    user = user_password.split(":", 1)[0]
    sha1 = hashlib.sha1(user_password.encode()).digest()
    return f"{user}:{base64.b64encode(sha1).decode()}"


def authenticate(scheme: str, credential: bytes, super_digest: str | None = None) -> list[Identity]:
    """The identities an `auth` request adds to its connection; [] when it fails
    (ZooKeeper answers AUTHFAILED and closes the connection)."""
    if scheme != "digest":
        return []
    identity = digest(credential.decode("utf-8", "replace"))
    if super_digest is not None and identity == super_digest:
        return [SUPER, ("digest", identity)]
    return [("digest", identity)]


def add_identities(held: Sequence[Identity], new: Iterable[Identity]) -> tuple[Identity, ...]:
    """A connection's identities after an `auth` (ServerCnxn.addAuthInfo: no duplicates)."""
    out = list(held)
    for identity in new:
        if identity not in out:
            out.append(identity)
    return tuple(out)


def _java_split(text: str, separator: str) -> list[str]:
    """Java's String.split: trailing empty strings are dropped."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _ip_network(expression: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    """An ip ACL's id ("10.0.0.1" or "10.0.0.0/8") as a network, None if it is not one."""
    address, _, bits = expression.partition("/")
    try:
        parsed = ipaddress.ip_address(address)
        prefix = int(bits) if bits else parsed.max_prefixlen
        if not 0 <= prefix <= parsed.max_prefixlen:
            return None
        return ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    except ValueError:
        return None


def _valid_id(scheme: str, identity: str) -> bool:
    """ServerAuthenticationProvider.isValid, for the schemes zkstub knows."""
    if scheme == "digest":
        return len(_java_split(identity, ":")) == 2
    if scheme == "ip":
        return _ip_network(identity) is not None
    return False


def fixup_acl(path: str, identities: Sequence[Identity], acl: Sequence[ACL]) -> tuple[ACL, ...]:
    """PrepRequestProcessor.fixupACL: the ACL a create or setACL stores, duplicates removed
    and each `auth` entry replaced by one per authenticated identity of the connection;
    InvalidACLError for an empty ACL, an unknown scheme, an invalid id, or an `auth` entry
    from a connection with no authenticated identity."""
    if acl == OPEN_ACL_UNSAFE:  # nearly every create: one shared value, nothing to check
        return OPEN_ACL_UNSAFE
    unique = list(dict.fromkeys(acl))
    if not unique:
        raise InvalidACLError(path=path)
    fixed: list[ACL] = []
    for entry in unique:
        if entry.scheme == "world" and entry.id == "anyone":
            fixed.append(entry)
        elif entry.scheme == "auth":
            expanded = [ACL(entry.perms, s, i) for s, i in identities
                        if s in _AUTHENTICATED_SCHEMES]  # fmt: skip
            if not expanded:
                raise InvalidACLError(path=path)
            fixed += expanded
        elif _valid_id(entry.scheme, entry.id):
            fixed.append(entry)
        else:
            raise InvalidACLError(path=path)
    return tuple(fixed)


def _matches(entry: ACL, identity: Identity) -> bool:
    scheme, held = identity
    if scheme != entry.scheme:
        return False
    if scheme == "ip":
        network = _ip_network(entry.id)
        try:
            return network is not None and ipaddress.ip_address(held) in network
        except ValueError:
            return False
    return scheme == "digest" and held == entry.id


def allowed(acl: Sequence[ACL], perm: int, identities: Sequence[Identity]) -> bool:
    """ZooKeeperServer.checkACL without the raise: an empty ACL allows all, so does the
    super identity, and otherwise an entry granting `perm` to world:anyone or to one of
    the identities."""
    if not acl or SUPER in identities:
        return True
    for entry in acl:
        if entry.perms & perm:
            if entry.scheme == "world" and entry.id == "anyone":
                return True
            if any(_matches(entry, identity) for identity in identities):
                return True
    return False


def check_acl(acl: Sequence[ACL], perm: int, identities: Sequence[Identity], path: str) -> None:
    """NoAuthError unless `allowed`."""
    if not allowed(acl, perm, identities):
        raise NoAuthError(path=path)


def redacted(acl: Sequence[ACL]) -> tuple[ACL, ...]:
    """What getACL shows a client with READ but not ADMIN: digest ids without their hash
    (FinalRequestProcessor: "user:x")."""
    return tuple(
        ACL(e.perms, e.scheme, e.id.split(":", 1)[0] + ":x") if e.scheme == "digest" else e
        for e in acl
    )


_LETTERS = {"r": Perms.READ, "w": Perms.WRITE, "c": Perms.CREATE, "d": Perms.DELETE,
            "a": Perms.ADMIN}  # fmt: skip


def perms_from_letters(letters: str) -> int:
    """zkCli's "cdrwa" form of a permission set."""
    perms = 0
    for letter in letters:
        if letter not in _LETTERS:
            raise InvalidACLError(f"unknown permission {letter!r} in {letters!r}")
        perms |= _LETTERS[letter]
    return perms


def perms_to_letters(perms: int) -> str:
    """As zkCli prints them (ZKUtil.getPermString's order: r w c d a)."""
    return "".join(letter for letter, perm in _LETTERS.items() if perms & perm)


def parse_acl(text: str) -> tuple[ACL, ...]:
    """zkCli's ACL form: comma-separated scheme:id:perms ("world:anyone:cdrwa",
    "digest:alice:HASH:cdrwa", "ip:10.0.0.0/8:r", "auth::cdrwa"); the perms are after the
    last colon, the scheme before the first."""
    entries: list[ACL] = []
    for part in text.split(","):
        scheme, _, rest = part.strip().partition(":")
        identity, _, letters = rest.rpartition(":")
        if not scheme or not letters:
            raise InvalidACLError(f"{part!r} is not scheme:id:perms")
        entries.append(ACL(perms_from_letters(letters), scheme, identity))
    return tuple(entries)


def acl_to_wire(acl: Sequence[ACL]) -> list[list[object]]:
    """An ACL on zkstub's msgpack wire: [[perms, scheme, id], ...]."""
    return [[int(e.perms), e.scheme, e.id] for e in acl]


def acl_from_wire(value: object) -> tuple[ACL, ...]:
    """Checked (a trust boundary): InvalidACLError for anything but [[int, str, str], ...]."""
    if not isinstance(value, list):
        raise InvalidACLError(f"an ACL is a list of [perms, scheme, id], got {value!r:.80}")
    entries = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 3):
            raise InvalidACLError(f"an ACL entry is [perms, scheme, id], got {entry!r:.80}")
        perms, scheme, identity = entry
        if not (isinstance(perms, int) and not isinstance(perms, bool)
                and isinstance(scheme, str) and isinstance(identity, str)):  # fmt: skip
            raise InvalidACLError(f"an ACL entry is [perms, scheme, id], got {entry!r:.80}")
        entries.append(ACL(perms, scheme, identity))
    return tuple(entries)
