"""The producer side of the kafka-produce workload, run in a child process:

    python -m bench.workloads._kafka_produce_child --client confluent|kcore --bootstrap H:P ...

Why a child: the workload compares two clients on one cluster. In the parent's process a
client would share the cluster's one Trio thread (and core); here each client gets a
process (and core) of its own, under the same conditions for both. The child
produces `--record-bytes` records to `--topic` (round-robin over its partitions) for
`--warmup` then `--duration` seconds, counting only acknowledged records, and reports on
stdout, one JSON object per line (the parent reads nothing else from stdout):

- `{"type": "ready", ...}`     the first record was acknowledged: the client is connected;
- `{"type": "begin"}`          the warm-up is over: measuring starts;
- `{"type": "interval", "start": wall seconds, "seconds": s, "count": n}` per interval;
- `{"type": "done", "count": n, "seconds": s, "cpu_s": s, "errors": {name: n}}` when
  measuring ends (before the client is closed: its flush is not measured); `cpu_s` is the
  CPU time this process used while measuring (whether the client was the bottleneck);
- `{"type": "error", "error": name, "message": text}` instead, then exit status 1.

Intervals are timed with the monotonic clock and stamped with the wall clock read once at
the start (the parent's rows are wall-clock stamped too), like bench/_clock.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence

__all__ = ["CLIENTS", "main"]

CLIENTS = ("kcore", "confluent")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workloads._kafka_produce_child",
        description="produce for the kafka-produce workload; JSON lines on stdout",
    )
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True, help='"host:port,host:port"')
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--acks", choices=("0", "1", "all"), required=True)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--duration", type=float, required=True, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--interval", type=float, default=0.25, help="seconds per report")
    parser.add_argument("--in-flight", type=int, default=512, help="records unacknowledged")
    parser.add_argument("--linger-ms", type=int, default=10)
    parser.add_argument("--batch-bytes", type=int, default=256 * 1024)
    parser.add_argument(
        "--min-records", type=int, default=50, help="measure past --duration until this many"
    )
    parser.add_argument(
        "--overrun", type=float, default=10.0, help="how far past --duration for --min-records"
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=20.0, help="seconds for the first record's ack"
    )
    return parser


class ChildError(Exception):
    """A failure the child names itself (its class name is the row's outcome)."""


class NoAcknowledgement(ChildError):
    """The first record was not acknowledged in time: the cluster is unreachable, or does
    not speak this client's protocol."""


class ClientMissing(ChildError):
    """The client library is not importable in this interpreter."""


def emit(kind: str, **fields: object) -> None:
    # One write per line, flushed: the parent reads lines as they come.
    sys.stdout.write(json.dumps({"type": kind, **fields}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Meter:
    """Turns a growing count of acknowledged records into interval reports: `tick(acked)`
    is called often by the producing loop and reports each interval as it ends.

    Measuring starts at `begin()` (after the warm-up) and ends once `duration` passed and
    `min_records` were measured, or `overrun` seconds past that at the latest (a loaded
    machine still ends the run; the parent bounds its wait on that)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.wall_anchor, self.mono_anchor = time.time(), time.monotonic()
        self.started = False
        self.finished = False
        self.measured = 0
        self.seconds = 0.0

    def begin(self, acked: int) -> None:
        emit("begin")
        now = time.monotonic()
        self.cpu_start = time.process_time()  # every thread's: librdkafka's too
        self.started = True
        self.start, self.last = now, acked
        self.next_report = now + self.args.interval
        self.end = now + self.args.duration
        self.deadline = self.end + self.args.overrun

    def tick(self, acked: int) -> bool:
        """Reports the interval if it ended; True once measuring is over."""
        now = time.monotonic()
        if now < self.next_report:
            return False
        count = acked - self.last
        emit(
            "interval",
            start=self.wall_anchor + (self.start - self.mono_anchor),
            seconds=now - self.start,
            count=count,
        )
        self.measured += count
        self.seconds += now - self.start
        self.start, self.last = now, acked
        self.next_report = now + self.args.interval
        enough = now >= self.end and self.measured >= self.args.min_records
        self.finished = enough or now >= self.deadline
        return self.finished

    def done(self, failed: Counter[str]) -> None:
        emit(
            "done",
            count=self.measured,
            seconds=self.seconds,
            cpu_s=time.process_time() - self.cpu_start,
            errors=dict(failed),
        )


def run_confluent(args: argparse.Namespace) -> None:
    """confluent-kafka (librdkafka) through Kafka's protocol: `produce` until the local
    queue holds `--in-flight` records (BufferError), serving delivery callbacks with
    `poll(0)` after each; only records whose delivery report carries no error count."""
    try:
        import confluent_kafka
    except ImportError as error:
        raise ClientMissing(
            f"confluent-kafka is not importable by {sys.executable} ({error}); "
            "install it: pip install confluent-kafka"
        ) from error

    acked = 0
    failed: Counter[str] = Counter()
    client_errors: list[str] = []  # librdkafka's own (connection) errors, for a failure

    def on_delivery(error, _message) -> None:
        nonlocal acked
        if error is None:
            acked += 1
        else:
            failed[error.name()] += 1

    def on_error(error) -> None:
        client_errors[:] = [*client_errors[-2:], str(error)]

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "client.id": "kafka-produce-bench",
            "acks": args.acks,
            "linger.ms": args.linger_ms,
            "batch.size": args.batch_bytes,
            "compression.type": "none",
            "enable.idempotence": False,
            # The bound on records produced and not yet acknowledged (kcore's `in_flight`).
            "queue.buffering.max.messages": args.in_flight,
            # A record not acknowledged in this long fails, rather than waiting 5 minutes.
            "message.timeout.ms": max(5000, round(args.ready_timeout * 1000)),
            "on_delivery": on_delivery,
            "error_cb": on_error,
        }
    )
    value = b"x" * args.record_bytes
    produce, poll = producer.produce, producer.poll

    # Ready: one record acknowledged (metadata fetched, connections open).
    produce(args.topic, value, partition=0)
    if producer.flush(args.ready_timeout) or not acked:
        reasons = [*failed] or ["no delivery report"]
        raise NoAcknowledgement(
            f"confluent-kafka: no record acknowledged by {args.bootstrap} within "
            f"{args.ready_timeout} s ({'; '.join(reasons + client_errors)}); does the "
            "broker speak Kafka's protocol?"
        )
    emit("ready", client="confluent", version=confluent_kafka.version()[0])

    meter = Meter(args)
    warm_until = time.monotonic() + args.warmup
    sequence = 0
    partitions = args.partitions
    while True:
        try:
            produce(args.topic, value, partition=sequence % partitions)
            sequence += 1
            poll(0)
        except BufferError:  # `in_flight` records outstanding: wait for deliveries
            poll(0.001)
        if meter.started:
            if meter.tick(acked):
                break
        elif time.monotonic() >= warm_until:
            meter.begin(acked)
    meter.done(failed)
    producer.flush(args.ready_timeout)


def run_kcore(args: argparse.Namespace) -> None:
    """kcore's own `kcore.Producer` through kcore's msgpack protocol, in `trio.run`, on the
    producer's fast path as the produce workload takes it (`send_in_window`): `send`
    queues, a delivery callback counts, at most `--in-flight` records unacknowledged."""
    import trio

    import kcore
    from bench.workloads.produce import send_in_window

    async def produce() -> None:
        acked = 0
        failed: Counter[str] = Counter()
        value = b"x" * args.record_bytes
        async with kcore.Producer(
            args.bootstrap,
            acks=args.acks,
            linger_ms=args.linger_ms,
            batch_size=args.batch_bytes,
            client_id="kafka-produce-bench",
        ) as producer:
            with trio.move_on_after(args.ready_timeout):
                await producer.send_and_wait(args.topic, value, partition=0)
                acked = 1
            if not acked:
                raise NoAcknowledgement(
                    f"kcore.Producer: no record acknowledged by {args.bootstrap} within "
                    f"{args.ready_timeout} s"
                )
            emit("ready", client="kcore")
            meter = Meter(args)
            stop = trio.Event()

            def delivered(metadata: object, error: BaseException | None) -> None:
                nonlocal acked
                if error is None:
                    acked += 1
                else:  # counted, not fatal: `done` says which
                    failed[type(error).__name__] += 1

            async def measure() -> None:
                await trio.sleep(args.warmup)
                meter.begin(acked)
                finished = False
                while not finished:  # a report per interval, on time
                    await trio.sleep(max(0.0, meter.next_report - time.monotonic()))
                    finished = meter.tick(acked)
                stop.set()
                meter.done(failed)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(measure)
                await send_in_window(
                    producer, args.topic, value, partitions=args.partitions,
                    numbers=range(1, 2**62), in_flight=args.in_flight, stop=stop,
                    on_delivery=lambda _number: delivered,
                )  # fmt: skip

    trio.run(produce)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        (run_confluent if args.client == "confluent" else run_kcore)(args)
    except Exception as error:  # reported to the parent, which writes it as an error row
        # A group of one (a nursery's) says less than the error it carries.
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        emit("error", error=type(error).__name__, message=str(error) or repr(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
