"""The consumer group checker names each broken invariant with its evidence, and accepts
what at-least-once delivery allows (re-consumption, commits that failed, concurrent
commits whose order is unknown)."""

from kcore.common import TopicPartition
from kcore.testing.group_history import (
    CommitOp,
    Consumed,
    GroupHistory,
    OffsetRead,
    check_group,
)
from kcore.testing.history import Outcome, ProduceOp
from kcore.testing.sim import SimConfig, SimResult

TP = TopicPartition("t", 0)


def _acked(count, tp=TP):
    return [ProduceOp("p", tp, f"v{i}".encode(), -1, False, Outcome.OK, i) for i in range(count)]


def _consumed(offsets, at, member="m1", tp=TP):
    return [Consumed(member, tp, offset, f"v{offset}".encode(), at) for offset in offsets]


def _commit(offset, start, end, outcome=Outcome.OK, member="m1", generation=1):
    return CommitOp(member, generation, ((TP, offset),), outcome, start, end)


def _durable(op):
    return True


def _check(ops, history, log=None):
    return check_group(ops, history, log, durable=_durable)


def test_a_clean_history_with_reconsumption_is_valid():
    history = GroupHistory(
        consumed=(
            *_consumed(range(0, 3), 1.0),
            *_consumed(range(2, 5), 3.0, member="m2"),  # re-read after a crash: allowed
        ),
        commits=(
            _commit(3, 1.5, 1.6),
            _commit(3, 2.0, 9.0, Outcome.FAILED),  # failed: may or may not have stored
            _commit(5, 3.5, 3.6, member="m2", generation=2),
        ),
        reads=(OffsetRead(((TP, None),), 0.0, 0.5), OffsetRead(((TP, 5),), 4.0, 4.1)),
    )
    log = {TP: [(i, f"v{i}".encode()) for i in range(5)]}
    result = _check(_acked(5), history, log)
    assert result.valid, result.summary()
    assert (result.acknowledged, result.consumed, result.distinct) == (5, 6, 5)
    assert result.commits == {"ok": 2, "failed": 1}
    assert result.last_committed == ((TP, 5),)


def test_an_acknowledged_record_never_consumed_is_named():
    history = GroupHistory(consumed=tuple(_consumed([0, 2], 1.0)))
    result = _check(_acked(3), history)
    assert [(a.invariant, a.tp) for a in result.anomalies] == [("unconsumed", TP)]
    assert "b'v1'" in str(result.anomalies[0]) and "offset 1" in str(result.anomalies[0])
    assert "VIOLATED unconsumed (1)" in result.summary()


def test_a_commit_going_backwards_is_caught():
    history = GroupHistory(
        consumed=tuple(_consumed(range(6), 1.0)),
        commits=(_commit(6, 2.0, 2.1), _commit(3, 3.0, 3.1, member="m2", generation=2)),
    )
    result = _check(_acked(6), history)
    assert [a.invariant for a in result.anomalies] == ["commit-backwards"]
    detail = str(result.anomalies[0])
    assert "went back from 6 to 3" in detail and "m2's commit of 3" in detail
    assert "m1's commit of 6" in detail


def test_an_offset_fetch_after_a_commit_answering_less_or_nothing_goes_backwards():
    history = GroupHistory(
        consumed=tuple(_consumed(range(4), 1.0)),
        commits=(_commit(4, 2.0, 2.1),),
        reads=(OffsetRead(((TP, 2),), 3.0, 3.2), OffsetRead(((TP, None),), 4.0, 4.2)),
    )
    result = _check(_acked(4), history)
    assert [a.invariant for a in result.anomalies] == ["commit-backwards"] * 2
    assert "went back from 4 to nothing" in str(result.anomalies[1])


def test_overlapping_commits_have_no_order_to_break():
    # The second began before the first was acknowledged: either may have been stored last.
    history = GroupHistory(
        consumed=tuple(_consumed(range(6), 1.0)),
        commits=(_commit(6, 2.0, 3.0), _commit(3, 2.5, 2.6, member="m2", generation=2)),
    )
    assert _check(_acked(6), history).valid


def test_a_commit_past_an_unconsumed_record_is_a_skip():
    # m1 read 0..2 and then 5, never 3 or 4, and committed 6: 3 and 4 were skipped (even
    # though m2 reads them later, after the commit).
    history = GroupHistory(
        consumed=(*_consumed([0, 1, 2, 5], 1.0), *_consumed([3, 4], 8.0, member="m2")),
        commits=(_commit(6, 2.0, 2.1),),
    )
    result = _check(_acked(6), history)
    assert [a.invariant for a in result.anomalies] == ["skipped"]
    detail = str(result.anomalies[0])
    assert "m1's commit of 6" in detail and "offset 3" in detail and "first at t=8.000" in detail


def test_an_offset_fetch_showing_a_skip_is_caught_too():
    history = GroupHistory(
        consumed=tuple(_consumed([0], 1.0)),
        reads=(OffsetRead(((TP, 3),), 2.0, 2.5),),
    )
    result = _check(_acked(3), history)
    assert sorted(a.invariant for a in result.anomalies) == ["skipped", "unconsumed", "unconsumed"]
    assert "never" in next(str(a) for a in result.anomalies if a.invariant == "skipped")


def test_consuming_a_record_the_log_does_not_hold_is_caught():
    history = GroupHistory(
        consumed=(Consumed("m1", TP, 0, b"v0", 1.0), Consumed("m1", TP, 1, b"ghost", 1.0))
    )
    log = {TP: [(0, b"v0"), (1, b"v1")]}
    result = _check(_acked(1), history, log)
    assert [a.invariant for a in result.anomalies] == ["consumed-unknown"]
    assert "b'ghost' at offset 1, where the log holds b'v1'" in str(result.anomalies[0])


def test_records_outside_the_durability_contract_need_not_be_consumed():
    ops = _acked(2)
    result = check_group(ops, GroupHistory(), durable=lambda op: op.offset == 0)
    assert [a.invariant for a in result.anomalies] == ["unconsumed"]
    assert result.acknowledged == 1


def test_a_run_with_a_broken_group_invariant_fails_and_says_which():
    history = GroupHistory(
        consumed=tuple(_consumed(range(3), 1.0)),
        commits=(_commit(3, 2.0, 2.1), _commit(1, 3.0, 3.1)),
    )
    config = SimConfig(seed=0, group_consumers=2)
    group_check = _check(_acked(3), history)
    result = SimResult(config, (), None, None, (), history, group_check)
    assert not result.ok
    report = result.report()
    assert "seed 0 (3 brokers, 2 partitions, 2 group consumers): FAILED" in report
    assert "VIOLATED commit-backwards (1)" in report


def test_a_stale_read_from_a_deposed_coordinator_is_no_step_back_but_still_no_skip():
    # Seed 86 (3x2, 20 s of chaos): an observer still pointed at the isolated old
    # coordinator read its cached offsets once the network healed, before it heard of its
    # successor (as Kafka's would answer).
    history = GroupHistory(
        consumed=tuple(_consumed(range(4), 1.0)),
        commits=(_commit(4, 2.0, 2.1),),
        reads=(OffsetRead(((TP, 2),), 3.0, 3.2, node=1, stale=True),),
    )
    result = _check(_acked(4), history)
    assert result.valid, result.summary()
    assert result.stale_reads == 1 and "(1 stale" in result.summary()
    skipping = GroupHistory(reads=(OffsetRead(((TP, 2),), 3.0, 3.2, node=1, stale=True),))
    assert "skipped" in _check(_acked(4), skipping).by_invariant()
