"""`kcore leader-election`: Kafka's kafka-leader-election.sh (Kafka 3.5's
LeaderElectionCommand), over kcore's Admin.

    kcore leader-election --bootstrap-server HOST:PORT --election-type PREFERRED \\
        --all-topic-partitions
    kcore leader-election --bootstrap-server HOST:PORT --election-type UNCLEAN \\
        --topic T --partition 0
    kcore leader-election --bootstrap-server HOST:PORT --election-type PREFERRED \\
        --path-to-json-file partitions.json   # {"partitions": [{"topic": "t", "partition": 0}]}

It prints what Kafka prints: `Successfully completed leader election (PREFERRED) for
partitions t-0, t-1`, `Valid replica already elected for partitions t-2`, and for each
failure `Error completing leader election (PREFERRED) for partition: t-3: <error>`, then
fails with the count of partitions that could not be elected.
"""

from __future__ import annotations

import argparse
import json

import trio

from kcore import errors
from kcore.client import Admin
from kcore.common import TopicPartition
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_command_config,
    admin_config,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    add_command_config(parser, "--admin.config")
    parser.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=("PREFERRED", "UNCLEAN"),
        help="PREFERRED: the first assigned replica, if in sync; UNCLEAN: any live replica "
        "of a partition without a leader",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--topic", help="with --partition: one partition")
    which.add_argument("--path-to-json-file", help='{"partitions": [{"topic": T, "partition": P}]}')
    parser.add_argument("--partition", type=int)


def check(args: argparse.Namespace) -> None:
    if (args.topic is None) != (args.partition is None):
        raise UsageError("--topic and --partition go together")


def partitions_from_json(text: str, where: str) -> list[TopicPartition]:
    """Kafka's JSON file of partitions; a ToolError naming the file when it is not that."""
    try:
        listed = json.loads(text)["partitions"]
        partitions = [TopicPartition(str(p["topic"]), int(p["partition"])) for p in listed]
    except (ValueError, KeyError, TypeError) as error:
        raise ToolError(
            f'{where} is not {{"partitions": [{{"topic": ..., "partition": ...}}]}}: {error!r}'
        ) from None
    duplicates = sorted({str(tp) for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise ToolError(
            f"Replica election data contains duplicate partitions: {', '.join(duplicates)}"
        )
    return partitions


def outcome_lines(
    election_type: str, outcomes: dict[TopicPartition, errors.KafkaError | None]
) -> tuple[list[str], int]:
    """What Kafka's LeaderElectionCommand prints for the outcomes, and how many failed."""
    elected = [str(tp) for tp, error in sorted(outcomes.items()) if error is None]
    not_needed = [
        str(tp)
        for tp, error in sorted(outcomes.items())
        if isinstance(error, errors.ElectionNotNeededError)
    ]
    failed = {
        tp: error
        for tp, error in sorted(outcomes.items())
        if error is not None and not isinstance(error, errors.ElectionNotNeededError)
    }
    lines = []
    if elected:
        lines.append(
            f"Successfully completed leader election ({election_type}) for partitions "
            + ", ".join(elected)
        )
    if not_needed:
        lines.append("Valid replica already elected for partitions " + ", ".join(not_needed))
    for tp, error in failed.items():
        lines.append(
            f"Error completing leader election ({election_type}) for partition: {tp}: "
            f"{type(error).__name__}: {error}"
        )
    return lines, len(failed)


async def run(args: argparse.Namespace) -> int:
    if args.path_to_json_file is not None:
        path = trio.Path(args.path_to_json_file)
        try:
            text = await path.read_text(encoding="utf-8")
        except OSError as error:
            raise ToolError(f"cannot read {path}: {error.strerror}") from None
        partitions: list[TopicPartition] | None = partitions_from_json(text, str(path))
    elif args.topic is not None:
        partitions = [TopicPartition(args.topic, args.partition)]
    else:
        partitions = None
    async with Admin(
        args.bootstrap_server, **await admin_config(args, "kcore-leader-election")
    ) as admin:
        outcomes = await admin.elect_leaders(partitions, election_type=args.election_type.lower())
    lines, failures = outcome_lines(args.election_type, outcomes)
    if lines:
        print("\n".join(lines))
    if failures:
        raise ToolError(f"{failures} replica(s) could not be elected")
    return 0


TOOL = Tool(
    "leader-election",
    "Elect preferred or unclean leaders (Kafka's kafka-leader-election.sh).",
    add_arguments,
    run,
    check,
)
