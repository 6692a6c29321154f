"""`kcore console-producer`: Kafka's kafka-console-producer.sh over kcore's Producer: one
record per line of standard input, in line order.

    printf 'one\\ntwo\\n' | kcore console-producer --bootstrap-server HOST:PORT --topic T
    kcore console-producer --bootstrap-server HOST:PORT --topic T \\
        --property parse.key=true --property key.separator=: --producer-property acks=1

`--property` configures the line reader as Kafka's LineMessageReader (`parse.key`,
`key.separator`, default a tab, `ignore.error`); `--producer-property` takes Kafka's producer
settings that kcore's Producer has (`acks`, `linger.ms`, `compression.type`, ...). Records
that were not acknowledged are counted at the end, on one line, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Mapping

import attrs
import trio

from kcore import errors
from kcore.client import Producer
from kcore.tools._tool import (
    Tool,
    ToolError,
    add_bootstrap_server,
    add_key_values,
    client_config,
    key_values,
    properties_to_fields,
    read_properties_file,
)

# Records in flight at once: enough to keep batches full, few enough to bound memory.
MAX_IN_FLIGHT = 1000
_READ_SIZE = 65536


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_server(parser)
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    add_key_values(
        parser,
        "--property",
        "line reader setting: parse.key, key.separator, ignore.error (repeatable)",
    )
    add_key_values(parser, "--producer-property", "a producer setting, e.g. acks=all (repeatable)")
    parser.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="producer settings in a properties file (--producer-property wins)",
    )


def check(args: argparse.Namespace) -> None:
    key_values(args.property, "--property")
    key_values(args.producer_property, "--producer-property")


@attrs.frozen
class LineReader:
    """Kafka's LineMessageReader: a line is the record's value, or with `parse.key` its key,
    the first `key.separator`, then its value."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> LineReader:
        return properties_to_fields(cls, properties, "--property")

    def record(self, line: bytes, line_number: int) -> tuple[bytes | None, bytes]:
        """(key, value) of one line (without its line ending)."""
        if not self.parse_key:
            return None, line
        at = line.find(self.key_separator)  # Kafka's indexOf
        if at >= 0:
            return line[:at], line[at + len(self.key_separator) :]
        if self.ignore_error:
            return None, line
        raise ToolError(f"No key found on line {line_number}: {line.decode(errors='replace')}")


@attrs.define
class Delivery:
    """What became of the records sent: how many, and the errors of those that failed."""

    sent: int = 0
    failures: list[errors.KafkaError] = attrs.field(factory=list)

    def summary(self) -> str | None:
        """One line about the records not delivered; None when every one was."""
        if not self.failures:
            return None
        first = self.failures[0]
        return (
            f"{len(self.failures)} of {self.sent} records were not delivered; the first: "
            f"{type(first).__name__}: {first}"
        )


async def run(args: argparse.Namespace) -> int:
    reader = LineReader.from_properties(key_values(args.property, "--property"))
    properties = {}
    if args.producer_config is not None:
        properties = await read_properties_file(args.producer_config, "--producer.config")
    properties.update(key_values(args.producer_property, "--producer-property"))
    settings = {"client_id": "console-producer"}
    settings.update(client_config(properties, Producer, "--producer-property"))
    lines = StandardInput(sys.stdin.fileno())
    async with Producer(args.bootstrap_server, **settings) as producer:
        delivery = await produce_lines(producer, args.topic, lines.read_line, reader)
    summary = delivery.summary()
    if summary is not None:
        raise ToolError(summary)
    return 0


class StandardInput:
    """Lines of standard input, read from its file descriptor on a worker thread that
    Ctrl-C abandons: a read waiting at a terminal could not be interrupted otherwise, and
    an abandoned read must not hold the lock of Python's buffered `sys.stdin` (the
    interpreter would wait for it at exit)."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor = descriptor
        self._pending = bytearray()
        self._ended = False

    async def read_line(self) -> bytes:
        """The next line with its ending; b"" once the input has ended."""
        while True:
            end = self._pending.find(b"\n") + 1
            if end or self._ended:
                end = end or len(self._pending)
                line = bytes(self._pending[:end])
                del self._pending[:end]
                return line
            chunk = await trio.to_thread.run_sync(
                os.read, self._descriptor, _READ_SIZE, abandon_on_cancel=True
            )
            self._pending += chunk
            self._ended = not chunk


async def produce_lines(
    producer: Producer,
    topic: str,
    read_line: Callable[[], Awaitable[bytes]],
    reader: LineReader,
) -> Delivery:
    """Sends a record per line until `read_line` gives b"", many in flight, in line
    order: each send is started on a task of its own and given a scheduling round to reach
    the producer's queue before the next one starts. (A task started in one round of Trio's
    scheduler runs in the next round at the latest, and `send` queues its record without
    waiting once the topic's metadata is known, which it is, looked up first.)"""
    delivery = Delivery()
    await producer.partitions_for(topic)  # UnknownTopicOrPartitionError after max.block.ms
    in_flight = trio.Semaphore(MAX_IN_FLIGHT)

    async def send(key: bytes | None, value: bytes) -> None:
        try:
            await producer.send_and_wait(topic, value, key=key)
        except errors.KafkaError as error:
            delivery.failures.append(error)
        finally:
            in_flight.release()

    async with trio.open_nursery() as nursery:
        line_number = 0
        while line := await read_line():
            line_number += 1
            key, value = reader.record(without_line_ending(line), line_number)
            await in_flight.acquire()
            nursery.start_soon(send, key, value)
            delivery.sent += 1
            await trio.lowlevel.checkpoint()
    return delivery


def without_line_ending(line: bytes) -> bytes:
    """The line without its ending (LF or CR LF), as Java's readLine strips it."""
    if line.endswith(b"\n"):
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
    return line


TOOL = Tool(
    "console-producer",
    "Produce a record per line of standard input (Kafka's kafka-console-producer.sh).",
    add_arguments,
    run,
    check,
)
