"""`kcore consumer-groups`: Kafka's kafka-consumer-groups.sh (Kafka 3.5's
ConsumerGroupCommand), over kcore's Admin.

    kcore consumer-groups --bootstrap-server HOST:PORT --list
    kcore consumer-groups --bootstrap-server HOST:PORT --describe --group G [--members | --state]
    kcore consumer-groups --bootstrap-server HOST:PORT --delete --group G [--group G2]

`--describe` prints, as Kafka does, each partition the group committed for or is assigned
with its committed offset, the log end offset and the lag, and the member consuming it;
`--members` the members with their partition counts; `--state` the coordinator, the assignor,
the state and the member count. A group without members says so first.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from kcore.client import Admin
from kcore.client.group_admin import GroupDescription
from kcore.common import TopicPartition
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_command_config,
    admin_config,
)

_MIN_WIDTH = 15  # Kafka pads the variable columns to at least this


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    add_command_config(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe the given groups")
    actions.add_argument("--delete", action="store_true", help="delete the given groups")
    parser.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="with --describe: the members")
    shown.add_argument("--state", action="store_true", help="with --describe: the group's state")
    shown.add_argument("--offsets", action="store_true", help="with --describe (the default)")


def check(args: argparse.Namespace) -> None:
    if (args.describe or args.delete) and not args.group:
        raise UsageError("--describe and --delete need --group")
    if (args.members or args.state or args.offsets) and not args.describe:
        raise UsageError("--members, --state and --offsets go with --describe")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], fixed: dict[int, int]) -> str:
    """Kafka's layout: each column left-aligned, padded to its width (a fixed width where
    Kafka fixes one, else the longest value but at least 15), one space between."""
    cells = [[str(v) for v in row] for row in [header, *rows]]
    widths = [
        fixed.get(i, max(_MIN_WIDTH, *(len(row[i]) for row in cells))) for i in range(len(header))
    ]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append(" ".join([*padded, row[-1]]).rstrip())
    return "\n" + "\n".join(lines)


def offsets_table(
    group: GroupDescription, committed: dict[TopicPartition, int], ends: dict[TopicPartition, int]
) -> str:
    owner = {tp: member for member in group.members for tp in member.assignment}
    rows = []
    for tp in sorted(set(committed) | set(owner)):
        offset = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if offset is None or end is None else max(0, end - offset)
        member = owner.get(tp)
        rows.append([
            group.group_id, tp.topic, tp.partition, "-" if offset is None else offset,
            "-" if end is None else end, lag, member.member_id if member else "-",
            member.host if member else "-", member.client_id if member else "-",
        ])  # fmt: skip
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
    return _table(header, rows, {2: 10, 3: 15, 4: 15, 5: 15})


def members_table(group: GroupDescription) -> str:
    rows = [
        [group.group_id, m.member_id, m.host, m.client_id, len(m.assignment)]
        for m in sorted(group.members, key=lambda m: m.member_id)
    ]
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    return _table(header, rows, {})


def state_table(group: GroupDescription, coordinator: str) -> str:
    row = [group.group_id, coordinator, group.protocol, group.state, len(group.members)]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    return _table(header, [row], {})


async def run(args: argparse.Namespace) -> int:
    async with Admin(
        args.bootstrap_server, **await admin_config(args, "kcore-consumer-groups")
    ) as admin:
        if args.list:
            for listing in await admin.list_groups():
                print(listing.group_id)
            return 0
        if args.delete:
            await admin.delete_groups(args.group)
            names = ", ".join(f"'{g}'" for g in args.group)
            print(f"Deletion of requested consumer groups ({names}) was successful.")
            return 0
        for group_id in args.group:
            group = await admin.describe_group(group_id)
            if group.state == "Dead":
                raise ToolError(f"Consumer group '{group_id}' does not exist.")
            if args.state:
                cluster = await admin.describe_cluster()
                broker = next((b for b in cluster.brokers if b.node_id == group.coordinator), None)
                where = f"{broker.host}:{broker.port}" if broker else "-"
                print(state_table(group, f"{where} ({group.coordinator})"))
                continue
            if not group.members:
                print(f"\nConsumer group '{group_id}' has no active members.")
            if args.members:
                if group.members:
                    print(members_table(group))
                continue
            committed = await admin.list_group_offsets(group_id)
            partitions = set(committed) | {tp for m in group.members for tp in m.assignment}
            ends = await admin.end_offsets(partitions) if partitions else {}
            print(offsets_table(group, committed, ends))
    return 0


TOOL = Tool(
    "consumer-groups",
    "List, describe and delete consumer groups (Kafka's kafka-consumer-groups.sh).",
    add_arguments,
    run,
    check,
)
