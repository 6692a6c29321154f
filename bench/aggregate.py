"""`python -m bench aggregate DIR [--out OUT]`: summarise the result rows of a run with
PySpark (a local session on loopback, no web UI).

Reads every `DIR/*.jsonl` (rows as described in bench/_rows.py), groups them by
(workload, case, op) and writes into the output folder (OUT, default DIR):

- `summary.csv`  one line per group, columns `SUMMARY_COLUMNS`, params as JSON;
- `summary.md`   one Markdown table per workload with the headline figures;
- `plots/*.png`  the plots of bench/plots.py.

A group's params may name a baseline measured in the same run, `baseline` =
"<workload>/<case>/<op>" with `baseline_metric` = "bytes_per_s" or "ops_per_s"; the group
then gets `ratio` = its metric / the baseline group's metric (empty when the baseline
group is not in the input).

Counts, bytes and the span (first start to last end) cover every row of a group, errors
included; latency percentiles and max are Spark's exact `percentile` (linear interpolation
between the closest ranks, as numpy's default) over the rows whose outcome is "ok". A
group's params are its earliest row's: params are not part of the group key, so a case that
sweeps a parameter (election-scaling's partitions) stays one group and a baseline's
"<workload>/<case>/<op>" names exactly one group.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BASELINE_METRICS",
    "SUMMARY_COLUMNS",
    "NoResults",
    "aggregate",
    "main",
    "spark_session",
]

log = logging.getLogger("bench.aggregate")

APP_NAME = "kcore-bench"
LOOPBACK = "127.0.0.1"
BASELINE_METRICS = ("bytes_per_s", "ops_per_s")
PERCENTILES = (("p50_ms", 0.50), ("p95_ms", 0.95), ("p99_ms", 0.99))
SUMMARY_COLUMNS = (
    "workload",
    "case",
    "op",
    "rows",
    "count",
    "bytes",
    "errors",
    "span_s",
    "ops_per_s",
    "bytes_per_s",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "baseline",
    "baseline_metric",
    "baseline_value",
    "ratio",
    "params",
)
# (column, Markdown header) of the per-workload tables.
HEADLINE_COLUMNS = (
    ("case", "case"),
    ("op", "op"),
    ("rows", "rows"),
    ("errors", "errors"),
    ("ops_per_s", "ops/s"),
    ("mb_per_s", "MB/s"),
    ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"),
    ("p99_ms", "p99 ms"),
    ("max_ms", "max ms"),
    ("ratio", "ratio"),
    ("baseline", "baseline"),
)
_CORRUPT = "_corrupt_record"


class NoResults(ValueError):
    """The results folder is missing or holds no rows to aggregate."""


# --- Spark -------------------------------------------------------------------------------


def spark_session() -> SparkSession:
    """A local SparkSession that listens on loopback only and has no web UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark resolves the machine's hostname to pick its local address unless told; on a
    # host whose name maps to a public interface that would be where it binds.
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(APP_NAME)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # stdout is the CLI's report
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
        # toPandas through Arrow: the per-row plots may collect many rows.
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _row_schema():
    from pyspark.sql import types as T

    # params is read as its raw JSON text (a string column given a JSON object keeps the
    # object's text), so the summary can report it with its types intact.
    return T.StructType(
        [
            T.StructField("run_id", T.StringType()),
            T.StructField("workload", T.StringType()),
            T.StructField("case", T.StringType()),
            T.StructField("op", T.StringType()),
            T.StructField("params", T.StringType()),
            T.StructField("git_sha", T.StringType()),
            T.StructField("seed", T.LongType()),
            T.StructField("start_time", T.DoubleType()),
            T.StructField("latency_ns", T.LongType()),
            T.StructField("bytes", T.LongType()),
            T.StructField("count", T.LongType()),
            T.StructField("outcome", T.StringType()),
            T.StructField(_CORRUPT, T.StringType()),
        ]
    )


def result_files(results_dir: Path) -> list[Path]:
    """The `*.jsonl` files of `results_dir`; NoResults when there is none."""
    if not results_dir.is_dir():
        raise NoResults(f"{results_dir} is not a folder")
    files = sorted(path for path in results_dir.glob("*.jsonl") if path.is_file())
    if not files:
        raise NoResults(f"{results_dir} holds no *.jsonl result files")
    return files


