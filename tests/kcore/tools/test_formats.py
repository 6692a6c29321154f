"""What the tools print and parse, against the exact strings Kafka 3.5's tools print
(TopicCommand, ConfigCommand, DefaultMessageFormatter, LineMessageReader)."""

from __future__ import annotations

import attrs
import pytest

from kcore.client import Consumer, ConsumerRecord, PartitionInfo, Producer, TopicDescription
from kcore.config import ConfigEntry, ConfigSourceCode, ConfigSynonym, ConfigTypeCode
from kcore.tools import ToolError, UsageError
from kcore.tools._tool import client_settings, key_values
from kcore.tools.configs import config_line, parse_add_config, parse_delete_config
from kcore.tools.configs import describe_lines as config_lines
from kcore.tools.console_consumer import RecordFormat
from kcore.tools.console_producer import LineReader, without_line_ending
from kcore.tools.topics import (
    describe_lines,
    matching_topics,
    parse_replica_assignment,
    partition_line,
    topic_configs,
    topic_line,
)

STRING = ConfigTypeCode.STRING


def _entry(name, value, source, *, sensitive=False):
    return ConfigEntry(name, value, source, STRING, is_sensitive=sensitive)


CONFIGS = {
    "retention.ms": _entry("retention.ms", "3600000", ConfigSourceCode.DYNAMIC_TOPIC_CONFIG),
    "min.insync.replicas": _entry(
        "min.insync.replicas", "2", ConfigSourceCode.DYNAMIC_TOPIC_CONFIG
    ),
    "segment.bytes": _entry("segment.bytes", "1048576", ConfigSourceCode.STATIC_BROKER_CONFIG),
    "cleanup.policy": _entry("cleanup.policy", "delete", ConfigSourceCode.DEFAULT_CONFIG),
}


# -- kcore topics ---------------------------------------------------------------------------


def test_topic_line_shows_every_config_not_at_kafkas_default():
    assert topic_line("orders", "3jRk_ElXG9DztBPWs6uosw", 3, 2, CONFIGS) == (
        "Topic: orders\tTopicId: 3jRk_ElXG9DztBPWs6uosw\tPartitionCount: 3"
        "\tReplicationFactor: 2"
        "\tConfigs: min.insync.replicas=2,retention.ms=3600000,segment.bytes=1048576"
    )


def test_topic_line_without_a_topic_id_or_configs():
    # Kafka prints the id only when it is not Uuid.ZERO_UUID.
    expected = "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "
    assert topic_line("t", None, 1, 1, {}) == expected
    assert topic_line("t", "AAAAAAAAAAAAAAAAAAAAAA", 1, 1, {}) == expected


def test_partition_line_says_none_without_a_leader():
    led = PartitionInfo(0, 2, 5, (2, 1, 3), (2, 1))
    assert (
        partition_line("t", led) == "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 2,1,3\tIsr: 2,1"
    )
    leaderless = PartitionInfo(4, -1, 5, (3,), (3,))
    assert partition_line("t", leaderless) == (
        "\tTopic: t\tPartition: 4\tLeader: none\tReplicas: 3\tIsr: 3"
    )


def test_describe_lines_and_the_partition_reports():
    description = TopicDescription(
        "t",
        "id",
        (
            PartitionInfo(0, 1, 0, (1, 2), (1, 2)),
            PartitionInfo(1, 2, 0, (2, 3), (2,)),  # under-replicated
            PartitionInfo(2, -1, 0, (3, 1), (3,)),  # under-replicated, no leader
            PartitionInfo(3, 3, 0, (3, 1), (3, 1)),  # led by a broker no longer live
        ),
    )
    live = {1, 2}
    assert describe_lines(description, {}, live) == [
        "Topic: t\tTopicId: id\tPartitionCount: 4\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2",
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: 3",
        "\tTopic: t\tPartition: 3\tLeader: 3\tReplicas: 3,1\tIsr: 3,1",
    ]
    # A report shows no topic line, only the partitions it is about.
    assert describe_lines(description, {}, live, under_replicated=True) == [
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2",
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: 3",
    ]
    assert describe_lines(description, {}, live, unavailable=True) == [
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: 3",
        "\tTopic: t\tPartition: 3\tLeader: 3\tReplicas: 3,1\tIsr: 3,1",
    ]


