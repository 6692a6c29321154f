"""`kcore topics`: Kafka's kafka-topics.sh (Kafka 3.5's TopicCommand) over kcore's Admin.

    kcore topics --bootstrap-server HOST:PORT --create --topic T --partitions 3 \\
        --replication-factor 3 --config min.insync.replicas=2
    kcore topics --bootstrap-server HOST:PORT --list
    kcore topics --bootstrap-server HOST:PORT --describe [--topic T] \\
        [--under-replicated-partitions | --unavailable-partitions]
    kcore topics --bootstrap-server HOST:PORT --alter --topic T --partitions 6
    kcore topics --bootstrap-server HOST:PORT --delete --topic T

It prints what Kafka 3.5 prints: `Created topic T.` after a creation, nothing after an
alteration or a deletion, and `--describe`'s tab-separated lines. `--topic` is a regular
expression for every action but `--create`, as in Kafka (`"a.*"`, `"a,b"`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping, Sequence

from kcore import errors
from kcore.client import Admin, PartitionInfo, TopicDescription
from kcore.common import NO_LEADER
from kcore.config import ConfigEntry, ConfigSourceCode
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_command_config,
    add_key_values,
    admin_config,
)

_ACTIONS = ("create", "list", "describe", "alter", "delete")
# Kafka's Uuid.ZERO_UUID as Uuid.toString prints it: a topic without an id.
_ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
_MAX_REPLICATION_FACTOR = 32767  # a Java short
# Which action each option goes with (Kafka's TopicCommandOptions.checkArgs).
_OPTION_ACTIONS = {
    "partitions": ("create", "alter"),
    "replication_factor": ("create",),
    "replica_assignment": ("create", "alter"),
    "config": ("create",),
    "under_replicated_partitions": ("describe",),
    "unavailable_partitions": ("describe",),
    "if_exists": ("alter", "delete", "describe"),
    "if_not_exists": ("create",),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    add_command_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--list", action="store_true", help="list all topics")
    actions.add_argument("--describe", action="store_true", help="describe the given topics")
    actions.add_argument("--alter", action="store_true", help="add partitions to a topic")
    actions.add_argument("--delete", action="store_true", help="delete a topic")
    parser.add_argument(
        "--topic", help="the topic; a regular expression except with --create ('a.*', 'a,b')"
    )
    parser.add_argument("--partitions", type=int, help="the number of partitions")
    parser.add_argument("--replication-factor", type=int, help="replicas per partition")
    parser.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B1:B2",
        help="each partition's replicas, partitions separated by ','",
    )
    add_key_values(parser, "--config", "a config of the topic being created (repeatable)")
    reports = parser.add_mutually_exclusive_group()
    reports.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="describe only partitions whose ISR is smaller than their replicas",
    )
    reports.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="describe only partitions without a live leader",
    )
    parser.add_argument(
        "--if-exists", action="store_true", help="do nothing when no topic matches --topic"
    )
    parser.add_argument(
        "--if-not-exists", action="store_true", help="do nothing when the topic exists"
    )


def check(args: argparse.Namespace) -> None:
    action = next(a for a in _ACTIONS if getattr(args, a))
    for option, actions in _OPTION_ACTIONS.items():
        given = getattr(args, option)
        if given not in (None, False, []) and action not in actions:
            raise UsageError(f"--{option.replace('_', '-')} cannot be used with --{action}")
    if action in ("create", "alter", "delete") and args.topic is None:
        raise UsageError(f"--topic is required with --{action}")
    if action == "alter" and args.partitions is None:
        raise UsageError("--partitions is required with --alter")
    if (
        action == "create"
        and args.replica_assignment is not None
        and (args.partitions is not None or args.replication_factor is not None)
    ):
        raise UsageError(
            "--replica-assignment cannot be used with --partitions or --replication-factor"
        )


async def run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, **await admin_config(args, "kcore-topics")) as admin:
        if args.create:
            await _create(admin, args)
        elif args.list:
            print("\n".join(matching_topics(await admin.list_topics(), args.topic)))
        elif args.describe:
            await _describe(admin, args)
        elif args.alter:
            await _alter(admin, args)
        else:
            topics = await _existing(admin, args)
            if topics:
                await admin.delete_topics(topics)
    return 0


async def _create(admin: Admin, args: argparse.Namespace) -> None:
    if args.replication_factor is not None and not (
        1 <= args.replication_factor <= _MAX_REPLICATION_FACTOR
    ):
        raise ToolError(
            f"The replication factor must be between 1 and {_MAX_REPLICATION_FACTOR} inclusive"
        )
    if args.partitions is not None and args.partitions < 1:
        raise ToolError("The partitions must be greater than 0")
    configs = topic_configs(args.config)
    placement = parse_replica_assignment(args.replica_assignment)
    if "." in args.topic or "_" in args.topic:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but "
            "not both."
        )
    try:
        await admin.create_topic(
            args.topic,
            -1 if args.partitions is None else args.partitions,
            -1 if args.replication_factor is None else args.replication_factor,
            config=configs,
            assignments=dict(enumerate(placement)),
        )
    except errors.TopicAlreadyExistsError:
        if not args.if_not_exists:
            raise
        return
    print(f"Created topic {args.topic}.")


async def _describe(admin: Admin, args: argparse.Namespace) -> None:
    topics = await _existing(admin, args)
    live_brokers = {b.node_id for b in (await admin.describe_cluster()).brokers}
    for name in topics:
        description = await admin.describe_topic(name)
        configs = await admin.describe_configs(name)
        for line in describe_lines(
            description,
            configs,
            live_brokers,
            under_replicated=args.under_replicated_partitions,
            unavailable=args.unavailable_partitions,
        ):
            print(line)


async def _alter(admin: Admin, args: argparse.Namespace) -> None:
    placement = parse_replica_assignment(args.replica_assignment)
    for name in await _existing(admin, args):
        existing = len((await admin.describe_topic(name)).partitions)
        # As in Kafka, the assignment lists every partition; the existing ones are skipped.
        new = placement[existing:]
        await admin.create_partitions(
            {name: args.partitions}, assignments={name: new} if new else None
        )


async def _existing(admin: Admin, args: argparse.Namespace) -> list[str]:
    """The topics `--topic` matches; an error when it matches none (unless --if-exists)."""
    topics = matching_topics(await admin.list_topics(), args.topic)
    if args.topic is not None and not topics and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")
    return topics


# -- pure: what Kafka's TopicCommand prints and parses ------------------------------------


def matching_topics(names: Iterable[str], pattern: str | None) -> list[str]:
    """The sorted names `pattern` matches in full, read as Kafka's IncludeList reads it: a
    Java regular expression in which ',' separates alternatives and quotes around it and
    spaces are dropped. Every name when `pattern` is None."""
    names = sorted(names)
    if pattern is None:
        return names
    cleaned = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", pattern.strip()))
    cleaned = cleaned.replace(",", "|").replace(" ", "")
    try:
        compiled = re.compile(cleaned)
    except re.error as error:
        raise ToolError(f"--topic {pattern!r} is not a valid regular expression: {error}") from None
    return [name for name in names if compiled.fullmatch(name)]


def topic_configs(items: Sequence[str]) -> dict[str, str]:
    """`--config k=v` flags as Kafka's parseTopicConfigsToBeAdded reads them."""
    configs = {}
    for item in items:
        pair = re.split(r"\s*=\s*", item)
        if len(pair) != 2:
            raise ToolError(
                'Invalid topic config: all configs to be added must be in the format "key=val".'
            )
        configs[pair[0].strip()] = pair[1].strip()
    return configs


