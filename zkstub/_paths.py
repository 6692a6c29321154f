"""ZooKeeper's path rules (PathUtils.validatePath) and chroot handling. Pure."""

from __future__ import annotations

import re

from zkstub._errors import BadArgumentsError

RESERVED = "/zookeeper"


# The characters ZooKeeper forbids in a path; Java sees a code point above U+FFFF as a
# surrogate pair, which it forbids too. One regex search: every request's paths pass here,
# on the client and again on the server, and a test per character was most of a request.
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


def validate_path(path: str, *, sequential: bool = False) -> str:
    """Returns `path` or raises BadArgumentsError saying what is wrong with it. A sequential
    create may end in `/` (the suffix is appended), as in ZooKeeper."""
    if not isinstance(path, str):
        raise BadArgumentsError(f"path must be a string, not {type(path).__name__}")
    checked = path + "1" if sequential else path
    if not checked:
        raise BadArgumentsError("path length must be > 0")
    if checked[0] != "/":
        raise BadArgumentsError(f"path must start with / character: {path!r}", path=path)
    if len(checked) == 1:
        return path
    if checked[-1] == "/":
        raise BadArgumentsError(f"path must not end with / character: {path!r}", path=path)
    for segment in checked[1:].split("/"):
        if segment == "":
            raise BadArgumentsError(f"empty node name specified: {path!r}", path=path)
        if segment in (".", ".."):
            raise BadArgumentsError(f"relative paths not allowed: {path!r}", path=path)
    if (forbidden := _FORBIDDEN.search(checked)) is not None:
        raise BadArgumentsError(
            f"invalid character \\u{ord(forbidden.group()):04x} in path {path!r}", path=path
        )
    return path


def parent_of(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


def name_of(path: str) -> str:
    return path.rsplit("/", 1)[1]


def join_chroot(chroot: str, path: str) -> str:
    if not chroot:
        return path
    return chroot if path == "/" else chroot + path


def strip_chroot(chroot: str, path: str) -> str:
    if not chroot:
        return path
    if path == chroot:
        return "/"
    return path[len(chroot) :] if path.startswith(chroot + "/") else path


def split_connect_string(connect: str) -> tuple[list[tuple[str, int]], str]:
    """`host:port[,host:port...][/chroot]` -> ([(host, port)...], chroot)."""
    hosts_part, slash, chroot = connect.partition("/")
    chroot = "/" + chroot if slash else ""
    if chroot == "/":
        chroot = ""
    if chroot:
        validate_path(chroot)
    hosts = []
    for item in hosts_part.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not port.isdigit() or not host:
            raise BadArgumentsError(f"bad connect string {connect!r}: expected host:port")
        hosts.append((host, int(port)))
    return hosts, chroot
