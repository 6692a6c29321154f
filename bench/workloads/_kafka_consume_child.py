"""The consumer side of the consume workload, run in a child process, as a script:

    python -P bench/workloads/_kafka_consume_child.py --client kcore|confluent \\
        --bootstrap H:P --topic T --ends 0:N0,1:N1,... --consumers 1,3 --group-prefix G ...

A script that imports nothing of `bench` (`-P`: nor anything beside it): a module under
`bench.workloads` imports the workload registry, every workload and kcore with it, 1.1 s
of each child's start for the confluent one. So `emit` and the error classes are this
file's own (the same as in _kafka_produce_child.py), and kcore is imported by its client
only.

Why a child: the load generator gets a process (and a core) of its own, whichever cluster
it reads from and whichever client it is (in the single-process cluster it would
otherwise share the cluster's one Trio thread; librdkafka's threads would share its GIL).
Both clients run under the same conditions: one process per (client, repeat), running one
case per number in `--consumers` in turn. A case of 1 consumer assigns itself every
partition (no group, no commits); a case of N > 1 is a group of N (`{group-prefix}-xN`,
Kafka's default range assignor, auto-commit on as by default) that shares them.

Each case reads `--topic` from the beginning until every partition is read up to its end
offset in `--ends` (what the parent produced). Its warm-up is everything before the first
records come back (connecting, metadata, the group's join, the offset look-ups, the first
fetch): those records are read, checked and not measured. Records are checked against the
offsets expected per partition (shared by the group's members): one at an offset already
read is a duplicate, a jump over offsets is counted as skipped.

Reports on stdout, one JSON object per line (the parent reads nothing else from stdout; its
`kafka_produce._run_child` reads them):

- `{"type": "ready", "client": name, ...}`  the client is importable and knows the topic;
- `{"type": "interval", "consumers": n, "start": wall s, "seconds": s, "count": n,
  "bytes": b}`                                   per interval of a case, while measuring;
- `{"type": "done", "cases": [{"consumers": n, "count": measured, "bytes": b,
  "seconds": s, "cpu_s": s, "records": all read, "duplicates": n, "skipped": n,
  "unread": n, "first_records_s": s, "errors": {name: n}}, ...]}` once every case read
  its records (before the consumers of the last case are closed);
- `{"type": "error", "error": name, "message": text}` instead, then exit status 1.

A case that has not read every record within `--read-timeout` seconds of its first
records ends with what it read (`unread` says how many were left).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["CLIENTS", "OffsetTracker", "main"]

CLIENTS = ("kcore", "confluent")
POLL_SECONDS = 0.2  # a consumer's longest wait in one poll: how late it sees the end


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workloads._kafka_consume_child",
        description="consume for the consume workload; JSON lines on stdout",
    )
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True, help='"host:port,host:port"')
    parser.add_argument("--topic", required=True)
    parser.add_argument("--ends", required=True, help="each partition's end offset: 0:N0,1:N1,...")
    parser.add_argument(
        "--consumers", default="1", help="the cases, in order: consumers each (1: no group)"
    )
    parser.add_argument("--group-prefix", default="consume-bench")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds per report")
    parser.add_argument(
        "--ready-timeout", type=float, default=20.0, help="seconds until the topic is known"
    )
    parser.add_argument(
        "--first-records-timeout",
        type=float,
        default=30.0,
        help="seconds from a case's start to its first records (a group's join included)",
    )
    parser.add_argument(
        "--read-timeout", type=float, default=60.0, help="seconds to read a case's records"
    )
    parser.add_argument(
        "--close-timeout", type=float, default=10.0, help="seconds to close a case's consumers"
    )
    return parser


def parse_ends(text: str) -> dict[int, int]:
    ends = {}
    for item in text.split(","):
        partition, end = item.split(":")
        ends[int(partition)] = int(end)
    return ends


def emit(kind: str, **fields: object) -> None:
    # One write per line, flushed: the parent reads lines as they come.
    sys.stdout.write(json.dumps({"type": kind, **fields}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class ChildError(Exception):
    """A failure the child names itself (its class name is the row's outcome)."""


class ClientMissing(ChildError):
    """The client library is not importable in this interpreter."""


class NoRecords(ChildError):
    """A case's consumers returned no record in time: the cluster is unreachable, does not
    speak this client's protocol, or the group never formed."""


class OffsetTracker:
    """What a case's consumers read, partition by partition: the next offset expected of
    each, duplicates and skipped offsets, records and bytes counted while measuring, and
    whether every partition is read up to its end. Shared by a group's members (a
    partition belongs to one at a time); `lock` is for consumers on threads."""

    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = dict(ends)
        self.expected = {partition: 0 for partition in ends}
        self.records = 0  # returned by the client, duplicates included
        self.duplicates = 0
        self.skipped = 0
        self.count = 0  # records while measuring: after the first poll that returned any
        self.bytes = 0
        self.first_records_at: float | None = None  # monotonic
        self.last_records_at: float | None = None
        self.lock = threading.Lock()
        self.finished = all(end <= 0 for end in ends.values())

    def add(self, read: Iterable[tuple[int, int, int]]) -> None:
        """`read`: (partition, offset, value bytes) of the records one poll returned."""
        expected = self.expected
        records = nbytes = 0
        for partition, offset, size in read:
            records += 1
            nbytes += size
            next_offset = expected.get(partition, 0)
            if offset < next_offset:
                self.duplicates += 1
                continue
            if offset > next_offset:
                self.skipped += offset - next_offset
            expected[partition] = offset + 1
        if not records:
            return
        now = time.monotonic()
        self.records += records
        if self.first_records_at is None:
            self.first_records_at = now  # the warm-up's end: these records are not measured
        else:
            self.count += records
            self.bytes += nbytes
        self.last_records_at = now
        self.finished = all(expected.get(p, 0) >= end for p, end in self.ends.items())

    @property
    def unread(self) -> int:
        return sum(max(0, end - self.expected.get(p, 0)) for p, end in self.ends.items())


class Meter:
    """Interval reports for one case: `begin()` when its first records came, then
    `tick()` at each interval's end and `end()` once all is read (the last, shorter,
    interval ends at the last records)."""

    def __init__(self, args: argparse.Namespace, consumers: int, tracker: OffsetTracker) -> None:
        self.args, self.consumers, self.tracker = args, consumers, tracker
        self.wall_anchor, self.mono_anchor = time.time(), time.monotonic()
        self.began: float | None = None

    def begin(self) -> None:
        tracker = self.tracker
        assert tracker.first_records_at is not None
        self.began = self.start = tracker.first_records_at
        self.cpu_start = time.process_time()  # every thread's: librdkafka's too
        self.last_count = self.last_bytes = 0
        self.next_report = self.start + self.args.interval
        self.deadline = self.start + self.args.read_timeout

    def _report(self, until: float) -> None:
        tracker = self.tracker
        count, nbytes = tracker.count, tracker.bytes
        if until > self.start:
            emit(
                "interval",
                consumers=self.consumers,
                start=self.wall_anchor + (self.start - self.mono_anchor),
                seconds=until - self.start,
                count=count - self.last_count,
                bytes=nbytes - self.last_bytes,
            )
        self.start, self.last_count, self.last_bytes = until, count, nbytes
        self.next_report = until + self.args.interval

    def tick(self) -> bool:
        """Reports the interval if it ended; True once the case is over (all read, or
        past its deadline)."""
        now = time.monotonic()
        if self.tracker.finished or now >= self.deadline:
            return True
        if now >= self.next_report:
            self._report(now)
        return False

    def end(self, errors: Counter[str]) -> dict[str, object]:
        """The last interval (up to the last records) and the case's figures."""
        tracker = self.tracker
        assert self.began is not None
        last = tracker.last_records_at or self.start
        self._report(max(last, self.start))
        return {
            "consumers": self.consumers,
            "count": tracker.count,
            "bytes": tracker.bytes,
            "seconds": max(0.0, last - self.began),
            "cpu_s": time.process_time() - self.cpu_start,
            "records": tracker.records,
            "duplicates": tracker.duplicates,
            "skipped": tracker.skipped,
            "unread": tracker.unread,
            "first_records_s": self.began - self.mono_anchor,
            "errors": dict(errors),
        }


# -- confluent-kafka ---------------------------------------------------------------------


def run_confluent(args: argparse.Namespace, ends: dict[int, int], cases: list[int]) -> None:
    """confluent-kafka (librdkafka) through Kafka's protocol: each consumer on a thread of
    its own, `consume(500)` in a loop (it releases the GIL while it waits)."""
    try:
        import confluent_kafka
    except ImportError as error:
        raise ClientMissing(
            f"confluent-kafka is not importable by {sys.executable} ({error}); "
            "install it: pip install confluent-kafka"
        ) from error

    def new_consumer(group: str, index: int, grouped: bool):
        return confluent_kafka.Consumer(
            {
                "bootstrap.servers": args.bootstrap,
                "client.id": f"consume-bench-{index}",
                "group.id": group,
                "auto.offset.reset": "earliest",
                # A lone consumer assigns itself the partitions: nothing to commit.
                "enable.auto.commit": grouped,
                "enable.partition.eof": False,
            }
        )

    probe = new_consumer(f"{args.group_prefix}-probe", 0, False)
    try:
        described = probe.list_topics(args.topic, timeout=args.ready_timeout).topics.get(args.topic)
    except confluent_kafka.KafkaException as error:
        raise NoRecords(f"confluent-kafka: no metadata from {args.bootstrap}: {error}") from error
    finally:
        probe.close()
    if described is None or described.error is not None or not described.partitions:
        raise NoRecords(f"confluent-kafka: {args.bootstrap} does not know {args.topic}")
    emit("ready", client="confluent", version=confluent_kafka.version()[0])

    results = [_confluent_case(args, confluent_kafka, new_consumer, ends, n) for n in cases]
    emit("done", cases=results)


def _confluent_case(args, confluent_kafka, new_consumer, ends: dict[int, int], number: int):
    grouped = number > 1
    tracker = OffsetTracker(ends)
    meter = Meter(args, number, tracker)
    errors: Counter[str] = Counter()
    stop = threading.Event()
    consumers = [
        new_consumer(f"{args.group_prefix}-x{number}", index, grouped) for index in range(number)
    ]
    if grouped:
        for consumer in consumers:
            consumer.subscribe([args.topic])
    else:
        consumers[0].assign(
            [
                confluent_kafka.TopicPartition(args.topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in sorted(ends)
            ]
        )

    def read(consumer) -> None:
        consume, add, lock = consumer.consume, tracker.add, tracker.lock
        while not stop.is_set():
            messages = consume(num_messages=500, timeout=POLL_SECONDS)
            good = []
            for message in messages:
                error = message.error()
                if error is None:
                    good.append(message)
                    continue
                with lock:
                    errors[error.name()] += 1
                if error.fatal():
                    stop.set()
                    return
            with lock:
                add((m.partition(), m.offset(), len(m.value())) for m in good)
                if tracker.finished:
                    stop.set()

    threads = [threading.Thread(target=read, args=(c,), daemon=True) for c in consumers]
    for thread in threads:
        thread.start()
    try:
        _meter_case(args, meter, tracker, stop.is_set, errors)
        stop.set()
        return meter.end(errors)
    finally:
        stop.set()
        for thread in threads:
            thread.join(args.close_timeout)
        for consumer in consumers:  # a group member commits and leaves
            consumer.close()


def _meter_case(args, meter: Meter, tracker: OffsetTracker, stopped, errors) -> None:
    """On the main thread while the consumers' threads read: waits for the case's first
    records (then measures), reporting each interval, until all is read."""
    deadline = time.monotonic() + args.first_records_timeout
    while tracker.first_records_at is None:
        if time.monotonic() >= deadline or stopped():
            raise NoRecords(
                f"confluent-kafka: no records from {args.bootstrap} within "
                f"{args.first_records_timeout} s ({meter.consumers} consumer(s); "
                f"errors: {dict(errors) or 'none'})"
            )
        time.sleep(0.005)
    meter.begin()
    while not meter.tick():
        time.sleep(min(0.005, max(0.0, meter.next_report - time.monotonic())))


# -- kcore ---------------------------------------------------------------------------------


def run_kcore(args: argparse.Namespace, ends: dict[int, int], cases: list[int]) -> None:
    """kcore's own `kcore.Consumer` through kcore's msgpack protocol, in `trio.run`: each
    consumer polls in a task of its own."""
    import trio

    import kcore

    async def read_all() -> None:
        known: dict = {}
        async with kcore.Consumer(args.bootstrap, client_id="consume-bench-probe") as probe:
            with trio.move_on_after(args.ready_timeout):
                known = await probe.end_offsets([(args.topic, p) for p in sorted(ends)])
        if len(known) < len(ends):
            raise NoRecords(
                f"kcore.Consumer: no offsets of {args.topic} from {args.bootstrap} within "
                f"{args.ready_timeout} s"
            )
        emit("ready", client="kcore")
        results = []
        for number in cases:
            results.append(await _kcore_case(args, ends, number))
        emit("done", cases=results)

    trio.run(read_all)


async def _kcore_case(args: argparse.Namespace, ends: dict[int, int], number: int) -> dict:
    import trio

    import kcore

    grouped = number > 1
    tracker = OffsetTracker(ends)
    meter = Meter(args, number, tracker)
    errors: Counter[str] = Counter()
    settings = {"group_id": f"{args.group_prefix}-x{number}"} if grouped else {}
    async with contextlib.AsyncExitStack() as stack:
        consumers = [
            await stack.enter_async_context(
                kcore.Consumer(args.bootstrap, client_id=f"consume-bench-{index}", **settings)
            )
            for index in range(number)
        ]
        if grouped:
            for consumer in consumers:
                consumer.subscribe([args.topic])
        else:
            consumers[0].assign([(args.topic, p) for p in sorted(ends)])
            consumers[0].seek_to_beginning()
        first_records, done = trio.Event(), trio.Event()

        async def read(consumer) -> None:
            add = tracker.add
            while not tracker.finished:
                records = await consumer.poll(timeout=POLL_SECONDS)
                if records:
                    add((r.partition, r.offset, len(r.value)) for r in records)
                    first_records.set()
            done.set()

        async def meter_case() -> None:
            with trio.move_on_after(args.first_records_timeout):
                await first_records.wait()
            if not first_records.is_set():
                raise NoRecords(
                    f"kcore.Consumer: no records from {args.bootstrap} within "
                    f"{args.first_records_timeout} s ({number} consumer(s))"
                )
            meter.begin()
            while not meter.tick():
                with trio.move_on_after(max(0.0, meter.next_report - time.monotonic())):
                    await done.wait()

        async with trio.open_nursery() as nursery:
            for consumer in consumers:
                nursery.start_soon(read, consumer)
            await meter_case()
            nursery.cancel_scope.cancel()  # the polls still waiting
        result = meter.end(errors)
    # Closed (a group member commits and leaves), not measured; the parent bounds it.
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        ends = parse_ends(args.ends)
        cases = [int(n) for n in args.consumers.split(",")]
        (run_confluent if args.client == "confluent" else run_kcore)(args, ends, cases)
    except Exception as error:  # reported to the parent, which writes it as an error row
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        emit("error", error=type(error).__name__, message=str(error) or repr(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
