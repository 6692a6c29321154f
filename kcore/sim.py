"""`python -m kcore.sim`: seeded whole-cluster simulation campaigns.

    python -m kcore.sim --seeds 10000 --workers 2     # seeds 0..9999, failures to a file
    python -m kcore.sim --seed 1234 --trace           # replay one seed, print its history
    python -m kcore.sim --seeds 1000 --shapes 3x2,5x8  # seed N runs shape N mod 2
    python -m kcore.sim --seeds 200 --group-consumers 3 --workers 2  # and a consumer group

Each seed is one deterministic history (see `kcore.testing.sim`); a failing seed replays
exactly (with the same --shapes, or its shape's --brokers and --partitions), so the file of
failures is a list of reproducible bugs.

Every WARNING or ERROR a seed logs is printed tagged with the seed, except the ones the
injected faults cause in a healthy cluster (`EXPECTED_UNDER_FAULTS`): those are counted in
a summary at the end, and shown too at --log-level INFO or DEBUG. A failing seed's log lines
go to the failures file with its trace.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gc
import logging
import multiprocessing
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import attrs

from kcore.log_context import PrefixFormatter
from kcore.testing.sim import (
    CONSUMER_FAULTS,
    FAULTS,
    SimConfig,
    SimResult,
    expected_under_faults,
    simulate,
)


@attrs.frozen
class Shape:
    """A cluster's shape: its brokers and the test topic's partitions."""

    brokers: int
    partitions: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        """`BROKERSxPARTITIONS`, e.g. `5x8`."""
        brokers, x, partitions = text.strip().partition("x")
        if not (x and brokers.isdigit() and partitions.isdigit()):
            raise ValueError(f"a shape is BROKERSxPARTITIONS (e.g. 5x8), not {text!r}")
        shape = cls(int(brokers), int(partitions))
        if shape.partitions < 1:
            raise ValueError(f"shape {text!r}: a topic needs at least one partition")
        return shape

    def __str__(self) -> str:
        return f"{self.brokers}x{self.partitions}"


def shape_of(seed: int, shapes: Sequence[Shape]) -> Shape:
    """The shape seed `seed` runs with in a campaign mixing `shapes`: a function of the
    seed alone, so a seed replays on its own."""
    return shapes[seed % len(shapes)]


def _parse_shapes(text: str) -> tuple[Shape, ...]:
    try:
        return tuple(Shape.parse(part) for part in text.split(","))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def config_for(argv: Sequence[str]) -> SimConfig:
    """The configuration `python -m kcore.sim --seed N ...` runs (a replay command's)."""
    args = _parser().parse_args(list(argv))
    if args.seed is None:
        raise ValueError("config_for: the arguments name no --seed")
    return _config(args.seed, args)


def _config(seed: int, args: argparse.Namespace) -> SimConfig:
    shape = shape_of(seed, args.shapes or (Shape(args.brokers, args.partitions),))
    return SimConfig(
        seed=seed,
        brokers=shape.brokers,
        partitions=shape.partitions,
        min_insync_replicas=args.min_insync_replicas,
        unclean_leader_election=args.unclean,
        acks=args.acks,
        idempotent=args.idempotent,
        chaos_seconds=args.chaos_seconds,
        faults=tuple(args.faults.split(",")) if args.faults else FAULTS,
        group_consumers=args.group_consumers,
    )


@attrs.frozen
class LogLine:
    """One line a seed logged, formatted in the process that ran it."""

    levelno: int
    logger: str
    text: str  # the message, with its traceback if any
    expected: str | None  # why the injected faults cause it (`ExpectedLog.why`), or None

    def format(self, name: str) -> str:
        return f"{name}: {logging.getLevelName(self.levelno)} {self.logger} {self.text}"


class _Capture(logging.Handler):
    """Keeps what one seed logs, so that each line can be shown with its seed."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[LogLine] = []
        # The broker's prefix ([Broker id=1] ...) is the text's; the message, which the
        # expected lines are matched against, is not.
        self.setFormatter(PrefixFormatter("%(log_prefix)s%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # a bad format string must not end the seed
            text = f"{record.msg!r} % {record.args!r}"
        if record.levelno >= logging.WARNING:
            expected = expected_under_faults(record.name, record.getMessage())
        else:
            expected = None
        self.lines.append(
            LogLine(record.levelno, record.name, text, None if expected is None else expected.why)
        )


@attrs.frozen
class SeedOutcome:
    seed: int
    name: str  # the seed and its shape
    ok: bool
    text: str  # the report, and for a failure its whole trace and log
    seconds: float  # real time the seed took
    log: tuple[LogLine, ...] = ()  # what it logged at the campaign's log level
    # What a failing seed broke: "crashed", "hung", "cluster" (a step invariant or a
    # cluster that did not converge), the history's anomaly kinds (lost, duplicated, ...)
    # and the group's invariants (unconsumed, commit-backwards, skipped, ...).
    failed: tuple[str, ...] = ()


def failed_invariants(result: SimResult) -> tuple[str, ...]:
    """What a run broke (empty when it passed), for a campaign's counts."""
    found: set[str] = set()
    if result.violation is not None:
        found.add("hung" if "did not finish within" in result.violation else "cluster")
    if result.check is not None:
        found |= {anomaly.kind for anomaly in result.check.anomalies}
    if result.group_check is not None:
        found |= set(result.group_check.by_invariant())
    if not found and not result.ok:
        found.add("unchecked")
    return tuple(sorted(found))


def run_seed(config: SimConfig, *, trace: bool = False) -> SeedOutcome:
    """One seed, its crash included in the outcome (a crash of the harness or of kcore is
    a finding, not the end of the campaign), and what it logged (at the root logger's
    level) kept in the outcome rather than printed. With `trace`, the text is the whole
    history then the report, failed or not."""
    started = time.monotonic()
    capture = _Capture()
    root = logging.getLogger()
    root.addHandler(capture)
    failed: tuple[str, ...] = ()
    try:
        result = simulate(config)
    except Exception:
        ok, text = False, f"{config.name}: CRASHED\n{traceback.format_exc()}"
        failed = ("crashed",)
    else:
        ok, text = result.ok, result.report()
        failed = failed_invariants(result)
        if trace:
            text = "\n".join((*result.trace, text))
        elif not ok:
            text += "\n" + "\n".join(result.trace)
    finally:
        root.removeHandler(capture)
    if not ok and capture.lines:
        text += "\nlog:\n" + "\n".join(line.format(config.name) for line in capture.lines)
    return SeedOutcome(
        config.seed,
        config.name,
        ok,
        text,
        time.monotonic() - started,
        tuple(capture.lines),
        failed,
    )


# A seed allocates short-lived objects by the million (trio's tasks and cancel scopes,
# frames, messages); with the default first-generation threshold (700) the collector took a
# sixth of a seed's time (8 seeds, one per campaign combination: 17.9 s, and 14.8 s at
# 50 000). A worker runs nothing but seeds, so it collects less often; no history depends
# on when the collector runs (the traces of both are the same).
WORKER_GC_THRESHOLD = 50_000


def start_worker(log_level: str) -> None:
    """A campaign worker process's set-up. Its logging: records at `log_level` reach
    `run_seed`'s capture, and nothing is printed from the worker itself. Its collector:
    see WORKER_GC_THRESHOLD."""
    logging.getLogger().setLevel(log_level.upper())
    _, *older = gc.get_threshold()
    gc.set_threshold(WORKER_GC_THRESHOLD, *older)


def run_campaign(
    configs: Iterable[SimConfig], workers: int, log_level: str = "WARNING"
) -> Iterator[SeedOutcome]:
    """Runs the seeds in `workers` fresh processes (spawned, so nothing a test process
    holds is inherited; what they log at `log_level` comes back in each outcome); yields
    each outcome as it completes."""
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_worker,
        initargs=(log_level,),
    ) as pool:
        futures = [pool.submit(run_seed, config) for config in configs]
        for future in concurrent.futures.as_completed(futures):
            yield future.result()


