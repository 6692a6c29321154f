"""PNG plots of the benchmark report, drawn by `python -m bench aggregate`
(bench/aggregate.py) from aggregates only: the groups' dicts and the small pandas frames
Spark computed (quantile grids, time buckets, per-count means), never raw rows.

Each figure's title says what it measures and against what; legends sit outside the
axes. Each plot function returns the path it wrote, or None when it had no data to draw.
Figures are built with `matplotlib.figure.Figure` on an Agg canvas rather than pyplot, so
there is no global figure state and no display is needed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "MIN_FIT_POINTS",
    "campaign_convergence",
    "election_scaling",
    "failover_timeline",
    "latency_cdf",
    "throughput_vs_baseline",
    "trend",
    "write_plots",
]

log = logging.getLogger("bench.aggregate")

# A least-squares line through two points always fits; from three on, it says something.
MIN_FIT_POINTS = 3
TREND_CASES_PER_FIGURE = 12


def _new_figure(width: float = 9.0, height: float = 5.0) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)  # attaches the Agg canvas that savefig renders with
    return figure


def _legend_outside(axes) -> None:
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    log.info("wrote %s", path)
    return path


def _file_safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def throughput_vs_baseline(groups: Sequence[dict[str, Any]], plots_dir: Path) -> Path | None:
    """One bar per group with a ratio to its baseline, on a log axis (0.02 and 14 both
    readable), with ±1 sd error bars where the groups had repeated intervals."""
    rated = [g for g in groups if g.get("ratio")]
    if not rated:
        return None
    labels = [f"{g['workload']}/{g['case']}" for g in rated]
    ratios = np.array([g["ratio"] for g in rated], dtype=float)
    spreads = np.array([g["ratio_spread"] or 0.0 for g in rated], dtype=float)
    # Asymmetric on a log axis: the lower bar stops short of zero.
    lower = np.minimum(spreads, ratios * 0.95)
    figure = _new_figure(width=10.0, height=max(2.5, 0.42 * len(rated) + 1.6))
    axes = figure.add_subplot()
    positions = np.arange(len(rated))
    axes.barh(positions, ratios, color="tab:blue", xerr=[lower, spreads], capsize=3)
    axes.set_xscale("log")
    axes.set_yticks(positions, labels, fontsize="small")
    axes.invert_yaxis()  # first group on top, like the summary table
    axes.axvline(1.0, color="black", linestyle="--", linewidth=1)
    for position, group in zip(positions, rated, strict=True):
        spread = f" ± {_fmt(group['ratio_spread'])}" if group["ratio_spread"] else ""
        axes.annotate(
            f"{_fmt(group['ratio'])}{spread}  vs {group['baseline']} ({group['baseline_metric']})",
            (group["ratio"] + (group["ratio_spread"] or 0.0), position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="x-small",
        )
    low, high = ratios.min(), (ratios + spreads).max()
    axes.set_xlim(min(low / 3, 0.5), max(high * 30, 2.0))  # room for the labels
    axes.set_xlabel("ratio to the baseline measured in the same run (log scale; 1 = equal)")
    axes.set_title("Throughput as a ratio of its baseline's (bars: ±1 sd from per-interval rates)")
    return _save(figure, plots_dir / "throughput_vs_baseline.png")


def latency_cdf(cdf: pd.DataFrame, workload: str, plots_dir: Path, run: str = "") -> Path | None:
    """The latency CDF of each case of `workload`, one axis per operation, drawn through
    the quantile grid Spark computed (log-scale x)."""
    rows = cdf[cdf["workload"] == workload] if not cdf.empty else cdf
    if rows.empty:
        return None
    ops = sorted(rows["op"].unique())
    figure = _new_figure(width=10.0, height=2.0 + 2.6 * len(ops))
    all_axes = figure.subplots(len(ops), 1, squeeze=False)[:, 0]
    for axes, op in zip(all_axes, ops, strict=True):
        for case, points in rows[rows["op"] == op].groupby("case", sort=True):
            points = points.sort_values("quantile")
            n = int(points["n"].iloc[0])
            axes.plot(points["latency_ms"], points["quantile"], label=f"{case} (n={n:,})")
        axes.set_xscale("log")
        axes.set_ylim(0, 1.02)
        axes.set_ylabel("fraction of ops")
        axes.set_title(f"operation: {op}", fontsize="medium")
        axes.grid(True, which="both", alpha=0.3)
        _legend_outside(axes)
    all_axes[-1].set_xlabel("latency (ms, log scale)")
    suffix = f", run {run}" if run else ""
    figure.suptitle(f"Latency CDF of {workload}'s successful operations{suffix} (no baseline)")
    return _save(figure, plots_dir / f"latency_cdf_{_file_safe(workload)}.png")


def failover_timeline(timeline: pd.DataFrame, plots_dir: Path) -> Path | None:
    """Per failover workload, the slowest successful operation of each time bucket per case
    (log y), with the buckets that had errors marked."""
    if timeline.empty:
        return None
    workloads = sorted(timeline["workload"].unique())
    figure = _new_figure(width=11.0, height=1.5 + 3.2 * len(workloads))
    all_axes = figure.subplots(len(workloads), 1, squeeze=False)[:, 0]
    for axes, workload in zip(all_axes, workloads, strict=True):
        rows = timeline[timeline["workload"] == workload]
        for index, (case, series) in enumerate(rows.groupby("case", sort=True)):
            color = f"C{index % 10}"
            axes.plot(series["second"], series["max_ms"], color=color, linewidth=1, label=case)
            failed = series[series["errors"] > 0]
            if not failed.empty:
                axes.scatter(
                    failed["second"],
                    failed["max_any_ms"],
                    marker="x",
                    s=40,
                    color=color,
                    label=f"{case}: buckets with errors",
                )
        axes.set_yscale("log")
        axes.set_ylabel("max latency (ms)")
        axes.set_title(workload, fontsize="medium")
        axes.grid(True, alpha=0.3)
        _legend_outside(axes)
    all_axes[-1].set_xlabel("seconds since the workload's first row")
    figure.suptitle(
        "Failover: the slowest successful operation per time bucket (errors marked x; no baseline)"
    )
    return _save(figure, plots_dir / "failover_timeline.png")


def _least_squares(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(slope, intercept) of y on x; None with fewer than MIN_FIT_POINTS distinct x."""
    if len(np.unique(x)) < MIN_FIT_POINTS:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def election_scaling(election: pd.DataFrame, plots_dir: Path) -> Path | None:
    """Election time against partitions per case family: the mean with min-max bars, and a
    least-squares line through the means when there are MIN_FIT_POINTS counts or more."""
    if election.empty:
        return None
    figure = _new_figure()
    axes = figure.add_subplot()
    for family, series in election.groupby("family", sort=True):
        x = series["partitions"].to_numpy(dtype=float)
        mean = series["mean_s"].to_numpy(dtype=float)
        errors = [mean - series["min_s"].to_numpy(), series["max_s"].to_numpy() - mean]
        bars = axes.errorbar(x, mean, yerr=errors, marker="o", capsize=3, label=f"{family} (mean)")
        fit = _least_squares(x, mean)
        if fit is not None:
            slope, intercept = fit
            xs = np.array([x.min(), x.max()])
            axes.plot(
                xs,
                intercept + slope * xs,
                linestyle="--",
                color=bars.lines[0].get_color(),
                label=f"{family} fit: {_fmt(intercept)} s + {_fmt(slope * 1e3)} ms/partition",
            )
    axes.set_xlabel("partitions led by the broker that died")
    axes.set_ylabel("election time (s)")
    axes.set_title("Election time vs partitions (mean, bars min to max; no baseline)")
    axes.grid(True, alpha=0.3)
    _legend_outside(axes)
    return _save(figure, plots_dir / "election_scaling.png")


