"""A small metrics registry: counters, gauges, histograms and timers, with Kafka's names.

Names follow Kafka's JMX names (`metric_name("kafka.controller", "ControllerEventManager",
"EventQueueTimeMs")`) so a Kafka operator finds what they know; kcore exports them to
Prometheus under the names the JMX exporter gives Kafka's (`kcore.metrics`).

Histograms are Kafka's (Yammer's biased histograms): exact count, sum, min and max since
the start, and percentiles from an exponentially decaying reservoir of 1028 samples, which
favours the last five minutes or so (`ExponentiallyDecayingReservoir`). Durations are
measured with an injected clock (Trio's by default), never the wall clock, so they are
virtual under `MockClock`; the reservoir's sampling draws on an injected `random.Random`,
so a seeded run reports the same percentiles every time.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import random
from collections.abc import Callable, Iterator, Mapping

import attrs
import trio

logger = logging.getLogger("actors.metrics")

# The percentiles Kafka's histograms publish (Yammer's 50th..999thPercentile attributes).
KAFKA_PERCENTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)

# Yammer's defaults (ExponentiallyDecayingSample as Kafka's `newHistogram(biased=true)`):
# 1028 samples give 99.9% confidence of a 5% margin of error on a normal distribution, and
# alpha 0.015 per second weights the last five minutes heavily.
RESERVOIR_SIZE = 1028
RESERVOIR_ALPHA = 0.015
RESERVOIR_RESCALE_AFTER = 3600.0  # seconds between rescales of the priorities


def metric_name(group: str, type_: str, name: str, **tags: str) -> str:
    """Kafka's metric naming: `group:type=T,name=N[,tag=v...]` (tags sorted)."""
    parts = [f"type={type_}", f"name={name}"]
    parts += [f"{key}={value}" for key, value in sorted(tags.items())]
    return f"{group}:{','.join(parts)}"


@attrs.frozen
class MetricName:
    """A parsed `metric_name`: Kafka's group (JMX domain), type, name and tags."""

    group: str
    type: str
    name: str
    tags: tuple[tuple[str, str], ...] = ()


def parse_metric_name(text: str) -> MetricName:
    """The parts of a `metric_name` string; ValueError for anything else."""
    group, sep, rest = text.partition(":")
    fields = {}
    tags = []
    for part in rest.split(",") if sep else ():
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"{text!r} is not a metric name (group:type=T,name=N,...)")
        if key in ("type", "name") and key not in fields:
            fields[key] = value
        else:
            tags.append((key, value))
    if not group or set(fields) != {"type", "name"}:
        raise ValueError(f"{text!r} is not a metric name (group:type=T,name=N,...)")
    return MetricName(group, fields["type"], fields["name"], tuple(tags))


def quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of ascending `ordered` values, interpolated as Yammer's Snapshot does
    (position q * (n + 1)); nan when empty."""
    if not 0 < q <= 1:
        raise ValueError(f"quantile {q} is not in (0, 1]")
    if not ordered:
        return math.nan
    position = q * (len(ordered) + 1)
    if position < 1:
        return ordered[0]
    if position >= len(ordered):
        return ordered[-1]
    lower = ordered[int(position) - 1]
    upper = ordered[int(position)]
    return lower + (position - math.floor(position)) * (upper - lower)


class ExponentiallyDecayingReservoir:
    """Forward-decaying priority sampling (Cormode et al.; Yammer's ExponentiallyDecaying
    Sample): each value gets the priority `exp(alpha * (t - start)) / u`, u uniform in
    (0, 1], and the `size` highest priorities are kept, so recent values are more likely
    to be in the sample. Sans-IO: the caller passes the time (seconds) and the generator.
    With a constant time it is a uniform sample of everything seen."""

    def __init__(
        self,
        rng: random.Random,
        *,
        size: int = RESERVOIR_SIZE,
        alpha: float = RESERVOIR_ALPHA,
        rescale_after: float = RESERVOIR_RESCALE_AFTER,
    ) -> None:
        if size < 1:
            raise ValueError(f"a reservoir holds at least one value, not {size}")
        self._rng = rng
        self.size = size
        self.alpha = alpha
        self._rescale_after = rescale_after
        # The landmark priorities are computed from; set by the first update after a clear.
        self._start: float | None = None
        self._next_rescale = math.inf
        # A min-heap of (priority, arrival, value): the root is the first to go.
        self._heap: list[tuple[float, int, float]] = []
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._heap)

    def update(self, value: float, now: float) -> None:
        if self._start is None:
            self._start = now
            self._next_rescale = now + self._rescale_after
        elif now >= self._next_rescale:
            self._rescale(now)
        # Within a rescale interval the exponent stays below alpha * rescale_after (54).
        priority = math.exp(self.alpha * (now - self._start)) / (1.0 - self._rng.random())
        self._arrivals += 1
        entry = (priority, self._arrivals, value)
        if len(self._heap) < self.size:
            heapq.heappush(self._heap, entry)
        elif priority > self._heap[0][0]:
            heapq.heapreplace(self._heap, entry)

    def _rescale(self, now: float) -> None:
        """Scales every priority to a new landmark (`now`), as Yammer does every hour so the
        exponent stays small. Very old priorities may underflow to 0: they go first."""
        assert self._start is not None
        factor = math.exp(-self.alpha * (now - self._start))
        self._heap = [(priority * factor, n, value) for priority, n, value in self._heap]
        heapq.heapify(self._heap)  # priorities that underflow to 0 tie and reorder
        self._start = now
        self._next_rescale = now + self._rescale_after

    def values(self) -> list[float]:
        """The sampled values, ascending."""
        return sorted(value for _, _, value in self._heap)

    def clear(self) -> None:
        self._heap = []
        self._start = None
        self._next_rescale = math.inf


def _no_clock() -> float:
    """A histogram made on its own decays nothing: its reservoir is a uniform sample."""
    return 0.0


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
    """Exact count, sum, min and max; percentiles from a decaying reservoir of samples
    (Kafka's biased histogram). `clock` (seconds) ages the samples; `rng` picks them."""

    name: str
    clock: Callable[[], float] = _no_clock
    rng: random.Random = attrs.field(factory=lambda: random.Random(0))
    count: int = attrs.field(default=0, init=False)
    total: float = attrs.field(default=0.0, init=False)
    min: float = attrs.field(default=math.nan, init=False)
    max: float = attrs.field(default=math.nan, init=False)
    _reservoir: ExponentiallyDecayingReservoir = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._reservoir = ExponentiallyDecayingReservoir(self.rng)

    def update(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = value if self.count == 1 else min(self.min, value)
        self.max = value if self.count == 1 else max(self.max, value)
        self._reservoir.update(value, self.clock())

    def clear(self) -> None:
        self.count = 0
        self.total = 0.0
        self.min = self.max = math.nan
        self._reservoir.clear()

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan

    def percentile(self, q: float) -> float:
        """The q-quantile (0 < q <= 1) of the sampled values; nan when empty."""
        return quantile(self._reservoir.values(), q)

    def percentiles(self, qs: tuple[float, ...] = KAFKA_PERCENTILES) -> dict[float, float]:
        """Several quantiles from one sort of the sample."""
        ordered = self._reservoir.values()
        return {q: quantile(ordered, q) for q in qs}

    def snapshot(self) -> dict[str, float]:
        ps = self.percentiles()
        return {
            "count": self.count,
            "sum": self.total,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "p50": ps[0.5],
            "p75": ps[0.75],
            "p95": ps[0.95],
            "p98": ps[0.98],
            "p99": ps[0.99],
            "p999": ps[0.999],
        }


@attrs.define
class Timer:
    """Kafka's RateAndTime: how often something ran (`count`) and how long it took, in ms."""

    name: str
    clock: Callable[[], float]
    rng: random.Random = attrs.field(factory=lambda: random.Random(0))
    histogram: Histogram = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.histogram = Histogram(self.name, self.clock, self.rng)

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
GaugeSet = Callable[[], Mapping[str, float]]


@attrs.define
class MetricsRegistry:
    """Get-or-create registry of named metrics. `clock` (seconds) times the timers and
    ages the histograms' samples; `rng` seeds each histogram's sampling.

    Besides single metrics, a gauge set (`gauge_set(key, read)`) publishes many gauges
    read together when someone looks (per-partition log offsets, counts over every
    partition): one pass over the state for all of them, and nothing to keep in step as
    partitions come and go."""

    clock: Callable[[], float] = trio.current_time
    rng: random.Random = attrs.field(factory=lambda: random.Random(0))
    _metrics: dict[str, Metric] = attrs.field(factory=dict, init=False)
    _gauge_sets: dict[str, GaugeSet] = attrs.field(factory=dict, init=False)

    def _get_or_create(self, name: str, kind: type, make: Callable[[], Metric]) -> Metric:
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = make()
        elif not isinstance(metric, kind):
            raise TypeError(f"metric {name} is a {type(metric).__name__}, not a {kind.__name__}")
        return metric

    def _new_rng(self) -> random.Random:
        return random.Random(self.rng.getrandbits(64))

    def counter(self, name: str) -> Counter:
        return self._get_or_create(name, Counter, lambda: Counter(name))

    def gauge(self, name: str, read: Callable[[], float]) -> Gauge:
        """Registers (or replaces the reader of) a gauge."""
        gauge = self._get_or_create(name, Gauge, lambda: Gauge(name, read))
        gauge.read = read
        return gauge

    def histogram(self, name: str) -> Histogram:
        return self._get_or_create(
            name, Histogram, lambda: Histogram(name, self.clock, self._new_rng())
        )

    def timer(self, name: str) -> Timer:
        return self._get_or_create(name, Timer, lambda: Timer(name, self.clock, self._new_rng()))

    def gauge_set(self, key: str, read: GaugeSet) -> None:
        """Registers (or replaces) `read`, which returns {metric name: value} each time the
        registry is read."""
        self._gauge_sets[key] = read

    def remove_gauge_set(self, key: str) -> None:
        self._gauge_sets.pop(key, None)

    def _read_gauge_sets(self) -> dict[str, float]:
        values: dict[str, float] = {}
        for key in sorted(self._gauge_sets):
            try:
                values.update(self._gauge_sets[key]())
            except Exception:  # one broken reader must not hide every other metric
                logger.exception("gauge set %s failed", key)
        return values

    def get(self, name: str) -> Metric | None:
        metric = self._metrics.get(name)
        if metric is None and self._gauge_sets:
            values = self._read_gauge_sets()
            if name in values:
                value = values[name]
                metric = Gauge(name, lambda: value)
        return metric

    def remove(self, name: str) -> None:
        self._metrics.pop(name, None)

    def collect(self) -> list[tuple[str, Metric]]:
        """Every metric, the gauge sets' read now, by name. A gauge whose reader fails is
        logged and left out."""
        found: dict[str, Metric] = {}
        for name, value in self._read_gauge_sets().items():
            found[name] = Gauge(name, lambda value=value: value)
        for name, metric in self._metrics.items():
            if isinstance(metric, Gauge):
                try:
                    value = metric.value
                except Exception:
                    logger.exception("gauge %s failed", name)
                    continue
                metric = Gauge(name, lambda value=value: value)
            found[name] = metric
        return sorted(found.items())

    def names(self) -> list[str]:
        return [name for name, _ in self.collect()]

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {name: metric.snapshot() for name, metric in self.collect()}
