"""`python -m bench aggregate [STORE|DIR] [--out OUT] [--spark-master URL]`: the benchmark
report, computed by Spark from the results store (bench/store.py) or from one run's folder
of `*.jsonl` files.

Everything that reads rows runs in Spark; only aggregates reach the driver (a few rows per
run and case, quantile grids, time buckets), and the plots are drawn from those:

- per run and (workload, case, op): rows, count, bytes, errors, span, throughput; for
  operation rows the latency percentiles (`percentile_approx`) over the ok rows, each only
  from enough rows to differ from the max (`PERCENTILES`); for interval rows (`op` ending
  in "_interval" or "rate", whose latency is the interval's length and no operation's
  latency) the spread of the per-interval rates over the run's intervals (its repeats)
  instead;
- a group's params may name a baseline measured in the same run, `baseline` =
  "<workload>/<case>/<op>" with `baseline_metric` = "bytes_per_s" or "ops_per_s": the
  group gets `ratio` = its metric / the baseline's, and `ratio_spread`, one standard
  deviation propagated from both groups' per-interval rates (empty without repeats);
- across runs, each case's trend and regression flag (bench/trends.py);
- the simulation campaigns' failures, convergence and slowest seeds (bench/campaigns.py).

It writes into OUT (default: DIR for a run's folder, `<STORE>/../report` for a store):
`summary.md` (the report), `summary.csv` (the latest run of each workload, `SUMMARY_COLUMNS`),
`runs.csv` (the same for every run),
`trend.csv` (every run of every case with its band and flag), `campaigns.csv` and
`slowest_seeds.csv` (when there are campaign rows) and `plots/*.png` (bench/plots.py).

Spark runs on `--spark-master` (default `local[*]`), listening on loopback with no web UI;
`local-cluster[N,cores,MB]` starts N worker JVMs on this machine (bench/_spark.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from bench._spark import DEFAULT_MASTER, spark_running, spark_session
from bench.store import STORE_COLUMNS, UNKNOWN_HOST, is_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BASELINE_METRICS",
    "SUMMARY_COLUMNS",
    "NoResults",
    "Report",
    "aggregate",
    "build_report",
    "case_stats",
    "load_rows",
    "main",
    "spark_session",
]

log = logging.getLogger("bench.aggregate")

BASELINE_METRICS = ("bytes_per_s", "ops_per_s")
# A percentile is shown only for groups of at least 1 / (1 - p) ok operations: below that
# it is the maximum (or an interpolation towards it) and says nothing the max does not.
PERCENTILES = (("p50_ms", 0.50, 2), ("p95_ms", 0.95, 20), ("p99_ms", 0.99, 100))
# percentile_approx's accuracy: the rank error is at most 1/ACCURACY of the group's rows.
ACCURACY = 10_000
# The quantiles a CDF is drawn through (per case and op of a workload's latest run).
CDF_GRID = (
    *(i / 100 for i in range(1, 100)),
    0.995,
    0.999,
)
FAILOVER_WORKLOADS = ("failover", "controller-failover")
ELECTION_WORKLOAD = "election-scaling"
ELECTION_OP = "election"
TIMELINE_BUCKETS = 200  # a failover timeline's time buckets (over the workload's span)
SUMMARY_COLUMNS = (
    "workload",
    "case",
    "op",
    "run_id",
    "git_sha",
    "host_class",
    "kind",
    "rows",
    "count",
    "bytes",
    "errors",
    "span_s",
    "ops_per_s",
    "bytes_per_s",
    "intervals",
    "rate_min",
    "rate_max",
    "rate_cv",
    "byte_rate_min",
    "byte_rate_max",
    "byte_rate_cv",
    "latency_n",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "baseline",
    "baseline_metric",
    "baseline_value",
    "ratio",
    "ratio_spread",
    "params",
)
_CORRUPT = "_corrupt_record"


class NoResults(ValueError):
    """The source is missing or holds no rows to aggregate."""


# --- reading -----------------------------------------------------------------------------


def source_kind(source: Path) -> str:
    """ "store" or "jsonl"; NoResults when it is neither."""
    if not source.is_dir():
        raise NoResults(f"{source} is not a folder")
    if is_store(source):
        return "store"
    if any(path.is_file() for path in source.glob("*.jsonl")):
        return "jsonl"
    raise NoResults(f"{source} holds no results store and no *.jsonl result files")


def _store_schema():
    from pyspark.sql import types as T

    kinds = {
        "string": T.StringType(),
        "int64": T.LongType(),
        "int32": T.IntegerType(),
        "float64": T.DoubleType(),
    }
    fields = [T.StructField(name, kinds[kind]) for name, kind in STORE_COLUMNS]
    # The partition columns, as written in the paths (a date stays its text).
    fields += [T.StructField("workload", T.StringType()), T.StructField("date", T.StringType())]
    return T.StructType(fields)


def _jsonl_schema():
    from pyspark.sql import types as T

    # params is read as its raw JSON text (a string column given a JSON object keeps the
    # object's text).
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


def load_rows(spark: SparkSession, source: str | Path) -> DataFrame:
    """The rows of a results store, or of a folder of `*.jsonl` files (given the store's
    columns: a run starts at its earliest row, its host is unknown; malformed lines are
    dropped with a warning)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    source = Path(source)
    if source_kind(source) == "store":
        path = str(source.resolve())
        return spark.read.schema(_store_schema()).option("basePath", path).parquet(path)
    files = sorted(str(path.resolve()) for path in source.glob("*.jsonl") if path.is_file())
    raw = (
        spark.read.schema(_jsonl_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .json(files)
        .cache()  # Spark refuses to filter raw JSON on the corrupt-record column alone
    )
    malformed = raw.filter(F.col(_CORRUPT).isNotNull()).count()
    if malformed:
        log.warning("skipped %d malformed result line(s)", malformed)
    run_started = F.min("start_time").over(Window.partitionBy("run_id"))
    return (
        raw.filter(F.col(_CORRUPT).isNull())
        .drop(_CORRUPT)
        .withColumn("run_started", run_started)
        .withColumn("host_class", F.lit(UNKNOWN_HOST))
        .withColumn("host_id", F.lit(UNKNOWN_HOST))
        .withColumn("cores", F.lit(None).cast("int"))
        .withColumn("load_1m", F.lit(None).cast("double"))
        .withColumn("date", F.date_format(F.timestamp_seconds("run_started"), "yyyy-MM-dd"))
    )


# --- per run and case --------------------------------------------------------------------

GROUP_KEY = ("run_id", "workload", "case", "op")


def is_interval(op):
    """Spark condition: a row measures an interval, by its op's name (bench/_rows.py): its
    latency is the interval's length, no operation's latency."""
    return op.endswith("_interval") | op.endswith("rate")


def case_stats(rows: DataFrame) -> DataFrame:
    """One row per (run_id, workload, case, op), computed in Spark (see the module doc)."""
    from pyspark.sql import functions as F

    ok = F.col("outcome") == "ok"
    interval_row = is_interval(F.col("op"))
    ok_op_latency = F.when(ok & ~interval_row, F.col("latency_ns"))
    seconds = F.col("latency_ns") / 1e9
    ok_interval = ok & interval_row & (F.col("latency_ns") > 0)
    rate = F.when(ok_interval, F.col("count") / seconds)
    byte_rate = F.when(ok_interval, F.col("bytes") / seconds)
    end_time = F.col("start_time") + seconds
    stats = rows.groupBy(*GROUP_KEY).agg(
        F.first("git_sha").alias("git_sha"),
        F.first("host_class").alias("host_class"),
        F.min("run_started").alias("run_started"),
        F.first("load_1m").alias("load_1m"),
        F.count(F.lit(1)).alias("rows"),
        F.sum("count").alias("count"),
        F.sum("bytes").alias("bytes"),
        F.sum(F.when(ok, 0).otherwise(1)).alias("errors"),
        F.min("start_time").alias("first_start"),
        (F.max(end_time) - F.min("start_time")).alias("span_s"),
        F.max(interval_row.cast("int")).alias("has_intervals"),
        F.count(ok_op_latency).alias("latency_n"),
        F.percentile_approx(ok_op_latency, [p for _, p, _ in PERCENTILES], ACCURACY).alias(
            "latency_percentiles"
        ),
        F.max(ok_op_latency).alias("max_latency_ns"),
        F.count(rate).alias("intervals"),
        F.min(rate).alias("rate_min"),
        F.max(rate).alias("rate_max"),
        F.avg(rate).alias("rate_mean"),
        F.stddev_samp(rate).alias("rate_std"),
        F.min(byte_rate).alias("byte_rate_min"),
        F.max(byte_rate).alias("byte_rate_max"),
        F.avg(byte_rate).alias("byte_rate_mean"),
        F.stddev_samp(byte_rate).alias("byte_rate_std"),
        # The earliest row's params, so the choice is repeatable; a case that sweeps a
        # parameter (election-scaling's partitions) stays one group.
        F.min_by("params", "start_time").alias("params"),
    )
    span = F.col("span_s")
    return (
        stats.withColumn("kind", F.when(F.col("has_intervals") == 1, "interval").otherwise("op"))
        .withColumn("ops_per_s", F.when(span > 0, F.col("count") / span))
        .withColumn("bytes_per_s", F.when(span > 0, F.col("bytes") / span))
        .drop("has_intervals")
    )


def group_dict(stats: dict[str, Any]) -> dict[str, Any]:
    """A collected `case_stats` row as the report's group: `SUMMARY_COLUMNS` first, then
    the extra facts the report and trends read."""
    interval = stats["kind"] == "interval"
    n = stats["latency_n"] or 0
    percentiles = stats["latency_percentiles"] or [None] * len(PERCENTILES)
    latency = {
        name: _ms(value) if not interval and n >= at_least else None
        for (name, _, at_least), value in zip(PERCENTILES, percentiles, strict=True)
    }
    params = json.loads(stats["params"]) if stats["params"] else {}
    group = {
        "workload": stats["workload"],
        "case": stats["case"],
        "op": stats["op"],
        "run_id": stats["run_id"],
        "git_sha": stats["git_sha"],
        "host_class": stats["host_class"],
        "kind": stats["kind"],
        "rows": stats["rows"],
        "count": stats["count"] or 0,
        "bytes": stats["bytes"] or 0,
        "errors": stats["errors"],
        "span_s": stats["span_s"],
        "ops_per_s": stats["ops_per_s"],
        "bytes_per_s": stats["bytes_per_s"],
        "intervals": stats["intervals"] if interval else None,
        "rate_min": stats["rate_min"],
        "rate_max": stats["rate_max"],
        "rate_cv": _cv(stats["rate_std"], stats["rate_mean"]),
        "byte_rate_min": stats["byte_rate_min"],
        "byte_rate_max": stats["byte_rate_max"],
        "byte_rate_cv": _cv(stats["byte_rate_std"], stats["byte_rate_mean"]),
        "latency_n": None if interval else n,
        **latency,
        "max_ms": None if interval or not n else _ms(stats["max_latency_ns"]),
        "baseline": None,
        "baseline_metric": None,
        "baseline_value": None,
        "ratio": None,
        "ratio_spread": None,
        # Canonical JSON (sorted keys) with the values' own types.
        "params": json.dumps(params, sort_keys=True, separators=(",", ":")),
    }
    group["run_started"] = stats["run_started"]
    group["load_1m"] = stats.get("load_1m")
    return group


def _cv(std: float | None, mean: float | None) -> float | None:
    """Coefficient of variation; None without two repeats (no spread to speak of)."""
    if std is None or not mean or math.isnan(std):
        return None
    return std / mean


def _ms(nanoseconds: float | None) -> float | None:
    return None if nanoseconds is None else nanoseconds / 1e6


# --- baselines ---------------------------------------------------------------------------


def group_key(group: dict[str, Any]) -> str:
    return f"{group['workload']}/{group['case']}/{group['op']}"


_METRIC_CV = {"bytes_per_s": "byte_rate_cv", "ops_per_s": "rate_cv"}


def add_ratios(groups: list[dict[str, Any]]) -> None:
    """Fills baseline, baseline_metric, baseline_value, ratio and ratio_spread of the
    groups whose params name a baseline measured in the same run; a baseline missing from
    the run leaves the ratio empty."""
    by_key = {(group["run_id"], group_key(group)): group for group in groups}
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
        reference = by_key.get((group["run_id"], str(baseline)))
        if reference is None:
            log.warning(
                "%s: baseline %s is not in run %s", group_key(group), baseline, group["run_id"]
            )
            continue
        group["baseline_value"] = reference[metric]
        if group[metric] is not None and reference[metric]:
            group["ratio"] = group[metric] / reference[metric]
            cvs = (group[_METRIC_CV[metric]], reference[_METRIC_CV[metric]])
            if None not in cvs:
                # One standard deviation of a quotient, from its terms' relative ones.
                group["ratio_spread"] = group["ratio"] * math.hypot(*cvs)


# --- the report --------------------------------------------------------------------------


@attrs.define
class Report:
    """Everything the report shows, as collected aggregates (plain Python and pandas)."""

    source: str
    groups: list[dict[str, Any]]  # every run's groups, ratios filled
    latest: list[dict[str, Any]]  # the groups of each workload's latest run
    trend: list[dict[str, Any]]  # every run of every case, with its band and flag
    window: int
    cdf: Any  # pandas: workload, case, op, quantile, latency_ms (latest runs)
    timeline: Any  # pandas: workload, case, second, ops, errors, p50_ms, max_ms
    election: Any  # pandas: family, partitions, n, mean_s, min_s, max_s
    campaigns: Any  # campaigns.CampaignReport or None
    runs: list[dict[str, Any]]  # run_id, git_sha, run_started, host_class, load_1m

    @property
    def regressions(self) -> list[dict[str, Any]]:
        latest = {(g["run_id"], group_key(g)) for g in self.latest}
        return [
            t
            for t in self.trend
            if t["flag"] == "regression" and (t["run_id"], group_key(t)) in latest
        ]


def build_report(spark: SparkSession, source: str | Path, *, window: int = 5) -> Report:
    import pandas as pd

    from bench import campaigns, trends

    rows = load_rows(spark, source)
    stats = case_stats(rows).cache()
    collected = [group_dict(row.asDict()) for row in stats.collect()]
    if not collected:
        stats.unpersist()
        raise NoResults(f"no result rows in {source}")
    collected.sort(key=lambda g: (g["workload"], g["case"], g["op"], g["run_started"], g["run_id"]))
    add_ratios(collected)
    latest_runs = _latest_runs(collected)
    latest = [g for g in collected if latest_runs[g["workload"]] == g["run_id"]]
    trend = trends.trend_rows(stats, window=window)
    latest_rows = rows.join(
        spark.createDataFrame(sorted(latest_runs.items()), "workload string, run_id string"),
        ["workload", "run_id"],
    )
    present = {group["workload"] for group in collected}
    empty = pd.DataFrame()
    # Each aggregate is a Spark job or more: only for workloads the rows hold.
    report = Report(
        source=str(source),
        groups=collected,
        latest=latest,
        trend=trend,
        window=window,
        cdf=latency_quantiles(latest_rows),
        timeline=failover_timeline(latest_rows) if present & set(FAILOVER_WORKLOADS) else empty,
        election=election_points(latest_rows) if ELECTION_WORKLOAD in present else empty,
        campaigns=(
            campaigns.campaign_report(rows) if campaigns.CAMPAIGN_WORKLOAD in present else None
        ),
        runs=_runs(collected),
    )
    stats.unpersist()
    return report


def _latest_runs(groups: Sequence[dict[str, Any]]) -> dict[str, str]:
    """workload -> its latest run's id (by start, then id)."""
    latest: dict[str, tuple[float, str]] = {}
    for group in groups:
        key = (group["run_started"] or 0.0, group["run_id"])
        if group["workload"] not in latest or key > latest[group["workload"]]:
            latest[group["workload"]] = key
    return {workload: run_id for workload, (_, run_id) in latest.items()}


def _runs(groups: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    runs: dict[str, dict[str, Any]] = {}
    for group in groups:
        runs.setdefault(
            group["run_id"],
            {
                "run_id": group["run_id"],
                "git_sha": group["git_sha"],
                "run_started": group["run_started"],
                "host_class": group["host_class"],
                "load_1m": group["load_1m"],
                "workloads": set(),
            },
        )["workloads"].add(group["workload"])
    return sorted(runs.values(), key=lambda r: (r["run_started"] or 0.0, r["run_id"]))


def latency_quantiles(rows: DataFrame):
    """pandas frame of each (workload, case, op)'s ok-operation latency at `CDF_GRID`
    (operation rows only), computed in Spark: what the CDF plots draw."""
    import pandas as pd
    from pyspark.sql import functions as F

    ops = rows.filter((F.col("outcome") == "ok") & ~is_interval(F.col("op")))
    # One row per group with the grid's latencies as an array (the grid is the same for
    # every group), turned into long form here: a few hundred values per group.
    collected = (
        ops.groupBy("workload", "case", "op")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.percentile_approx("latency_ns", list(CDF_GRID), ACCURACY).alias("latencies"),
        )
        .filter(F.col("n") >= 2)
        .collect()
    )
    records = [
        {
            "workload": row["workload"],
            "case": row["case"],
            "op": row["op"],
            "n": row["n"],
            "quantile": quantile,
            "latency_ms": latency / 1e6,
        }
        for row in collected
        for quantile, latency in zip(CDF_GRID, row["latencies"], strict=True)
    ]
    columns = ["workload", "case", "op", "n", "quantile", "latency_ms"]
    return pd.DataFrame.from_records(records, columns=columns)


def failover_timeline(rows: DataFrame):
    """pandas frame of the failover workloads' rows in `TIMELINE_BUCKETS` time buckets
    (over the workload's span, from its first row): per case and bucket the operations,
    errors, and p50 and max latency of the ok ones."""
    import pandas as pd
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    failover = rows.filter(F.col("workload").isin(*FAILOVER_WORKLOADS))
    per_workload = Window.partitionBy("workload")
    start = F.min("start_time").over(per_workload)
    span = F.max("start_time").over(per_workload) - start
    width = F.greatest(span / TIMELINE_BUCKETS, F.lit(1e-3))
    ok_latency = F.when(F.col("outcome") == "ok", F.col("latency_ns"))
    collected = (
        failover.withColumn("width", width)
        .withColumn("bucket", F.floor((F.col("start_time") - start) / F.col("width")))
        .groupBy("workload", "case", "bucket")
        .agg(
            F.first("width").alias("width"),
            F.count(F.lit(1)).alias("ops"),
            F.sum(F.when(F.col("outcome") == "ok", 0).otherwise(1)).alias("errors"),
            F.percentile_approx(ok_latency, 0.5, ACCURACY).alias("p50_ns"),
            F.max(ok_latency).alias("max_ns"),
            F.max(F.col("latency_ns")).alias("max_any_ns"),
        )
        .orderBy("workload", "case", "bucket")
        .collect()
    )
    records = [
        {
            "workload": row["workload"],
            "case": row["case"],
            "second": row["bucket"] * row["width"],
            "ops": row["ops"],
            "errors": row["errors"],
            "p50_ms": _ms(row["p50_ns"]),
            "max_ms": _ms(row["max_ns"]),
            "max_any_ms": _ms(row["max_any_ns"]),
        }
        for row in collected
    ]
    columns = ["workload", "case", "second", "ops", "errors", "p50_ms", "max_ms", "max_any_ms"]
    return pd.DataFrame.from_records(records, columns=columns)


def election_points(rows: DataFrame):
    """pandas frame of election-scaling's ok elections per case family ("leader-dies-1000"
    and "leader-dies-3000" are two points of "leader-dies") and partition count: n, mean,
    min and max seconds."""
    import pandas as pd
    from pyspark.sql import functions as F

    partitions = F.get_json_object("params", "$.partitions").cast("double")
    seconds = F.col("latency_ns") / 1e9
    collected = (
        rows.filter(
            (F.col("workload") == ELECTION_WORKLOAD)
            & (F.col("op") == ELECTION_OP)
            & (F.col("outcome") == "ok")
        )
        .withColumn("partitions", partitions)
        .filter(F.col("partitions").isNotNull())
        .withColumn("family", F.regexp_replace("case", r"-[0-9]+$", ""))
        .groupBy("family", "partitions")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.avg(seconds).alias("mean_s"),
            F.min(seconds).alias("min_s"),
            F.max(seconds).alias("max_s"),
        )
        .orderBy("family", "partitions")
        .collect()
    )
    columns = ["family", "partitions", "n", "mean_s", "min_s", "max_s"]
    return pd.DataFrame.from_records([row.asDict() for row in collected], columns=columns)


