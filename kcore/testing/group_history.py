"""The history of a consumer group in a simulation, and its check (sans-IO).

A run records what the group's members did, each with its Trio time:

- `Consumed`: a record a member's poll returned (and the member then processed);
- `CommitOp`: an OffsetCommit a member made after processing (the offsets, the generation,
  when it began and ended, and its outcome: OK, or FAILED / INDETERMINATE, which the
  check treats alike: a commit that failed after retries may still have been stored);
- `OffsetRead`: what an observer's OffsetFetch said the group had committed.

`check_group` then holds the history to these invariants, each named in its anomalies:

- `unconsumed`: every record acknowledged to a producer (and covered by the durability
  contract) is consumed by the group at least once by the end;
- `commit-backwards`: the group's committed offset of a partition never goes backwards:
  a commit acknowledged, or an offset read, before another commit or read began is never
  above what that later one committed or read (an OffsetFetch answering "nothing
  committed" after a commit was acknowledged counts as going back to nothing; an
  OffsetFetch a deposed coordinator answered is a stale read, see `OffsetRead`);
- `skipped`: with commits after processing, no acknowledged record is skipped: every
  acknowledged offset below an offset a member committed (or an OffsetFetch returned) was
  consumed by some member before that commit began (before the read ended);
- `consumed-unknown`: a record the group consumed is the one the log holds at its offset
  (a consumer reads committed records only, and those never change).

That no acknowledged record appears twice in the log under idempotent producers is
`kcore.testing.history`'s `duplicated` anomaly.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import attrs

from kcore.common import TopicPartition
from kcore.testing.history import Outcome, ProduceOp

INVARIANTS = {
    "unconsumed": "every acknowledged record is consumed by the group at least once",
    "commit-backwards": "a committed offset of the group never goes backwards",
    "skipped": "every acknowledged record below a committed offset was consumed before the commit",
    "consumed-unknown": "every record the group consumed is the one the log holds",
}
# Anomalies shown per invariant in a summary (all of them are in the result).
SHOWN_PER_INVARIANT = 10


@attrs.frozen
class Consumed:
    member: str
    tp: TopicPartition
    offset: int
    value: bytes | None
    time: float


@attrs.frozen
class CommitOp:
    member: str
    generation: int
    offsets: tuple[tuple[TopicPartition, int], ...]
    outcome: Outcome
    start: float
    end: float
    error: str | None = None


@attrs.frozen
class OffsetRead:
    """An OffsetFetch's answer: each partition's committed offset (None: none).

    `stale`: the broker that answered no longer led the group's offsets partition when the
    answer came (a deposed coordinator that has not heard of its successor yet, e.g. cut
    off: as in Kafka, it answers from its cache, which the commits made since at its
    successor never reached). Such a read says what was committed once, not what is
    committed now: `skipped` counts it, `commit-backwards` does not."""

    offsets: tuple[tuple[TopicPartition, int | None], ...]
    start: float
    end: float
    node: int | None = None  # the broker that answered
    stale: bool = False


@attrs.frozen
class GroupHistory:
    consumed: tuple[Consumed, ...] = ()
    commits: tuple[CommitOp, ...] = ()
    reads: tuple[OffsetRead, ...] = ()


@attrs.frozen
class GroupAnomaly:
    invariant: str  # a key of INVARIANTS
    tp: TopicPartition
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.tp}: {self.detail}"


@attrs.frozen
class GroupCheckResult:
    anomalies: tuple[GroupAnomaly, ...]
    acknowledged: int  # acknowledged records the group had to consume
    consumed: int  # records handed to members (re-consumptions included)
    distinct: int  # distinct offsets consumed
    commits: Counter[str]  # outcome -> count
    reads: int
    stale_reads: int  # answered by a deposed coordinator (see OffsetRead)
    last_committed: tuple[tuple[TopicPartition, int | None], ...]  # the last OffsetFetch

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def by_invariant(self) -> Counter[str]:
        return Counter(anomaly.invariant for anomaly in self.anomalies)

    def summary(self) -> str:
        commits = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.commits.items()))
        committed = ", ".join(
            f"{tp}={'-' if offset is None else offset}" for tp, offset in self.last_committed
        )
        lines = [
            f"group: acknowledged {self.acknowledged}, consumed {self.consumed} "
            f"({self.distinct} distinct), commits: {commits or 'none'}, offset reads "
            f"{self.reads} ({self.stale_reads} stale{f', last: {committed}' if committed else ''}"
            f"), anomalies {len(self.anomalies)}"
        ]
        shown: Counter[str] = Counter()
        for anomaly in self.anomalies:
            shown[anomaly.invariant] += 1
            if shown[anomaly.invariant] <= SHOWN_PER_INVARIANT:
                lines.append(f"  {anomaly}")
        for invariant, count in sorted(shown.items()):
            if count > SHOWN_PER_INVARIANT:
                lines.append(f"  ... and {count - SHOWN_PER_INVARIANT} more {invariant}")
        for invariant, count in sorted(self.by_invariant().items()):
            lines.append(f"  VIOLATED {invariant} ({count}): {INVARIANTS[invariant]}")
        return "\n".join(lines)


@attrs.frozen
class _Point:
    """A committed offset observed over [start, end]: a commit or an offset read."""

    offset: int  # -1: nothing committed
    start: float
    end: float
    what: str


def _points(history: GroupHistory) -> dict[TopicPartition, list[_Point]]:
    points: dict[TopicPartition, list[_Point]] = {}
    for commit in history.commits:
        if commit.outcome is not Outcome.OK:
            continue
        for tp, offset in commit.offsets:
            what = (
                f"{commit.member}'s commit of {offset} (generation {commit.generation}, "
                f"{commit.start:.3f}-{commit.end:.3f})"
            )
            points.setdefault(tp, []).append(_Point(offset, commit.start, commit.end, what))
    for read in history.reads:
        if read.stale:
            continue
        for tp, found in read.offsets:
            offset = -1 if found is None else found
            shown = "nothing" if found is None else str(found)
            what = f"an OffsetFetch answering {shown} ({read.start:.3f}-{read.end:.3f})"
            points.setdefault(tp, []).append(_Point(offset, read.start, read.end, what))
    return points


def _backwards(tp: TopicPartition, points: list[_Point]) -> list[GroupAnomaly]:
    """Each observation below one that ended before it began."""
    by_end = sorted(points, key=lambda p: (p.end, p.start, p.offset))
    best: _Point | None = None
    done = 0
    found = []
    for point in sorted(points, key=lambda p: (p.start, p.end, p.offset)):
        while done < len(by_end) and by_end[done].end < point.start:
            candidate = by_end[done]
            if best is None or candidate.offset > best.offset:
                best = candidate
            done += 1
        if best is not None and point.offset < best.offset:
            found.append(
                GroupAnomaly(
                    "commit-backwards",
                    tp,
                    f"{point.what} after {best.what}: the committed offset went back from "
                    f"{best.offset} to {'nothing' if point.offset < 0 else point.offset}",
                )
            )
    return found


@attrs.define
class _Consumption:
    """Per partition: the acknowledged offsets in order, and when each was first consumed."""

    offsets: list[int]
    first_time: list[float]  # inf: never consumed
    running_max: list[float]  # max of first_time[:i + 1]

    @classmethod
    def of(cls, acked: list[int], first: Mapping[int, float]) -> _Consumption:
        offsets = sorted(acked)
        times = [first.get(offset, math.inf) for offset in offsets]
        running, top = [], -math.inf
        for t in times:
            top = max(top, t)
            running.append(top)
        return cls(offsets, times, running)

    def late_below(self, offset: int, by: float) -> tuple[int, float] | None:
        """The first acknowledged offset below `offset` not consumed by time `by`."""
        index = bisect.bisect_left(self.offsets, offset)
        if index == 0 or self.running_max[index - 1] <= by:
            return None
        for i in range(index):
            if self.first_time[i] > by:
                return self.offsets[i], self.first_time[i]
        return None  # (unreachable)


def check_group(
    ops: Iterable[ProduceOp],
    history: GroupHistory,
    log: Mapping[TopicPartition, Iterable[tuple[int, bytes | None]]] | None = None,
    *,
    durable: Callable[[ProduceOp], bool],
) -> GroupCheckResult:
    """`ops`: the producers' history; `history`: the group's; `log`: per partition the
    (offset, value) pairs the healed cluster holds (None: skip `consumed-unknown`).
    `durable(op)` says whether the durability contract covers an acknowledged op (only
    those must be consumed)."""
    anomalies: list[GroupAnomaly] = []
    acked: dict[TopicPartition, dict[int, ProduceOp]] = {}
    for op in ops:
        if op.outcome is Outcome.OK and op.acks != 0 and op.offset >= 0 and durable(op):
            acked.setdefault(op.tp, {})[op.offset] = op
    first: dict[TopicPartition, dict[int, float]] = {}
    seen_values: dict[tuple[TopicPartition, int], set[bytes | None]] = {}
    for record in history.consumed:
        times = first.setdefault(record.tp, {})
        if record.offset not in times or record.time < times[record.offset]:
            times[record.offset] = record.time
        seen_values.setdefault((record.tp, record.offset), set()).add(record.value)

    # unconsumed
    for tp in sorted(acked):
        consumed = first.get(tp, {})
        for offset in sorted(acked[tp]):
            if offset not in consumed:
                op = acked[tp][offset]
                anomalies.append(
                    GroupAnomaly(
                        "unconsumed",
                        tp,
                        f"{op.value!r} acknowledged to {op.process} at offset {offset} "
                        f"(t={op.end:.3f}) was never consumed by the group",
                    )
                )

    # commit-backwards
    points = _points(history)
    for tp in sorted(points):
        anomalies += _backwards(tp, points[tp])

    # skipped
    consumption = {tp: _Consumption.of(list(acked[tp]), first.get(tp, {})) for tp in sorted(acked)}
    flagged: set[tuple[TopicPartition, int]] = set()

    def skipped(tp: TopicPartition, offset: int, by: float, what: str) -> None:
        if tp not in consumption:
            return
        late = consumption[tp].late_below(offset, by)
        if late is None or (tp, late[0]) in flagged:
            return
        flagged.add((tp, late[0]))
        when = "never" if late[1] == math.inf else f"first at t={late[1]:.3f}"
        anomalies.append(
            GroupAnomaly(
                "skipped",
                tp,
                f"{what} is above acknowledged offset {late[0]} "
                f"({acked[tp][late[0]].value!r}), which was not consumed before it "
                f"(consumed {when})",
            )
        )

    for commit in history.commits:
        for tp, offset in commit.offsets:
            what = (
                f"{commit.member}'s commit of {offset} (generation {commit.generation}, "
                f"{commit.outcome.value}, began t={commit.start:.3f})"
            )
            skipped(tp, offset, commit.start, what)
    for read in history.reads:
        for tp, found in read.offsets:
            if found is not None:
                what = f"the committed offset {found} (OffsetFetch ending t={read.end:.3f})"
                skipped(tp, found, read.end, what)

    # consumed-unknown
    if log is not None:
        held = {tp: dict(records) for tp, records in log.items()}
        for tp, offset in sorted(seen_values):
            values = seen_values[tp, offset]
            in_log = held.get(tp, {})
            wrong = sorted(
                (v for v in values if offset not in in_log or in_log[offset] != v),
                key=lambda v: b"" if v is None else v,
            )
            for value in wrong:
                there = repr(in_log[offset]) if offset in in_log else "nothing"
                anomalies.append(
                    GroupAnomaly(
                        "consumed-unknown",
                        tp,
                        f"consumed {value!r} at offset {offset}, where the log holds {there}",
                    )
                )

    last_read = max(
        (read for read in history.reads if not read.stale),
        key=lambda r: (r.end, r.start),
        default=None,
    )
    return GroupCheckResult(
        tuple(anomalies),
        sum(len(offsets) for offsets in acked.values()),
        len(history.consumed),
        len(seen_values),
        Counter(commit.outcome.value for commit in history.commits),
        len(history.reads),
        sum(read.stale for read in history.reads),
        () if last_read is None else tuple(sorted(last_read.offsets)),
    )
