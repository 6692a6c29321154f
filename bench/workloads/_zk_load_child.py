"""One load generator of the zk-ops workload, run in a child process:

    python -m bench.workloads._zk_load_child --connect jute://H:P --op get|set \\
        --path /p --in-flight 64 --duration 2

Why a child: one Trio client in one process tops out below what either server can answer
(each request is Python work on the client), so a ratio measured through it compares the
client with itself. Several of these, each a process of its own, load the server until the
server is the limit. It runs `--in-flight` requests at a time against `--path` for
`--warmup` then `--duration` seconds and prints one JSON line on stdout:
`{"count": n, "seconds": s}` (requests answered while measuring), or
`{"error": text}` and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import trio

import zkstub


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.workloads._zk_load_child")
    parser.add_argument("--connect", required=True, help="jute://host:port")
    parser.add_argument("--op", choices=("get", "set"), required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--value-bytes", type=int, default=64)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--warmup", type=float, default=0.5)
    return parser


async def load(args: argparse.Namespace) -> dict[str, float]:
    value = b"x" * args.value_bytes
    counting = False
    count = 0
    async with zkstub.connect(args.connect, session_timeout=10.0) as zk:

        async def worker() -> None:
            nonlocal count
            while True:
                if args.op == "get":
                    await zk.get(args.path)
                else:
                    await zk.set(args.path, value)
                if counting:
                    count += 1

        async with trio.open_nursery() as nursery:
            for _ in range(args.in_flight):
                nursery.start_soon(worker)
            await trio.sleep(args.warmup)
            counting = True
            started = time.perf_counter()
            await trio.sleep(args.duration)
            counting = False
            seconds = time.perf_counter() - started
            nursery.cancel_scope.cancel()
    return {"count": count, "seconds": seconds}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = trio.run(load, args)
    except Exception as error:  # reported to the parent, which fails the case
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
