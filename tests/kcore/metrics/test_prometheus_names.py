"""kcore's metric names as Prometheus shows them: the names the JMX exporter's standard Kafka
rules (lowercased) give Kafka's MBeans, so existing dashboards find them."""

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from actors import Counter, Gauge, Histogram, MetricsRegistry, Timer, metric_name
from actors import parse_metric_name as parse
from kcore.metrics import exposition, prometheus_families, prometheus_registry, prometheus_series


@pytest.mark.parametrize(
    ("name", "kind", "family", "family_type", "labels"),
    [
        ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", Gauge,
         "kafka_server_replicamanager_underreplicatedpartitions", "gauge", ()),
        ("kafka.controller:type=KafkaController,name=ActiveControllerCount", Gauge,
         "kafka_controller_kafkacontroller_activecontrollercount", "gauge", ()),
        ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t", Counter,
         "kafka_server_brokertopicmetrics_messagesin", "counter", (("topic", "t"),)),
        ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce", Histogram,
         "kafka_network_requestmetrics_totaltimems", "summary", (("request", "Produce"),)),
        ("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch,version=12",
         Counter, "kafka_network_requestmetrics_requests", "counter",
         (("request", "Fetch"), ("version", "12"))),
        ("kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs", Timer,
         "kafka_controller_controllerstats_leaderelectionrateandtimems", "summary", ()),
        ("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec", Counter,
         "kafka_controller_controllerstats_uncleanleaderelections", "counter", ()),
        ("kafka.server:type=SessionExpireListener,name=ZooKeeperExpiresPerSec", Counter,
         "kafka_server_sessionexpirelistener_zookeeperexpires", "counter", ()),
        ("kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica", Gauge,
         "kafka_server_replicafetchermanager_maxlag", "gauge", (("clientId", "Replica"),)),
        ("kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,"
         "delayedOperation=Produce", Gauge,
         "kafka_server_delayedoperationpurgatory_purgatorysize", "gauge",
         (("delayedOperation", "Produce"),)),
        ("kafka.log:type=Log,name=LogEndOffset,partition=0,topic=t", Gauge,
         "kafka_log_log_logendoffset", "gauge", (("partition", "0"), ("topic", "t"))),
        ("kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups", Gauge,
         "kafka_coordinator_group_groupmetadatamanager_numgroups", "gauge", ()),
        # A tag name Prometheus cannot carry is made safe, as the exporter's safeName does.
        ("kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=2", Gauge,
         "kafka_controller_controllerchannelmanager_queuesize", "gauge", (("broker_id", "2"),)),
        # A counter that is no meter: the exporter's `_count`.
        ("kafka.server:type=X,name=Things", Counter, "kafka_server_x_things_count", "gauge", ()),
    ],
)  # fmt: skip
def test_kafka_names_map_to_the_jmx_exporters(name, kind, family, family_type, labels):
    series = prometheus_series(parse(name), kind)
    assert (series.family, series.type, series.labels) == (family, family_type, labels)


def _scrape(registry):
    text = exposition(prometheus_registry(registry)).decode()
    return text, {family.name: family for family in text_string_to_metric_families(text)}


def _samples(family):
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for sample in family.samples}  # fmt: skip


def _key(name, **labels):
    return name, tuple(sorted(labels.items()))


def test_the_exposition_carries_values_labels_and_quantiles():
    registry = MetricsRegistry(clock=lambda: 0.0)
    messages_in = "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"
    registry.counter(messages_in).inc(7)
    registry.counter(messages_in + ",topic=t").inc(7)
    registry.gauge("kafka.server:type=ReplicaManager,name=LeaderCount", lambda: 3)
    total_time = registry.histogram(
        metric_name("kafka.network", "RequestMetrics", "TotalTimeMs", request="Produce")
    )
    for value in range(1, 101):
        total_time.update(float(value))
    registry.histogram(  # nothing measured yet: nan, as Prometheus' own summaries say
        metric_name("kafka.network", "RequestMetrics", "TotalTimeMs", request="Fetch")
    )
    text, families = _scrape(registry)

    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 7.0' in text
    assert _samples(families["kafka_server_brokertopicmetrics_messagesin"]) == {
        ("kafka_server_brokertopicmetrics_messagesin_total", ()): 7,
        ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),)): 7,
    }
    assert families["kafka_server_replicamanager_leadercount"].type == "gauge"
    summary = families["kafka_network_requestmetrics_totaltimems"]
    assert summary.type == "summary"
    samples = _samples(summary)
    family = "kafka_network_requestmetrics_totaltimems"
    assert samples[_key(family, request="Produce", quantile="0.99")] == pytest.approx(99.99)
    assert samples[_key(family, request="Produce", quantile="0.50")] == pytest.approx(50.5)
    assert samples[_key(f"{family}_count", request="Produce")] == 100
    assert samples[_key(f"{family}_sum", request="Produce")] == 5050
    assert math.isnan(samples[_key(family, request="Fetch", quantile="0.50")])
    assert "# HELP kafka_server_replicamanager_leadercount kafka.server:type=ReplicaManager," \
           "name=LeaderCount" in text  # fmt: skip


def test_what_has_no_kafka_name_or_clashes_is_left_out(caplog):
    registry = MetricsRegistry(clock=lambda: 0.0)
    registry.counter("not-a-kafka-name").inc()
    registry.gauge("kafka.server:type=T,name=N", lambda: 1)
    registry.histogram("kafka.server:type=T,name=N,topic=t")  # the same family, another type
    families = prometheus_families(registry.collect())
    assert [(f.name, f.type) for f in families] == [("kafka_server_t_n", "gauge")]
    assert "would be a summary in the gauge kafka_server_t_n" in caplog.text


def test_a_scrape_reads_gauges_afresh():
    registry = MetricsRegistry()
    partitions = {0: 10}
    registry.gauge_set(
        "log",
        lambda: {
            metric_name("kafka.log", "Log", "LogEndOffset", topic="t", partition=str(p)): end
            for p, end in partitions.items()
        },
    )
    exported = prometheus_registry(registry)
    assert (
        'kafka_log_log_logendoffset{partition="0",topic="t"} 10.0' in exposition(exported).decode()
    )
    partitions[0] = 12
    partitions[1] = 3
    text = exposition(exported).decode()
    assert 'kafka_log_log_logendoffset{partition="0",topic="t"} 12.0' in text
    assert 'kafka_log_log_logendoffset{partition="1",topic="t"} 3.0' in text