def read_rows_frame(spark: SparkSession, files: Sequence[Path]) -> DataFrame:
    """The rows of `files`, with `params_map` (params as map<string,string>) and
    `params_key` (params as canonical JSON text: keys sorted, values as strings) added;
    malformed lines are dropped with a warning."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    raw = (
        spark.read.schema(_row_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json([str(path.resolve()) for path in files])
        .cache()  # Spark refuses to filter raw JSON on the corrupt-record column alone
    )
    malformed = raw.filter(F.col(_CORRUPT).isNotNull()).count()
    if malformed:
        log.warning("skipped %d malformed result line(s)", malformed)
    params_map = F.from_json("params", T.MapType(T.StringType(), T.StringType()))
    return (
        raw.filter(F.col(_CORRUPT).isNull())
        .drop(_CORRUPT)
        .withColumn("params_map", params_map)
        .withColumn(
            "params_key", F.to_json(F.map_from_entries(F.array_sort(F.map_entries(params_map))))
        )
    )


def group_stats(rows: DataFrame) -> list[dict[str, Any]]:
    """Per (workload, case, op): the sums, span and ok-row latency percentiles."""
    from pyspark.sql import functions as F

    ok_latency = F.when(F.col("outcome") == "ok", F.col("latency_ns"))
    end_time = F.col("start_time") + F.col("latency_ns") / 1e9
    percentiles = F.percentile(ok_latency, [p for _, p in PERCENTILES])
    stats = (
        rows.groupBy("workload", "case", "op")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum("count").alias("count"),
            F.sum("bytes").alias("bytes"),
            F.sum(F.when(F.col("outcome") != "ok", 1).otherwise(0)).alias("errors"),
            (F.max(end_time) - F.min("start_time")).alias("span_s"),
            percentiles.alias("latency_percentiles"),
            F.max(ok_latency).alias("max_latency_ns"),
            # "The first row's params": the earliest row's, so the choice is repeatable.
            F.min_by("params", "start_time").alias("params"),
            F.count_distinct("params_key").alias("params_variants"),
        )
        .orderBy("workload", "case", "op")
    )
    return [_group_dict(row.asDict()) for row in stats.collect()]


def _group_dict(stats: dict[str, Any]) -> dict[str, Any]:
    if stats["params_variants"] > 1:
        # Expected when a case sweeps a parameter (election-scaling's partitions); the
        # per-row plots read each row's own params.
        log.info(
            "%s/%s/%s: %d different params; the summary shows the earliest row's",
            stats["workload"],
            stats["case"],
            stats["op"],
            stats["params_variants"],
        )
    span = stats["span_s"]
    percentiles = stats["latency_percentiles"] or [None] * len(PERCENTILES)
    params = json.loads(stats["params"]) if stats["params"] else {}
    return {
        "workload": stats["workload"],
        "case": stats["case"],
        "op": stats["op"],
        "rows": stats["rows"],
        "count": stats["count"] or 0,
        "bytes": stats["bytes"] or 0,
        "errors": stats["errors"],
        "span_s": span,
        "ops_per_s": _per_second(stats["count"] or 0, span),
        "bytes_per_s": _per_second(stats["bytes"] or 0, span),
        **{name: _ms(value) for (name, _), value in zip(PERCENTILES, percentiles, strict=True)},
        "max_ms": _ms(stats["max_latency_ns"]),
        "baseline": None,
        "baseline_metric": None,
        "baseline_value": None,
        "ratio": None,
        # Canonical JSON (sorted keys) with the values' own types.
        "params": json.dumps(params, sort_keys=True, separators=(",", ":")),
    }


def _per_second(amount: float, span_s: float | None) -> float | None:
    # A group of one instantaneous row has no span: no rate rather than a division error.
    return amount / span_s if span_s else None


def _ms(nanoseconds: float | None) -> float | None:
    return None if nanoseconds is None else nanoseconds / 1e6


# --- baselines ---------------------------------------------------------------------------


def group_key(group: dict[str, Any]) -> str:
    return f"{group['workload']}/{group['case']}/{group['op']}"


def add_ratios(groups: list[dict[str, Any]]) -> None:
    """Fills baseline, baseline_metric, baseline_value and ratio of the groups whose params
    name a baseline; a baseline group missing from the run leaves the ratio empty."""
    by_key = {group_key(group): group for group in groups}
    for group in groups:
        params = json.loads(group["params"])
        baseline = params.get("baseline")
        if not baseline:
            continue
        metric = params.get("baseline_metric")
        group["baseline"], group["baseline_metric"] = str(baseline), metric
        if metric not in BASELINE_METRICS:
            log.warning(
                "%s: baseline_metric %r is not one of %s",
                group_key(group),
                metric,
                BASELINE_METRICS,
            )
            continue
        reference = by_key.get(str(baseline))
        if reference is None:
            log.warning("%s: baseline %s is not in this run", group_key(group), baseline)
            continue
        group["baseline_value"] = reference[metric]
        if group[metric] is not None and reference[metric]:
            group["ratio"] = group[metric] / reference[metric]


# --- outputs -----------------------------------------------------------------------------


def write_csv(groups: Sequence[dict[str, Any]], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        for group in groups:
            writer.writerow(
                {name: "" if group[name] is None else group[name] for name in SUMMARY_COLUMNS}
            )
    return path


def format_number(value: Any) -> str:
    """Three significant figures, whole numbers from 100 up (with thousands separators)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value).replace("|", "\\|")


