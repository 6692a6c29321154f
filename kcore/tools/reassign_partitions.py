"""`kcore reassign-partitions`: Kafka's kafka-reassign-partitions.sh (Kafka 3.5's
ReassignPartitionsCommand) over kcore's Admin.

    kcore reassign-partitions --bootstrap-server HOST:PORT --generate \\
        --topics-to-move-json-file topics.json --broker-list 1,2,3
    kcore reassign-partitions --bootstrap-server HOST:PORT --execute \\
        --reassignment-json-file plan.json [--additional]
    kcore reassign-partitions --bootstrap-server HOST:PORT --verify \\
        --reassignment-json-file plan.json
    kcore reassign-partitions --bootstrap-server HOST:PORT --cancel \\
        --reassignment-json-file plan.json
    kcore reassign-partitions --bootstrap-server HOST:PORT --list

The files are Kafka's: `{"version": 1, "topics": [{"topic": "t"}]}` to --generate from, and
`{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}`
(what --generate proposes, with `"log_dirs"`) to execute, verify or cancel. It prints what
Kafka prints: the current and proposed assignments, the current assignment to keep for a
rollback, `Successfully started partition reassignment for t-0`, `Status of partition
reassignment:` and each partition's `Reassignment of partition t-0 is completed.` (or `is
still in progress.`).

kcore has no replication throttles and no moves between log directories: --throttle,
--replica-alter-log-dirs-throttle and log dirs other than "any" are refused, and nothing is
said about clearing throttles. --generate's assignment is Kafka's rack-unaware one.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence

import trio

from kcore import errors
from kcore.assignment import assign_replicas_to_brokers
from kcore.client import Admin, BrokerInfo
from kcore.client.admin import PartitionReassignment
from kcore.common import TopicPartition
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_command_config,
    admin_config,
)

ANY_LOG_DIR = "any"  # Kafka's AnyLogDir
_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# The options each action requires, and the others it accepts (Kafka's
# validateAndParseArgs); --bootstrap-server goes with every one.
_REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
_PERMITTED = {
    "generate": ("disable_rack_aware",),
    "execute": ("additional", "throttle", "replica_alter_log_dirs_throttle", "timeout"),
    "verify": ("preserve_throttles",),
    "cancel": ("preserve_throttles", "timeout"),
    "list": (),
}
_DEFAULT_TIMEOUT_MS = 10000

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    add_command_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument(
        "--generate",
        action="store_true",
        help="generate a candidate partition reassignment configuration (it is not executed)",
    )
    actions.add_argument(
        "--execute",
        action="store_true",
        help="kick off the reassignment given by --reassignment-json-file",
    )
    actions.add_argument(
        "--verify",
        action="store_true",
        help="verify whether the reassignment in --reassignment-json-file completed",
    )
    actions.add_argument("--cancel", action="store_true", help="cancel an active reassignment")
    actions.add_argument(
        "--list", action="store_true", help="list all active partition reassignments"
    )
    parser.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help='{"version": 1, "partitions": [{"topic": "foo", "partition": 1, "replicas": '
        "[1, 2, 3]}]}",
    )
    parser.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='the topics to move, for --generate: {"version": 1, "topics": [{"topic": "foo"}]}',
    )
    parser.add_argument(
        "--broker-list", metavar="1,2,3", help="the brokers to move the topics to (--generate)"
    )
    parser.add_argument(
        "--disable-rack-aware",
        action="store_true",
        help="generate an assignment without rack information (kcore's is rack-unaware)",
    )
    parser.add_argument(
        "--additional",
        action="store_true",
        help="execute this reassignment in addition to those already in progress",
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="do not modify throttles (kcore has none)",
    )
    parser.add_argument("--throttle", type=int, help="not supported: kcore has no throttles")
    parser.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        help="not supported: kcore does not move replicas between log dirs",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        help=f"ms to wait for log dir moves to begin (default {_DEFAULT_TIMEOUT_MS}; kcore "
        "has none to wait for)",
    )


def check(args: argparse.Namespace) -> None:
    action = next(a for a in _ACTIONS if getattr(args, a))
    for option in _REQUIRED[action]:
        if getattr(args, option) is None:
            raise UsageError(f'Missing required argument "[{_flag(option)}]"')
    allowed = {*_REQUIRED[action], *_PERMITTED[action]}
    every = {o for options in (*_REQUIRED.values(), *_PERMITTED.values()) for o in options}
    for option in sorted(every - allowed):
        if getattr(args, option) not in (None, False):
            raise UsageError(f'Option "[{_flag(option)}]" can\'t be used with action "[{action}]"')


def _flag(option: str) -> str:
    return option.replace("_", "-")


# -- the files ----------------------------------------------------------------------------


def _json_object(text: str, where: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ToolError(f"{where} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ToolError(f"{where} is not a JSON object")
    version = value.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return value


def parse_topics_to_move(text: str, where: str) -> list[str]:
    """Kafka's parseTopicsData: `{"version": 1, "topics": [{"topic": "t"}, ...]}`."""
    value = _json_object(text, where)
    try:
        topics = [entry["topic"] for entry in value.get("topics", [])]
    except (KeyError, TypeError) as error:
        raise ToolError(f'{where} is not {{"topics": [{{"topic": ...}}]}}: {error!r}') from None
    if not all(isinstance(t, str) for t in topics):
        raise ToolError(f"{where}: a topic name is not a string")
    duplicates = _duplicates(topics)
    if duplicates:
        raise ToolError(
            "List of topics to reassign contains duplicate entries: " + ",".join(duplicates)
        )
    return topics


