"""Each tool end to end against a 3-broker cluster over real TCP: what it prints on standard
output (Kafka 3.5's text), on standard error (one line, no traceback) and its exit status.
The tools run in the test's Trio loop (`TOOL.main(argv)`); one test runs `python -m
kcore.cli` itself, with real pipes."""

from __future__ import annotations

import os
import sys

import pytest
import trio

import kcore
from kcore.testing import poll_until
from kcore.tools import configs, console_consumer, console_producer, topics
from kcore.tools.console_producer import StandardInput

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def cluster(tmp_path):
    # Groups form at once (Kafka's test and development set-ups do the same).
    settings = {"group.initial.rebalance.delay.ms": 0}
    async with kcore.open_cluster(brokers=3, data_dir=tmp_path, broker_config=settings) as cluster:
        yield cluster


def _run(tool, cluster, *argv):
    return tool.TOOL.main(["--bootstrap-server", cluster.bootstrap_servers, *argv])


@pytest.fixture
def stdin(monkeypatch):
    """`stdin(data)` makes standard input a pipe holding `data`: the console producer reads
    its file descriptor."""
    descriptors = []

    def holding(data: bytes) -> None:
        reading, writing = os.pipe()
        descriptors.append(reading)
        os.write(writing, data)
        os.close(writing)
        monkeypatch.setattr(sys, "stdin", open(reading, "rb", closefd=False))

    yield holding
    for descriptor in descriptors:
        os.close(descriptor)


async def test_topics_creates_lists_describes_alters_and_deletes(cluster, capsys):
    create = ["--create", "--topic", "orders", "--partitions", "2", "--replication-factor", "3"]
    assert await _run(topics, cluster, *create, "--config", "min.insync.replicas=2") == 0
    assert (
        await _run(topics, cluster, "--create", "--topic", "audit", "--replica-assignment", "3")
        == 0
    )
    assert capsys.readouterr().out == "Created topic orders.\nCreated topic audit.\n"

    assert await _run(topics, cluster, "--list") == 0
    assert capsys.readouterr().out == "audit\norders\n"

    async with cluster.admin() as admin:
        described = await admin.describe_topic("orders")
    assert await _run(topics, cluster, "--describe", "--topic", "orders") == 0
    expected = [
        f"Topic: orders\tTopicId: {described.topic_id}\tPartitionCount: 2\tReplicationFactor: 3"
        "\tConfigs: min.insync.replicas=2"
    ]
    for p in described.partitions:
        replicas = ",".join(map(str, p.replicas))
        expected.append(
            f"\tTopic: orders\tPartition: {p.partition}\tLeader: {p.leader}"
            f"\tReplicas: {replicas}\tIsr: {replicas}"
        )
    assert capsys.readouterr().out.splitlines() == expected

    assert await _run(topics, cluster, "--alter", "--topic", "orders", "--partitions", "3") == 0
    assert capsys.readouterr().out == ""  # Kafka 3.5 prints nothing either
    assert await _run(topics, cluster, "--describe", "--topic", "ord.*") == 0
    assert "\tPartitionCount: 3\t" in capsys.readouterr().out
    # As in Kafka, --replica-assignment lists every partition; the new one is the last.
    placed = "1:2:3,2:3:1,3:1:2,3:2:1"
    alter = ["--alter", "--topic", "orders", "--partitions", "4", "--replica-assignment", placed]
    assert await _run(topics, cluster, *alter) == 0
    assert await _run(topics, cluster, "--describe", "--topic", "orders") == 0
    assert "\tPartition: 3\tLeader: 3\tReplicas: 3,2,1\t" in capsys.readouterr().out

    # The only replica of audit's partition goes down: unavailable, as the report shows.
    await cluster.stop_broker(3)
    assert await _run(topics, cluster, "--describe", "--unavailable-partitions") == 0
    out = capsys.readouterr().out
    assert "\tTopic: audit\tPartition: 0\tLeader: none\tReplicas: 3\tIsr: 3\n" in out
    assert await _run(topics, cluster, "--describe", "--under-replicated-partitions") == 0
    under = capsys.readouterr().out.splitlines()
    assert len(under) == 4 and all(line.startswith("\tTopic: orders\t") for line in under)
    await cluster.start_broker(3)

    assert await _run(topics, cluster, "--delete", "--topic", "audit") == 0
    assert await _run(topics, cluster, "--list") == 0
    assert capsys.readouterr().out == "orders\n"

    # Errors: one line on standard error, exit status 1.
    assert await _run(topics, cluster, "--describe", "--topic", "audit") == 1
    assert capsys.readouterr().err == "kcore topics: Topic 'audit' does not exist as expected\n"
    assert await _run(topics, cluster, *create) == 1
    err = capsys.readouterr().err
    assert err.startswith("kcore topics: TopicAlreadyExistsError: ") and err.count("\n") == 1
    assert await _run(topics, cluster, *create, "--if-not-exists") == 0
    assert await _run(topics, cluster, "--alter", "--topic", "orders", "--partitions", "2") == 1
    err = capsys.readouterr().err
    assert err.startswith("kcore topics: InvalidPartitionsError: ") and err.count("\n") == 1


