"""The little of HTTP/1.1 the broker's HTTP listener speaks, sans-IO: read a GET (or HEAD)
request's head, and write a whole response that closes the connection.

Enough for Prometheus and a browser: no request bodies (a request announcing one is
refused), no keep-alive (every response says `Connection: close`), no chunked encoding.
"""

from __future__ import annotations

from http import HTTPStatus
from urllib.parse import unquote, urlsplit

import attrs

MAX_HEAD_BYTES = 16 * 1024  # a request line and headers larger than this are refused
_END_OF_HEAD = b"\r\n\r\n"
_METHODS = ("GET", "HEAD")


class HttpError(Exception):
    """A request that gets an error status instead of a handler's answer."""

    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@attrs.frozen
class HttpRequest:
    method: str  # GET or HEAD
    path: str  # percent-decoded, without the query
    query: str
    headers: tuple[tuple[str, str], ...]  # names lowercased, in arrival order

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return None


@attrs.frozen
class HttpResponse:
    status: HTTPStatus = attrs.field(converter=HTTPStatus)
    content_type: str
    body: bytes


def head_end(buffer: bytes | bytearray) -> int | None:
    """Where the request's head ends (just past its blank line), None until it has; raises
    HttpError once the head outgrows MAX_HEAD_BYTES."""
    end = buffer.find(_END_OF_HEAD)
    if end < 0:
        if len(buffer) > MAX_HEAD_BYTES:
            raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
        return None
    if end > MAX_HEAD_BYTES:
        raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
    return end + len(_END_OF_HEAD)


def parse_request_head(head: bytes) -> HttpRequest:
    """A request's head (request line and headers, through the blank line); HttpError for
    anything this listener does not serve."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover (latin-1 decodes any byte)
        raise HttpError(HTTPStatus.BAD_REQUEST, "undecodable request head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(HTTPStatus.BAD_REQUEST, f"bad request line {lines[0]!r}")
    method, target, _version = parts
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HttpError(HTTPStatus.BAD_REQUEST, f"bad header line {line!r}")
        headers.append((name.lower(), value.strip()))
    if method not in _METHODS:
        raise HttpError(HTTPStatus.METHOD_NOT_ALLOWED, f"method {method} is not served")
    request = HttpRequest(method, "", "", tuple(headers))
    length = request.header("content-length")
    if (length is not None and length != "0") or request.header("transfer-encoding"):
        raise HttpError(HTTPStatus.BAD_REQUEST, f"a {method} request carries no body")
    split = urlsplit(target)
    if not split.path.startswith("/"):
        raise HttpError(HTTPStatus.BAD_REQUEST, f"bad request target {target!r}")
    return attrs.evolve(request, path=unquote(split.path), query=split.query)


def encode_response(response: HttpResponse, *, head_only: bool = False) -> bytes:
    """The whole response, closing the connection (`head_only`: a HEAD's, without body)."""
    status = response.status
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        f"Content-Type: {response.content_type}\r\n"
        f"Content-Length: {len(response.body)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    ).encode("latin-1")
    return head if head_only else head + response.body


def error_response(error: HttpError) -> HttpResponse:
    return HttpResponse(error.status, "text/plain; charset=utf-8", f"{error.reason}\n".encode())