def trend(trend_rows: Sequence[dict[str, Any]], workload: str, plots_dir: Path) -> Path | None:
    """Per case of `workload` run at least twice: its metric run after run (commit below),
    the band of the previous runs shaded, regressions and improvements marked."""
    frame = pd.DataFrame([t for t in trend_rows if t["workload"] == workload])
    if frame.empty:
        return None
    frame = frame[frame["metric"].notna()]
    cases = [
        (key, series)
        for key, series in frame.groupby(["case", "op", "host_class"], sort=True)
        if len(series) >= 2
    ][:TREND_CASES_PER_FIGURE]
    if not cases:
        return None
    columns = min(3, len(cases))
    rows = math.ceil(len(cases) / columns)
    figure = _new_figure(width=4.2 * columns + 1.0, height=2.8 * rows + 0.8)
    all_axes = figure.subplots(rows, columns, squeeze=False).flatten()
    several_hosts = frame["host_class"].nunique() > 1
    for axes, ((case, op, host), series) in zip(all_axes, cases, strict=False):
        x = np.arange(len(series))
        axes.plot(x, series["metric"], marker="o", markersize=3, color="tab:blue")
        banded = series["band_low"].notna()
        if banded.any():
            # As floats: a case whose early runs have no band holds None too, and a column
            # of objects is no number to matplotlib ("ufunc 'isfinite' not supported").
            axes.fill_between(
                x[banded.to_numpy()],
                series.loc[banded, "band_low"].astype(float),
                series.loc[banded, "band_high"].astype(float),
                alpha=0.2,
                color="tab:gray",
                step="mid",
            )
        for flag, marker, color in (
            ("regression", "X", "tab:red"),
            ("improvement", "^", "tab:green"),
        ):
            marked = (series["flag"] == flag).to_numpy()
            axes.scatter(x[marked], series["metric"][marked], marker=marker, s=60, color=color)
        axes.set_xticks(x, [str(sha)[:7] for sha in series["git_sha"]], rotation=60, fontsize=6)
        metric = series["metric_name"].iloc[0]
        host_note = f" [{host}]" if several_hosts else ""
        axes.set_title(f"{case} / {op}{host_note}", fontsize="small")
        axes.set_ylabel(metric.replace("_", " "), fontsize="small")
        axes.grid(True, alpha=0.3)
    for axes in all_axes[len(cases) :]:
        axes.set_visible(False)
    figure.suptitle(
        f"Trend of {workload} run by run (commit below; shaded: median ± max(3·1.48·MAD, 5%) of "
        "the previous runs; X regression, ^ improvement)",
        fontsize="medium",
    )
    return _save(figure, plots_dir / f"trend_{_file_safe(workload)}.png")


