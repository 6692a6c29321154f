"""The demo's decisions without I/O: events between two looks at the cluster, time
without a leader, the verdict on acked vs consumed records, and the fault schedule."""

import pytest

from kcore.demo.model import (
    NO_LEADER,
    ClusterView,
    LeaderlessClock,
    PartitionView,
    events_between,
    judge,
)
from kcore.demo.schedule import CANNOT_CUT, Action, chaos_schedule, describe, shrink_seconds


def _view(time, live, controller, epoch, partitions):
    return ClusterView(
        time,
        frozenset(live),
        controller,
        epoch,
        {
            p: PartitionView(leader, le, (1, 2, 3), tuple(isr))
            for p, (leader, le, isr) in partitions.items()
        },
    )


def test_events_name_brokers_controllers_leaders_and_isr_changes():
    before = _view(0, {1, 2, 3}, 1, 1, {0: (1, 0, [1, 2, 3]), 1: (2, 0, [2, 3, 1])})
    after = _view(1, {2, 3}, 2, 2, {0: (2, 1, [2, 3]), 1: (NO_LEADER, 1, [2])})
    assert events_between(before, after) == [
        "broker 1 is gone",
        "controller elected: broker 2 (epoch 2)",
        "partition 0: leader 1 -> 2 (leader epoch 1)",
        "partition 0: ISR shrank to [2, 3] (-[1])",
        "partition 1: OFFLINE (leader 2 lost)",
        "partition 1: ISR shrank to [2] (-[1, 3])",
    ]
    back = _view(2, {1, 2, 3}, 2, 2, {0: (2, 1, [2, 3, 1]), 1: (2, 2, [2])})
    assert events_between(after, back) == [
        "broker 1 registered",
        "partition 0: ISR expanded to [2, 3, 1] (+[1])",
        "partition 1: leader -1 -> 2 (leader epoch 2)",
    ]
    assert events_between(back, back) == []


def test_the_first_look_describes_everything():
    first = _view(0, {1}, 1, 1, {0: (1, 0, [1])})
    assert events_between(None, first) == [
        "broker 1 registered",
        "controller elected: broker 1 (epoch 1)",
        "partition 0: leader 1, ISR [1]",
    ]


def test_leaderless_time_adds_up_per_partition_and_counts_an_open_stretch():
    clock = LeaderlessClock()
    for time, leader0, leader1 in [(0, 1, 1), (1, NO_LEADER, 1), (3, 2, NO_LEADER), (4, 2, 2)]:
        clock.observe(_view(time, {1, 2}, 1, 1, {0: (leader0, 0, [1]), 1: (leader1, 0, [1])}))
    clock.observe(_view(5, {1, 2}, 1, 1, {0: (NO_LEADER, 0, [1]), 1: (2, 0, [1])}))
    assert clock.finish(now=7) == {0: 2 + 2, 1: 1}


def test_the_verdict_finds_lost_moved_and_duplicated_records():
    acked = [(0, 0, b"a", 1.0), (0, 1, b"b", 1.5), (1, 0, b"c", 2.0), (1, 1, b"d", 6.0)]
    consumed = [(0, 0, b"a"), (0, 0, b"a"), (1, 5, b"c"), (1, 1, b"d")]
    verdict = judge(acked, consumed, {0: 0.0, 1: 3.5})
    assert (verdict.acked, verdict.consumed) == (4, 4)
    assert verdict.lost == ((0, 1, b"b"),)
    assert verdict.moved == ((1, 0, b"c"),)
    assert verdict.duplicates == 1
    assert verdict.longest_ack_gap == {0: (0.5, 1.0), 1: (4.0, 2.0)}
    assert not verdict.ok
    assert verdict.lines()[-1] == "verdict: DATA LOST"


def test_a_clean_run_is_ok():
    verdict = judge([(0, 0, b"a", 0.0)], [(0, 0, b"a")], {0: 0.0})
    assert verdict.ok and verdict.lines()[-1] == "verdict: no acknowledged record lost"


def test_the_schedule_undoes_each_fault_before_the_next_and_ends_early():
    steps = chaos_schedule(100)
    assert [s.action for s in steps] == [
        Action.KILL_CONTROLLER,
        Action.RESTART_KILLED,
        Action.KILL_LEADER,
        Action.RESTART_KILLED,
        Action.ISOLATE_FOLLOWER,
        Action.HEAL,
    ]
    assert [s.at for s in steps] == sorted(s.at for s in steps)
    assert steps[-1].at <= 80
    assert not any(s.skipped for s in steps)
    with pytest.raises(ValueError, match="duration"):
        chaos_schedule(0)


def _cut_and_heal(steps):
    (cut,) = [s.at for s in steps if s.action is Action.ISOLATE_FOLLOWER]
    (heal,) = [s.at for s in steps if s.action is Action.HEAL]
    return cut, heal


@pytest.mark.parametrize("duration", [16, 30, 60, 100])
def test_the_cut_lasts_long_enough_for_the_isr_to_shrink(duration):
    """replica.lag.time.max.ms, then up to one ISR check (half of it), then the write."""
    assert shrink_seconds(3000) == 3 + 1.5 + 1
    cut, heal = _cut_and_heal(chaos_schedule(duration, cut_seconds=shrink_seconds(3000)))
    assert heal - cut >= shrink_seconds(3000)
    assert heal - cut >= 0.16 * duration - 0.001  # never shorter than its share of the run


def test_a_schedule_without_network_faults_says_what_it_skips():
    steps = chaos_schedule(100, can_isolate=False)
    assert [s.action for s in steps if s.skipped] == [Action.ISOLATE_FOLLOWER, Action.HEAL]
    assert all(s.skipped == CANNOT_CUT for s in steps if s.skipped)
    line = describe(steps)
    assert "62.0s cut a follower off from its leader (skipped)" in line
    assert line.endswith(f"; skipped: {CANNOT_CUT}")
    assert "skipped" not in describe(chaos_schedule(100))


def test_the_verdict_names_partitions_in_words():
    verdict = judge([(0, 0, b"a", 0.0), (1, 0, b"b", 0.0)], [(0, 0, b"a")], {0: 0.0, 1: 2.5})
    text = "\n".join(verdict.lines())
    assert "(partition 0 0.0s, partition 1 2.5s)" in text
    assert "  LOST partition 1 offset 0: b'b'" in text
    assert " p0 " not in text and " p1 " not in text
