"""`python -m bench`: run named workloads and write their result rows.

    python -m bench list
    python -m bench run transport-raw [more workloads...] [--out DIR] [--quick] [--seed N]

Each workload writes `DIR/<workload>.jsonl` (one JSON row per measured operation or
interval, see bench/_rows.py) and prints its headline figures as JSON lines.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from bench._rows import git_sha, new_run_id, open_rows
from bench.workloads import WORKLOADS, WorkloadOptions, get_workload

DEFAULT_OUT = Path("bench-results")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("list", help="list the workloads")

    run = commands.add_parser("run", help="run workloads and write their rows")
    run.add_argument("workloads", nargs="+", metavar="WORKLOAD", help="registered workload names")
    run.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"result folder (default {DEFAULT_OUT})"
    )
    run.add_argument("--quick", action="store_true", help="measure briefly (a smoke run)")
    run.add_argument(
        "--seed", type=int, default=0, help="seed for workloads that draw random numbers"
    )
    return parser


def run_workloads(names: Sequence[str], *, out: Path, options: WorkloadOptions) -> dict[str, list]:
    """Runs each workload in its own `trio.run`; returns its summary per name."""
    workloads = [get_workload(name) for name in names]  # fail before running anything
    run_id = new_run_id()
    sha = git_sha()
    summaries = {}
    for chosen in workloads:
        path = out / f"{chosen.name}.jsonl"
        with open_rows(
            path, workload=chosen.name, seed=options.seed, run_id=run_id, sha=sha
        ) as rows:
            summaries[chosen.name] = trio.run(functools.partial(chosen.run, rows, options))
        print(f"# {chosen.name}: {rows.rows_written} rows in {path}", file=sys.stderr)
        for line in summaries[chosen.name]:
            print(json.dumps({"workload": chosen.name, **line}))
    return summaries


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "list":
        for name in sorted(WORKLOADS):
            print(f"{name}: {WORKLOADS[name].description}")
        return 0
    try:
        options = WorkloadOptions(suite="quick" if args.quick else "full", seed=args.seed)
        run_workloads(args.workloads, out=args.out, options=options)
    except KeyError as exc:
        print(f"python -m bench: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
