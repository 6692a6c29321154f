"""`zkstub serve --http HOST:PORT`: the server's `mntr` numbers at `/metrics` in Prometheus'
text format, named as ZooKeeper 3.8's Prometheus metrics provider names them
(`znode_count`, `num_alive_connections`, ...: `_four_letter_words.prometheus_gauges`), so
ZooKeeper's dashboards read zkstub too. prometheus-client's registry and exposition write
the text; each scrape reads the server's state at that moment.

The HTTP side is the least a scraper needs: GET or HEAD of one path, one response, then the
connection closes. It runs in the server's Trio task tree (no thread: the numbers are read on
the task that owns them), on real TCP whatever network the server uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from http import HTTPStatus

import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from zkstub._four_letter_words import ServerFacts, prometheus_gauges

logger = logging.getLogger("zkstub.metrics")

# Prometheus' text format 0.0.4, which every Prometheus reads (prometheus-client 0.22+ labels
# its output 1.0.0 by default, which a Prometheus before 3.0 does not know).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METRICS_PATH = "/metrics"
MAX_HEAD_BYTES = 16 * 1024
CONNECTION_TIMEOUT_S = 30.0  # a stalled scraper does not keep its connection for ever


class MntrCollector:
    """A prometheus-client custom collector: one gauge per `mntr` number (its help text is
    its name, as ZooKeeper's provider registers them)."""

    def __init__(self, facts: Callable[[], ServerFacts]) -> None:
        self._facts = facts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, value in prometheus_gauges(self._facts()):
            yield GaugeMetricFamily(name, name, value=value)


def metrics_registry(facts: Callable[[], ServerFacts]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MntrCollector(facts))
    return registry


def parse_address(text: str) -> tuple[str, int]:
    """`--http`'s HOST:PORT (`[::1]:PORT` for IPv6; port 0 picks one)."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http expects HOST:PORT, got {text!r}")
    return host, int(port)


def respond(head: bytes, metrics: Callable[[], bytes]) -> bytes:
    """The whole response to a request's head (its request line and headers)."""
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return _response(HTTPStatus.BAD_REQUEST, b"bad request line\n")
    method, target, _ = parts
    if method not in ("GET", "HEAD"):
        return _response(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not served\n".encode())
    path = target.split("?", 1)[0]
    if path != METRICS_PATH:
        status, body = HTTPStatus.NOT_FOUND, f"no such path {path} (try /metrics)\n".encode()
        return _response(status, body, head_only=method == "HEAD")
    return _response(HTTPStatus.OK, metrics(), CONTENT_TYPE, head_only=method == "HEAD")


def _response(
    status: HTTPStatus,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    *,
    head_only: bool = False,
) -> bytes:
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + body


async def serve_metrics(
    host: str,
    port: int,
    facts: Callable[[], ServerFacts],
    *,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serves `/metrics` on (host, port) until cancelled; `task_status.started` gets the
    address bound (port 0: the one the OS picked)."""
    registry = metrics_registry(facts)
    listeners = await trio.open_tcp_listeners(port, host=host)
    for extra in listeners[1:]:  # one address, as printed (localhost may give two)
        await extra.aclose()
    bound = listeners[0].socket.getsockname()
    address = (str(bound[0]), int(bound[1]))
    logger.info("serving /metrics on http://%s:%d", *address)

    async def handle(stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(CONNECTION_TIMEOUT_S):
                head = await _read_head(stream)
                if head is not None:
                    await stream.send_all(respond(head, lambda: generate_latest(registry)))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            logger.debug("metrics connection lost: %r", error)
        except Exception:  # a scrape that fails must not take the server down
            logger.exception("failed answering a metrics request")
        finally:
            await trio.aclose_forcefully(stream)

    task_status.started(address)
    await trio.serve_listeners(handle, listeners[:1])


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD_BYTES:
            await stream.send_all(_response(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, b""))
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None
        buffer += chunk
    return bytes(buffer)