def test_topic_patterns_are_read_as_kafkas_include_list():
    names = ["orders", "orders-dlq", "payments", "a.b"]
    assert matching_topics(names, None) == ["a.b", "orders", "orders-dlq", "payments"]
    assert matching_topics(names, "orders") == ["orders"]  # a full match, not a prefix
    assert matching_topics(names, "orders.*") == ["orders", "orders-dlq"]
    assert matching_topics(names, '"orders, payments"') == ["orders", "payments"]
    assert matching_topics(names, "a\\.b") == ["a.b"]
    with pytest.raises(ToolError, match="not a valid regular expression"):
        matching_topics(names, "(")


def test_topic_configs_and_replica_assignments_as_kafka_parses_them():
    assert topic_configs(["retention.ms = 1000", "min.insync.replicas=2"]) == {
        "retention.ms": "1000",
        "min.insync.replicas": "2",
    }
    with pytest.raises(ToolError, match='in the format "key=val"'):
        topic_configs(["retention.ms"])
    assert parse_replica_assignment("1:2, 2:3,3:1") == [[1, 2], [2, 3], [3, 1]]
    assert parse_replica_assignment(None) == []
    with pytest.raises(ToolError, match="may not contain duplicate entries: 1"):
        parse_replica_assignment("1:1")
    with pytest.raises(ToolError, match="Partition 1 has different replication factor"):
        parse_replica_assignment("1:2,3")


# -- kcore configs --------------------------------------------------------------------------


def test_config_lines_dynamic_and_all():
    assert config_lines("topics", "t", CONFIGS, describe_all=False) == [
        "Dynamic configs for topic t are:",
        "  min.insync.replicas=2 sensitive=false"
        " synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2}",
        "  retention.ms=3600000 sensitive=false"
        " synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}",
    ]
    broker = {
        "broker.id": _entry("broker.id", "1", ConfigSourceCode.STATIC_BROKER_CONFIG),
        "ssl.key.password": _entry(
            "ssl.key.password", None, ConfigSourceCode.DEFAULT_CONFIG, sensitive=True
        ),
    }
    # A broker without dynamic configs: none to show.
    assert config_lines("brokers", "1", broker, describe_all=False) == [
        "Dynamic configs for broker 1 are:"
    ]
    assert config_lines("brokers", "1", broker, describe_all=True) == [
        "All configs for broker 1 are:",
        "  broker.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.id=1}",
        "  ssl.key.password=null sensitive=true synonyms={DEFAULT_CONFIG:ssl.key.password=null}",
    ]
    unknown = _entry("x", "1", ConfigSourceCode.UNKNOWN)
    assert config_line(unknown) == "  x=1 sensitive=false synonyms={}"