def parse_broker_list(text: str) -> list[int]:
    """Kafka's --broker-list: comma-separated broker ids, each once."""
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise ToolError(f"--broker-list {text!r} is not a comma-separated list of ids") from None
    duplicates = _duplicates(brokers)
    if duplicates:
        raise ToolError(f"Broker list contains duplicate entries: {','.join(duplicates)}")
    return brokers


def parse_reassignment(text: str, where: str) -> list[tuple[TopicPartition, list[int]]]:
    """Kafka's parsePartitionReassignmentData (duplicates kept, for the checks of
    --execute): each partition and its target replicas. A log dir other than "any" is
    refused: kcore does not move replicas between log directories."""
    value = _json_object(text, where)
    parsed = []
    try:
        for entry in value.get("partitions", []):
            tp = TopicPartition(entry["topic"], entry["partition"])
            replicas = entry["replicas"]
            if not isinstance(tp.topic, str) or not _all_ints([tp.partition, *replicas]):
                raise TypeError("topics are strings, partitions and replicas integers")
            log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
            if len(log_dirs) != len(replicas):
                raise ToolError(
                    f"Size of replicas list {_scala_list(replicas)} is different from size of "
                    f"log dirs list {_scala_list(log_dirs)} for partition {tp}"
                )
            if any(d != ANY_LOG_DIR for d in log_dirs):
                raise ToolError(
                    f"{tp}: log dirs {log_dirs}: kcore does not move replicas between log "
                    'directories; use "any"'
                )
            parsed.append((tp, list(replicas)))
    except (KeyError, TypeError) as error:
        raise ToolError(
            f'{where} is not {{"partitions": [{{"topic": ..., "partition": ..., "replicas": '
            f"[...]}}]}}: {error!r}"
        ) from None
    return parsed


def check_execution(parts: Sequence[tuple[TopicPartition, list[int]]]) -> dict:
    """Kafka's parseExecuteAssignmentArgs checks: something to do, no empty replica list,
    each partition once, no broker twice in a list."""
    if not parts:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise ToolError("Partition replica list cannot be empty")
    duplicated = _duplicates([tp for tp, _ in parts])
    if duplicated:
        raise ToolError(
            "Partition reassignment contains duplicate topic partitions: " + ",".join(duplicated)
        )
    repeated = [
        f"{tp} contains multiple entries for {','.join(_duplicates(replicas))}"
        for tp, replicas in parts
        if _duplicates(replicas)
    ]
    if repeated:
        raise ToolError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated)
        )
    return dict(parts)


def _duplicates(items: Sequence) -> list[str]:
    seen, repeated = set(), []
    for item in items:
        if item in seen and str(item) not in repeated:
            repeated.append(str(item))
        seen.add(item)
    return repeated


def _all_ints(values: Sequence) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _scala_list(values: Sequence) -> str:
    return f"List({', '.join(map(str, values))})"