def markdown_summary(
    groups: Sequence[dict[str, Any]], run_ids: Sequence[str], shas: Sequence[str]
) -> str:
    lines = [
        "# Benchmark summary",
        "",
        f"Runs: {', '.join(run_ids) or 'none'}; git sha: {', '.join(shas) or 'unknown'}.",
        "Latencies are over ok rows; ratio = the group's baseline_metric / the baseline's.",
    ]
    for workload in sorted({group["workload"] for group in groups}):
        lines += ["", f"## {workload}", ""]
        lines.append("| " + " | ".join(header for _, header in HEADLINE_COLUMNS) + " |")
        lines.append(
            "|"
            + "|".join(
                "---" if name in ("case", "op", "baseline") else "---:"
                for name, _ in HEADLINE_COLUMNS
            )
            + "|"
        )
        for group in groups:
            if group["workload"] != workload:
                continue
            cells = _headline_cells(group)
            lines.append(
                "| " + " | ".join(format_number(cells[name]) for name, _ in HEADLINE_COLUMNS) + " |"
            )
    return "\n".join(lines) + "\n"


def _headline_cells(group: dict[str, Any]) -> dict[str, Any]:
    baseline = group["baseline"]
    if baseline and group["baseline_metric"]:
        baseline = f"{baseline} ({group['baseline_metric']})"
    bytes_per_s = group["bytes_per_s"]
    return {
        **group,
        "mb_per_s": None if bytes_per_s is None else bytes_per_s / 1e6,
        "baseline": baseline,
    }


def per_row_frame(rows: DataFrame):
    """The raw rows the per-row plots need (see bench/plots.py), as a pandas frame."""
    from pyspark.sql import functions as F

    from bench import plots

    wanted = (
        ((F.col("count") == 1) & ~F.col("op").endswith("_interval"))
        | F.col("workload").isin(*plots.FAILOVER_WORKLOADS)
        | ((F.col("workload") == plots.ELECTION_WORKLOAD) & (F.col("op") == plots.ELECTION_OP))
    )
    return (
        rows.filter(wanted)
        .select(
            "workload",
            "case",
            "op",
            "start_time",
            "latency_ns",
            "count",
            "outcome",
            F.col("params_map").getItem("partitions").alias("partitions"),
        )
        .toPandas()
    )


# --- entry points ------------------------------------------------------------------------


def aggregate(
    results_dir: str | Path, out_dir: str | Path | None = None, *, spark: SparkSession | None = None
) -> list[dict[str, Any]]:
    """Summarises `results_dir/*.jsonl` into `out_dir` (default `results_dir`); returns the
    groups, with the values written to summary.csv. Stops the SparkSession only if it
    started it."""
    results_dir = Path(results_dir)
    out_dir = results_dir if out_dir is None else Path(out_dir)
    files = result_files(results_dir)
    groups, _ = _run(files, out_dir, spark)
    return groups


def _run(
    files: Sequence[Path], out_dir: Path, spark: SparkSession | None
) -> tuple[list[dict[str, Any]], list[Path]]:
    """(groups, plots written); starts and stops a session unless given one or one is
    already active (stopping that would pull it from under its owner)."""
    owned = spark is None and not _spark_running()
    spark = spark_session() if spark is None else spark
    try:
        return _aggregate(spark, files, out_dir)
    finally:
        if owned:
            spark.stop()


def _spark_running() -> bool:
    """Whether this process already runs a SparkContext (the builder would reuse it)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def _aggregate(
    spark: SparkSession, files: Sequence[Path], out_dir: Path
) -> tuple[list[dict[str, Any]], list[Path]]:
    import pandas as pd

    from bench import plots

    rows = read_rows_frame(spark, files)
    groups = group_stats(rows)
    if not groups:
        raise NoResults(f"no result rows in {', '.join(str(path) for path in files)}")
    add_ratios(groups)
    ids = rows.select("run_id", "git_sha").distinct().collect()
    run_ids = sorted({row["run_id"] for row in ids if row["run_id"]})
    shas = sorted({row["git_sha"] for row in ids if row["git_sha"]})

    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(groups, out_dir / "summary.csv")
    (out_dir / "summary.md").write_text(markdown_summary(groups, run_ids, shas), encoding="utf-8")
    written = plots.write_plots(
        pd.DataFrame(groups, columns=SUMMARY_COLUMNS), per_row_frame(rows), out_dir / "plots"
    )
    rows.unpersist()
    return groups, written


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench aggregate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "results", type=Path, metavar="DIR", help="folder of <workload>.jsonl files"
    )
    parser.add_argument("--out", type=Path, default=None, help="output folder (default DIR)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out_dir = args.results if args.out is None else args.out
    try:
        files = result_files(args.results)  # before starting a JVM: a wrong folder fails fast
        import pyspark  # noqa: F401  (only to give a clear message when it is missing)
    except NoResults as exc:
        print(f"python -m bench aggregate: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        print(
            "python -m bench aggregate: needs PySpark (pip install -e '.[bench]') and Java",
            file=sys.stderr,
        )
        return 2
    try:
        groups, plots = _run(files, out_dir, None)
    except NoResults as exc:
        print(f"python -m bench aggregate: {exc}", file=sys.stderr)
        return 2
    print(f"{len(groups)} groups from {len(files)} result file(s) in {args.results}")
    for path in [out_dir / "summary.csv", out_dir / "summary.md", *plots]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
