"""`python -m bench`: run named workloads and write their result rows.

    python -m bench list
    python -m bench run [--suite quick|full] [WORKLOAD ...] [--out DIR] [--seed N]
    python -m bench aggregate DIR [--out OUT]     (needs PySpark: see bench/aggregate.py)

`run` without workload names runs them all, baselines first (SUITE_ORDER).

Each workload writes `DIR/<workload>.jsonl` (one JSON row per measured operation or
interval, see bench/_rows.py) and prints its headline figures as JSON lines.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import trio

from bench._rows import git_sha, new_run_id, open_rows
from bench.workloads import SUITES, WORKLOADS, WorkloadOptions, get_workload

DEFAULT_OUT = Path("bench-results")
# The baselines first: a report divides by figures measured in the same run.
SUITE_ORDER = (
    "transport-raw",
    "zk-ops",
    "produce",
    "kafka-produce",
    "e2e-latency",
    "failover",
    "controller-failover",
    "election-scaling",
    "sim-campaign",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("list", help="list the workloads")

    run = commands.add_parser("run", help="run workloads and write their rows")
    run.add_argument(
        "workloads", nargs="*", metavar="WORKLOAD", help="registered workload names (default: all)"
    )
    run.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"result folder (default {DEFAULT_OUT})"
    )
    run.add_argument(
        "--suite", choices=SUITES, default="full", help="quick: every case, measured briefly"
    )
    run.add_argument("--quick", action="store_true", help="the same as --suite quick")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--seed", type=int, default=0, help="seed for workloads that draw random numbers"
    )
    run.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="seeds a campaign runs, from --seed on (sim-campaign; default: the suite's)",
    )

    # Listed here for --help only: main() hands `aggregate ...` to bench.aggregate.main,
    # which parses its own options (so `aggregate --help` shows them).
    commands.add_parser(
        "aggregate",
        help="summarise DIR/*.jsonl with PySpark: aggregate DIR [--out OUT]",
        add_help=False,
    )
    return parser


def run_workloads(
    names: Sequence[str], *, out: Path, options: WorkloadOptions, progress: bool = False
) -> dict[str, list]:
    """Runs each workload in its own `trio.run`; returns its summary per name. With
    `progress`, a bar on stderr advances per workload."""
    workloads = [get_workload(name) for name in names]  # fail before running anything
    run_id = new_run_id()
    sha = git_sha()
    summaries = {}
    with _progress_bar(progress, len(workloads)) as advance:
        for chosen in workloads:
            advance(chosen.name, done=False)
            path = out / f"{chosen.name}.jsonl"
            with open_rows(
                path, workload=chosen.name, seed=options.seed, run_id=run_id, sha=sha
            ) as rows:
                summaries[chosen.name] = trio.run(functools.partial(chosen.run, rows, options))
            advance(chosen.name, done=True)
            print(f"# {chosen.name}: {rows.rows_written} rows in {path}", file=sys.stderr)
            for line in summaries[chosen.name]:
                print(json.dumps({"workload": chosen.name, **line}), flush=True)
    return summaries


@contextlib.contextmanager
def _progress_bar(enabled: bool, total: int) -> Iterator[Callable[..., None]]:
    if not enabled:
        yield lambda name, done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("benchmarks", total=total)

        def advance(name: str, done: bool) -> None:
            bar.update(task, description=f"{name}{' done' if done else '...'}", advance=int(done))

        yield advance


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["aggregate"]:
        from bench.aggregate import main as aggregate_main  # lazily: `run` needs no PySpark

        return aggregate_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "list":
        for name in sorted(WORKLOADS):
            print(f"{name}: {WORKLOADS[name].description}")
        return 0
    try:
        suite = "quick" if args.quick else args.suite
        options = WorkloadOptions(suite=suite, seed=args.seed, seeds=args.seeds)
    except ValueError as exc:
        print(f"python -m bench: {exc}", file=sys.stderr)
        return 2
    try:
        names = args.workloads or [n for n in SUITE_ORDER if n in WORKLOADS]
        names += [] if args.workloads else sorted(set(WORKLOADS) - set(names))
        progress = not args.no_progress and sys.stderr.isatty()
        run_workloads(names, out=args.out, options=options, progress=progress)
    except KeyError as exc:
        print(f"python -m bench: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