# -- what it prints -----------------------------------------------------------------------


def reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson, as compact as its Jackson writes it."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(replicas),
                    "log_dirs": [ANY_LOG_DIR] * len(replicas),
                }
                for tp, replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def propose_assignment(
    current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int], rng: random.Random
) -> dict[TopicPartition, list[int]]:
    """Kafka's calculateAssignment: each topic's partitions spread over the brokers by the
    assignment algorithm of topic creation, at the topic's replication factor."""
    proposed = {}
    for topic in sorted({tp.topic for tp in current}):
        partitions = sorted(tp for tp in current if tp.topic == topic)
        replication_factor = len(current[partitions[0]])
        try:
            assigned = assign_replicas_to_brokers(
                brokers, len(partitions), replication_factor, rng=rng
            )
        except errors.KafkaError as error:
            raise ToolError(str(error)) from None
        proposed |= {TopicPartition(topic, p): r for p, r in assigned.items()}
    return proposed


def generate_text(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
) -> str:
    return (
        f"Current partition replica assignment\n{reassignment_json(current)}\n\n"
        f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}"
    )


def rollback_text(current: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's currentPartitionReplicaAssignmentToString."""
    return (
        f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )


def _partitions(partitions: Sequence[TopicPartition]) -> str:
    return ",".join(str(tp) for tp in sorted(partitions))


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


def started_line(partitions: Sequence[TopicPartition]) -> str:
    return (
        f"Successfully started partition reassignment{_plural(len(partitions))} for "
        f"{_partitions(partitions)}"
    )


def cancelled_line(partitions: Sequence[TopicPartition]) -> str:
    return (
        f"Successfully cancelled partition reassignment{_plural(len(partitions))} for: "
        f"{_partitions(partitions)}"
    )


def status_lines(
    states: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int], bool]],
) -> list[str]:
    """Kafka's partitionReassignmentStatesToString: per partition (current replicas,
    target replicas, done)."""
    lines = ["Status of partition reassignment:"]
    for tp, (current, target, done) in sorted(states.items()):
        if not done:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif list(current) == list(target):
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is "
                f"{','.join(map(str, current))} rather than {','.join(map(str, target))}."
            )
    return lines


def list_text(reassignments: Mapping[TopicPartition, PartitionReassignment]) -> str:
    """Kafka's curReassignmentsToString."""
    if not reassignments:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(reassignments.items()):
        line = f"{tp}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        lines.append(line)
    return "\n".join(lines)


def error_lines(heading: str, failures: Mapping[TopicPartition, errors.KafkaError]) -> list[str]:
    return [heading, *(f"{tp}: {error}" for tp, error in sorted(failures.items()))]


# -- the actions --------------------------------------------------------------------------


async def _read(path_name: str) -> str:
    path = trio.Path(path_name)
    try:
        return await path.read_text(encoding="utf-8")
    except OSError as error:
        raise ToolError(f"cannot read {path}: {error.strerror}") from None


async def _replicas_of(
    admin: Admin, topics: Sequence[str]
) -> dict[TopicPartition, tuple[int, ...]]:
    """Every partition of the topics with its replicas; a missing topic is an error."""
    found = {}
    for topic in sorted(set(topics)):
        try:
            description = await admin.describe_topic(topic)
        except errors.UnknownTopicOrPartitionError:
            raise ToolError(f"Topic {topic} not found.") from None
        found |= {TopicPartition(topic, p.partition): p.replicas for p in description.partitions}
    return found


def _rack_unaware_brokers(
    brokers: Sequence[BrokerInfo], wanted: Sequence[int], disable_rack_aware: bool
) -> list[int]:
    """The wanted brokers that exist (Kafka's getBrokerMetadata leaves the others out)."""
    chosen = [b for b in brokers if b.node_id in set(wanted)]
    racked = sum(b.rack is not None for b in chosen)
    if not disable_rack_aware and racked:
        if racked != len(chosen):
            raise ToolError(
                "Not all brokers have rack information. Add --disable-rack-aware in command "
                "line to make replica assignment without rack information."
            )
        raise ToolError(
            "The brokers have racks and kcore generates rack-unaware assignments only: add "
            "--disable-rack-aware"
        )
    return sorted(b.node_id for b in chosen)