@attrs.define
class LogView:
    """What a campaign shows of its seeds' logs: every line tagged with its seed, except
    the ones expected under injected faults, which are counted (per logger) and shown only
    when `show_expected` (a log level below WARNING)."""

    show_expected: bool = False
    expected: Counter[tuple[str, str]] = attrs.field(factory=Counter)  # (logger, why) -> n

    def lines(self, outcome: SeedOutcome) -> list[str]:
        shown = []
        for line in outcome.log:
            if line.expected is not None:
                self.expected[line.logger, line.expected] += 1
                if not self.show_expected:
                    continue
            shown.append(line.format(outcome.name))
        return shown

    def summary(self) -> list[str]:
        if not self.expected:
            return []
        total = sum(self.expected.values())
        hint = "" if self.show_expected else "; --log-level INFO shows them"
        lines = [f"{total} WARNING/ERROR line(s) expected under the injected faults{hint}:"]
        for (logger_name, why), count in sorted(self.expected.items()):
            lines.append(f"  {count:6d}  {logger_name}: {why}")
        return lines


def _parser() -> argparse.ArgumentParser:
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
    parser.add_argument(
        "--shapes",
        type=_parse_shapes,
        help="mix cluster shapes, BROKERSxPARTITIONS comma-separated (e.g. 3x2,5x8): seed N "
        "runs the (N mod count)-th; overrides --brokers and --partitions",
    )
    parser.add_argument("--min-insync-replicas", type=int, default=2)
    parser.add_argument("--unclean", action="store_true")
    parser.add_argument("--acks", default="all", choices=["all", "1", "0"])
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--chaos-seconds", type=float, default=60.0)
    parser.add_argument("--faults", help=f"comma-separated subset of {','.join(FAULTS)}")
    parser.add_argument(
        "--group-consumers",
        type=int,
        default=0,
        help="members of a consumer group consuming the topic, committing after processing; "
        f"crashed, restarted and their coordinator killed by the faults "
        f"({','.join(CONSUMER_FAULTS)}), checked for at-least-once delivery",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        help="what the seeds log (below WARNING, the lines expected under faults are shown)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    level = logging.getLevelName(args.log_level.upper())
    if not isinstance(level, int):
        parser.error(f"--log-level: unknown level {args.log_level!r}")
    view = LogView(show_expected=level < logging.WARNING)
    if args.seed is not None:
        start_worker(args.log_level)  # the one seed runs here as it would in a worker
        outcome = run_seed(_config(args.seed, args), trace=args.trace)
        for line in view.lines(outcome):
            print(line, file=sys.stderr)
        print(outcome.text)
        for line in view.summary():
            print(line, file=sys.stderr)
        return 0 if outcome.ok else 1
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    failed = 0
    by_invariant: Counter[str] = Counter()
    slowest: SeedOutcome | None = None
    started = time.monotonic()
    with open(args.failures, "w", encoding="utf-8") as failures:
        configs = [_config(seed, args) for seed in seeds]
        outcomes = run_campaign(configs, args.workers, args.log_level)
        for done, outcome in enumerate(outcomes, start=1):
            if slowest is None or outcome.seconds > slowest.seconds:
                slowest = outcome
            for line in view.lines(outcome):
                print(line, file=sys.stderr)
            if not outcome.ok:
                failed += 1
                by_invariant.update(outcome.failed)
                failures.write(outcome.text + "\n\n")
                failures.flush()
                print(f"{outcome.name}: FAILED ({', '.join(outcome.failed)})", file=sys.stderr)
            if done % 10 == 0 or done == len(configs):
                print(
                    f"{done}/{len(configs)} seeds, {failed} failed, "
                    f"{time.monotonic() - started:.0f}s",
                    file=sys.stderr,
                )
    if slowest is not None:
        print(f"slowest: {slowest.name} ({slowest.seconds:.1f}s)", file=sys.stderr)
    for line in view.summary():
        print(line, file=sys.stderr)
    if by_invariant:
        counts = ", ".join(f"{name} {count}" for name, count in sorted(by_invariant.items()))
        print(f"failed seeds by invariant: {counts}")
    shapes = ", ".join(str(shape) for shape in args.shapes) if args.shapes else None
    print(
        f"{len(seeds)} seeds{f' (shapes {shapes})' if shapes else ''}, {failed} failed"
        + (f" (see {args.failures})" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
