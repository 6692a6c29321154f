"""The Markdown report (`summary.md`) of `python -m bench aggregate`, from the collected
aggregates of bench/aggregate.py (plain Python: no Spark here)."""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import trends

__all__ = ["format_number", "markdown_report"]

# (column, Markdown header) of the per-workload tables.
HEADLINE_COLUMNS = (
    ("case", "case"),
    ("op", "op"),
    ("rows", "rows"),
    ("errors", "errors"),
    ("ops_per_s", "ops/s"),
    ("mb_per_s", "MB/s"),
    ("spread", "ops/s per interval"),
    ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"),
    ("p99_ms", "p99 ms"),
    ("max_ms", "max ms"),
    ("ratio", "ratio"),
    ("baseline", "baseline"),
)
_TEXT_COLUMNS = ("case", "op", "spread", "ratio", "baseline")


def format_number(value: Any) -> str:
    """Three significant figures, whole numbers from 100 up (with thousands separators)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value).replace("|", "\\|")


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], text: Sequence[int] = (0,)):
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---" if i in text else "---:" for i in range(len(headers))) + "|")
    lines += ["| " + " | ".join(format_number(cell) for cell in row) + " |" for row in rows]
    return lines


def _headline_cells(group: dict[str, Any]) -> dict[str, Any]:
    spread = None
    if group["kind"] == "interval" and (group["intervals"] or 0) >= 2:
        spread = (
            f"{format_number(group['rate_min'])} to {format_number(group['rate_max'])}"
            f" ({group['intervals']})"
        )
    ratio = None
    if group["ratio"] is not None:
        ratio = format_number(group["ratio"])
        if group["ratio_spread"] is not None:
            ratio += f" ± {format_number(group['ratio_spread'])}"
    baseline = group["baseline"]
    if baseline and group["baseline_metric"]:
        baseline = f"{baseline} ({group['baseline_metric']})"
    bytes_per_s = group["bytes_per_s"]
    return {
        **group,
        "mb_per_s": None if not bytes_per_s else bytes_per_s / 1e6,
        "spread": spread,
        "ratio": ratio,
        "baseline": baseline,
    }


def _plot_link(plot_paths: Sequence[Path], name: str, out_dir: Path, alt: str) -> list[str]:
    for path in plot_paths:
        if path.name == name:
            return ["", f"![{alt}]({Path(os.path.relpath(path, out_dir)).as_posix()})"]
    return []


def markdown_report(report: Any, plot_paths: Sequence[Path], out_dir: Path) -> str:
    """`report`: bench.aggregate.Report."""
    runs = report.runs
    commits = {run["git_sha"] for run in runs}
    hosts = sorted({run["host_class"] for run in runs})
    lines = [
        "# Benchmark report",
        "",
        f"{len(runs)} run(s) of {len(commits)} commit(s), {_when(runs[0]['run_started'])} to "
        f"{_when(runs[-1]['run_started'])}; host classes: {', '.join(hosts)}.",
        "",
        "Tables: each workload's latest run. Interval rows (a rate over an interval) show "
        "their rate and its spread over the run's intervals, not latencies; operation rows "
        "show latency percentiles over the successful operations (percentile_approx), p50 "
        "from 2, p95 from 20 and p99 from 100 of them. A ratio divides by the baseline "
        "measured in the same run, ± one standard deviation from both sides' per-interval "
        "rates.",
    ]
    lines += _regressions(report)
    for workload in sorted({group["workload"] for group in report.latest}):
        lines += _workload_section(report, workload, plot_paths, out_dir)
    lines += _plot_link(
        plot_paths, "throughput_vs_baseline.png", out_dir, "throughput as a ratio of baselines"
    )
    lines += _trend_section(report, plot_paths, out_dir)
    if report.campaigns is not None:
        lines += _campaign_section(report.campaigns, plot_paths, out_dir)
    return "\n".join(lines) + "\n"


def _regressions(report: Any) -> list[str]:
    rule = (
        f"A run is flagged when its metric (ops/s of interval cases, p50 of operation "
        f"cases) falls outside median ± max({trends.K:g} · 1.4826 · MAD, "
        f"{trends.FLOOR:.0%} of the median) of the previous {report.window} runs of the "
        f"same case on the same host class (from {trends.MIN_HISTORY} previous runs on)."
    )
    lines = ["", "## Regressions in the latest runs", "", rule, ""]
    found = report.regressions
    if not found:
        return [*lines, "None."]
    rows = [
        (
            t["workload"],
            t["case"],
            t["op"],
            t["metric_name"],
            t["metric"],
            f"{format_number(t['band_low'])} to {format_number(t['band_high'])}",
            str(t["git_sha"])[:12],
        )
        for t in found
    ]
    headers = ("workload", "case", "op", "metric", "latest", "band", "commit")
    return lines + _table(headers, rows, text=(0, 1, 2, 3, 5, 6))


def _workload_section(
    report: Any, workload: str, plot_paths: Sequence[Path], out_dir: Path
) -> list[str]:
    groups = [g for g in report.latest if g["workload"] == workload]
    run = next(r for r in report.runs if r["run_id"] == groups[0]["run_id"])
    load = "" if run["load_1m"] is None else f", load {run['load_1m']:.2f}"
    lines = [
        "",
        f"## {workload}",
        "",
        f"Run {run['run_id']} of {str(run['git_sha'])[:12]}, {_when(run['run_started'])}, "
        f"host {run['host_class']}{load}.",
        "",
    ]
    cells = [_headline_cells(group) for group in groups]
    text = tuple(i for i, (name, _) in enumerate(HEADLINE_COLUMNS) if name in _TEXT_COLUMNS)
    lines += _table(
        [header for _, header in HEADLINE_COLUMNS],
        [[cell[name] for name, _ in HEADLINE_COLUMNS] for cell in cells],
        text=text,
    )
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in workload)
    lines += _plot_link(plot_paths, f"latency_cdf_{safe}.png", out_dir, f"{workload} latency CDF")
    if workload == "election-scaling":
        lines += _plot_link(plot_paths, "election_scaling.png", out_dir, "election scaling")
    if workload in ("failover", "controller-failover"):
        lines += _plot_link(plot_paths, "failover_timeline.png", out_dir, "failover timeline")
    return lines


def _trend_section(report: Any, plot_paths: Sequence[Path], out_dir: Path) -> list[str]:
    by_case: dict[tuple, list[dict[str, Any]]] = {}
    for row in report.trend:
        by_case.setdefault((row["workload"], row["case"], row["op"], row["host_class"]), []).append(
            row
        )
    repeated = {key: rows for key, rows in by_case.items() if len(rows) >= 2}
    if not repeated:
        return []
    lines = [
        "",
        "## Trends",
        "",
        "Cases measured in two runs or more: first and latest metric, the band the latest "
        "was held against, its flag.",
        "",
    ]
    rows = []
    for (workload, case, op, host), history in sorted(repeated.items()):
        last = history[-1]
        band = (
            ""
            if last["band_low"] is None
            else f"{format_number(last['band_low'])} to {format_number(last['band_high'])}"
        )
        rows.append(
            (
                workload,
                case,
                op,
                host,
                last["metric_name"],
                len(history),
                history[0]["metric"],
                last["metric"],
                band,
                last["flag"] or "",
            )
        )
    headers = (
        "workload",
        "case",
        "op",
        "host",
        "metric",
        "runs",
        "first",
        "latest",
        "band",
        "flag",
    )
    lines += _table(headers, rows, text=(0, 1, 2, 3, 4, 8, 9))
    for workload in sorted({key[0] for key in repeated}):
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in workload)
        lines += _plot_link(plot_paths, f"trend_{safe}.png", out_dir, f"{workload} trend")
    return lines


def _fault_mix(faults: str) -> str:
    from kcore.testing.sim import CONSUMER_FAULTS, FAULTS

    if faults == ",".join(FAULTS):
        return "all cluster faults"
    if faults == ",".join(FAULTS + CONSUMER_FAULTS):
        return "all cluster and consumer faults"
    return faults


def _campaign_section(campaigns: Any, plot_paths: Sequence[Path], out_dir: Path) -> list[str]:
    lines = [
        "",
        "## Simulation campaigns",
        "",
        "Every stored campaign seed. Converge: virtual seconds from the end of the faults to "
        "a converged cluster, over the seeds that converged.",
        "",
    ]
    rows = [
        (
            _fault_mix(m["faults"]),
            m["shape"],
            m["case"],
            m["seeds"],
            m["failed"],
            m["seconds_p50"],
            m["converge_p50_s"],
            m["converge_p95_s"],
            m["converge_max_s"],
        )
        for m in campaigns.by_mix
    ]
    headers = (
        "faults",
        "shape",
        "case",
        "seeds",
        "failed",
        "s/seed p50",
        "converge p50 s",
        "p95 s",
        "max s",
    )
    lines += _table(headers, rows, text=(0, 1, 2))
    if campaigns.by_invariant:
        lines += ["", "What the failed seeds broke:", ""]
        lines += _table(
            ("faults", "shape", "invariant", "seeds"),
            [
                (_fault_mix(b["faults"]), b["shape"], b["invariant"], b["seeds"])
                for b in campaigns.by_invariant
            ],
            text=(0, 1, 2),
        )
    lines += ["", "Per commit:", ""]
    lines += _table(
        ("commit", "first run", "runs", "seeds", "failed"),
        [
            (str(c["git_sha"])[:12], _when(c["first_run"]), c["runs"], c["seeds"], c["failed"])
            for c in campaigns.by_commit
        ],
        text=(0, 1),
    )
    lines += ["", "Slowest seeds (real time):", ""]
    lines += _table(
        ("seed", "case", "seconds", "outcome", "broke", "converge s", "run"),
        [
            (
                s["sim_seed"],
                s["case"],
                s["seconds"],
                s["outcome"],
                s["invariants"] or "",
                s["converge_s"],
                s["run_id"],
            )
            for s in campaigns.slowest
        ],
        text=(1, 3, 4, 6),
    )
    lines += _plot_link(plot_paths, "campaigns.png", out_dir, "campaign failures and convergence")
    return lines
