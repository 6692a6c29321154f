"""Partition's replication rules, driven directly (no network, no clock)."""

import pytest

from kcore import errors
from kcore.common import TopicPartition
from kcore.log import MemoryPartitionLog, build_batch, iter_batch_records
from kcore.protocol.control import LeaderAndIsrPartitionState
from kcore.server.partition import Partition

TP = TopicPartition("t", 0)
LAG_MS = 30_000


def _state(leader=1, epoch=1, isr=(1, 2, 3), replicas=(1, 2, 3), partition_epoch=0):
    return LeaderAndIsrPartitionState("t", 0, 1, leader, epoch, isr, partition_epoch, replicas)


def _leader(now=0, **kwargs):
    partition = Partition(TP, 1, MemoryPartitionLog(), replica_lag_time_max_ms=LAG_MS)
    partition.make_leader(_state(**kwargs), now)
    return partition


def _records(*values):
    return build_batch([(0, None, v) for v in values])


def test_high_watermark_is_the_minimum_log_end_offset_of_the_isr():
    p = _leader()
    p.append_as_leader(_records(b"a", b"b", b"c"), -1, 2, now_ms=0)
    assert p.high_watermark == 0
    p.update_follower_fetch_state(2, 3, 0, now_ms=10)
    assert p.high_watermark == 0  # replica 3 has not fetched
    p.update_follower_fetch_state(3, 2, 0, now_ms=10)
    assert p.high_watermark == 2
    p.update_follower_fetch_state(3, 3, 0, now_ms=20)
    assert p.high_watermark == 3


def test_high_watermark_never_moves_backwards():
    p = _leader()
    p.append_as_leader(_records(b"a", b"b"), 1, 1, now_ms=0)
    p.update_follower_fetch_state(2, 2, 0, now_ms=1)
    p.update_follower_fetch_state(3, 2, 0, now_ms=1)
    assert p.high_watermark == 2
    p.update_follower_fetch_state(3, 1, 0, now_ms=2)  # a follower reports less
    assert p.high_watermark == 2


def test_a_follower_not_caught_up_for_the_lag_time_is_shrunk_out_of_the_isr():
    p = _leader(now=0)
    p.append_as_leader(_records(b"a"), 1, 1, now_ms=0)
    p.update_follower_fetch_state(2, 1, 0, now_ms=100)
    assert p.propose_isr_shrink(now_ms=LAG_MS) is None  # 3 still within its window
    proposal = p.propose_isr_shrink(now_ms=LAG_MS + 1)
    assert proposal.isr == (1, 2)
    # Pessimistic: until written, the HW still waits for replica 3.
    assert p.high_watermark == 0
    assert p.complete_isr_change(proposal, new_partition_epoch=1)
    assert p.isr == (1, 2) and p.partition_epoch == 1
    p.maybe_increment_high_watermark(now_ms=LAG_MS + 1)
    assert p.high_watermark == 1


def test_a_failed_isr_write_changes_nothing():
    p = _leader()
    proposal = p.propose_isr_shrink(now_ms=LAG_MS + 1)
    assert proposal.isr == (1,)
    assert not p.complete_isr_change(proposal, None)
    assert p.isr == (1, 2, 3) and p.pending_isr is None


def test_a_follower_joins_the_isr_once_it_reaches_the_high_watermark_and_epoch_start():
    p = _leader(isr=(1, 2), epoch=1)
    p.append_as_leader(_records(b"a", b"b"), 1, 1, now_ms=0)
    p.update_follower_fetch_state(2, 2, 0, now_ms=1)
    assert p.high_watermark == 2
    p.update_follower_fetch_state(3, 1, 0, now_ms=1)
    assert p.propose_isr_expansion(3) is None  # below the HW
    p.update_follower_fetch_state(3, 2, 0, now_ms=2)
    proposal = p.propose_isr_expansion(3)
    assert proposal.isr == (1, 2, 3)
    assert p.maximal_isr == (1, 2, 3)  # optimistic: counted for the HW at once
    assert p.complete_isr_change(proposal, new_partition_epoch=1)
    assert p.isr == (1, 2, 3)


def test_acks_all_is_refused_before_append_when_the_isr_is_below_min_insync():
    p = _leader(isr=(1,))
    with pytest.raises(errors.NotEnoughReplicasError):
        p.append_as_leader(_records(b"a"), -1, 2, now_ms=0)
    assert p.log_end_offset == 0
    p.append_as_leader(_records(b"a"), 1, 2, now_ms=0)  # acks=1 does not check
    assert p.log_end_offset == 1


def test_acks_all_completes_when_the_high_watermark_passes_and_reports_a_shrunk_isr():
    p = _leader(isr=(1, 2))
    _, last = p.append_as_leader(_records(b"a"), -1, 2, now_ms=0)
    assert p.check_enough_replicas_reach_offset(last + 1, 2) == (False, 0)
    p.update_follower_fetch_state(2, 1, 0, now_ms=1)
    assert p.check_enough_replicas_reach_offset(last + 1, 2) == (True, 0)
    p.isr = (1,)
    code = errors.NotEnoughReplicasAfterAppendError.code
    assert p.check_enough_replicas_reach_offset(last + 1, 2) == (True, code)


def test_requests_with_another_leader_epoch_are_fenced():
    p = _leader(epoch=5)
    with pytest.raises(errors.FencedLeaderEpochError):
        p.check_leader(4)
    with pytest.raises(errors.UnknownLeaderEpochError):
        p.check_leader(6)
    p.check_leader(5)
    p.check_leader(-1)


def test_a_follower_refuses_produce():
    p = Partition(TP, 2, MemoryPartitionLog())
    p.make_follower(_state(leader=1))
    with pytest.raises(errors.NotLeaderOrFollowerError):
        p.append_as_leader(_records(b"a"), 1, 1, now_ms=0)


def test_consumers_read_below_the_high_watermark_and_followers_to_the_log_end():
    p = _leader(isr=(1, 2))
    p.append_as_leader(_records(b"a"), 1, 1, now_ms=0)
    p.update_follower_fetch_state(2, 1, 0, now_ms=1)
    p.append_as_leader(_records(b"b"), 1, 1, now_ms=2)
    consumer = [r.value for r in iter_batch_records(p.read(0, 1 << 20, up_to_high_watermark=True))]
    follower = [r.value for r in iter_batch_records(p.read(0, 1 << 20, up_to_high_watermark=False))]
    assert consumer == [b"a"]
    assert follower == [b"a", b"b"]
    assert p.read(1, 1 << 20, up_to_high_watermark=True) == []


def test_a_new_leader_epoch_starts_at_the_log_end_in_the_epoch_cache():
    p = _leader(epoch=1)
    p.append_as_leader(_records(b"a", b"b"), 1, 1, now_ms=0)
    p.make_leader(_state(epoch=3), now_ms=5)
    assert p.log.epoch_cache.entries() == [(1, 0), (3, 2)]
    assert p.leader_epoch_start_offset == 2
    assert p.last_offset_for_leader_epoch(3, 1) == (1, 2)


def test_a_follower_high_watermark_is_capped_by_its_log_end():
    p = Partition(TP, 2, MemoryPartitionLog())
    p.make_follower(_state(leader=1))
    batch = build_batch([(0, None, b"a")], base_offset=0, partition_leader_epoch=1)
    p.append_as_follower(batch, leader_high_watermark=5)
    assert p.high_watermark == 1
