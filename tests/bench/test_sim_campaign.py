"""The sim-campaign workload: one row per seed over the standing campaign's mix, aggregated
like every workload, and a failing seed's replay command that runs that seed alone."""

import io
import json

from bench import RowWriter
from bench.workloads import WorkloadOptions
from bench.workloads.sim_campaign import MIX, combination_of, run, seeds_for
from kcore.sim import main as sim_main


async def test_a_campaign_writes_one_row_per_seed_over_the_whole_mix():
    out = io.StringIO()
    rows = RowWriter(out, workload="sim-campaign", git_sha="abc", seed=40, run_id="r")
    summary = await run(rows, WorkloadOptions(suite="quick", seed=40, seeds=4))
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [row["params"]["sim_seed"] for row in written] == [40, 41, 42, 43]
    assert {row["case"] for row in written} == {combination.case for combination in MIX}
    assert all(row["op"] == "seed" and row["latency_ns"] > 0 for row in written)
    assert all(row["outcome"] == "ok" for row in written), summary
    assert sorted(s["case"] for s in summary) == sorted(c.case for c in MIX)
    assert all(s["seeds"] == 1 and s["failed"] == 0 for s in summary)


def test_the_mix_is_a_function_of_the_seed_alone():
    assert [combination_of(seed).case for seed in (0, 4, 8)] == [MIX[0].case] * 3
    assert {combination_of(seed) for seed in range(4)} == set(MIX)
    assert seeds_for(WorkloadOptions(suite="quick", seed=7)) == range(7, 11)
    assert len(seeds_for(WorkloadOptions(suite="full"))) == 200


def test_a_replay_command_runs_that_seed_with_its_combination(capsys):
    seed = 3  # 5 brokers, idempotent producers
    command = combination_of(seed).replay_command(seed).split()
    assert command[:3] == ["python", "-m", "kcore.sim"]
    assert sim_main([arg for arg in command[3:] if arg != "--trace"]) == 0
    assert "5 brokers, 8 partitions" in capsys.readouterr().out
