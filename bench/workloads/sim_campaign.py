"""sim-campaign: seeded whole-cluster simulations under random faults (`kcore.sim`), one row
per seed, so campaigns are aggregated like every other workload (failures per case, seconds
per seed).

The mix is the one the standing campaign runs: 3 brokers / 2 partitions and 5 brokers /
8 partitions, with and without idempotent producers, always acks=all and
min.insync.replicas=2; and each of those four again with a consumer group of
`GROUP_CONSUMERS` members consuming the topic (crashed, restarted, their coordinator
killed by the faults; checked for at-least-once delivery, see `kcore.testing.group_history`).
Seed N runs combination N mod 8, a function of the seed alone, so a failing seed replays by
itself; its replay command is in the summary. (Before the group combinations, seed N ran
combination N mod 4: every seed keeps its shape and producers, and the seeds with
N mod 8 >= 4 now also run the group, which changes their histories.)

    python -m bench run sim-campaign --seeds 10000 --seed 0    # seeds 0..9999 (~3 h, 2 cores)

The quick suite runs 8 seeds (one per combination), the full suite 200; `--seeds N`
overrides both, and `--seed` is the first seed.

Rows: one `seed` row per seed: `latency_ns` is the seed's real time, `outcome` "ok" or
"failed", `params` the combination (its fault mix in `faults`: the cluster faults, then the
consumer faults when there is a group), `sim_seed`, what the seed broke (`invariants`,
comma-separated, "" when it passed) and `converge_s`: virtual seconds from the end of the
faults to the cluster converged (None when it never did), read from the seed's trace.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence

import attrs
import trio

from bench._rows import RowWriter
from bench.workloads import Summary, WorkloadOptions, workload
from kcore.sim import SeedOutcome, Shape, run_seed, start_worker
from kcore.testing.sim import TOPIC, SimConfig

NAME = "sim-campaign"
CHAOS_SECONDS = 20.0  # virtual seconds of faults per seed, as the test suite's sweep
MIN_INSYNC_REPLICAS = 2
GROUP_CONSUMERS = 3
QUICK_SEEDS = 8
FULL_SEEDS = 200


@attrs.frozen
class Combination:
    shape: Shape
    idempotent: bool
    group_consumers: int = 0

    @property
    def case(self) -> str:
        producer = "idempotent" if self.idempotent else "plain"
        group = f"-group={self.group_consumers}" if self.group_consumers else ""
        return f"{self.shape}-{producer}-acks=all-min.insync={MIN_INSYNC_REPLICAS}{group}"

    def config(self, seed: int) -> SimConfig:
        return SimConfig(
            seed=seed,
            brokers=self.shape.brokers,
            partitions=self.shape.partitions,
            min_insync_replicas=MIN_INSYNC_REPLICAS,
            acks="all",
            idempotent=self.idempotent,
            chaos_seconds=CHAOS_SECONDS,
            group_consumers=self.group_consumers,
        )

    @property
    def faults(self) -> str:
        """The fault mix its seeds draw from, as a row's `faults` parameter."""
        config = self.config(0)
        faults = config.faults + (config.consumer_faults if self.group_consumers else ())
        return ",".join(faults)

    def replay_command(self, seed: int) -> str:
        idempotent = " --idempotent" if self.idempotent else ""
        if self.group_consumers:
            idempotent += f" --group-consumers {self.group_consumers}"
        return (
            f"python -m kcore.sim --seed {seed} --shapes {self.shape}{idempotent} "
            f"--min-insync-replicas {MIN_INSYNC_REPLICAS} --chaos-seconds {CHAOS_SECONDS:g} "
            "--trace"
        )


MIX = tuple(
    Combination(shape, idempotent, group_consumers)
    # The group combinations come after the four older ones: seed N mod 8 < 4 runs what it
    # always ran.
    for group_consumers in (0, GROUP_CONSUMERS)
    for shape in (Shape(3, 2), Shape(5, 8))
    for idempotent in (False, True)
)


def combination_of(seed: int) -> Combination:
    return MIX[seed % len(MIX)]


def seeds_for(options: WorkloadOptions) -> range:
    count = options.seeds
    if count is None:
        count = QUICK_SEEDS if options.quick else FULL_SEEDS
    return range(options.seed, options.seed + count)


