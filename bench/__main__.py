"""`python -m bench`: run named workloads and write their result rows.

    python -m bench list
    python -m bench run [--suite quick|full] [WORKLOAD ...] [--out DIR] [--seed N]
                        [--store STORE | --no-store]
    python -m bench import-jsonl DIR ... [--store STORE] [--host-class CLASS]
    python -m bench aggregate [STORE|DIR] [--out OUT] [--spark-master URL]
                                                  (needs PySpark: see bench/aggregate.py)

`run` without workload names runs them all, baselines first (SUITE_ORDER).

Each workload writes `DIR/<workload>.jsonl` (one JSON row per measured operation or
interval, see bench/_rows.py), appends the same rows to the Parquet results store
(bench/store.py; default bench-results/store) and prints its headline figures as JSON lines.
`import-jsonl` adds runs written before the store (or with --no-store) to it.
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

from bench import store as results_store
from bench._rows import git_sha, new_run_id, open_rows, read_rows
from bench.workloads import CLUSTERS, SUITES, WORKLOADS, WorkloadOptions, get_workload

DEFAULT_OUT = Path("bench-results")
# The baselines first: a report divides by figures measured in the same run.
SUITE_ORDER = (
    "transport-raw",
    "zk-ops",
    "produce",
    "kafka-produce",
    "consume",
    "mixed",
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
    run.add_argument(
        "--cluster",
        dest="clusters",
        action="append",
        choices=CLUSTERS,
        help="the cluster the cluster workloads run on, repeatable: processes (a broker per "
        "process) and / or single (one process); default: the suite's (quick: processes, "
        "full: both)",
    )
    stored = run.add_mutually_exclusive_group()
    stored.add_argument(
        "--store",
        type=Path,
        default=results_store.DEFAULT_STORE,
        help=f"Parquet store the rows are appended to (default {results_store.DEFAULT_STORE})",
    )
    stored.add_argument("--no-store", action="store_true", help="write the JSON lines only")

    imports = commands.add_parser(
        "import-jsonl", help="add the runs of result folders (*.jsonl) to the results store"
    )
    imports.add_argument("folders", nargs="+", type=Path, metavar="DIR")
    imports.add_argument(
        "--store",
        type=Path,
        default=results_store.DEFAULT_STORE,
        help=f"results store (default {results_store.DEFAULT_STORE})",
    )
    imports.add_argument(
        "--host-class",
        default=results_store.UNKNOWN_HOST,
        help="the machine class the runs were measured on, e.g. 2-core (default: unknown)",
    )

    # Listed here for --help only: main() hands `aggregate ...` to bench.aggregate.main,
    # which parses its own options (so `aggregate --help` shows them).
    commands.add_parser(
        "aggregate",
        help="report on the results store (or one DIR/*.jsonl run) with PySpark: "
        "aggregate [STORE|DIR] [--out OUT] [--spark-master URL]",
        add_help=False,
    )
    return parser


def run_workloads(
    names: Sequence[str],
    *,
    out: Path,
    options: WorkloadOptions,
    progress: bool = False,
    store: Path | None = None,
) -> dict[str, list]:
    """Runs each workload in its own `trio.run`; returns its summary per name. With
    `progress`, a bar on stderr advances per workload; with `store`, each workload's rows
    are appended to that results store once it finishes."""
    workloads = [get_workload(name) for name in names]  # fail before running anything
    run_id = new_run_id()
    sha = git_sha()
    # Host facts (the load average above all) as the run starts, before it loads the machine.
    run_facts = results_store.run_facts_now(run_id, sha)
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
            if store is not None:
                stored = results_store.append_run(store, read_rows(path), run_facts)
                print(f"# {chosen.name}: stored in {', '.join(map(str, stored))}", file=sys.stderr)
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
    if args.command == "import-jsonl":
        return _import_jsonl(args)
    if args.command == "list":
        for name in sorted(WORKLOADS):
            print(f"{name}: {WORKLOADS[name].description}")
        return 0
    try:
        suite = "quick" if args.quick else args.suite
        options = WorkloadOptions(
            suite=suite,
            seed=args.seed,
            seeds=args.seeds,
            clusters=None if args.clusters is None else tuple(args.clusters),
        )
    except ValueError as exc:
        print(f"python -m bench: {exc}", file=sys.stderr)
        return 2
    try:
        names = args.workloads or [n for n in SUITE_ORDER if n in WORKLOADS]
        names += [] if args.workloads else sorted(set(WORKLOADS) - set(names))
        progress = not args.no_progress and sys.stderr.isatty()
        store = None if args.no_store else args.store
        run_workloads(names, out=args.out, options=options, progress=progress, store=store)
    except KeyError as exc:
        print(f"python -m bench: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


def _import_jsonl(args: argparse.Namespace) -> int:
    missing = [str(folder) for folder in args.folders if not folder.exists()]
    if missing:
        print(
            f"python -m bench import-jsonl: no such folder: {', '.join(missing)}", file=sys.stderr
        )
        return 2
    report = results_store.import_jsonl(args.store, args.folders, host_class=args.host_class)
    runs = len({run_id for _, run_id in report.imported})
    print(
        f"imported {report.rows} rows of {runs} run(s) into {args.store}"
        f" ({len(report.imported)} workload file(s); {len(report.skipped)} already stored)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
