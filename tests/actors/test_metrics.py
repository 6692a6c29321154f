import math

import pytest

from actors import Histogram, MetricsRegistry, metric_name


def test_metric_name_is_kafkas():
    assert (
        metric_name("kafka.controller", "ControllerStats", "LeaderElectionRateAndTimeMs")
        == "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs"
    )
    assert (
        metric_name("g", "T", "N", topic="t", partition="0")
        == "g:type=T,name=N,partition=0,topic=t"
    )


def test_histogram_counts_extremes_and_percentiles():
    histogram = Histogram("h")
    assert math.isnan(histogram.percentile(0.5))
    for value in [1, 1, 1, 1, 1, 1, 1, 1, 1, 400]:
        histogram.update(value)
    assert (histogram.count, histogram.min, histogram.max) == (10, 1, 400)
    assert histogram.mean == pytest.approx(40.9)
    assert histogram.percentile(0.5) == 1
    assert histogram.percentile(0.99) == 400  # capped by the exact max, not the bucket's 500
    histogram.clear()
    assert histogram.count == 0 and math.isnan(histogram.max)


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
