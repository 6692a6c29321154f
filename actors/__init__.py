"""actors: the Trio actor runtime (event manager, actors, supervision, metrics)."""

from actors._actor import Actor, ActorStoppedError, AskTimeoutError
from actors._event_manager import (
    DEFAULT_QUEUE_TIME_RESET_AFTER,
    EventManager,
    EventPreemptedError,
    EventProcessor,
    QueuedEvent,
)
from actors._metrics import (
    KAFKA_PERCENTILES,
    Counter,
    ExponentiallyDecayingReservoir,
    Gauge,
    Histogram,
    Metric,
    MetricName,
    MetricsRegistry,
    Timer,
    metric_name,
    parse_metric_name,
    quantile,
)
from actors._nursery import open_background_nursery
from actors._supervisor import RestartIntensityError, Supervisor, open_supervisor

__all__ = [
    "DEFAULT_QUEUE_TIME_RESET_AFTER",
    "KAFKA_PERCENTILES",
    "Actor",
    "ActorStoppedError",
    "AskTimeoutError",
    "Counter",
    "EventManager",
    "EventPreemptedError",
    "EventProcessor",
    "ExponentiallyDecayingReservoir",
    "Gauge",
    "Histogram",
    "Metric",
    "MetricName",
    "MetricsRegistry",
    "QueuedEvent",
    "RestartIntensityError",
    "Supervisor",
    "Timer",
    "metric_name",
    "open_background_nursery",
    "open_supervisor",
    "parse_metric_name",
    "quantile",
]