# --- outputs -----------------------------------------------------------------------------


def write_csv(records: Sequence[dict[str, Any]], columns: Sequence[str], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow(
                {name: "" if record[name] is None else record[name] for name in columns}
            )
    return path


def write_report(report: Report, out_dir: Path) -> list[Path]:
    """summary.md, summary.csv, runs.csv, trend.csv, campaigns.csv and slowest_seeds.csv
    (with campaigns) and the plots; returns the paths written."""
    from bench import plots, trends
    from bench.report import markdown_report

    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        write_csv(report.latest, SUMMARY_COLUMNS, out_dir / "summary.csv"),
        write_csv(report.groups, (*SUMMARY_COLUMNS, "run_started"), out_dir / "runs.csv"),
        write_csv(report.trend, trends.TREND_COLUMNS, out_dir / "trend.csv"),
    ]
    if report.campaigns is not None:
        written += report.campaigns.write_csvs(out_dir)
    plot_paths = plots.write_plots(report, out_dir / "plots")
    summary = out_dir / "summary.md"
    summary.write_text(markdown_report(report, plot_paths, out_dir), encoding="utf-8")
    return [summary, *written, *plot_paths]


# --- entry points ------------------------------------------------------------------------


def aggregate(
    source: str | Path,
    out_dir: str | Path | None = None,
    *,
    spark: SparkSession | None = None,
    master: str = DEFAULT_MASTER,
    window: int = 5,
) -> list[dict[str, Any]]:
    """Reports on `source` (a store or a run's folder) into `out_dir` (see the module doc);
    returns the groups of each workload's latest run, with the values written to
    summary.csv. Stops the SparkSession only if it started it."""
    report, _, _ = _run(Path(source), out_dir, spark, master, window)
    return report.latest


