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
    DEFAULT_MS_BUCKETS,
    Counter,
    Gauge,
    Histogram,
    MetricsRegistry,
    Timer,
    metric_name,
)
from actors._nursery import open_background_nursery
from actors._supervisor import RestartIntensityError, Supervisor, open_supervisor

__all__ = [
    "DEFAULT_MS_BUCKETS",
    "DEFAULT_QUEUE_TIME_RESET_AFTER",
    "Actor",
    "ActorStoppedError",
    "AskTimeoutError",
    "Counter",
    "EventManager",
    "EventPreemptedError",
    "EventProcessor",
    "Gauge",
    "Histogram",
    "MetricsRegistry",
    "QueuedEvent",
    "RestartIntensityError",
    "Supervisor",
    "Timer",
    "metric_name",
    "open_background_nursery",
    "open_supervisor",
]
