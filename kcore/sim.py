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
import sys
import time
import traceback

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


def _run_one(seed: int, args: argparse.Namespace) -> tuple[int, bool, str]:
    try:
        result = simulate(_config(seed, args))
    except Exception:  # a crash of the harness or of kcore is a finding, not the end
        return seed, False, f"seed {seed}: CRASHED\n{traceback.format_exc()}"
    text = result.report()
    if not result.ok:
        text += "\n" + "\n".join(result.trace)
    return seed, result.ok, text


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
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s %(message)s")
    if args.seed is not None:
        result = simulate(_config(args.seed, args))
        if args.trace:
            _print_trace(result)
        else:
            print(result.report())
        return 0 if result.ok else 1
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    failed = 0
    started = time.monotonic()
    with (
        open(args.failures, "w", encoding="utf-8") as failures,
        concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool,
    ):
        futures = [pool.submit(_run_one, seed, args) for seed in seeds]
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            seed, ok, text = future.result()
            if not ok:
                failed += 1
                failures.write(text + "\n\n")
                failures.flush()
                print(f"seed {seed}: FAILED", file=sys.stderr)
            if done % 10 == 0 or done == len(futures):
                print(
                    f"{done}/{len(futures)} seeds, {failed} failed, "
                    f"{time.monotonic() - started:.0f}s",
                    file=sys.stderr,
                )
    print(f"{len(futures)} seeds, {failed} failed" + (f" (see {args.failures})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