def default_out(source: Path) -> Path:
    return source.parent / "report" if is_store(source) else source


def _run(
    source: Path,
    out_dir: str | Path | None,
    spark: SparkSession | None,
    master: str,
    window: int,
) -> tuple[Report, list[Path], str]:
    """(report, paths written, where Spark ran); starts and stops a session unless given
    one or one is already active (stopping that would pull it from under its owner)."""
    source_kind(source)  # before starting a JVM: a wrong folder fails fast
    out = default_out(source) if out_dir is None else Path(out_dir)
    owned = spark is None and not spark_running()
    spark = spark_session(master) if spark is None else spark
    try:
        report = build_report(spark, source, window=window)
        return report, write_report(report, out), _engine(spark)
    finally:
        if owned:
            spark.stop()


def _engine(spark: SparkSession) -> str:
    context = spark.sparkContext
    if context.master.startswith("local["):
        return f"Spark {spark.version} on {context.master} (in this process)"
    # The block managers: the driver's and one per executor.
    executors = context._jsc.sc().getExecutorMemoryStatus().size() - 1
    return f"Spark {spark.version} on {context.master} with {executors} executor(s)"


def build_parser() -> argparse.ArgumentParser:
    from bench.store import DEFAULT_STORE

    parser = argparse.ArgumentParser(
        prog="python -m bench aggregate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "source",
        type=Path,
        nargs="?",
        default=DEFAULT_STORE,
        metavar="STORE|DIR",
        help=f"a results store or a folder of <workload>.jsonl files (default {DEFAULT_STORE})",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default DIR, or STORE/../report)"
    )
    parser.add_argument(
        "--spark-master",
        default=DEFAULT_MASTER,
        help=f"Spark master URL (default {DEFAULT_MASTER}; e.g. local-cluster[2,1,1024])",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=5,
        help="previous runs a run is compared with for the regression flag (default 5)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        source_kind(args.source)  # before starting a JVM: a wrong folder fails fast
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
    if args.window < 1:
        print("python -m bench aggregate: --window must be at least 1", file=sys.stderr)
        return 2
    try:
        report, written, engine = _run(args.source, args.out, None, args.spark_master, args.window)
    except NoResults as exc:
        print(f"python -m bench aggregate: {exc}", file=sys.stderr)
        return 2
    print(
        f"{len(report.groups)} groups of {len(report.runs)} run(s) in {args.source}; "
        f"{len(report.regressions)} regression(s) in the latest runs; {engine}"
    )
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
