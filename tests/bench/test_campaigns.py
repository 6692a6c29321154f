"""Simulation campaigns in the store: the seed rows the sim-campaign workload writes (fault
mix, what a seed broke, its time to converge) and their Spark aggregates by fault mix and
cluster shape, per commit, and the slowest seeds."""

import io
import json

import attrs
import pytest

from bench import RowWriter
from bench.aggregate import load_rows
from bench.campaigns import NOT_RECORDED, campaign_report
from bench.store import HostFacts, RunFacts, append_run
from bench.workloads import WorkloadOptions, sim_campaign
from bench.workloads.sim_campaign import MIX, combination_of, convergence_seconds
from kcore.sim import SeedOutcome
from kcore.testing.sim import CONSUMER_FAULTS, FAULTS, SimConfig

BASE = 1_700_000_000.0


# --- the rows ----------------------------------------------------------------------------


def test_time_to_converge_is_read_from_the_trace():
    config = SimConfig(seed=1, chaos_seconds=20.0)
    trace = [
        "     0.000 controller: 1 (epoch 1)",
        "     2.500 topic sim created",
        "    10.000 kill broker 2",
        "  a line of a multi-line log without a stamp",
        "    31.000 restart broker 2 (settling)",
        "    34.250 converged",
        "sim seed 1: ok",
    ]
    assert convergence_seconds(trace, config) == pytest.approx(34.25 - 22.5)
    assert convergence_seconds(trace[:-2], config) is None  # never converged
    grouped = attrs.evolve(config, group_consumers=3)
    # With a consumer group, the faults start once the group has formed.
    assert convergence_seconds(trace, grouped) is None
    formed = [*trace[:3], "     5.000 group formed", *trace[3:]]
    assert convergence_seconds(formed, grouped) == pytest.approx(34.25 - 25.0)


def test_a_combinations_fault_mix_names_the_consumer_faults_with_a_group():
    assert combination_of(0).faults == ",".join(FAULTS)
    assert combination_of(4).faults == ",".join(FAULTS + CONSUMER_FAULTS)


async def test_seed_rows_carry_what_broke_and_the_time_to_converge(monkeypatch):
    def fake_campaign(configs, workers):
        for config in configs:
            failed = ("duplicated", "lost") if config.seed == 1 else ()
            outcome = SeedOutcome(config.seed, config.name, not failed, "", 2.0, (), failed)
            yield outcome, None if failed else 3.5

    monkeypatch.setattr(sim_campaign, "run_measured_campaign", fake_campaign)
    out = io.StringIO()
    rows = RowWriter(out, workload="sim-campaign", git_sha="abc", seed=0, run_id="r")
    summary = await sim_campaign.run(rows, WorkloadOptions(suite="quick", seed=0, seeds=2))
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["params"]["sim_seed"], r["outcome"]) for r in written] == [(0, "ok"), (1, "failed")]
    assert [r["params"]["invariants"] for r in written] == ["", "duplicated,lost"]
    assert [r["params"]["converge_s"] for r in written] == [3.5, None]
    assert {r["params"]["faults"] for r in written} == {",".join(FAULTS)}
    assert {"replay": MIX[1].replay_command(1)} in summary


# --- the aggregates ----------------------------------------------------------------------


def _seed_row(seed, seconds, invariants, converge, params=None):
    combination = combination_of(seed)
    return {
        "workload": "sim-campaign",
        "case": combination.case,
        "op": "seed",
        "params": params
        if params is not None
        else {
            "sim_seed": seed,
            "brokers": combination.shape.brokers,
            "partitions": combination.shape.partitions,
            "faults": combination.faults,
            "invariants": invariants,
            "converge_s": converge,
        },
        "seed": 0,
        "start_time": BASE + seed,
        "latency_ns": round(seconds * 1e9),
        "bytes": 0,
        "count": 1,
        "outcome": "failed" if invariants else "ok",
    }


@pytest.fixture(scope="module")
def campaigns(spark, tmp_path_factory):
    store = tmp_path_factory.mktemp("campaigns") / "store"
    host = HostFacts("2-core", "h")
    # Commit one: seeds 0..15, seed 1 lost records, seed 9 hung; commit two: seeds 16..23,
    # seed 17 (the same combination as 1 and 9) broke the cluster and duplicated.
    broke = {1: "lost", 9: "hung", 17: "cluster,duplicated"}
    first = [
        _seed_row(s, 10 + s, broke.get(s, ""), None if s in broke else s / 10) for s in range(16)
    ]
    append_run(store, first, RunFacts("run1", "sha1", BASE, host))
    second = [
        _seed_row(s, 5.0, broke.get(s, ""), None if s in broke else 1.0) for s in range(16, 24)
    ]
    # A row from before the workload recorded faults and what broke.
    second.append(
        _seed_row(24, 1.0, "", None, params={"sim_seed": 24, "brokers": 3, "partitions": 2})
    )
    second[-1]["outcome"] = "failed"
    append_run(store, second, RunFacts("run2", "sha2", BASE + 86_400, host))
    return campaign_report(load_rows(spark, store))


@pytest.mark.spark
def test_failures_by_fault_mix_and_shape(campaigns):
    by_case = {(m["faults"], m["case"]): m for m in campaigns.by_mix}
    idempotent_3x2 = by_case[",".join(FAULTS), combination_of(1).case]
    assert idempotent_3x2["shape"] == "3x2"
    assert (idempotent_3x2["runs"], idempotent_3x2["seeds"], idempotent_3x2["failed"]) == (2, 3, 3)
    assert idempotent_3x2["failure_rate"] == 1.0 and idempotent_3x2["converged"] == 0
    healthy = by_case[",".join(FAULTS), combination_of(0).case]
    # Seeds 0, 8 (converged 0.0 s, 0.8 s) and 16 (1.0 s).
    assert (healthy["seeds"], healthy["failed"], healthy["converged"]) == (3, 0, 3)
    assert (healthy["converge_p50_s"], healthy["converge_max_s"]) == (0.8, 1.0)
    assert healthy["seconds_max"] == pytest.approx(18.0)
    unrecorded = by_case[NOT_RECORDED, combination_of(24).case]
    assert (unrecorded["shape"], unrecorded["failed"]) == ("3x2", 1)
    assert sum(m["seeds"] for m in campaigns.by_mix) == 25


@pytest.mark.spark
def test_what_failed_seeds_broke(campaigns):
    broke = {(b["faults"], b["shape"], b["invariant"]): b["seeds"] for b in campaigns.by_invariant}
    mix = ",".join(FAULTS)
    assert broke == {
        (mix, "3x2", "lost"): 1,
        (mix, "3x2", "hung"): 1,
        (mix, "3x2", "cluster"): 1,
        (mix, "3x2", "duplicated"): 1,
        (NOT_RECORDED, "3x2", NOT_RECORDED): 1,
    }


@pytest.mark.spark
def test_failures_per_commit_and_the_slowest_seeds(campaigns):
    assert [(c["git_sha"], c["seeds"], c["failed"]) for c in campaigns.by_commit] == [
        ("sha1", 16, 2),
        ("sha2", 9, 2),
    ]
    assert [s["sim_seed"] for s in campaigns.slowest] == list(range(15, 5, -1))
    assert campaigns.slowest[0]["seconds"] == pytest.approx(25.0)
    slow_failure = next(s for s in campaigns.slowest if s["sim_seed"] == 9)
    assert (slow_failure["outcome"], slow_failure["invariants"]) == ("failed", "hung")
