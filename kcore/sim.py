"""`python -m kcore.sim`: seeded whole-cluster simulation campaigns.

    python -m kcore.sim --seeds 10000 --workers 2     # seeds 0..9999, failures to a file
    python -m kcore.sim --seed 1234 --trace           # replay one seed, print its history

Each seed is one deterministic history (see `kcore.testing.sim`); a failing seed replays
exactly, so the file of failures is a list of reproducible bugs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing
import sys
import time
import traceback
from collections.abc import Iterable, Iterator

import attrs

from kcore.testing.sim import FAULTS, SimConfig, SimResult, simulate


def _config(seed: int, args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        seed=seed,
        brokers=args.brokers,
        partitions=args.partitions,
        min_insync_replicas=args.min_insync_replicas,
        unclean_leader_election=args.unclean,
        acks=args.acks,
        idempotent=args.idempotent,
        chaos_seconds=args.chaos_seconds,
        faults=tuple(args.faults.split(",")) if args.faults else FAULTS,
    )


@attrs.frozen
class SeedOutcome:
    seed: int
    ok: bool
    text: str  # the report, and for a failure its whole trace
    seconds: float  # real time the seed took


def run_seed(config: SimConfig) -> SeedOutcome:
    """One seed, its crash included in the outcome (a crash of the harness or of kcore is
    a finding, not the end of the campaign)."""
    started = time.monotonic()
    try:
        result = simulate(config)
    except Exception:
        text = f"seed {config.seed}: CRASHED\n{traceback.format_exc()}"
        return SeedOutcome(config.seed, False, text, time.monotonic() - started)
    text = result.report()
    if not result.ok:
        text += "\n" + "\n".join(result.trace)
    return SeedOutcome(config.seed, result.ok, text, time.monotonic() - started)


def _configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s %(message)s")


def run_campaign(
    configs: Iterable[SimConfig], workers: int, log_level: str = "WARNING"
) -> Iterator[SeedOutcome]:
    """Runs the seeds in `workers` fresh processes (spawned, so nothing a test process
    holds is inherited; their logs at `log_level` go to stderr); yields each outcome as
    it completes."""
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_configure_logging,
        initargs=(log_level,),
    ) as pool:
        futures = [pool.submit(run_seed, config) for config in configs]
        for future in concurrent.futures.as_completed(futures):
            yield future.result()


def _print_trace(result: SimResult) -> None:
    for line in result.trace:
        print(line)
    print(result.report())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kcore.sim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seed", type=int, help="run (replay) one seed")
    parser.add_argument("--seeds", type=int, default=100, help="run seeds 0..N-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="processes in parallel")
    parser.add_argument("--trace", action="store_true", help="print the event trace")
    parser.add_argument(
        "--failures", default="sim-failures.txt", help="where failing seeds and their histories go"
    )
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--min-insync-replicas", type=int, default=2)
    parser.add_argument("--unclean", action="store_true")
    parser.add_argument("--acks", default="all", choices=["all", "1", "0"])
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--chaos-seconds", type=float, default=60.0)
    parser.add_argument("--faults", help=f"comma-separated subset of {','.join(FAULTS)}")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    _configure_logging(args.log_level)
    if args.seed is not None:
        result = simulate(_config(args.seed, args))
        if args.trace:
            _print_trace(result)
        else:
            print(result.report())
        return 0 if result.ok else 1
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    failed = 0
    slowest: SeedOutcome | None = None
    started = time.monotonic()
    with open(args.failures, "w", encoding="utf-8") as failures:
        configs = [_config(seed, args) for seed in seeds]
        outcomes = run_campaign(configs, args.workers, args.log_level)
        for done, outcome in enumerate(outcomes, start=1):
            if slowest is None or outcome.seconds > slowest.seconds:
                slowest = outcome
            if not outcome.ok:
                failed += 1
                failures.write(outcome.text + "\n\n")
                failures.flush()
                print(f"seed {outcome.seed}: FAILED", file=sys.stderr)
            if done % 10 == 0 or done == len(configs):
                print(
                    f"{done}/{len(configs)} seeds, {failed} failed, "
                    f"{time.monotonic() - started:.0f}s",
                    file=sys.stderr,
                )
    if slowest is not None:
        print(f"slowest: seed {slowest.seed} ({slowest.seconds:.1f}s)", file=sys.stderr)
    print(f"{len(seeds)} seeds, {failed} failed" + (f" (see {args.failures})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
