"""Kafka's command-line tools as `kcore` subcommands, speaking to brokers through kcore's
own clients: `kcore topics` (kafka-topics.sh), `kcore configs` (kafka-configs.sh),
`kcore leader-election` (kafka-leader-election.sh), `kcore reassign-partitions`
(kafka-reassign-partitions.sh), `kcore console-producer`,
`kcore console-consumer`, `kcore consumer-groups` (kafka-consumer-groups.sh) and
`kcore zookeeper-shell` (zookeeper-shell.sh, ZooKeeper's zkCli). Each takes
Kafka's flags and prints what Kafka 3.5's tool prints; what it prints is built by pure
functions in its module.

From a Trio program (tests, embedding): `await kcore.tools.topics.TOOL.main([...argv])`.
"""

from kcore.tools import (
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
    zookeeper_shell.TOOL,
)

__all__ = ["TOOLS", "Tool", "ToolError", "UsageError"]
