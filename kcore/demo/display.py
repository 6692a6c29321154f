"""How the demo shows itself: a live view on a terminal (rich), plain timestamped lines
otherwise (pipes, CI logs). Both show the brokers' own numbers from their /metrics
(under-replicated and offline partitions, leader counts, log end offsets, messages in)
beside the workload's (records acked and consumed)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from kcore.demo.model import NO_LEADER, ClusterView, Verdict, messages_in_per_second
from kcore.demo.runner import Display, Progress

STATUS_EVERY = 5.0  # seconds between status lines in plain mode
EVENTS_SHOWN = 12


def _rates(progress: Progress, window: dict) -> tuple[float, float]:
    """Acked and consumed records per second since the previous call."""
    now = time.monotonic()
    acked, consumed = len(progress.acked), len(progress.consumed)
    then, old_acked, old_consumed = window.get("last", (now, acked, consumed))
    window["last"] = (now, acked, consumed)
    elapsed = now - then
    if elapsed <= 0:
        return window.get("rates", (0.0, 0.0))
    window["rates"] = ((acked - old_acked) / elapsed, (consumed - old_consumed) / elapsed)
    return window["rates"]


def status_line(progress: Progress, produced: float, consumed: float) -> str:
    """The plain display's status: the workload's counts and rates, then the cluster's."""
    errors = sum(progress.send_errors.values())
    line = (
        f"status: acked {len(progress.acked)} ({produced:.0f}/s), consumed "
        f"{len(progress.consumed)} ({consumed:.0f}/s), send errors {errors}"
    )
    view = progress.view
    if view is None:
        return line
    offline = [p for p, s in sorted(view.partitions.items()) if s.leader == NO_LEADER]
    appended = messages_in_per_second(progress.previous_view, view)
    return (
        f"{line}; brokers: messages in {appended:.0f}/s, under-replicated partitions "
        f"{view.under_replicated}, offline partitions {view.offline_partitions}"
        + (f" {offline}" if offline else "")
    )


def _metric(view: ClusterView, broker: int, read) -> str:
    """A broker's number from its /metrics, `-` when it did not answer (down)."""
    metrics = view.brokers.get(broker)
    return "-" if metrics is None else str(read(metrics))


class PlainDisplay(Display):
    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self._last_status = 0.0
        self._window: dict = {}

    def _line(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} {text}", file=self.out, flush=True)

    def event(self, progress: Progress, text: str) -> None:
        self._line(text)

    def refresh(self, progress: Progress) -> None:
        now = time.monotonic()
        if now - self._last_status < STATUS_EVERY:
            return
        self._last_status = now
        produced, consumed = _rates(progress, self._window)
        self._line(status_line(progress, produced, consumed))

    def verdict(self, verdict: Verdict) -> None:
        print("", file=self.out)
        for line in verdict.lines():
            print(line, file=self.out)
        self.out.flush()


class LiveDisplay(Display):
    """A rich Live view: brokers, partitions, rates, and the latest cluster events."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._window: dict = {}
        self._progress: Progress | None = None

    def __enter__(self) -> LiveDisplay:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def event(self, progress: Progress, text: str) -> None:
        self._progress = progress
        self.live.update(self._render(progress))

    def refresh(self, progress: Progress) -> None:
        self._progress = progress
        self.live.update(self._render(progress))

    def verdict(self, verdict: Verdict) -> None:
        from rich.panel import Panel

        style = "green" if verdict.ok else "bold red"
        self.live.update(self._render(self._progress) if self._progress else "")
        self.live.__exit__(None, None, None)
        self.console.print(Panel("\n".join(verdict.lines()), title="verdict", style=style))

    def _render(self, progress: Progress):
        from rich.console import Group
        from rich.table import Table

        view = progress.view
        brokers = Table(title="brokers", expand=False)
        for column in ("id", "state", "role", "leaders", "under-replicated"):
            brokers.add_column(column)
        partitions = Table(title="topic demo", expand=False)
        for column in ("partition", "leader", "epoch", "replicas", "ISR", "HW", "LEO"):
            partitions.add_column(column)
        if view is not None:
            ids = sorted(
                view.live_brokers | {r for s in view.partitions.values() for r in s.replicas}
            )
            for broker in ids:
                up = broker in view.live_brokers
                role = (
                    f"controller (epoch {view.controller_epoch})"
                    if broker == view.controller
                    else ""
                )
                brokers.add_row(
                    str(broker), "[green]up[/]" if up else "[red]down[/]", role,
                    _metric(view, broker, lambda m: m.leaders),
                    _metric(view, broker, lambda m: m.under_replicated),
                )  # fmt: skip
            for partition, state in sorted(view.partitions.items()):
                leader = "[red]none[/]" if state.leader == NO_LEADER else str(state.leader)
                short = len(state.isr) < len(state.replicas)
                isr = f"[yellow]{list(state.isr)}[/]" if short else str(list(state.isr))
                hw = "?" if state.high_watermark is None else str(state.high_watermark)
                leo = "?" if state.log_end_offset is None else str(state.log_end_offset)
                partitions.add_row(
                    str(partition), leader, str(state.leader_epoch),
                    str(list(state.replicas)), isr, hw, leo,
                )  # fmt: skip
        produced, consumed = _rates(progress, self._window)
        errors = sum(progress.send_errors.values())
        numbers = Table.grid(padding=(0, 2))
        numbers.add_row("phase", progress.phase)
        numbers.add_row("acked (acks=all)", f"{len(progress.acked)}  ({produced:.0f}/s)")
        numbers.add_row("consumed", f"{len(progress.consumed)}  ({consumed:.0f}/s)")
        numbers.add_row("send errors", str(errors))
        if view is not None:
            appended = messages_in_per_second(progress.previous_view, view)
            urp, offline = view.under_replicated, view.offline_partitions
            numbers.add_row("messages in (brokers)", f"{appended:.0f}/s")
            numbers.add_row("under-replicated", f"[yellow]{urp}[/]" if urp else "0")
            numbers.add_row("offline partitions", f"[red]{offline}[/]" if offline else "0")
        events = Table(title="cluster events", expand=False, show_header=False)
        events.add_column("t")
        events.add_column("event")
        for at, text in progress.events[-EVENTS_SHOWN:]:
            style = "bold" if text.startswith("CHAOS") else ""
            events.add_row(f"{at:6.1f}s", f"[{style}]{text}[/]" if style else text)
        top = Table.grid(padding=(0, 4))
        top.add_row(brokers, partitions, numbers)
        return Group(top, events)