async def _generate(admin: Admin, args: argparse.Namespace, rng: random.Random) -> None:
    topics = parse_topics_to_move(
        await _read(args.topics_to_move_json_file), args.topics_to_move_json_file
    )
    wanted = parse_broker_list(args.broker_list)
    current = await _replicas_of(admin, topics)
    cluster = await admin.describe_cluster()
    brokers = _rack_unaware_brokers(cluster.brokers, wanted, args.disable_rack_aware)
    print(generate_text(current, propose_assignment(current, brokers, rng)))


async def _execute(admin: Admin, args: argparse.Namespace) -> None:
    for option in ("throttle", "replica_alter_log_dirs_throttle"):
        if getattr(args, option) is not None and getattr(args, option) >= 0:
            raise ToolError(f"--{_flag(option)} is not supported: kcore has no throttles")
    text = await _read(args.reassignment_json_file)
    proposed = check_execution(parse_reassignment(text, args.reassignment_json_file))
    if not args.additional and await admin.list_partition_reassignments():
        raise ToolError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    known = {b.node_id for b in (await admin.describe_cluster()).brokers}
    for broker in sorted({b for replicas in proposed.values() for b in replicas}):
        if broker not in known:
            raise ToolError(f"Unknown broker id {broker}")
    current = await _replicas_of(admin, [tp.topic for tp in proposed])
    print(rollback_text({tp: r for tp, r in current.items() if tp in proposed}))
    outcomes = await admin.alter_partition_reassignments(proposed)
    failures = {tp: e for tp, e in outcomes.items() if e is not None}
    if failures:
        print("\n".join(error_lines("Error reassigning partition(s):", failures)))
        raise ToolError(f"{len(failures)} partition reassignment(s) could not be started")
    print(started_line(list(proposed)))


async def _verify(admin: Admin, args: argparse.Namespace) -> None:
    text = await _read(args.reassignment_json_file)
    targets = parse_reassignment(text, args.reassignment_json_file)
    ongoing = await admin.list_partition_reassignments()
    states = {}
    described: dict[str, dict[int, tuple[int, ...]]] = {}
    for tp, target in targets:
        if tp in ongoing:
            states[tp] = (ongoing[tp].replicas, target, False)
            continue
        if tp.topic not in described:
            try:
                topic = await admin.describe_topic(tp.topic)
                described[tp.topic] = {p.partition: p.replicas for p in topic.partitions}
            except errors.UnknownTopicOrPartitionError:
                described[tp.topic] = {}
        states[tp] = (described[tp.topic].get(tp.partition, ()), target, True)
    print("\n".join(status_lines(states)))


async def _cancel(admin: Admin, args: argparse.Namespace) -> None:
    text = await _read(args.reassignment_json_file)
    targets = [tp for tp, _ in parse_reassignment(text, args.reassignment_json_file)]
    active = await admin.list_partition_reassignments(targets)
    reassigning = [
        tp for tp, r in sorted(active.items()) if r.adding_replicas or r.removing_replicas
    ]
    if reassigning:
        outcomes = await admin.alter_partition_reassignments(dict.fromkeys(reassigning))
        failures = {tp: e for tp, e in outcomes.items() if e is not None}
        if failures:
            heading = f"Error cancelling partition reassignment{_plural(len(failures))} for:"
            print("\n".join(error_lines(heading, failures)))
            raise ToolError(f"{len(failures)} partition reassignment(s) could not be cancelled")
        print(cancelled_line(reassigning))
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")


async def run(args: argparse.Namespace, rng: random.Random | None = None) -> int:
    async with Admin(
        args.bootstrap_server, **await admin_config(args, "reassign-partitions-tool")
    ) as admin:
        if args.generate:
            await _generate(admin, args, rng or random.Random())
        elif args.execute:
            await _execute(admin, args)
        elif args.verify:
            await _verify(admin, args)
        elif args.cancel:
            await _cancel(admin, args)
        else:
            print(list_text(await admin.list_partition_reassignments()))
    return 0


TOOL = Tool(
    "reassign-partitions",
    "Move partitions between brokers (Kafka's kafka-reassign-partitions.sh).",
    add_arguments,
    run,
    check,
)
