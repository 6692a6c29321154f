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


def chaos_schedule(duration: float, *, can_isolate: bool = True) -> list[Step]:
    """The steps for a run of `duration` seconds; without `can_isolate` (brokers in their
    own processes, where the demo cannot cut links) the network steps are left out."""
    if duration <= 0:
        raise ValueError(f"duration must be positive, not {duration}")
    network = (Action.ISOLATE_FOLLOWER, Action.HEAL)
    return [
        Step(round(duration * fraction, 3), action)
        for fraction, action in _PLAN
        if can_isolate or action not in network
    ]
