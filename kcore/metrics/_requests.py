"""Kafka's RequestMetrics per request type (`kafka.network:type=RequestMetrics,...`), taken
around the broker's request handlers, for both of its protocols:

- `RequestsPerSec` (tags request, version): requests handled;
- `RequestQueueTimeMs`: from the request being read off its connection to its handler's
  start (the transport's `request.timing`: a connection's requests wait for one of its
  workers, or, on an ordered server, for the ones before them);
- `RemoteTimeMs`: the part of the handling spent waiting in a purgatory (an acks=all
  produce for its followers, a fetch's long poll); `LocalTimeMs`: the rest of it;
- `ResponseSendTimeMs`: from the handler's answer to the response written to the socket
  (kcore has no response queue between them, so this is Kafka's ResponseQueueTimeMs and
  ResponseSendTimeMs together: responses leave in arrival order, so it includes waiting
  for the connection's earlier answers). Recorded once the write is done: its count trails
  the others by the responses still being written, and a connection lost first leaves none;
- `TotalTimeMs`: RequestQueueTimeMs + LocalTimeMs + RemoteTimeMs, recorded with the answer
  (so a client that has its answer finds it counted); Kafka's also adds the send time;
- `ErrorsPerSec` (tags request, error): every error code in each response, NONE included,
  as Kafka's `errorCounts` (a Produce to three partitions adds three).

A Fetch counts as `Fetch` and as `FetchConsumer` or `FetchFollower`, as in Kafka.

What only the code deep inside a request knows (its purgatory wait, a fetch's origin, the
error codes of a kcore-protocol answer, which is a bare msgpack list by then) reaches the
handler's wrapper through a context variable: `note_remote_time`, `note_fetch_origin`,
`note_error_codes` do nothing outside an instrumented request.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any

import attrs

import transport
from actors import Counter as CountMetric
from actors import Histogram, MetricsRegistry, metric_name
from kcore.errors import ERROR_NAMES, UnknownServerError

Handler = Callable[[transport.Request], Awaitable[Any]]

_GROUP = "kafka.network"
_TYPE = "RequestMetrics"
_FETCH = 1  # ApiKey.FETCH


@attrs.define
class RequestRecord:
    """What the handling of one request noted about itself."""

    remote_seconds: float = 0.0
    from_follower: bool | None = None  # a Fetch's origin, once known
    error_codes: Counter[int] | None = None
    # Set once the request is answered. A task started while it was handled (a group
    # coordinator's offsets write) inherits the record and may note into it later: ignored.
    answered: bool = False


_current: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar(
    "kcore_request_record", default=None
)


def _handled() -> RequestRecord | None:
    record = _current.get()
    return None if record is None or record.answered else record


def note_remote_time(seconds: float) -> None:
    """The request being handled waited this long in a purgatory."""
    record = _handled()
    if record is not None:
        record.remote_seconds += seconds


def note_fetch_origin(from_follower: bool) -> None:
    """The Fetch being handled came from a follower (True) or a consumer."""
    record = _handled()
    if record is not None:
        record.from_follower = from_follower


def note_error_codes(codes: Iterable[int]) -> None:
    """The answer of the request being handled carries these error codes (0 included)."""
    record = _handled()
    if record is not None:
        if record.error_codes is None:
            record.error_codes = Counter()
        record.error_codes.update(codes)


def request_name(api_key: int) -> str:
    """Kafka's name for a request type (ApiKeys' `name`: `Produce`, `OffsetForLeaderEpoch`):
    kcore's ApiKey's, else the kio package's schema index (the group APIs; kio has Kafka 4's
    APIs, without the ZooKeeper-era LeaderAndIsr and its kin); the number if neither knows."""
    from kio.schema import index

    from kcore.protocol.api_keys import ApiKey

    try:
        snake = ApiKey(api_key).name.lower()
    except ValueError:
        snake = index.api_key_map.get(api_key)
    if snake is None:
        return str(api_key)
    return "".join(part.capitalize() for part in snake.split("_"))


def error_codes_in(body: object) -> Counter[int]:
    """Every `error_code` in a Kafka-protocol response body (the codec's dicts), at any
    depth: Kafka's `errorCounts`. NONE once for a body without any (acks=0's None too)."""
    found: Counter[int] = Counter()
    pending = [body]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "error_code" and isinstance(value, int):
                    found[value] += 1
                elif isinstance(value, dict | list):
                    pending.append(value)
        elif isinstance(item, list):
            pending.extend(value for value in item if isinstance(value, dict | list))
    return found or Counter({0: 1})


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"UNKNOWN_{code}")


# Each request type's histograms, in _Timings' order.
_TIMED = ("TotalTimeMs", "LocalTimeMs", "RemoteTimeMs", "RequestQueueTimeMs", "ResponseSendTimeMs")


@attrs.define
class _Timings:
    total: Histogram
    local: Histogram
    remote: Histogram
    queue: Histogram
    send: Histogram


@attrs.define(eq=False)
class RequestMetrics:
    """The broker's RequestMetrics: `instrument` wraps a protocol's handlers."""

    registry: MetricsRegistry
    clock: Callable[[], float] = attrs.field(
        default=attrs.Factory(lambda self: self.registry.clock, takes_self=True)
    )
    # Metric objects by request name (and version / error): no name is formatted per request.
    _requests: dict[tuple[str, int], CountMetric] = attrs.field(factory=dict, init=False)
    _timings: dict[str, _Timings] = attrs.field(factory=dict, init=False)
    _errors: dict[tuple[str, int], CountMetric] = attrs.field(factory=dict, init=False)
    _names: dict[int, str] = attrs.field(factory=dict, init=False)

    def instrument(
        self, handlers: Mapping[int, Handler], *, kafka_protocol: bool
    ) -> dict[int, Handler]:
        """`handlers` measured. `kafka_protocol`: the answers are the Kafka codec's dicts,
        whose error codes are counted from the body itself; a kcore-protocol answer's are
        the ones its handling noted (`note_error_codes`), else NONE."""
        return {
            api_key: self._instrumented(api_key, handler, kafka_protocol)
            for api_key, handler in handlers.items()
        }

    def _instrumented(self, api_key: int, handler: Handler, kafka_protocol: bool) -> Handler:
        async def instrumented(request: transport.Request) -> Any:
            record = RequestRecord()
            token = _current.set(record)
            start = self.clock()
            try:
                body = await handler(request)
            except transport.RpcError as error:
                self._record(request, start, record, {error.error_code: 1})
                raise
            except Exception:
                self._record(request, start, record, {_UNKNOWN: 1})
                raise
            finally:
                record.answered = True
                _current.reset(token)
            if kafka_protocol:
                codes: Mapping[int, int] = error_codes_in(body)
            else:
                codes = record.error_codes or {0: 1}
            self._record(request, start, record, codes)
            return body

        return instrumented

    def _record(
        self,
        request: transport.Request,
        start: float,
        record: RequestRecord,
        codes: Mapping[int, int],
    ) -> None:
        """Records the answered request, and asks the transport to say when its response
        is written (ResponseSendTimeMs)."""
        api_key, version = request.api_key, request.api_version
        handling_ms = max(0.0, (self.clock() - start) * 1000)
        remote_ms = min(handling_ms, record.remote_seconds * 1000)
        queued = None if request.timing is None else request.timing.queued_seconds
        queue_ms = max(0.0, queued * 1000) if queued is not None else None
        names = [self._name(api_key)]
        if api_key == _FETCH and record.from_follower is not None:
            names.insert(0, "FetchFollower" if record.from_follower else "FetchConsumer")
        for name in names:
            self._requests_counter(name, version).inc()
            timings = self._timings_of(name)
            timings.total.update(handling_ms + (queue_ms or 0.0))
            timings.remote.update(remote_ms)
            timings.local.update(handling_ms - remote_ms)
            if queue_ms is not None:  # a request that came through a server
                timings.queue.update(queue_ms)
            for code, count in codes.items():
                self._errors_counter(name, code).inc(count)
        if request.timing is not None:
            request.timing.on_sent = partial(self._record_send, names)

    def _record_send(self, names: list[str], timing: transport.RequestTiming) -> None:
        """The transport wrote the response (`RequestTiming.on_sent`)."""
        seconds = timing.sending_seconds
        if seconds is None:
            return
        for name in names:
            self._timings_of(name).send.update(max(0.0, seconds * 1000))

    def _name(self, api_key: int) -> str:
        name = self._names.get(api_key)
        if name is None:
            name = self._names[api_key] = request_name(api_key)
        return name

    def _requests_counter(self, name: str, version: int) -> CountMetric:
        counter = self._requests.get((name, version))
        if counter is None:
            counter = self._requests[(name, version)] = self.registry.counter(
                metric_name(_GROUP, _TYPE, "RequestsPerSec", request=name, version=str(version))
            )
        return counter

    def _timings_of(self, name: str) -> _Timings:
        timings = self._timings.get(name)
        if timings is None:
            timings = self._timings[name] = _Timings(
                *(
                    self.registry.histogram(metric_name(_GROUP, _TYPE, metric, request=name))
                    for metric in _TIMED
                )
            )
        return timings

    def _errors_counter(self, name: str, code: int) -> CountMetric:
        counter = self._errors.get((name, code))
        if counter is None:
            counter = self._errors[(name, code)] = self.registry.counter(
                metric_name(_GROUP, _TYPE, "ErrorsPerSec", request=name, error=error_name(code))
            )
        return counter


_UNKNOWN = UnknownServerError.code
