import math
import random

import pytest

from actors import (
    ExponentiallyDecayingReservoir,
    Histogram,
    MetricName,
    MetricsRegistry,
    metric_name,
    parse_metric_name,
    quantile,
)


def test_metric_name_is_kafkas():
    assert (
        metric_name("kafka.controller", "ControllerStats", "LeaderElectionRateAndTimeMs")
        == "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs"
    )
    assert (
        metric_name("g", "T", "N", topic="t", partition="0")
        == "g:type=T,name=N,partition=0,topic=t"
    )


def test_a_metric_name_parses_back_into_its_parts():
    name = metric_name("kafka.network", "RequestMetrics", "ErrorsPerSec", request="Fetch",
                       error="NONE")  # fmt: skip
    assert parse_metric_name(name) == MetricName(
        "kafka.network", "RequestMetrics", "ErrorsPerSec", (("error", "NONE"), ("request", "Fetch"))
    )
    for bad in ("x", "g:name=N", "g:type=T", ":type=T,name=N", "g:type=T,name=N,tag"):
        with pytest.raises(ValueError, match="is not a metric name"):
            parse_metric_name(bad)


def test_histogram_counts_extremes_and_percentiles():
    histogram = Histogram("h")
    assert math.isnan(histogram.percentile(0.5))
    for value in [1, 1, 1, 1, 1, 1, 1, 1, 1, 400]:
        histogram.update(value)
    assert (histogram.count, histogram.min, histogram.max) == (10, 1, 400)
    assert histogram.mean == pytest.approx(40.9)
    assert histogram.percentile(0.5) == 1
    assert histogram.percentile(0.99) == 400
    histogram.clear()
    assert histogram.count == 0 and math.isnan(histogram.max)
    assert math.isnan(histogram.percentile(0.5))


def test_percentiles_are_the_values_not_bucket_bounds():
    # The case: a bucketed histogram said p50 = 0.5 beside a mean of 1.28. Up to
    # the reservoir's size every value is kept, so a percentile is a value seen (or
    # Yammer's interpolation between two neighbours).
    histogram = Histogram("h")
    values = [0.3, 0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 2.1, 2.2, 1.0]
    for value in values:
        histogram.update(value)
    assert histogram.mean == pytest.approx(1.28)
    assert histogram.percentile(0.5) == pytest.approx(1.2)  # between 1.1 and 1.3
    assert histogram.percentiles()[0.999] == 2.2
    snapshot = histogram.snapshot()
    assert snapshot["count"] == 10 and snapshot["sum"] == pytest.approx(12.8)
    assert snapshot["p50"] == pytest.approx(1.2)


def test_quantile_interpolates_as_yammer_does():
    ordered = [float(v) for v in range(1, 101)]  # 1..100
    assert quantile(ordered, 0.5) == pytest.approx(50.5)
    assert quantile(ordered, 0.99) == pytest.approx(99.99)
    assert quantile(ordered, 0.999) == 100.0
    assert quantile([7.0], 0.5) == 7.0
    assert math.isnan(quantile([], 0.5))
    with pytest.raises(ValueError, match="not in"):
        quantile(ordered, 0)


def test_a_reservoir_keeps_a_bounded_sample_and_its_percentiles_stay_close():
    reservoir = ExponentiallyDecayingReservoir(random.Random(1), size=1028)
    values = list(range(100_000))
    random.Random(2).shuffle(values)
    for value in values:
        reservoir.update(float(value), now=0.0)  # no time passes: a uniform sample
    sample = reservoir.values()
    assert len(sample) == 1028
    assert quantile(sample, 0.5) == pytest.approx(50_000, rel=0.1)
    assert quantile(sample, 0.99) == pytest.approx(99_000, rel=0.02)


def test_a_reservoir_favours_recent_values():
    # Kafka's histograms describe the last few minutes: after ten minutes of 1000s, a
    # minute of 1s is most of the sample, though it is a tenth of the values.
    reservoir = ExponentiallyDecayingReservoir(random.Random(3), size=100)
    now = 0.0
    for _ in range(6000):
        now += 0.1
        reservoir.update(1000.0, now)
    for _ in range(600):
        now += 0.1
        reservoir.update(1.0, now)
    assert quantile(reservoir.values(), 0.5) == 1.0


def test_a_reservoir_rescales_without_losing_its_sample():
    reservoir = ExponentiallyDecayingReservoir(random.Random(4), size=10, rescale_after=60)
    for second in range(10):
        reservoir.update(float(second), now=float(second))
    # Hours later the priorities are rescaled to a new landmark; the newest values win.
    for n in range(10):
        reservoir.update(100.0 + n, now=10_000.0 + n)
    assert reservoir.values() == [100.0 + n for n in range(10)]


def test_the_same_seed_gives_the_same_percentiles():
    def p99(seed):
        registry = MetricsRegistry(clock=lambda: 0.0, rng=random.Random(seed))
        histogram = registry.histogram("h")
        for value in range(5000):
            histogram.update(float(value % 977))
        return histogram.percentile(0.99)

    assert p99(7) == p99(7)


def test_timer_counts_blocks_that_raise():
    now = [0.0]
    registry = MetricsRegistry(clock=lambda: now[0])
    timer = registry.timer("t")
    with pytest.raises(KeyError), timer.time():
        now[0] = 0.25
        raise KeyError("x")
    assert timer.count == 1 and timer.histogram.max == pytest.approx(250)


def test_registry_refuses_a_name_of_another_kind():
    registry = MetricsRegistry()
    registry.counter("x").inc(3)
    assert registry.counter("x").count == 3
    with pytest.raises(TypeError, match="x is a Counter, not a Histogram"):
        registry.histogram("x")
    registry.gauge("g", lambda: 7)
    assert registry.snapshot() == {"g": {"value": 7}, "x": {"count": 3}}


def test_gauge_sets_are_read_when_the_registry_is(caplog):
    registry = MetricsRegistry()
    partitions = {"t-0": 5}
    registry.gauge_set("logs", lambda: {f"log:{tp}": end for tp, end in partitions.items()})
    assert registry.snapshot() == {"log:t-0": {"value": 5}}
    partitions["t-1"] = 9  # a partition arrives: nothing to register
    assert registry.get("log:t-1").value == 9
    assert registry.names() == ["log:t-0", "log:t-1"]

    def broken():
        raise RuntimeError("boom")

    registry.gauge_set("broken", broken)
    registry.gauge("bad", broken)
    assert registry.names() == ["log:t-0", "log:t-1"]  # the rest still reads
    assert "gauge set broken failed" in caplog.text and "gauge bad failed" in caplog.text
    registry.remove_gauge_set("logs")
    assert registry.get("log:t-0") is None
