"""The demo end to end over real TCP on 127.0.0.1 (real time: the faults wait for real
session timeouts), in this process and as the `python -m kcore.cluster` command."""

import os
import subprocess
import sys

import attrs

from kcore.demo.runner import DemoOptions, Display, run_demo


@attrs.define
class RecordingDisplay(Display):
    events: list[str] = attrs.Factory(list)
    refreshes: int = 0
    verdicts: list = attrs.Factory(list)

    def event(self, progress, text):
        self.events.append(text)

    def refresh(self, progress):
        self.refreshes += 1

    def verdict(self, verdict):
        self.verdicts.append(verdict)


async def test_the_demo_loses_nothing_through_its_faults(tmp_path):
    display = RecordingDisplay()
    verdict = await run_demo(DemoOptions(duration=16, rate=100, data_dir=tmp_path), display)
    assert verdict.ok, "\n".join(verdict.lines())
    assert verdict.acked > 0 and verdict.consumed >= verdict.acked
    assert display.verdicts == [verdict]
    chaos = [e for e in display.events if e.startswith("CHAOS")]
    assert [c.split(":")[1].split()[0] for c in chaos] == [
        "kill", "restart", "kill", "restart", "cut", "heal",
    ]  # fmt: skip
    elected = [e for e in display.events if e.startswith("controller elected")]
    assert len(elected) >= 2  # the first controller, then its successor
    assert any("ISR shrank" in e for e in display.events)
    assert (tmp_path / "broker-1").is_dir()  # the logs went where asked


def _demo(*args, timeout=120):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "kcore.cluster", "--plain", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def test_the_demo_command_prints_a_verdict_and_exits_0():
    done = _demo("--duration", "3", "--no-chaos", "--partitions", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "records lost:             0" in done.stdout
    assert done.stdout.rstrip().endswith("verdict: no acknowledged record lost")


def test_the_demo_runs_each_broker_as_its_own_process(tmp_path):
    done = _demo("--processes", "--duration", "3", "--no-chaos", "--data-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 brokers up (one process each)" in done.stdout
    assert done.stdout.rstrip().endswith("verdict: no acknowledged record lost")
    assert (tmp_path / "broker-2" / "server.properties").is_file()


def test_bad_options_are_named():
    done = _demo("--brokers", "0")
    assert done.returncode == 2
    assert "--brokers must be at least 1" in done.stderr
