"""A small metrics registry: counters, gauges, histograms with fixed buckets, and timers.

Later packages publish into it; nothing exports it yet. Names follow Kafka's JMX names
(`metric_name("kafka.controller", "ControllerEventManager", "EventQueueTimeMs")`) so a Kafka
operator finds what they know. Durations are measured with an injected clock (Trio's by
default), never the wall clock, so they are virtual under `MockClock`.
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Callable, Iterator

import attrs
import trio

# Upper bounds in milliseconds; the last bucket catches everything above.
DEFAULT_MS_BUCKETS: tuple[float, ...] = (
    0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, math.inf,
)  # fmt: skip


def metric_name(group: str, type_: str, name: str, **tags: str) -> str:
    """Kafka's metric naming: `group:type=T,name=N[,tag=v...]` (tags sorted)."""
    parts = [f"type={type_}", f"name={name}"]
    parts += [f"{key}={value}" for key, value in sorted(tags.items())]
    return f"{group}:{','.join(parts)}"


@attrs.define
class Counter:
    name: str
    count: int = 0

    def inc(self, amount: int = 1) -> None:
        self.count += amount

    def snapshot(self) -> dict[str, float]:
        return {"count": self.count}


@attrs.define
class Gauge:
    name: str
    read: Callable[[], float]

    @property
    def value(self) -> float:
        return self.read()

    def snapshot(self) -> dict[str, float]:
        return {"value": self.value}


@attrs.define
class Histogram:
    """Exact count, sum, min and max; bucketed distribution for percentiles."""

    name: str
    buckets: tuple[float, ...] = DEFAULT_MS_BUCKETS
    count: int = 0
    total: float = 0.0
    min: float = math.nan
    max: float = math.nan
    bucket_counts: list[int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if list(self.buckets) != sorted(self.buckets) or self.buckets[-1] != math.inf:
            raise ValueError(f"histogram {self.name}: buckets must be sorted and end with inf")
        self.bucket_counts = [0] * len(self.buckets)

    def update(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = value if self.count == 1 else min(self.min, value)
        self.max = value if self.count == 1 else max(self.max, value)
        self.bucket_counts[bisect.bisect_left(self.buckets, value)] += 1

    def clear(self) -> None:
        self.count = 0
        self.total = 0.0
        self.min = self.max = math.nan
        self.bucket_counts = [0] * len(self.buckets)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan

    def percentile(self, q: float) -> float:
        """The upper bound of the bucket holding the q-quantile (0 < q <= 1), capped by the
        exact max; nan when empty."""
        if not 0 < q <= 1:
            raise ValueError(f"percentile {q} is not in (0, 1]")
        if not self.count:
            return math.nan
        rank = math.ceil(q * self.count)
        seen = 0
        for bound, n in zip(self.buckets, self.bucket_counts, strict=True):
            seen += n
            if seen >= rank:
                return min(bound, self.max)
        return self.max  # pragma: no cover (the inf bucket always reaches rank)

    def snapshot(self) -> dict[str, float]:
        return {
            "count": self.count,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "p50": self.percentile(0.5) if self.count else math.nan,
            "p99": self.percentile(0.99) if self.count else math.nan,
        }


@attrs.define
class Timer:
    """Kafka's RateAndTime: how often something ran (`count`) and how long it took, in ms."""

    name: str
    clock: Callable[[], float]
    histogram: Histogram = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.histogram = Histogram(self.name)

    @property
    def count(self) -> int:
        return self.histogram.count

    def update_ms(self, duration_ms: float) -> None:
        self.histogram.update(duration_ms)

    @contextlib.contextmanager
    def time(self) -> Iterator[None]:
        """Times the block; a block that raises is still counted (Kafka's timers do)."""
        start = self.clock()
        try:
            yield
        finally:
            self.histogram.update((self.clock() - start) * 1000.0)

    def snapshot(self) -> dict[str, float]:
        return self.histogram.snapshot()


Metric = Counter | Gauge | Histogram | Timer


@attrs.define
class MetricsRegistry:
    """Get-or-create registry of named metrics. `clock` (seconds) times the timers."""

    clock: Callable[[], float] = trio.current_time
    _metrics: dict[str, Metric] = attrs.field(factory=dict, init=False)

    def _get_or_create(self, name: str, kind: type, make: Callable[[], Metric]) -> Metric:
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = make()
        elif not isinstance(metric, kind):
            raise TypeError(f"metric {name} is a {type(metric).__name__}, not a {kind.__name__}")
        return metric

    def counter(self, name: str) -> Counter:
        return self._get_or_create(name, Counter, lambda: Counter(name))

    def gauge(self, name: str, read: Callable[[], float]) -> Gauge:
        """Registers (or replaces the reader of) a gauge."""
        gauge = self._get_or_create(name, Gauge, lambda: Gauge(name, read))
        gauge.read = read
        return gauge

    def histogram(self, name: str, buckets: tuple[float, ...] = DEFAULT_MS_BUCKETS) -> Histogram:
        return self._get_or_create(name, Histogram, lambda: Histogram(name, buckets))

    def timer(self, name: str) -> Timer:
        return self._get_or_create(name, Timer, lambda: Timer(name, self.clock))

    def get(self, name: str) -> Metric | None:
        return self._metrics.get(name)

    def remove(self, name: str) -> None:
        self._metrics.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._metrics)

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {name: self._metrics[name].snapshot() for name in self.names()}
