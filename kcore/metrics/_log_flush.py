"""Kafka's LogFlushStats (`kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs`): a timer
over every log segment's flush, its fsyncs (a segment rolled, `flush.messages` reached, a
cleaned segment swapped in, a log closed). One per broker, shared by all its logs, as Kafka's
is one per JVM; the JMX exporter's rules make it the summary
`kafka_log_logflushstats_logflushrateandtimems` (quantiles, `_count`: the flushes)."""

from __future__ import annotations

from actors import MetricsRegistry, Timer, metric_name

LOG_FLUSH_RATE_AND_TIME_MS = metric_name("kafka.log", "LogFlushStats", "LogFlushRateAndTimeMs")


def log_flush_timer(registry: MetricsRegistry) -> Timer:
    """The broker's LogFlushRateAndTimeMs, for its log manager to hand to each log."""
    return registry.timer(LOG_FLUSH_RATE_AND_TIME_MS)
