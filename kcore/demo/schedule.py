"""The demo's fault schedule, as data: when to kill the controller, kill a partition's
leader, cut a follower off, and bring each back. Targets are named by role and resolved
when the step runs (the controller then, the leader then)."""

from __future__ import annotations

import enum

import attrs


class Action(enum.Enum):
    KILL_CONTROLLER = "kill the controller"
    KILL_LEADER = "kill the leader of a partition"
    ISOLATE_FOLLOWER = "cut a follower off from its leader"
    RESTART_KILLED = "restart the killed broker"
    HEAL = "heal the network"


@attrs.frozen
class Step:
    at: float  # seconds after the workload started
    action: Action
    skipped: str | None = None  # why the step does nothing on this cluster


CANNOT_CUT = "the brokers are separate processes, whose links the demo cannot cut"


def shrink_seconds(replica_lag_time_max_ms: int) -> float:
    """How long a follower must stay cut off for ZooKeeper to show it out of the ISR: it
    is out of sync after `replica.lag.time.max.ms`, its leader notices at the next ISR
    check (every half of that, as Kafka's isr-expiration task), then writes the ISR; a
    second more covers that write and the demo's next look."""
    return replica_lag_time_max_ms * 1.5 / 1000 + 1.0


# (fraction of the run, action): each fault is undone before the next one starts, and the
# last fault is undone with time left to catch up before the verdict.
_PLAN = (
    (0.15, Action.KILL_CONTROLLER),
    (0.30, Action.RESTART_KILLED),
    (0.40, Action.KILL_LEADER),
    (0.55, Action.RESTART_KILLED),
    (0.62, Action.ISOLATE_FOLLOWER),
    (0.78, Action.HEAL),
)


def chaos_schedule(
    duration: float, *, can_isolate: bool = True, cut_seconds: float = 0.0
) -> list[Step]:
    """The steps for a run of `duration` seconds. The cut lasts at least `cut_seconds`
    (see `shrink_seconds`) so that the ISR visibly shrinks, even when that moves the heal
    past its share of the run. Without `can_isolate` (brokers in their own processes) the
    network steps are kept, marked skipped, so the schedule says what it leaves out."""
    if duration <= 0:
        raise ValueError(f"duration must be positive, not {duration}")
    network = (Action.ISOLATE_FOLLOWER, Action.HEAL)
    steps = []
    cut_at = None
    for fraction, action in _PLAN:
        at = round(duration * fraction, 3)
        if action is Action.ISOLATE_FOLLOWER:
            cut_at = at
        elif action is Action.HEAL and cut_at is not None:
            at = max(at, round(cut_at + cut_seconds, 3))
        skipped = CANNOT_CUT if action in network and not can_isolate else None
        steps.append(Step(at, action, skipped))
    return steps


def describe(steps: list[Step]) -> str:
    """The schedule in one line, skipped steps named as such."""
    parts = [
        f"{step.at:.1f}s {step.action.value}" + (" (skipped)" if step.skipped else "")
        for step in steps
    ]
    skipped = sorted({step.skipped for step in steps if step.skipped})
    return "chaos schedule: " + ", ".join(parts) + "".join(f"; skipped: {w}" for w in skipped)
