"""PNG plots of a benchmark run, drawn by `python -m bench aggregate` (bench/aggregate.py).

Inputs are pandas frames, never Spark objects, so these functions can be drawn and tested
without a JVM:

- `groups`: one row per (workload, case, op) group, the dicts `aggregate` returns;
- `per_row`: the raw rows the per-row plots need, with the columns workload, case, op,
  start_time, latency_ns, count, outcome and partitions (params["partitions"], a string).

Each plot function returns the path it wrote, or None when it had no data to draw.
Figures are built with `matplotlib.figure.Figure` on an Agg canvas rather than pyplot, so
there is no global figure state and no display is needed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "FAILOVER_WORKLOADS",
    "election_scaling",
    "failover_timeline",
    "latency_cdf",
    "per_op_rows",
    "throughput_vs_baseline",
    "write_plots",
]

log = logging.getLogger("bench.aggregate")

FAILOVER_WORKLOADS = ("failover", "controller-failover")
ELECTION_WORKLOAD = "election-scaling"
ELECTION_OP = "election"


def _new_figure(width: float = 8.0, height: float = 5.0) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)  # attaches the Agg canvas that savefig renders with
    return figure


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    log.info("wrote %s", path)
    return path


def throughput_vs_baseline(groups: pd.DataFrame, plots_dir: Path) -> Path | None:
    """One horizontal bar per group that has a ratio to its baseline, with a line at 1.0."""
    if groups.empty or "ratio" not in groups:
        return None
    rated = groups[pd.to_numeric(groups["ratio"], errors="coerce").notna()]
    if rated.empty:
        return None
    labels = [f"{w}/{c}" for w, c in zip(rated["workload"], rated["case"], strict=True)]
    ratios = rated["ratio"].astype(float).to_numpy()
    figure = _new_figure(height=max(2.5, 0.4 * len(rated) + 1.5))
    axes = figure.add_subplot()
    positions = np.arange(len(rated))
    axes.barh(positions, ratios, color="tab:blue")
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()  # first group on top, like the summary table
    axes.axvline(1.0, color="black", linestyle="--", linewidth=1)
    axes.set_xlabel("ratio to baseline (same run)")
    axes.set_title("Throughput vs baseline")
    return _save(figure, plots_dir / "throughput_vs_baseline.png")


def per_op_rows(per_row: pd.DataFrame) -> pd.DataFrame:
    """Rows that measure one operation each (not an interval), and succeeded."""
    if per_row.empty:
        return per_row
    single = (per_row["count"] == 1) & ~per_row["op"].str.endswith("_interval")
    return per_row[single & (per_row["outcome"] == "ok") & (per_row["latency_ns"] > 0)]


def latency_cdf(per_op: pd.DataFrame, workload: str, plots_dir: Path) -> Path | None:
    """The latency CDF of each case of `workload`, from `per_op_rows` (log-scale x)."""
    rows = per_op[per_op["workload"] == workload] if not per_op.empty else per_op
    if rows.empty:
        return None
    figure = _new_figure()
    axes = figure.add_subplot()
    for case, case_rows in rows.groupby("case", sort=True):
        latency_ms = np.sort(case_rows["latency_ns"].to_numpy(dtype=float) / 1e6)
        fraction = np.arange(1, len(latency_ms) + 1) / len(latency_ms)
        axes.step(latency_ms, fraction, where="post", label=f"{case} (n={len(latency_ms)})")
    axes.set_xscale("log")
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("latency (ms, log scale)")
    axes.set_ylabel("fraction of operations")
    axes.set_title(f"Latency CDF: {workload}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    return _save(figure, plots_dir / f"latency_cdf_{_file_safe(workload)}.png")


def _file_safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def failover_timeline(per_row: pd.DataFrame, plots_dir: Path) -> Path | None:
    """Latency over time of the failover workloads, one series per case; errors as crosses."""
    if per_row.empty:
        return None
    rows = per_row[per_row["workload"].isin(FAILOVER_WORKLOADS)]
    if rows.empty:
        return None
    several = rows["workload"].nunique() > 1
    figure = _new_figure(width=10.0)
    axes = figure.add_subplot()
    for index, ((workload, case), series) in enumerate(
        rows.groupby(["workload", "case"], sort=True)
    ):
        # Seconds since the first row of the workload (not of the case), so the cases of
        # one workload share a time axis.
        origin = rows.loc[rows["workload"] == workload, "start_time"].min()
        seconds = series["start_time"] - origin
        latency_ms = series["latency_ns"] / 1e6
        ok = series["outcome"] == "ok"
        label = f"{workload}/{case}" if several else case
        color = f"C{index % 10}"
        axes.scatter(seconds[ok], latency_ms[ok], s=8, color=color, label=label)
        if (~ok).any():
            axes.scatter(
                seconds[~ok],
                latency_ms[~ok],
                s=48,
                marker="x",
                color=color,
                linewidths=1.5,
                label=f"{label}: errors",
            )
    axes.set_xlabel("seconds since the workload's first row")
    axes.set_ylabel("latency (ms)")
    axes.set_title("Failover timeline")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return _save(figure, plots_dir / "failover_timeline.png")


def _without_count(case: str) -> str:
    head, _, tail = case.rpartition("-")
    return head if head and tail.isdigit() else case


def election_scaling(per_row: pd.DataFrame, plots_dir: Path) -> Path | None:
    """Election latency (s) against partitions, one line per case plus its least-squares fit.

    Only successful "election" rows whose params carry a numeric `partitions` count."""
    if per_row.empty:
        return None
    rows = per_row[
        (per_row["workload"] == ELECTION_WORKLOAD)
        & (per_row["op"] == ELECTION_OP)
        & (per_row["outcome"] == "ok")
    ].assign(partitions=lambda f: pd.to_numeric(f["partitions"], errors="coerce"))
    rows = rows[rows["partitions"].notna()]
    if rows.empty:
        return None
    # One line per family of cases: "leader-dies-1000" and "leader-dies-3000" are two
    # points of "leader-dies" (a case per count keeps them apart in the tables).
    rows = rows.assign(family=rows["case"].map(_without_count))
    figure = _new_figure()
    axes = figure.add_subplot()
    for case, series in rows.groupby("family", sort=True):
        x = series["partitions"].to_numpy(dtype=float)
        y = series["latency_ns"].to_numpy(dtype=float) / 1e9
        means = series.assign(seconds=y).groupby("partitions")["seconds"].mean()
        (line,) = axes.plot(means.index, means.to_numpy(), marker="o", label=f"{case} (mean)")
        axes.scatter(x, y, s=10, alpha=0.4, color=line.get_color())
        fit = _least_squares(x, y)
        if fit is not None:
            slope, intercept = fit
            xs = np.array([x.min(), x.max()])
            axes.plot(
                xs,
                intercept + slope * xs,
                linestyle="--",
                color=line.get_color(),
                label=f"{case} fit: {intercept:.3g} s + {slope * 1e3:.3g} ms/partition",
            )
    axes.set_xlabel("partitions")
    axes.set_ylabel("election latency (s)")
    axes.set_title("Election time vs partitions")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return _save(figure, plots_dir / "election_scaling.png")


def _least_squares(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(slope, intercept) of y on x; None when x has fewer than two distinct values."""
    if len(np.unique(x)) < 2:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def write_plots(groups: pd.DataFrame, per_row: pd.DataFrame, plots_dir: Path) -> list[Path]:
    """Every plot there is data for; returns the paths written."""
    written = [throughput_vs_baseline(groups, plots_dir)]
    per_op = per_op_rows(per_row)
    if not per_op.empty:
        written += [latency_cdf(per_op, w, plots_dir) for w in sorted(per_op["workload"].unique())]
    written += [failover_timeline(per_row, plots_dir), election_scaling(per_row, plots_dir)]
    return [path for path in written if path is not None]
