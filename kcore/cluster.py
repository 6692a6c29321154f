"""`python -m kcore.cluster`: the demo. A zkstub server and 3 brokers in this process over
real TCP on 127.0.0.1, topic `demo` (6 partitions, RF 3, min.insync.replicas=2), an acks=all
producer and a consumer, and on a schedule: the controller killed, a partition's leader
killed, a follower cut off from its leader, each brought back. It ends with a verdict from
the data: records acked, consumed, lost (must be 0), duplicates, and how long each
partition went without a leader. Exit status 0 when nothing acknowledged was lost.

    python -m kcore.cluster                          # 60 s, live view on a terminal
    python -m kcore.cluster --duration 20 --no-chaos
    python -m kcore.cluster --processes              # each broker its own OS process
    python -m kcore.cluster --zookeeper 127.0.0.1:2181   # a real ZooKeeper
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import trio

from kcore.demo.display import LiveDisplay, PlainDisplay
from kcore.demo.runner import DemoOptions, run_demo
from kcore.log_context import configure_cli_logging
from zkstub import log_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kcore.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of workload")
    parser.add_argument("--no-chaos", action="store_true", help="no faults, just the workload")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=200.0, help="records per second offered")
    parser.add_argument("--zookeeper", metavar="HOST:PORT", help="use a real ZooKeeper")
    parser.add_argument(
        "--processes", action="store_true", help="run each broker as its own OS process"
    )
    parser.add_argument("--data-dir", type=pathlib.Path, help="keep logs here (default: temp)")
    parser.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    # kcore's own logging (stderr): --log-level [LOGGER=]LEVEL, --log-config, --log-format.
    log_config.add_arguments(parser, default_level="ERROR")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        options = DemoOptions(
            brokers=args.brokers,
            partitions=args.partitions,
            duration=args.duration,
            chaos=not args.no_chaos,
            seed=args.seed,
            zookeeper=args.zookeeper,
            processes=args.processes,
            data_dir=args.data_dir,
            rate=args.rate,
        )
    except ValueError as error:
        print(f"python -m kcore.cluster: {error}", file=sys.stderr)
        return 2
    try:
        configure_cli_logging(args, "ERROR")  # lines prefixed [Broker id=N], as Kafka's
    except ValueError as error:
        print(f"python -m kcore.cluster: {error}", file=sys.stderr)
        return 2
    live = sys.stdout.isatty() and not args.plain
    try:
        if live:
            with LiveDisplay() as display:
                verdict = trio.run(run_demo, options, display)
        else:
            verdict = trio.run(run_demo, options, PlainDisplay())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