def test_broker_config_lines_with_synonyms_and_the_cluster_default():
    dynamic = ConfigSourceCode.DYNAMIC_BROKER_CONFIG
    default = ConfigSourceCode.DYNAMIC_DEFAULT_BROKER_CONFIG
    retention = attrs.evolve(
        _entry("log.retention.ms", "1000", dynamic),
        synonyms=(
            ConfigSynonym("log.retention.ms", "1000", dynamic),
            ConfigSynonym("log.retention.ms", "5000", default),
            ConfigSynonym("log.retention.hours", "168", ConfigSourceCode.DEFAULT_CONFIG),
        ),
    )
    assert config_line(retention) == (
        "  log.retention.ms=1000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=1000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    )
    defaults = {"min.insync.replicas": _entry("min.insync.replicas", "2", default)}
    assert config_lines("brokers", "", defaults, describe_all=False) == [
        "Default configs for brokers in the cluster are:",
        "  min.insync.replicas=2 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2}",
    ]


def test_add_and_delete_config_as_kafka_parses_them():
    assert parse_add_config("a=1,b = 2,c=[x,y],d=") == {"a": "1", "b": "2", "c": "x,y", "d": ""}
    assert parse_add_config("a=1,") == {"a": "1"}
    with pytest.raises(ToolError, match='in the format "key=val"'):
        parse_add_config("a")
    with pytest.raises(ToolError, match='in the format "key=val"'):
        parse_add_config("a=1=2")
    assert parse_delete_config("a, b,") == ["a", "b"]


# -- console tools --------------------------------------------------------------------------


def _record(key=b"k", value=b"v", headers=()):
    return ConsumerRecord("t", 2, 17, 1_700_000_000_000, key, value, headers)


def test_record_format_is_kafkas_default_message_formatter():
    assert RecordFormat().format(_record()) == b"v\n"
    everything = RecordFormat.from_properties(
        {
            "print.timestamp": "true",
            "print.partition": "TRUE",
            "print.offset": "true",
            "print.headers": "true",
            "print.key": "true",
            "key.separator": " | ",
        }
    )
    assert everything.format(_record(headers=(("h1", b"x"), ("h2", None)))) == (
        b"CreateTime:1700000000000 | Partition:2 | Offset:17 | h1:x,h2:null | k | v\n"
    )
    assert everything.format(_record(key=None)) == (
        b"CreateTime:1700000000000 | Partition:2 | Offset:17 | NO_HEADERS | null | v\n"
    )
    keys_only = RecordFormat.from_properties(
        {"print.key": "true", "print.value": "false", "line.separator": ";"}
    )
    assert keys_only.format(_record()) == b"k;"
    with pytest.raises(ToolError, match=r"print\.keys is not supported"):
        RecordFormat.from_properties({"print.keys": "true"})


def test_line_reader_is_kafkas_line_message_reader():
    assert LineReader().record(b"a:b", 1) == (None, b"a:b")
    keyed = LineReader.from_properties({"parse.key": "true", "key.separator": ":"})
    assert keyed.record(b"user-1:a:b", 1) == (b"user-1", b"a:b")
    spaced = LineReader.from_properties({"parse.key": "true", "key.separator": " - "})
    assert spaced.record(b"k - v", 1) == (b"k", b"v")
    with pytest.raises(ToolError, match="No key found on line 3: no separator"):
        keyed.record(b"no separator", 3)
    lenient = LineReader.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.record(b"no tab", 1) == (None, b"no tab")
    with pytest.raises(ToolError, match=r"parse\.headers is not supported"):
        LineReader.from_properties({"parse.headers": "true"})
    assert without_line_ending(b"a\r\n") == b"a"
    assert without_line_ending(b"a\r\r\n") == b"a\r"
    assert without_line_ending(b"a") == b"a"


def test_client_properties_become_typed_client_settings():
    assert client_settings(
        {"acks": "1", "linger.ms": "5", "enable.idempotence": "false"}, Producer, "--p"
    ) == {"acks": "1", "linger_ms": 5, "enable_idempotence": False}
    assert client_settings({"fetch.max.wait.ms": "100"}, Consumer, "--c") == {
        "fetch_max_wait_ms": 100
    }
    with pytest.raises(ToolError, match=r"--p bootstrap\.servers is not supported .*linger\.ms"):
        client_settings({"bootstrap.servers": "x:1"}, Producer, "--p")
    with pytest.raises(ToolError, match=r"linger\.ms=soon: expected an integer"):
        client_settings({"linger.ms": "soon"}, Producer, "--p")
    with pytest.raises(ToolError, match="expected true or false"):
        client_settings({"enable.idempotence": "yes"}, Producer, "--p")
    # The client's own hooks are not settings.
    with pytest.raises(ToolError, match="network is not supported"):
        client_settings({"network": "x"}, Producer, "--p")


def test_key_values_flags():
    assert key_values(["a=1", "b =x=y", "c= "], "--property") == {"a": "1", "b": "x=y", "c": " "}
    with pytest.raises(UsageError, match="--property expects key=value, got 'a'"):
        key_values(["a"], "--property")
