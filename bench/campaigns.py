"""The simulation campaigns in the store (`sim-campaign` rows, one per seed; see
bench/workloads/sim_campaign.py), aggregated in Spark over every stored run:

- per fault mix, cluster shape (BROKERSxPARTITIONS) and case: seeds, failures, the real
  seconds per seed and the virtual seconds to converge after the faults (p50 / p95 / max of
  the seeds that converged);
- what the failures broke: seeds per invariant (lost, duplicated, hung, cluster, ...) by
  fault mix and shape;
- seeds and failures per commit, in the order the commits were first measured;
- the slowest seeds (real time), with their replay facts.

Rows stored before the workload recorded `faults`, `invariants` and `converge_s` count as
"not recorded" there.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CAMPAIGN_WORKLOAD", "SLOWEST", "CampaignReport", "campaign_report"]

CAMPAIGN_WORKLOAD = "sim-campaign"
CAMPAIGN_OP = "seed"
SLOWEST = 10
NOT_RECORDED = "not recorded"
ACCURACY = 10_000
MIX_COLUMNS = (
    "faults",
    "shape",
    "case",
    "runs",
    "seeds",
    "failed",
    "failure_rate",
    "seconds_p50",
    "seconds_max",
    "converged",
    "converge_p50_s",
    "converge_p95_s",
    "converge_max_s",
)
SLOWEST_COLUMNS = (
    "run_id",
    "git_sha",
    "case",
    "sim_seed",
    "seconds",
    "outcome",
    "invariants",
    "converge_s",
)


@attrs.frozen
class CampaignReport:
    by_mix: list[dict[str, Any]]
    by_invariant: list[dict[str, Any]]  # faults, shape, invariant, seeds
    by_commit: list[dict[str, Any]]  # git_sha, first_run, runs, seeds, failed
    slowest: list[dict[str, Any]]

    def write_csvs(self, out_dir: Path) -> list[Path]:
        return [
            _write(self.by_mix, MIX_COLUMNS, out_dir / "campaigns.csv"),
            _write(self.slowest, SLOWEST_COLUMNS, out_dir / "slowest_seeds.csv"),
        ]


def _write(records: Sequence[dict[str, Any]], columns: Sequence[str], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow({k: "" if record[k] is None else record[k] for k in columns})
    return path


def campaign_rows(rows: DataFrame) -> DataFrame:
    """The campaign's seed rows with their parameters as columns."""
    from pyspark.sql import functions as F

    def param(name: str):
        return F.get_json_object("params", f"$.{name}")

    return (
        rows.filter((F.col("workload") == CAMPAIGN_WORKLOAD) & (F.col("op") == CAMPAIGN_OP))
        .withColumn("faults", F.coalesce(param("faults"), F.lit(NOT_RECORDED)))
        .withColumn("shape", F.concat_ws("x", param("brokers"), param("partitions")))
        .withColumn("sim_seed", param("sim_seed").cast("long"))
        .withColumn("invariants", param("invariants"))
        .withColumn("converge_s", param("converge_s").cast("double"))
        .withColumn("seconds", F.col("latency_ns") / 1e9)
        .withColumn("failed", (F.col("outcome") != "ok").cast("int"))
    )


def campaign_report(rows: DataFrame) -> CampaignReport | None:
    """None when the rows hold no campaign."""
    from pyspark.sql import functions as F

    seeds = campaign_rows(rows).cache()
    try:
        by_mix = [
            row.asDict()
            for row in seeds.groupBy("faults", "shape", "case")
            .agg(
                F.count_distinct("run_id").alias("runs"),
                F.count(F.lit(1)).alias("seeds"),
                F.sum("failed").alias("failed"),
                F.percentile_approx("seconds", 0.5, ACCURACY).alias("seconds_p50"),
                F.max("seconds").alias("seconds_max"),
                F.count("converge_s").alias("converged"),
                F.percentile_approx("converge_s", [0.5, 0.95], ACCURACY).alias("converge"),
                F.max("converge_s").alias("converge_max_s"),
            )
            .orderBy("faults", "shape", "case")
            .collect()
        ]
        if not by_mix:
            return None
        for mix in by_mix:
            mix["failure_rate"] = mix["failed"] / mix["seeds"]
            converge = mix.pop("converge") or [None, None]
            mix["converge_p50_s"], mix["converge_p95_s"] = converge
        broken = (
            seeds.filter(F.col("failed") == 1)
            .withColumn(
                "invariant",
                F.explode(
                    F.when(
                        F.col("invariants").isNull() | (F.col("invariants") == ""),
                        F.array(F.lit(NOT_RECORDED)),
                    ).otherwise(F.split("invariants", ","))
                ),
            )
            .groupBy("faults", "shape", "invariant")
            .agg(F.count(F.lit(1)).alias("seeds"))
            .orderBy("faults", "shape", F.desc("seeds"), "invariant")
            .collect()
        )
        by_commit = (
            seeds.groupBy("git_sha")
            .agg(
                F.min("run_started").alias("first_run"),
                F.count_distinct("run_id").alias("runs"),
                F.count(F.lit(1)).alias("seeds"),
                F.sum("failed").alias("failed"),
            )
            .orderBy("first_run", "git_sha")
            .collect()
        )
        slowest = (
            seeds.orderBy(F.desc("latency_ns"), "run_id", "sim_seed")
            .limit(SLOWEST)
            .select(*SLOWEST_COLUMNS)
            .collect()
        )
    finally:
        seeds.unpersist()
    return CampaignReport(
        by_mix=by_mix,
        by_invariant=[row.asDict() for row in broken],
        by_commit=[row.asDict() for row in by_commit],
        slowest=[row.asDict() for row in slowest],
    )
