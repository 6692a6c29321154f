"""Each case's trend across runs, and the regression flag, computed in Spark.

A run of a case (workload, case, op) is compared with the previous `window` runs (default
5) of the same case on the same host class (bench/store.py), ordered by run start. The
compared figure is the case's headline metric:

- interval cases: `ops_per_s` (higher is better);
- operation cases: the p50 latency in ms (lower is better).

The band is median ± max(K · 1.4826 · MAD, FLOOR · |median|) of the previous runs' metric
(MAD: the median absolute deviation from their median; K = 3, FLOOR = 5 %; not below 0).
A run outside it on the bad side is flagged "regression", on the good side "improvement"; a
run with fewer than MIN_HISTORY previous runs is not flagged.

Why this band: the median and MAD ignore one odd run among the previous ones (a run on a
loaded machine does not widen the band as a standard deviation would, nor move its centre
as a mean would); 1.4826 · MAD estimates the standard deviation of normal noise, so three of
them flag about 0.3 % of noise; the floor keeps a history of near-identical runs (MAD near 0)
from flagging timer jitter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["FLOOR", "MIN_HISTORY", "TREND_COLUMNS", "K", "trend_frame", "trend_rows"]

K = 3.0
MAD_TO_SIGMA = 1.4826
FLOOR = 0.05
MIN_HISTORY = 3
CASE = ("workload", "case", "op", "host_class")
TREND_COLUMNS = (
    "workload",
    "case",
    "op",
    "host_class",
    "run_id",
    "git_sha",
    "run_started",
    "metric_name",
    "metric",
    "history",
    "band_median",
    "band_low",
    "band_high",
    "flag",
)


def _median(array: str) -> str:
    """Spark SQL: the median of a sorted array column (null when it is empty)."""
    n = f"size({array})"
    low, high = f"cast(floor(({n} - 1) / 2) as int)", f"cast(ceil(({n} - 1) / 2) as int)"
    return f"if({n} = 0, null, (get({array}, {low}) + get({array}, {high})) / 2)"


def trend_frame(stats: DataFrame, *, window: int = 5) -> DataFrame:
    """`stats` (bench.aggregate.case_stats) with each run's metric, band and flag."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    interval = F.col("kind") == "interval"
    p50_ms = F.element_at("latency_percentiles", 1) / 1e6
    previous = Window.partitionBy(*CASE).orderBy("run_started", "run_id").rowsBetween(-window, -1)
    measured = (
        stats.withColumn("metric_name", F.when(interval, "ops_per_s").otherwise("p50_ms"))
        .withColumn("metric", F.when(interval, F.col("ops_per_s")).otherwise(p50_ms))
        .withColumn("higher_is_better", interval)
        # collect_list leaves nulls out: a run without the metric is no evidence.
        .withColumn("previous", F.array_sort(F.collect_list("metric").over(previous)))
        .withColumn("history", F.size("previous"))
        .withColumn("band_median", F.expr(_median("previous")))
        .withColumn(
            "deviations",
            F.array_sort(F.expr("transform(previous, x -> abs(x - band_median))")),
        )
        .withColumn("mad", F.expr(_median("deviations")))
        .withColumn(
            "half_width",
            F.greatest(K * MAD_TO_SIGMA * F.col("mad"), FLOOR * F.abs(F.col("band_median"))),
        )
        # No band to speak of from fewer runs.
        .withColumn("banded", F.col("history") >= MIN_HISTORY)
        # Rates and latencies are not negative: nor is the band.
        .withColumn(
            "band_low",
            F.when(
                F.col("banded"), F.greatest(F.col("band_median") - F.col("half_width"), F.lit(0.0))
            ),
        )
        .withColumn(
            "band_high", F.when(F.col("banded"), F.col("band_median") + F.col("half_width"))
        )
    )
    below = F.col("metric") < F.col("band_low")
    above = F.col("metric") > F.col("band_high")
    better = F.col("higher_is_better")
    flag = (
        F.when(~F.col("banded") | F.col("metric").isNull(), "")
        .when((better & below) | (~better & above), "regression")
        .when((better & above) | (~better & below), "improvement")
        .otherwise("")
    )
    return measured.withColumn("flag", flag)


def trend_rows(stats: DataFrame, *, window: int = 5) -> list[dict[str, Any]]:
    """`trend_frame` collected: one dict per run and case (`TREND_COLUMNS`), in case and
    run order."""
    collected = (
        trend_frame(stats, window=window)
        .select(*TREND_COLUMNS)
        .orderBy(*CASE, "run_started", "run_id")
        .collect()
    )
    return [row.asDict() for row in collected]
