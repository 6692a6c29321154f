"""`kcore console-consumer`: Kafka's kafka-console-consumer.sh over kcore's Consumer: the
topic's records on standard output, a value per line.

    kcore console-consumer --bootstrap-server HOST:PORT --topic T --from-beginning \\
        --max-messages 10 --property print.key=true --property key.separator=:
    kcore console-consumer --bootstrap-server HOST:PORT --topic T --partition 0 --offset 42

With `--group` the tool joins that consumer group and reads the partitions the group gives
it, from the group's committed offsets (where there are none, from the end, or the start
with `--from-beginning`), committing as it goes and when it stops. Without, it reads every
partition of the topic (or `--partition`) by assignment, from the end (from the start with
`--from-beginning`, from `--offset` of one partition). `--property` configures the output as
Kafka's DefaultMessageFormatter (`print.key`, `print.value`, `print.partition`,
`print.offset`, `print.timestamp`, `print.headers`, `key.separator`, `line.separator`,
`headers.separator`, `null.literal`). At the end, as Kafka, `Processed a total of N
messages` on standard error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import BinaryIO

import attrs

from kcore.client import Admin, Consumer, ConsumerRecord
from kcore.common import TopicPartition
from kcore.tools._tool import (
    Tool,
    ToolError,
    UsageError,
    add_bootstrap_server,
    add_key_values,
    client_config,
    key_values,
    properties_to_fields,
    read_properties_file,
    security_settings,
)

_IDLE_POLL_SECONDS = 1.0  # a poll's wait without --timeout-ms (the loop polls again)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    parser.add_argument("--topic", required=True, help="the topic to consume")
    parser.add_argument("--partition", type=int, help="consume this partition only")
    parser.add_argument(
        "--offset",
        help="where to start in --partition: earliest, latest (the default) or an offset",
    )
    parser.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest record"
    )
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument("--timeout-ms", type=int, help="exit when no record came for this long")
    add_key_values(parser, "--property", "output setting, e.g. print.key=true (repeatable)")
    add_key_values(
        parser,
        "--consumer-property",
        "a consumer setting, e.g. fetch.max.wait.ms=100 (repeatable)",
    )
    parser.add_argument("--group", help="the consumer group to consume in")
    parser.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="FILE",
        help="consumer settings in a properties file (--consumer-property wins)",
    )


def check(args: argparse.Namespace) -> None:
    key_values(args.property, "--property")
    key_values(args.consumer_property, "--consumer-property")
    if args.group is not None and (args.partition is not None or args.offset is not None):
        raise UsageError("Options group and partition/offset cannot be specified together.")
    if args.offset is not None:
        if args.partition is None:
            raise UsageError("The partition is required when offset is specified.")
        if args.from_beginning:
            raise UsageError("Options from-beginning and offset cannot be specified together.")
        if args.offset not in ("earliest", "latest") and not args.offset.isdigit():
            raise UsageError(
                f"The provided offset value '{args.offset}' is incorrect. Valid values are "
                "'earliest', 'latest', or a non-negative long."
            )


@attrs.frozen
class RecordFormat:
    """Kafka's DefaultMessageFormatter: which parts of a record are printed and between
    which separators."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RecordFormat:
        return properties_to_fields(cls, properties, "--property")

    def format(self, record: ConsumerRecord) -> bytes:
        """The record's bytes as Kafka's formatter writes them: the chosen columns, each
        followed by the key separator, the last one by the line separator."""
        columns = []
        if self.print_timestamp:
            columns.append(b"CreateTime:%d" % record.timestamp)
        if self.print_partition:
            columns.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            columns.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            columns.append(self._headers(record.headers))
        if self.print_key:
            columns.append(self._bytes(record.key))
        if self.print_value:
            columns.append(self._bytes(record.value))
        if not columns:
            return b""
        return self.key_separator.join(columns) + self.line_separator

    def _bytes(self, value: bytes | None) -> bytes:
        return self.null_literal if value is None else value

    def _headers(self, headers: tuple[tuple[str, bytes | None], ...]) -> bytes:
        if not headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(
            key.encode() + b":" + self._bytes(value) for key, value in headers
        )


async def run(args: argparse.Namespace) -> int:
    record_format = RecordFormat.from_properties(key_values(args.property, "--property"))
    settings: dict[str, object] = {"client_id": "console-consumer"}
    if args.group is not None:
        settings["group_id"] = args.group
    # Kafka's console consumer resets a position out of range as its start says.
    settings["auto_offset_reset"] = "earliest" if _starts_earliest(args) else "latest"
    properties = {}
    if args.consumer_config is not None:
        properties = await read_properties_file(args.consumer_config, "--consumer.config")
    properties.update(key_values(args.consumer_property, "--consumer-property"))
    security, _ = security_settings(properties, "--consumer-property")
    settings.update(client_config(properties, Consumer, "--consumer-property"))
    admin = Admin(args.bootstrap_server, client_id="console-consumer-admin", **security)
    async with admin:
        partitions = [p.partition for p in (await admin.describe_topic(args.topic)).partitions]
    if args.partition is not None:
        if args.partition not in partitions:
            raise ToolError(
                f"topic '{args.topic}' has no partition {args.partition} "
                f"(its partitions: 0..{len(partitions) - 1})"
            )
        partitions = [args.partition]
    consumed = Consumed()
    try:
        async with Consumer(args.bootstrap_server, **settings) as consumer:
            if args.group is not None:
                consumer.subscribe([args.topic])
            else:
                tps = [TopicPartition(args.topic, p) for p in partitions]
                consumer.assign(tps)
                _position(consumer, tps, args)
            await _consume(consumer, args, record_format, sys.stdout.buffer, consumed)
    finally:
        # Kafka reports the count however the consumer stopped (Ctrl-C included).
        print(f"Processed a total of {consumed.records} messages", file=sys.stderr)
    return 0


@attrs.define
class Consumed:
    records: int = 0


def _starts_earliest(args: argparse.Namespace) -> bool:
    return args.from_beginning or args.offset == "earliest"


def _position(consumer: Consumer, tps: list[TopicPartition], args: argparse.Namespace) -> None:
    if args.offset is not None and args.offset.isdigit():
        consumer.seek(tps[0], int(args.offset))
    elif _starts_earliest(args):
        consumer.seek_to_beginning()
    else:
        consumer.seek_to_end()


async def _consume(
    consumer: Consumer,
    args: argparse.Namespace,
    record_format: RecordFormat,
    out: BinaryIO,
    consumed: Consumed,
) -> None:
    """Writes records until --max-messages, or until a poll of --timeout-ms came back
    empty, counting them in `consumed`."""
    wait = _IDLE_POLL_SECONDS if args.timeout_ms is None else args.timeout_ms / 1000
    while args.max_messages is None or consumed.records < args.max_messages:
        records = await consumer.poll(timeout=wait)
        if not records and args.timeout_ms is not None:
            break
        if args.max_messages is not None:
            records = records[: args.max_messages - consumed.records]
        try:
            out.write(b"".join(record_format.format(record) for record in records))
            out.flush()
        except BrokenPipeError:
            # The reader went away (`| head`): stop, as Kafka does.
            print("Unable to write to standard out, closing consumer.", file=sys.stderr)
            _discard_standard_output()
            break
        consumed.records += len(records)


def _discard_standard_output() -> None:
    """Points standard output at /dev/null, so Python's own flush at exit does not fail on
    the closed pipe again."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


TOOL = Tool(
    "console-consumer",
    "Print a topic's records on standard output (Kafka's kafka-console-consumer.sh).",
    add_arguments,
    run,
    check,
)
