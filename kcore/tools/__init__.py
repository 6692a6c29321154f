"""Kafka's command-line tools as `kcore` subcommands, speaking to brokers through kcore's
own clients: `kcore topics` (kafka-topics.sh), `kcore configs` (kafka-configs.sh),
`kcore leader-election` (kafka-leader-election.sh), `kcore reassign-partitions`
(kafka-reassign-partitions.sh), `kcore console-producer`,
`kcore console-consumer`, `kcore consumer-groups` (kafka-consumer-groups.sh),
`kcore acls` (kafka-acls.sh) and
`kcore zookeeper-shell` (zookeeper-shell.sh, ZooKeeper's zkCli). Each takes
Kafka's flags and prints what Kafka 3.5's tool prints; what it prints is built by pure
functions in its module. Those that talk to brokers take Kafka's client properties file
(`--command-config`; `--admin.config`, `--consumer.config`, `--producer.config` where Kafka's
tool names it so), security settings included.

From a Trio program (tests, embedding): `await kcore.tools.topics.TOOL.main([...argv])`.
"""

from kcore.tools import (
    acls,
    configs,
    console_consumer,
    console_producer,
    consumer_groups,
    leader_election,
    reassign_partitions,
    topics,
    zookeeper_shell,
)
from kcore.tools._tool import Tool, ToolError, UsageError

# In the order `kcore --help` lists them.
TOOLS = (
    topics.TOOL,
    configs.TOOL,
    leader_election.TOOL,
    reassign_partitions.TOOL,
    console_producer.TOOL,
    console_consumer.TOOL,
    consumer_groups.TOOL,
    acls.TOOL,
    zookeeper_shell.TOOL,
)

__all__ = ["TOOLS", "Tool", "ToolError", "UsageError"]