def campaign_convergence(by_mix: Sequence[dict[str, Any]], plots_dir: Path) -> Path | None:
    """Per campaign combination: the share of seeds that failed, and the virtual seconds
    to converge after the faults (p50 bar, p95 and max marks)."""
    if not by_mix:
        return None
    labels = [f"{m['case']}" for m in by_mix]
    positions = np.arange(len(by_mix))
    figure = _new_figure(width=11.0, height=1.6 + 0.45 * len(by_mix))
    failed_axes, converge_axes = figure.subplots(1, 2, sharey=True)
    failed_axes.barh(positions, [100 * m["failure_rate"] for m in by_mix], color="tab:red")
    for position, mix in zip(positions, by_mix, strict=True):
        failed_axes.annotate(
            f"{mix['failed']}/{mix['seeds']}",
            (100 * mix["failure_rate"], position),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize="x-small",
        )
    failed_axes.set_yticks(positions, labels, fontsize="x-small")
    failed_axes.invert_yaxis()
    failed_axes.set_xlabel("seeds failed (%)")
    failed_axes.set_xlim(0, max(10.0, 120 * max(m["failure_rate"] for m in by_mix)))
    p50 = np.array([m["converge_p50_s"] or np.nan for m in by_mix], dtype=float)
    converge_axes.barh(positions, p50, color="tab:blue", label="p50")
    for name, marker in (("converge_p95_s", "|"), ("converge_max_s", "x")):
        values = np.array([m[name] or np.nan for m in by_mix], dtype=float)
        converge_axes.scatter(values, positions, marker=marker, color="black", label=name[9:12])
    converge_axes.set_xlabel("virtual seconds to converge after the faults")
    _legend_outside(converge_axes)
    figure.suptitle("Simulation campaigns: failures and time to converge per combination")
    return _save(figure, plots_dir / "campaigns.png")


def write_plots(report: Any, plots_dir: Path) -> list[Path]:
    """Every plot there is data for (`report`: bench.aggregate.Report); returns the paths
    written."""
    latest_run = {g["workload"]: g["run_id"] for g in report.latest}
    written = [throughput_vs_baseline(report.latest, plots_dir)]
    if not report.cdf.empty:
        written += [
            latency_cdf(report.cdf, workload, plots_dir, latest_run.get(workload, ""))
            for workload in sorted(report.cdf["workload"].unique())
        ]
    written += [
        failover_timeline(report.timeline, plots_dir),
        election_scaling(report.election, plots_dir),
    ]
    written += [
        trend(report.trend, workload, plots_dir)
        for workload in sorted({t["workload"] for t in report.trend})
    ]
    if report.campaigns is not None:
        written.append(campaign_convergence(report.campaigns.by_mix, plots_dir))
    return [path for path in written if path is not None]
