"""kcore's metrics in Prometheus' text format, under the names Kafka's metrics get from the
Prometheus JMX exporter with its standard Kafka rules (`example_configs/kafka-2_0_0.yml`,
`lowercaseOutputName: true`), so existing Kafka dashboards and alerts work unchanged:

- a meter (`...PerSec`, a counter here) -> a counter `kafka_<domain>_<type>_<name minus
  PerSec>_total`: `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t` is
  `kafka_server_brokertopicmetrics_messagesin_total{topic="t"}`;
- a gauge -> `kafka_<domain>_<type>_<name>`:
  `kafka_server_replicamanager_underreplicatedpartitions`;
- a histogram or timer -> a summary `kafka_<domain>_<type>_<name>` with Kafka's
  percentiles as quantiles 0.50 .. 0.999 (the exporter's `0.$N` of `<N>thPercentile`) and
  `_count`, plus the `_sum` the exporter's rules lack;
- any other counter -> `..._count`, as the exporter names a Yammer counter's Count.

Tags become labels (names made safe, not lowercased: `clientId` stays). The mapping is a
pure function (`prometheus_series`); `MetricsCollector` applies it to a `MetricsRegistry`
each time Prometheus scrapes, through prometheus-client's custom-collector API.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Iterator

import attrs
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric as PrometheusFamily

from actors import (
    KAFKA_PERCENTILES,
    Counter,
    Gauge,
    Histogram,
    Metric,
    MetricName,
    MetricsRegistry,
    Timer,
    parse_metric_name,
)

logger = logging.getLogger("kcore.metrics.prometheus")

# Yammer's percentile attributes and the quantile label the exporter's rules make of them.
QUANTILE_LABELS: dict[float, str] = {
    0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99", 0.999: "0.999",
}  # fmt: skip
assert set(QUANTILE_LABELS) == set(KAFKA_PERCENTILES)

_PER_SEC = re.compile(r"^(.+)PerSec\w*$")  # the exporter's `name=(.+)PerSec\w*`
_UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9:_]")
_UNSAFE_LABEL = re.compile(r"[^a-zA-Z0-9_]")
_REPEATED_UNDERSCORES = re.compile(r"__+")

# Prometheus' text format 0.0.4, which every Prometheus reads: what generate_latest writes
# for names like these (prometheus-client 0.22+ labels it 1.0.0 by default, which a
# Prometheus before 3.0 does not know).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

COUNTER = "counter"
GAUGE = "gauge"
SUMMARY = "summary"


@attrs.frozen
class PrometheusSeries:
    """Where one kcore metric goes: its family's name and type, its labels, and the HELP
    text (the Kafka MBean name without its tags)."""

    family: str
    type: str  # COUNTER, GAUGE or SUMMARY
    labels: tuple[tuple[str, str], ...]
    help: str


def _safe(name: str, unsafe: re.Pattern[str]) -> str:
    """The JMX exporter's safeName: unsafe characters to `_`, runs of `_` collapsed."""
    return _REPEATED_UNDERSCORES.sub("_", unsafe.sub("_", name))


def prometheus_series(name: MetricName, kind: type) -> PrometheusSeries:
    """Where a metric of `kind` (Counter, Gauge, Histogram or Timer) named `name` goes."""
    base = name.name
    if kind is Counter:
        per_sec = _PER_SEC.match(base)
        if per_sec is not None:
            base, family_type = per_sec.group(1), COUNTER
        else:
            base, family_type = f"{base}_count", GAUGE
    elif kind is Gauge:
        family_type = GAUGE
    elif kind in (Histogram, Timer):
        family_type = SUMMARY
    else:
        raise TypeError(f"{name} is a {kind.__name__}, which has no Prometheus form")
    domain = name.group.replace(".", "_")
    family = _safe(f"{domain}_{name.type}_{base}", _UNSAFE_NAME).lower()
    labels = []
    for key, value in name.tags:
        label = _safe(key, _UNSAFE_LABEL)
        if label[:1].isdigit():
            label = f"_{label}"
        labels.append((label, value))
    return PrometheusSeries(
        family, family_type, tuple(labels), f"{name.group}:type={name.type},name={name.name}"
    )


def prometheus_families(
    metrics: Iterable[tuple[str, Metric]], *, summaries: bool = True
) -> list[PrometheusFamily]:
    """The Prometheus families of a registry's metrics (`MetricsRegistry.collect()`), by
    family name. A metric whose name is not Kafka's form is left out, as is one whose
    family already holds another type (both logged). Without `summaries`, histograms and
    timers are left out too (for a reader that wants only counters and gauges: each
    summary's percentiles cost a sort of its samples)."""
    families: dict[str, PrometheusFamily] = {}
    for text, metric in metrics:
        if not summaries and isinstance(metric, Histogram | Timer):
            continue
        try:
            series = prometheus_series(parse_metric_name(text), type(metric))
        except ValueError:
            logger.debug("metric %r has no Kafka name; not exported", text)
            continue
        family = families.get(series.family)
        if family is None:
            family = families[series.family] = PrometheusFamily(
                series.family, series.help, series.type
            )
        elif family.type != series.type:
            logger.warning("metric %s would be a %s in the %s %s; not exported",
                           text, series.type, family.type, series.family)  # fmt: skip
            continue
        _add_samples(family, series, metric)
    return [families[name] for name in sorted(families)]


def prometheus_samples(
    families: Iterable[PrometheusFamily],
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `families` by (its name, its labels sorted): the same for
    `prometheus_families` (a registry read now) as for a scrape of /metrics parsed by
    `prometheus_client.parser.text_string_to_metric_families`."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in families
        for sample in family.samples
    }


def _add_samples(family: PrometheusFamily, series: PrometheusSeries, metric: Metric) -> None:
    labels = dict(series.labels)
    if isinstance(metric, Counter):
        suffix = "_total" if series.type == COUNTER else ""
        family.add_sample(series.family + suffix, labels, float(metric.count))
    elif isinstance(metric, Gauge):
        family.add_sample(series.family, labels, _number(metric.value))
    else:
        histogram = metric.histogram if isinstance(metric, Timer) else metric
        for q, value in histogram.percentiles().items():
            family.add_sample(series.family, {**labels, "quantile": QUANTILE_LABELS[q]}, value)
        family.add_sample(series.family + "_count", labels, float(histogram.count))
        family.add_sample(series.family + "_sum", labels, float(histogram.total))


def _number(value: object) -> float:
    """A gauge's value as Prometheus takes it (booleans as 0 / 1; anything else nan)."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


class MetricsCollector:
    """prometheus-client's custom collector over a kcore `MetricsRegistry`: every scrape
    reads the registry afresh (gauges read the broker's state then)."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[PrometheusFamily]:
        yield from prometheus_families(self.registry.collect())

    def describe(self) -> list[PrometheusFamily]:
        return []  # nothing to check at registration: families come and go with topics


def prometheus_registry(registry: MetricsRegistry) -> CollectorRegistry:
    """A prometheus-client registry exporting `registry` (and nothing of this process's
    default registry: a broker's metrics only)."""
    exported = CollectorRegistry(auto_describe=False)
    exported.register(MetricsCollector(registry))  # type: ignore[arg-type]
    return exported


def exposition(exported: CollectorRegistry) -> bytes:
    """Prometheus' text format (0.0.4) of everything `exported` collects now."""
    return generate_latest(exported)
