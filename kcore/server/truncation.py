"""Where a follower truncates its log before fetching from a new leader (KIP-101, KIP-279):
Kafka's AbstractFetcherThread.getOffsetTruncationState, as a pure function.

The follower asks the leader for the end offset of its latest epoch (OffsetsForLeaderEpoch).
The leader answers with the largest epoch it has that is <= the one asked for and where that
epoch ends in its log. The follower then:
- has no epoch to ask about, or the leader cannot say: truncates to its high watermark
  (the pre-KIP-101 rule, kept as the fallback);
- does not know the leader's epoch: truncates to the end of its own largest epoch below it
  and asks again about that epoch (KIP-279: several epochs may have diverged);
- knows it: truncates to the smaller of the two end offsets for that epoch. Done.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from kcore.log import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


@attrs.frozen
class OffsetTruncationState:
    offset: int
    truncation_completed: bool
    # When not completed: the epoch to ask the leader about next (our largest below the
    # leader's answer). Not "our latest after truncating": an epoch assigned at our log end
    # holds no record and survives a truncation to the log end, so it would be asked again.
    epoch_to_ask: int | None = None


def offset_truncation_state(
    *,
    leader_epoch: int,
    leader_end_offset: int,
    follower_lookup: Callable[[int], tuple[int, int] | None],
    log_end_offset: int,
    high_watermark: int,
) -> OffsetTruncationState:
    """`leader_epoch` / `leader_end_offset`: the leader's answer. `follower_lookup(epoch)`
    gives the follower's (largest epoch <= epoch, its end offset) or None."""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        # The leader has nothing for our epoch (e.g. an older leader): fall back to the HW.
        return OffsetTruncationState(min(high_watermark, log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader_end_offset, log_end_offset), True)
    found = follower_lookup(leader_epoch)
    if found is None:
        # We were not tracking epochs that far back: the leader's offset is safe.
        return OffsetTruncationState(min(leader_end_offset, log_end_offset), True)
    follower_epoch, follower_end_offset = found
    if follower_epoch != leader_epoch:
        # The leader's epoch is unknown here: cut back to the end of our largest epoch
        # below it and ask again with that epoch.
        return OffsetTruncationState(
            min(follower_end_offset, log_end_offset), False, epoch_to_ask=follower_epoch
        )
    return OffsetTruncationState(min(follower_end_offset, leader_end_offset, log_end_offset), True)