def parse_replica_assignment(text: str | None) -> list[list[int]]:
    """`--replica-assignment 1:2,2:3`: one replica list per partition, from partition 0
    (Kafka's parseReplicaAssignment)."""
    if not text:
        return []
    placement: list[list[int]] = []
    for index, part in enumerate(text.split(",")):
        try:
            replicas = [int(broker.strip()) for broker in part.split(":")]
        except ValueError:
            raise ToolError(f"--replica-assignment: {part!r} is not a list of broker ids") from None
        duplicates = sorted({b for b in replicas if replicas.count(b) > 1})
        if duplicates:
            raise ToolError(
                "Partition replica lists may not contain duplicate entries: "
                + ",".join(map(str, duplicates))
            )
        if placement and len(replicas) != len(placement[0]):
            raise ToolError(f"Partition {index} has different replication factor: {replicas}")
        placement.append(replicas)
    return placement


def describe_lines(
    description: TopicDescription,
    configs: Mapping[str, ConfigEntry],
    live_brokers: Iterable[int],
    *,
    under_replicated: bool = False,
    unavailable: bool = False,
) -> list[str]:
    """Kafka 3.5's `--describe` of one topic: its line (unless only some partitions are
    asked for), then the line of each partition asked for."""
    live = set(live_brokers)
    lines = []
    if not (under_replicated or unavailable):
        first = description.partitions[0] if description.partitions else None
        lines.append(
            topic_line(
                description.name,
                description.topic_id,
                len(description.partitions),
                len(first.replicas) if first is not None else 0,
                configs,
            )
        )
    for partition in description.partitions:
        if under_replicated and len(partition.isr) >= len(partition.replicas):
            continue
        if unavailable and partition.leader != NO_LEADER and partition.leader in live:
            continue
        lines.append(partition_line(description.name, partition))
    return lines


def topic_line(
    name: str,
    topic_id: str | None,
    partition_count: int,
    replication_factor: int,
    configs: Mapping[str, ConfigEntry],
) -> str:
    """`Topic: T\\tTopicId: ID\\tPartitionCount: N\\tReplicationFactor: R\\tConfigs: k=v,...`:
    the configs not at Kafka's default (the topic's overrides and the brokers' own
    settings, as Kafka's `!isDefault` shows them), by name."""
    shown = ",".join(
        f"{entry.name}={entry.value}"
        for entry in sorted(configs.values(), key=lambda entry: entry.name)
        if entry.source != ConfigSourceCode.DEFAULT_CONFIG
    )
    topic_id_column = f"\tTopicId: {topic_id}" if topic_id and topic_id != _ZERO_TOPIC_ID else ""
    return (
        f"Topic: {name}{topic_id_column}\tPartitionCount: {partition_count}"
        f"\tReplicationFactor: {replication_factor}\tConfigs: {shown}"
    )


def partition_line(topic: str, partition: PartitionInfo) -> str:
    """`\\tTopic: T\\tPartition: P\\tLeader: L\\tReplicas: a,b\\tIsr: a,b` (Leader `none`
    without a leader)."""
    leader = "none" if partition.leader == NO_LEADER else str(partition.leader)
    return (
        f"\tTopic: {topic}\tPartition: {partition.partition}\tLeader: {leader}"
        f"\tReplicas: {','.join(map(str, partition.replicas))}"
        f"\tIsr: {','.join(map(str, partition.isr))}"
    )


TOOL = Tool(
    "topics",
    "Create, delete, describe, or change a topic (Kafka's kafka-topics.sh).",
    add_arguments,
    run,
    check,
)
