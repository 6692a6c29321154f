"""The follower's truncation walk (KIP-101 / KIP-279) against two real epoch caches: the
leader's answer comes from its LeaderEpochCache, the follower's lookup from its own."""

from kcore.log import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from kcore.server.truncation import OffsetTruncationState, offset_truncation_state


def _cache(*entries):
    cache = LeaderEpochCache()
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def _lookup(cache, log_end_offset):
    def lookup(epoch):
        found, end = cache.end_offset_for(epoch, log_end_offset)
        return None if found == UNDEFINED_EPOCH else (found, end)

    return lookup


def _walk(leader, leader_leo, follower, follower_leo, follower_hw=0):
    """Runs rounds of OffsetsForLeaderEpoch as the fetcher does (asking its latest epoch,
    then the epoch the previous round named; a cut only when below the log end) until
    truncation completes; returns the offsets truncated to, in order."""
    offsets = []
    epoch_to_ask = None
    for _ in range(10):
        asked = follower.latest_epoch if epoch_to_ask is None else epoch_to_ask
        epoch, end = leader.end_offset_for(asked, leader_leo)
        state = offset_truncation_state(
            leader_epoch=epoch,
            leader_end_offset=end,
            follower_lookup=_lookup(follower, follower_leo),
            log_end_offset=follower_leo,
            high_watermark=follower_hw,
        )
        offsets.append(state.offset)
        if state.offset < follower_leo:
            follower_leo = state.offset
            follower.truncate_from_end(follower_leo)
        if state.truncation_completed:
            return offsets
        epoch_to_ask = state.epoch_to_ask
    raise AssertionError(f"truncation never completed: {offsets}")


def test_kip101_scenario_1_a_restarted_follower_keeps_what_the_leader_has():
    # Both hold offsets 0..1 in epoch 0; the follower's checkpointed HW lagged at 1.
    # Truncating to the HW (pre-KIP-101) would drop offset 1; the epoch walk keeps it.
    leader, follower = _cache((0, 0)), _cache((0, 0))
    assert _walk(leader, 2, follower, 2, follower_hw=1) == [2]


def test_kip101_scenario_2_divergent_logs_are_cut_at_the_new_leaders_epoch_start():
    # Old leader wrote offset 1 in epoch 0 alone; the new leader (epoch 1) wrote its own
    # offset 1. The old leader, now following, must drop its offset 1.
    new_leader = _cache((0, 0), (1, 1))
    old_leader = _cache((0, 0))
    assert _walk(new_leader, 2, old_leader, 2) == [1]


def test_kip279_fast_double_failover_truncates_an_epoch_the_leader_never_saw():
    # A led epoch 1 briefly and wrote offset 2; B led epoch 2 and wrote offsets 2..3.
    a = _cache((0, 0), (1, 2))
    b = _cache((0, 0), (2, 2))
    assert _walk(b, 4, a, 3) == [2]


def test_kip279_several_diverged_epochs_take_several_rounds():
    follower = _cache((1, 0), (3, 5))  # LEO 8
    leader = _cache((1, 0), (2, 5), (4, 9))  # LEO 10
    # Round 1: asked 3, the leader answers (2, 9); the follower has no epoch 2 and cuts to
    # the end of its epoch 1 (5). Round 2: asked 1, answered (1, 5): done at 5.
    assert _walk(leader, 10, follower, 8) == [5, 5]


def test_an_epoch_led_without_writing_does_not_make_the_walk_ask_forever():
    # The follower led epoch 2 from its log end (3) and wrote nothing before losing it; the
    # leader never had epoch 2, its epoch 0 ended at 2 and its epoch 1 at 4. Round 1: asked
    # 2, answered (1, 4); the follower has no epoch 1 and its epoch 0 ends at 3, its log
    # end, so nothing is cut and its latest epoch is still 2. Round 2 must ask about epoch
    # 0 (answered (0, 2)): done at 2. Asking about epoch 2 again got the same answer
    # forever, and the fetcher never fetched (seed 50022: a restarted broker never
    # rejoined the ISR).
    follower = _cache((0, 0), (2, 3))  # LEO 3
    leader = _cache((0, 0), (1, 2), (3, 4))  # LEO 5
    assert _walk(leader, 5, follower, 3) == [3, 2]


def test_leader_without_the_epoch_falls_back_to_the_high_watermark():
    state = offset_truncation_state(
        leader_epoch=UNDEFINED_EPOCH,
        leader_end_offset=UNDEFINED_EPOCH_OFFSET,
        follower_lookup=lambda epoch: (0, 5),
        log_end_offset=5,
        high_watermark=3,
    )
    assert state == OffsetTruncationState(3, True)


def test_follower_that_did_not_track_the_epoch_takes_the_leaders_offset():
    state = offset_truncation_state(
        leader_epoch=2,
        leader_end_offset=7,
        follower_lookup=lambda epoch: None,
        log_end_offset=10,
        high_watermark=0,
    )
    assert state == OffsetTruncationState(7, True)


def test_never_truncates_beyond_the_log_end():
    state = offset_truncation_state(
        leader_epoch=0,
        leader_end_offset=100,
        follower_lookup=lambda epoch: (0, 100),
        log_end_offset=4,
        high_watermark=0,
    )
    assert state == OffsetTruncationState(4, True)
