"""The sim-campaign workload: one row per seed over the standing campaign's mix, aggregated
like every workload, and a failing seed's replay command that runs that seed alone."""

import io
import json

from bench import RowWriter
from bench.workloads import WorkloadOptions
from bench.workloads.sim_campaign import MIX, combination_of, run, seeds_for
from kcore.sim import config_for
from kcore.sim import main as sim_main


async def test_a_campaign_writes_one_row_per_seed_over_the_mix():
    out = io.StringIO()
    rows = RowWriter(out, workload="sim-campaign", git_sha="abc", seed=42, run_id="r")
    # Seeds 42..45: both shapes, without a consumer group (42, 43) and with one (44, 45).
    summary = await run(rows, WorkloadOptions(suite="quick", seed=42, seeds=4))
    written = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [row["params"]["sim_seed"] for row in written] == [42, 43, 44, 45]
    cases = {combination_of(seed).case for seed in range(42, 46)}
    assert {row["case"] for row in written} == cases
    assert [row["params"]["group_consumers"] for row in written] == [0, 0, 3, 3]
    assert all(row["op"] == "seed" and row["latency_ns"] > 0 for row in written)
    assert all(row["outcome"] == "ok" for row in written), summary
    assert sorted(s["case"] for s in summary) == sorted(cases)
    assert all(s["seeds"] == 1 and s["failed"] == 0 for s in summary)
    assert all(s["failed_by_invariant"] == {} for s in summary)


def test_the_mix_is_a_function_of_the_seed_alone():
    assert [combination_of(seed).case for seed in (0, 8, 16)] == [MIX[0].case] * 3
    assert {combination_of(seed) for seed in range(8)} == set(MIX)
    assert seeds_for(WorkloadOptions(suite="quick", seed=7)) == range(7, 15)
    assert len(seeds_for(WorkloadOptions(suite="full"))) == 200


def test_the_group_combinations_keep_each_seeds_shape_and_producers():
    """Before the consumer group, seed N ran combination N mod 4: it still runs that shape
    and producers, and seeds 0..3 mod 8 run exactly what they ran."""
    older = MIX[:4]
    assert all(c.group_consumers == 0 for c in older)
    for seed in range(16):
        now, before = combination_of(seed), older[seed % 4]
        assert (now.shape, now.idempotent) == (before.shape, before.idempotent)
        assert now.group_consumers == (0 if seed % 8 < 4 else 3)


def test_a_replay_command_runs_that_seed_with_its_combination(capsys):
    seed = 3  # 5 brokers, idempotent producers
    command = combination_of(seed).replay_command(seed).split()
    assert command[:3] == ["python", "-m", "kcore.sim"]
    assert sim_main([arg for arg in command[3:] if arg != "--trace"]) == 0
    assert "5 brokers, 8 partitions" in capsys.readouterr().out


def test_every_replay_command_names_its_whole_configuration():
    for seed in range(8):
        command = combination_of(seed).replay_command(seed).split()
        assert config_for(command[3:]) == combination_of(seed).config(seed)
