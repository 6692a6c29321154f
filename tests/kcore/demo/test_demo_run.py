"""The demo end to end over real TCP on 127.0.0.1 (real time: the faults wait for real
session timeouts), in this process and as the `python -m kcore.cluster` command."""

import os
import re
import subprocess
import sys

import attrs

import zkstub
from kcore.demo.runner import DemoOptions, Display, run_demo
from zkstub.testing import find_zookeeper_classpath, java_available, run_real_zookeeper


@attrs.define
class RecordingDisplay(Display):
    events: list[str] = attrs.Factory(list)
    refreshes: int = 0
    verdicts: list = attrs.Factory(list)
    last_view: object = None

    def event(self, progress, text):
        self.events.append(text)

    def refresh(self, progress):
        self.refreshes += 1
        self.last_view = progress.view

    def verdict(self, verdict):
        self.verdicts.append(verdict)


async def test_the_demo_loses_nothing_through_its_faults(tmp_path):
    display = RecordingDisplay()
    # 40 s: each kill takes a session timeout (6 s) and a re-election to settle, so that the
    # cut (at 62%) finds the cluster settled, as the 60 s default does.
    verdict = await run_demo(DemoOptions(duration=40, rate=100, data_dir=tmp_path), display)
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
    assert display.events[2].startswith("chaos schedule: ")
    # The cut shows: the partition it names loses that follower from its ISR before the heal.
    (cut,) = [i for i, e in enumerate(display.events) if e.startswith("CHAOS: cut")]
    follower, _leader, partition = map(
        int, re.search(r"cut broker (\d+) off from broker (\d+) .* partition (\d+)\)",
                       display.events[cut]).groups()
    )  # fmt: skip
    heal = display.events.index("CHAOS: heal the network")
    shrinks = [
        e for e in display.events[cut:heal]
        if e.startswith(f"partition {partition}: ISR shrank") and str(follower) in e.split("(-")[1]
    ]  # fmt: skip
    assert shrinks, "\n".join(display.events)
    # Every partition's high watermark is known (the view showed `?` for each before).
    hws = [state.high_watermark for state in display.last_view.partitions.values()]
    assert None not in hws and sum(hws) > 0, hws


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


async def test_the_demo_on_a_real_zookeeper_leaves_no_chroot_behind(require_external, tmp_path):
    require_external(
        "ZooKeeper",
        java_available() and find_zookeeper_classpath() is not None,
        "apt-get install zookeeper libslf4j-java default-jre-headless",
    )
    async with run_real_zookeeper(tmp_path / "zk", tick_ms=200) as server:
        options = DemoOptions(
            duration=2,
            chaos=False,
            partitions=2,
            data_dir=tmp_path,
            zookeeper=server.connect_string,
        )
        verdict = await run_demo(options, RecordingDisplay())
        assert verdict.ok, "\n".join(verdict.lines())
        async with zkstub.connect(f"zookeeper://{server.connect_string}") as zk:
            left = [c for c in await zk.get_children("/") if c.startswith("kcore-demo-")]
        assert left == []
