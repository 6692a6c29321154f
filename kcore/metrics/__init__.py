"""kcore's metrics: the broker's, under Kafka's JMX names (`actors.MetricsRegistry` holds
them), and their Prometheus exposition over the broker's HTTP listener
(`http.listener=http://host:port`, `GET /metrics`), named as the Prometheus JMX exporter's
Kafka rules name Kafka's.

- `BrokerTopicStats`, `IsrChangeMeters`: the counters the replica manager bumps;
  `RequestMetrics`: RequestsPerSec / TotalTimeMs / LocalTimeMs / RemoteTimeMs /
  ErrorsPerSec around the request handlers; `note_remote_time` and friends: what a
  request's handling tells its RequestMetrics.
- `register_broker_metrics`: the gauges read from a broker's state at each scrape;
  `FetchSessionMetrics`: the fetch-session cache's, which the Fetch handler attaches.
- `prometheus_series` / `prometheus_families`: the naming (pure); `prometheus_samples`:
  families' samples by name and labels, as a scrape parses them; `MetricsCollector`,
  `prometheus_registry`, `exposition`: prometheus-client's side.
- `HttpListener`, `metrics_route`: the Trio HTTP server.
- `console_route`: the web console at `/` (`render_console`, pure; `console_state`, what it
  gathers from the broker; `StateChangeLog`, the broker's recent state changes).
"""

from kcore.metrics._broker import (
    FetchSessionMetrics,
    IsrChangeMeters,
    ReplicaCounts,
    controller_counts,
    group_counts,
    register_broker_metrics,
    replica_counts,
)
from kcore.metrics._console import ConsoleState, render_console
from kcore.metrics._console_data import StateChangeLog, console_route, console_state
from kcore.metrics._http import (
    HttpError,
    HttpRequest,
    HttpResponse,
    encode_response,
    head_end,
    parse_request_head,
)
from kcore.metrics._http_listener import HttpListener, metrics_route
from kcore.metrics._log_flush import LOG_FLUSH_RATE_AND_TIME_MS, log_flush_timer
from kcore.metrics._prometheus import (
    QUANTILE_LABELS,
    MetricsCollector,
    PrometheusSeries,
    exposition,
    prometheus_families,
    prometheus_registry,
    prometheus_samples,
    prometheus_series,
)
from kcore.metrics._requests import (
    RequestMetrics,
    error_codes_in,
    note_error_codes,
    note_fetch_origin,
    note_remote_time,
    request_name,
)
from kcore.metrics._topic_stats import BrokerTopicStats

__all__ = [
    "LOG_FLUSH_RATE_AND_TIME_MS",
    "QUANTILE_LABELS",
    "BrokerTopicStats",
    "ConsoleState",
    "FetchSessionMetrics",
    "HttpError",
    "HttpListener",
    "HttpRequest",
    "HttpResponse",
    "IsrChangeMeters",
    "MetricsCollector",
    "PrometheusSeries",
    "ReplicaCounts",
    "RequestMetrics",
    "StateChangeLog",
    "console_route",
    "console_state",
    "controller_counts",
    "encode_response",
    "error_codes_in",
    "exposition",
    "group_counts",
    "head_end",
    "log_flush_timer",
    "metrics_route",
    "note_error_codes",
    "note_fetch_origin",
    "note_remote_time",
    "parse_request_head",
    "prometheus_families",
    "prometheus_registry",
    "prometheus_samples",
    "prometheus_series",
    "register_broker_metrics",
    "render_console",
    "replica_counts",
    "request_name",
]
