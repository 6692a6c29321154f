"""Kafka's command-line tools as `kcore` subcommands, speaking to brokers through kcore's
own clients: `kcore topics` (kafka-topics.sh), `kcore configs` (kafka-configs.sh),
`kcore leader-election` (kafka-leader-election.sh), `kcore console-producer`,
`kcore console-consumer` and `kcore consumer-groups` (kafka-consumer-groups.sh). Each takes
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
    topics,
)
from kcore.tools._tool import Tool, ToolError, UsageError

# In the order `kcore --help` lists them.
TOOLS = (
    topics.TOOL,
    configs.TOOL,
    leader_election.TOOL,
    console_producer.TOOL,
    console_consumer.TOOL,
    consumer_groups.TOOL,
)

__all__ = ["TOOLS", "Tool", "ToolError", "UsageError"]