async def test_configs_describes_and_alters_topic_and_broker_configs(cluster, capsys):
    async with cluster.admin() as admin:
        await admin.create_topic("t", 1, 3, config={"retention.ms": "3600000"})
    describe = ["--entity-type", "topics", "--entity-name", "t", "--describe"]
    assert await _run(configs, cluster, *describe) == 0
    assert capsys.readouterr().out == (
        "Dynamic configs for topic t are:\n"
        "  retention.ms=3600000 sensitive=false"
        " synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}\n"
    )

    alter = ["--entity-type", "topics", "--entity-name", "t", "--alter"]
    changes = [
        "--add-config",
        "min.insync.replicas=2,segment.ms=60000",
        "--delete-config",
        "retention.ms",
    ]
    assert await _run(configs, cluster, *alter, *changes) == 0
    assert capsys.readouterr().out == "Completed updating config for topic t.\n"
    assert await _run(configs, cluster, *describe) == 0
    assert capsys.readouterr().out == (
        "Dynamic configs for topic t are:\n"
        "  min.insync.replicas=2 sensitive=false"
        " synonyms={DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2}\n"
        "  segment.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=60000}\n"
    )

    # Refusals: one line each, exit status 1.
    assert await _run(configs, cluster, *alter, "--delete-config", "retention.ms") == 1
    assert capsys.readouterr().err == "kcore configs: Invalid config(s): retention.ms\n"
    assert await _run(configs, cluster, *alter, "--add-config", "no.such.config=1") == 1
    err = capsys.readouterr().err
    assert err.startswith("kcore configs: InvalidConfigurationError: ") and "no.such.config" in err
    assert err.count("\n") == 1

    # Brokers: none has dynamic configs yet; every setting with --all.
    broker = ["--entity-type", "brokers", "--entity-name", "2"]
    assert await _run(configs, cluster, "--entity-type", "brokers", "--describe") == 0
    assert capsys.readouterr().out == (
        "Dynamic configs for broker 1 are:\nDynamic configs for broker 2 are:\n"
        "Dynamic configs for broker 3 are:\nDefault configs for brokers in the cluster are:\n"
    )
    assert await _run(configs, cluster, *broker, "--describe", "--all") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "All configs for broker 2 are:"
    assert "  broker.id=2 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.id=2}" in lines
    assert "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}" in lines

    # A cluster-wide default and broker 2's own setting, each applied by the brokers from
    # ZooKeeper's change notification.
    default = ["--entity-type", "brokers", "--entity-default"]
    add_default = ["--alter", "--add-config", "log.retention.ms=3600000,min.insync.replicas=2"]
    assert await _run(configs, cluster, *default, *add_default) == 0
    add_own = ["--alter", "--add-config", "log.retention.ms=60000"]
    assert await _run(configs, cluster, *broker, *add_own) == 0
    assert capsys.readouterr().out == (
        "Completed updating default config for brokers in the cluster.\n"
        "Completed updating config for broker 2.\n"
    )

    def applied(broker_id, name, value):
        server = cluster.brokers[broker_id]
        return server.dynamic_config.get(name) == value

    await poll_until(lambda: all(applied(b, "min.insync.replicas", 2) for b in (1, 2, 3)))
    await poll_until(lambda: applied(2, "log.retention.ms", 60000))
    assert await _run(configs, cluster, "--entity-type", "brokers", "--describe") == 0
    assert capsys.readouterr().out == (
        "Dynamic configs for broker 1 are:\n"
        "Dynamic configs for broker 2 are:\n"
        "  log.retention.ms=60000 sensitive=false"
        " synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=60000}\n"
        "Dynamic configs for broker 3 are:\n"
        "Default configs for brokers in the cluster are:\n"
        "  log.retention.ms=3600000 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}\n"
        "  min.insync.replicas=2 sensitive=false"
        " synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2}\n"
    )
    delete = ["--alter", "--delete-config"]
    assert await _run(configs, cluster, *default, *delete, "log.retention.ms") == 0
    assert capsys.readouterr().out == (
        "Completed updating default config for brokers in the cluster.\n"
    )

    # Refusals: a setting that cannot change at run time (Kafka's words), one that is not set.
    assert await _run(configs, cluster, *broker, "--alter", "--add-config", "num.partitions=3") == 1
    assert capsys.readouterr().err == (
        "kcore configs: InvalidRequestError: broker 2: Cannot update these configs "
        "dynamically: Set(num.partitions)\n"
    )
    assert await _run(configs, cluster, *broker, *delete, "num.partitions") == 1
    assert capsys.readouterr().err == "kcore configs: Invalid config(s): num.partitions\n"


