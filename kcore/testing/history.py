"""A Jepsen-style history of produce operations and the check of what was read back.

Every produce is recorded with its outcome: OK (acknowledged, with its offset), FAILED (the
broker definitely did not append it: e.g. NOT_ENOUGH_REPLICAS before the append, with no
earlier attempt in doubt) or INDETERMINATE (a timeout or a lost connection: it may or may
not be in the log). After the cluster is healed and settled, each partition is read from
the beginning, and `check` compares:

- lost: an acknowledged write that the durability contract covers (acks=all, with
  min.insync.replicas >= 2 and unclean election off; the caller decides) is not read back at
  the offset it was acknowledged with;
- moved: it is read back, but at another offset;
- duplicated: a value read more than once (a violation for idempotent producers only:
  without idempotence a retry after a lost response duplicates, as in Kafka);
- phantom: a value read that no operation ever sent;
- resurrected: a value read whose write definitely failed.
Indeterminate writes may or may not appear.

Values must be unique per history (the workload makes them so).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import attrs

from kcore.common import TopicPartition


class Outcome(enum.Enum):
    OK = "ok"
    FAILED = "failed"
    INDETERMINATE = "indeterminate"


@attrs.frozen
class ProduceOp:
    process: str  # which producer
    tp: TopicPartition
    value: bytes
    acks: int  # -1, 0 or 1
    idempotent: bool
    outcome: Outcome
    offset: int = -1  # the acknowledged offset when OK (acks >= 1)
    error: str | None = None
    start: float = 0.0  # Trio time the send began and ended
    end: float = 0.0


@attrs.frozen
class Anomaly:
    kind: str  # lost, moved, duplicated, phantom, resurrected
    tp: TopicPartition
    value: bytes
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.tp} {self.value!r}: {self.detail}"


@attrs.frozen
class CheckResult:
    anomalies: tuple[Anomaly, ...]
    acknowledged: int
    durable: int
    read: int
    lost_non_durable: tuple[Anomaly, ...]  # losses outside the contract (acks=1, unclean...)
    duplicates_tolerated: int

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def summary(self) -> str:
        lines = [
            f"acknowledged {self.acknowledged} (durable {self.durable}), read {self.read}, "
            f"non-durable losses {len(self.lost_non_durable)}, tolerated duplicates "
            f"{self.duplicates_tolerated}, anomalies {len(self.anomalies)}"
        ]
        lines += [f"  {anomaly}" for anomaly in self.anomalies]
        return "\n".join(lines)


def check(
    ops: Iterable[ProduceOp],
    reads: Mapping[TopicPartition, Iterable[tuple[int, bytes]]],
    *,
    durable: Callable[[ProduceOp], bool],
) -> CheckResult:
    """`reads`: per partition the (offset, value) pairs read from the log start to its end.
    `durable(op)` says whether the durability contract covers an acknowledged op."""
    ops = list(ops)
    by_value = {op.value: op for op in ops}
    anomalies: list[Anomaly] = []
    non_durable: list[Anomaly] = []
    where: dict[bytes, list[tuple[TopicPartition, int]]] = {}
    total_read = 0
    for tp in sorted(reads):
        for offset, value in reads[tp]:
            total_read += 1
            where.setdefault(value, []).append((tp, offset))
    counts = Counter({value: len(places) for value, places in where.items()})
    tolerated = 0
    for value in sorted(where):
        op = by_value.get(value)
        tp, offset = where[value][0]
        if op is None:
            anomalies.append(Anomaly("phantom", tp, value, f"read at offset {offset}, never sent"))
            continue
        if op.outcome is Outcome.FAILED:
            anomalies.append(
                Anomaly("resurrected", tp, value, f"read at offset {offset}, failed: {op.error}")
            )
        if counts[value] > 1:
            if op.idempotent:
                anomalies.append(
                    Anomaly(
                        "duplicated", tp, value, f"read at {where[value]} by an idempotent producer"
                    )
                )
            else:
                tolerated += counts[value] - 1
    acknowledged = [op for op in ops if op.outcome is Outcome.OK]
    durable_count = 0
    for op in acknowledged:
        is_durable = durable(op)
        durable_count += is_durable
        places = where.get(op.value, [])
        if op.acks == 0 or op.offset < 0:
            continue  # acks=0 acknowledges nothing about the log
        if (op.tp, op.offset) in places:
            continue
        if places:
            anomaly = Anomaly(
                "moved", op.tp, op.value, f"acknowledged at {op.offset}, read at {places}"
            )
        else:
            anomaly = Anomaly(
                "lost",
                op.tp,
                op.value,
                f"acknowledged at offset {op.offset} (acks={op.acks}), not read back",
            )
        (anomalies if is_durable else non_durable).append(anomaly)
    return CheckResult(
        tuple(anomalies),
        len(acknowledged),
        durable_count,
        total_read,
        tuple(non_durable),
        tolerated,
    )
