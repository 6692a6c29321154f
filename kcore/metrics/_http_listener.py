"""The broker's HTTP listener (`http.listener=http://host:port`): a small HTTP/1.1 server on
Trio's TCP streams, one task per connection, no threads. It answers GET / HEAD by path from
its `routes` (`/metrics`: Prometheus' text format) and closes each connection after its
response; what it parses and writes is `kcore.metrics._http`'s (sans-IO).

It binds real TCP whatever network the broker runs on: a scraper is a real process.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus

import attrs
import trio
from prometheus_client import CollectorRegistry

from actors import MetricsRegistry
from kcore.metrics._http import (
    HttpError,
    HttpRequest,
    HttpResponse,
    encode_response,
    error_response,
    head_end,
    parse_request_head,
)
from kcore.metrics._prometheus import CONTENT_TYPE, exposition, prometheus_registry

logger = logging.getLogger("kcore.metrics.http")

Route = Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]

# A client gets this long to send its request and read the response (a stalled one must not
# hold a connection slot for ever).
CONNECTION_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 64  # served at once; more wait to be accepted
ACCEPT_RETRY_S = 0.1


def metrics_route(registry: MetricsRegistry) -> Route:
    """GET /metrics: the registry in Prometheus' text format, read now."""
    exported: CollectorRegistry = prometheus_registry(registry)

    def metrics(request: HttpRequest) -> HttpResponse:
        return HttpResponse(HTTPStatus.OK, CONTENT_TYPE, exposition(exported))

    return metrics


@attrs.define(eq=False)
class HttpListener:
    routes: Mapping[str, Route]
    name: str = "http"
    # A semaphore, not a CapacityLimiter: the accepting task takes a slot, the
    # connection's task gives it back.
    _slots: trio.Semaphore = attrs.field(
        factory=lambda: trio.Semaphore(MAX_CONNECTIONS), init=False
    )

    async def serve(
        self,
        host: str,
        port: int,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listens on (host, port) (an empty host: every interface; port 0: one the OS
        picks) and serves until cancelled; `task_status.started((host, port))` as bound."""
        listeners = await trio.open_tcp_listeners(port, host=host or "0.0.0.0")
        # A name with several addresses (localhost: ::1 and 127.0.0.1) and port 0 would get
        # one port per address; a listener has one address, the first.
        for extra in listeners[1:]:
            await extra.aclose()
        listener = listeners[0]
        bound = listener.socket.getsockname()
        address = (str(bound[0]), int(bound[1]))
        logger.info("%s listening on http://%s:%d", self.name, *address)
        task_status.started(address)
        async with listener, trio.open_nursery() as nursery:
            while True:
                await self._slots.acquire()
                try:
                    stream = await listener.accept()
                except OSError as error:  # out of file descriptors, say: as serve_listeners
                    self._slots.release()
                    logger.error("%s: accept failed (%r); retrying in a moment", self.name, error)
                    await trio.sleep(ACCEPT_RETRY_S)
                    continue
                except BaseException:
                    self._slots.release()
                    raise
                nursery.start_soon(self._serve_connection, stream)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(CONNECTION_TIMEOUT_S):
                await self._answer(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            logger.debug("%s: connection lost: %r", self.name, error)
        except Exception:
            logger.exception("%s: failed serving a connection", self.name)
        finally:
            self._slots.release()
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _answer(self, stream: trio.SocketStream) -> None:
        head_only = False
        try:
            request = await _read_request(stream)
            head_only = request.method == "HEAD"
            response = await self._route(request)
        except HttpError as error:
            response = error_response(error)
        await stream.send_all(encode_response(response, head_only=head_only))

    async def _route(self, request: HttpRequest) -> HttpResponse:
        route = self.routes.get(request.path)
        if route is None:
            known = ", ".join(sorted(self.routes))
            raise HttpError(HTTPStatus.NOT_FOUND, f"no such path {request.path} (try {known})")
        try:
            response = route(request)
            if inspect.isawaitable(response):
                response = await response
        except HttpError:
            raise
        except Exception:
            logger.exception("%s: %s %s failed", self.name, request.method, request.path)
            raise HttpError(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error") from None
        return response


async def _read_request(stream: trio.SocketStream) -> HttpRequest:
    buffer = bytearray()
    while True:
        end = head_end(buffer)
        if end is not None:
            return parse_request_head(bytes(buffer[:end]))
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise HttpError(HTTPStatus.BAD_REQUEST, "connection closed before a request")
        buffer += chunk