async def test_console_producer_and_consumer_round_trip(cluster, capsys, stdin):
    async with cluster.admin() as admin:
        await admin.create_topic("lines", 1, 3)
        await admin.create_topic("strict", 1, 3, config={"min.insync.replicas": "4"})
    keyed = ["--property", "parse.key=true", "--property", "key.separator=:"]
    stdin(b"".join(b"key-%d:value %d\n" % (i, i) for i in range(300)))
    assert await _run(console_producer, cluster, "--topic", "lines", *keyed) == 0

    # Every line, in line order, read from the beginning with its key.
    read = ["--topic", "lines", "--from-beginning", "--max-messages", "300"]
    assert await _run(console_consumer, cluster, *read, "--property", "print.key=true") == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"key-{i}\tvalue {i}" for i in range(300)]
    assert captured.err == "Processed a total of 300 messages\n"

    tail = ["--topic", "lines", "--partition", "0", "--offset", "298", "--timeout-ms", "500"]
    assert await _run(console_consumer, cluster, *tail, "--property", "print.offset=true") == 0
    captured = capsys.readouterr()
    assert captured.out == "Offset:298\tvalue 298\nOffset:299\tvalue 299\n"
    assert captured.err == "Processed a total of 2 messages\n"

    # In a group: what one run consumed and committed, the next run does not read again.
    grouped = ["--topic", "lines", "--group", "g", "--from-beginning"]
    assert await _run(console_consumer, cluster, *grouped, "--max-messages", "300") == 0
    assert capsys.readouterr().err == "Processed a total of 300 messages\n"
    assert await _run(console_consumer, cluster, *grouped, "--timeout-ms", "1000") == 0
    assert capsys.readouterr().err == "Processed a total of 0 messages\n"

    # Refusals: one line on standard error.
    stdin(b"no key here\n")
    assert await _run(console_producer, cluster, "--topic", "lines", *keyed) == 1
    assert capsys.readouterr().err == (
        "kcore console-producer: No key found on line 1: no key here\n"
    )
    stdin(b"one\n")
    no_retries = ["--producer-property", "retries=0"]
    assert await _run(console_producer, cluster, "--topic", "strict", *no_retries) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "kcore console-producer: 1 of 1 records were not delivered; the first: "
        "NotEnoughReplicasError: "
    )
    assert err.count("\n") == 1


async def test_the_kcore_command_runs_the_tools_over_pipes(cluster):
    servers = cluster.bootstrap_servers
    command = [sys.executable, "-m", "kcore.cli"]
    async with cluster.admin() as admin:
        await admin.create_topic("piped", 1, 3)
    produced = await trio.run_process(
        [*command, "console-producer", "--bootstrap-server", servers, "--topic", "piped"],
        stdin=b"first\nsecond\n",
        capture_stdout=True,
        capture_stderr=True,
    )
    assert (produced.stdout, produced.stderr) == (b"", b"")
    consumed = await trio.run_process(
        [*command, "console-consumer", "--bootstrap-server", servers, "--topic", "piped",
         "--from-beginning", "--max-messages", "2"],
        capture_stdout=True,
        capture_stderr=True,
    )  # fmt: skip
    assert consumed.stdout == b"first\nsecond\n"
    assert consumed.stderr == b"Processed a total of 2 messages\n"
    missing = await trio.run_process(
        [*command, "topics", "--bootstrap-server", servers, "--describe", "--topic", "nope"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert missing.returncode == 1
    assert missing.stderr == b"kcore topics: Topic 'nope' does not exist as expected\n"


async def test_standard_input_lines_with_and_without_an_ending():
    reading, writing = os.pipe()
    os.write(writing, b"a\r\nb\n\nlast")
    os.close(writing)
    try:
        lines = StandardInput(reading)
        read = [await lines.read_line() for _ in range(5)]
    finally:
        os.close(reading)
    assert read == [b"a\r\n", b"b\n", b"\n", b"last", b""]
