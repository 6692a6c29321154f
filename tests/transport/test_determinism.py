"""One seed, one history: SimNetwork with Trio's scheduler pinned replays exactly, in the
same process and in another one (with a different hash seed)."""

import json
import os
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SCENARIO = Path(__file__).with_name("_sim_scenario.py")
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_scenario():
    return runpy.run_path(str(SCENARIO))["run_scenario"]


@pytest.fixture(scope="module")
def history(run_scenario):
    return run_scenario(5)


def test_the_scenario_exercises_faults(history):
    kinds = Counter(event[1] for event in history if isinstance(event[1], str))
    assert kinds["deliver"] > 100 and kinds["connect"] > 3  # reconnects after faults
    outcomes = Counter(str(event[3]) for event in history if event[1] in ("c1", "c2", "c3"))
    assert outcomes["RequestTimeoutError"] > 0  # the partition bit
    assert sum(n for outcome, n in outcomes.items() if outcome.startswith("[")) > 0


def test_same_seed_same_history_twice_in_one_process(run_scenario, history):
    assert run_scenario(5) == history


def test_another_seed_gives_another_history(run_scenario, history):
    assert run_scenario(6) != history


def test_same_seed_same_history_in_another_process(history):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, str(SCENARIO), "5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout) == history