def convergence_seconds(trace: Sequence[str], config: SimConfig) -> float | None:
    """Virtual seconds from the end of the faults to the "converged" line of a seed's trace
    (lines `"<virtual time> <event>"`, `kcore.testing.sim.Simulation.log`); None when the
    trace has no such line. The faults start when the topic is created, or once the group
    has formed when there is one, and last `chaos_seconds`."""
    started = converged = None
    start_event = "group formed" if config.group_consumers else f"topic {TOPIC} created"
    for line in trace:
        stamp, _, event = line.strip().partition(" ")
        try:
            at = float(stamp)
        except ValueError:
            continue
        event = event.strip()
        if started is None and event == start_event:
            started = at
        elif event == "converged":
            converged = at
    if started is None or converged is None:
        return None
    return max(0.0, converged - (started + config.chaos_seconds))


def _rounded(seconds: float | None) -> float | None:
    # The trace's stamps have milliseconds: so does their difference.
    return None if seconds is None else round(seconds, 3)


def _run_measured_seed(config: SimConfig) -> tuple[SeedOutcome, float | None]:
    """One seed in a campaign worker (set up as kcore.sim's workers), with its time to
    converge. The seed runs traced, to read that time; the outcome keeps the text (trace
    and report) only for a failure."""
    outcome = run_seed(config, trace=True)
    converge = convergence_seconds(outcome.text.splitlines(), config)
    if outcome.ok:
        outcome = attrs.evolve(outcome, text="")
    return outcome, converge


def run_measured_campaign(
    configs: Sequence[SimConfig], workers: int, log_level: str = "WARNING"
) -> Iterator[tuple[SeedOutcome, float | None]]:
    """`kcore.sim.run_campaign` with each seed's time to converge: fresh spawned processes,
    outcomes as they complete."""
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_worker,
        initargs=(log_level,),
    ) as pool:
        futures = [pool.submit(_run_measured_seed, config) for config in configs]
        for future in concurrent.futures.as_completed(futures):
            yield future.result()


@workload(
    NAME,
    "seeded simulations under faults, one row per seed (3 and 5 brokers, acks=all, with "
    "and without a consumer group)",
)
async def run(rows: RowWriter, options: WorkloadOptions) -> Summary:
    seeds = seeds_for(options)
    configs = [combination_of(seed).config(seed) for seed in seeds]
    workers = min(os.cpu_count() or 1, len(configs)) or 1
    # The seeds run in spawned processes; this task only waits for them.
    measured = await trio.to_thread.run_sync(lambda: list(run_measured_campaign(configs, workers)))
    finished = time.time()
    converge = {outcome.seed: seconds for outcome, seconds in measured}
    outcomes = [outcome for outcome, _ in measured]
    failed = []
    for outcome in sorted(outcomes, key=lambda o: o.seed):
        combination = combination_of(outcome.seed)
        rows.write(
            case=combination.case,
            op="seed",
            params={
                "sim_seed": outcome.seed,
                "brokers": combination.shape.brokers,
                "partitions": combination.shape.partitions,
                "idempotent": combination.idempotent,
                "acks": "all",
                "min_insync_replicas": MIN_INSYNC_REPLICAS,
                "chaos_seconds": CHAOS_SECONDS,
                "group_consumers": combination.group_consumers,
                "faults": combination.faults,
                "invariants": ",".join(outcome.failed),
                "converge_s": _rounded(converge[outcome.seed]),
            },
            start_time=finished - outcome.seconds,
            latency_ns=int(outcome.seconds * 1e9),
            outcome="ok" if outcome.ok else "failed",
        )
        if not outcome.ok:
            failed.append(combination.replay_command(outcome.seed))
    summary: Summary = []
    for combination in MIX:
        mine = [o for o in outcomes if combination_of(o.seed) == combination]
        if mine:
            summary.append(
                {
                    "case": combination.case,
                    "seeds": len(mine),
                    "failed": sum(not o.ok for o in mine),
                    "failed_by_invariant": dict(
                        sorted(Counter(name for o in mine for name in o.failed).items())
                    ),
                    "seconds_per_seed": round(sum(o.seconds for o in mine) / len(mine), 2),
                }
            )
    summary += [{"replay": command} for command in failed]
    return summary
