"""A partition replica on a broker (Kafka's `kafka.cluster.Partition`), sans-IO.

It holds the local log, the leadership the controller last granted (leader, leader epoch,
ISR, partition epoch), the high watermark, and as leader the fetch state of each follower.
It decides: who is caught up, which ISR to propose, where the high watermark is, whether an
acks=all produce is satisfied, whether a request's leader epoch is fenced. It never waits,
reads no clock (callers pass `now_ms`) and writes nothing to ZooKeeper: the replica manager
does that with the `IsrProposal` this returns. (Its log does disk I/O: the replica manager
runs the calls that append or truncate under the log-dir failure handling.)

The rules (Kafka 3.5):
- HW = min LEO over the maximal ISR and the followers that are caught up, never backwards.
- A follower is caught up when its LEO reaches the leader's, or it reached the leader's LEO
  as of its previous fetch within `replica.lag.time.max.ms` (`last_caught_up_time_ms`).
- ISR expansion: a follower whose LEO reaches the HW and the start of the current leader
  epoch joins; expansion is optimistic (the maximal ISR counts it at once), shrinking is
  pessimistic (the HW keeps waiting for a removed replica until the write succeeds).
- One ISR change in flight at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import attrs

from kcore import errors
from kcore.common import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.log import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    TimestampAndOffset,
    max_timestamp,
    parse_header,
)
from kcore.protocol.control import LeaderAndIsrPartitionState
from kcore.protocol.data import MAX_TIMESTAMP, NO_EPOCH

logger = logging.getLogger("kcore.server.partition")

UNKNOWN_OFFSET = -1
_TIMESTAMP_SCAN_BYTES = 1 << 20  # per read while scanning batch headers for a timestamp
DELETE_TO_HIGH_WATERMARK = -1  # DeleteRecords' offset meaning "up to the high watermark"


@attrs.define
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica / ReplicaState)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    # None: never caught up in this leader's term (Kafka uses 0 on a wall clock; our clock
    # is Trio's, which may start at 0).
    last_caught_up_time_ms: int | None = None
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int | None = None

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_end_offset: int
    ) -> None:
        # Caught up now, or caught up to where the leader was at the previous fetch: then it
        # was caught up as of that previous fetch's time.
        if fetch_offset >= leader_end_offset:
            self._caught_up_at(fetch_time_ms)
        elif (
            fetch_offset >= self.last_fetch_leader_log_end_offset
            and self.last_fetch_time_ms is not None
        ):
            self._caught_up_at(self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def _caught_up_at(self, time_ms: int) -> None:
        if self.last_caught_up_time_ms is None or time_ms > self.last_caught_up_time_ms:
            self.last_caught_up_time_ms = time_ms

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        if self.log_end_offset >= leader_end_offset:
            return True
        return (
            self.last_caught_up_time_ms is not None
            and now_ms - self.last_caught_up_time_ms <= max_lag_ms
        )


@attrs.frozen
class IsrProposal:
    """An ISR change for the replica manager to write (conditioned on `partition_epoch`)."""

    tp: TopicPartition
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    controller_epoch: int

    def partition_state(self) -> LeaderIsrAndControllerEpoch:
        """What the partition's state znode holds once the proposal is written."""
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(self.leader, self.leader_epoch, self.isr, self.partition_epoch),
            self.controller_epoch,
        )


@attrs.define(eq=False)
class Partition:
    tp: TopicPartition
    local_broker_id: int
    log: Any  # kcore.log.PartitionLog | MemoryPartitionLog
    high_watermark: int = 0
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    leader_epoch_start_offset: int | None = None
    partition_epoch: int = -1
    controller_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()  # committed: what ZooKeeper holds
    maximal_isr: tuple[int, ...] = ()  # isr plus a pending expansion
    pending_isr: IsrProposal | None = None
    followers: dict[int, FollowerState] = attrs.field(factory=dict)
    replica_lag_time_max_ms: int = 30000

    def __attrs_post_init__(self) -> None:
        self.high_watermark = min(
            max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset
        )

    # -- state ---------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def __repr__(self) -> str:
        return (
            f"<Partition {self.tp} on {self.local_broker_id}: leader={self.leader_id} "
            f"epoch={self.leader_epoch} isr={list(self.isr)} hw={self.high_watermark} "
            f"leo={self.log_end_offset}>"
        )

    # -- leadership ----------------------------------------------------------------------

    def make_leader(self, state: LeaderAndIsrPartitionState, now_ms: int) -> bool:
        """Becomes leader at the request's epoch; True when that is a new leader epoch (a new
        term: the epoch starts at the current LEO and followers are tracked afresh)."""
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self._apply_assignment(state)
        if is_new_epoch:
            self.log.epoch_cache.assign(state.leader_epoch, self.log_end_offset)
            self.leader_epoch_start_offset = self.log_end_offset
            self.followers = {}
        self.leader_id = self.local_broker_id
        self.leader_epoch = state.leader_epoch
        leader_end = self.log_end_offset
        for replica in self.replicas:
            if replica == self.local_broker_id:
                continue
            follower = self.followers.setdefault(replica, FollowerState(replica))
            # ISR members get a full lag window to show up before they can be shrunk away.
            follower.last_caught_up_time_ms = now_ms if replica in self.isr else None
            if is_new_epoch:
                follower.last_fetch_leader_log_end_offset = leader_end
                follower.last_fetch_time_ms = now_ms
        for gone in sorted(set(self.followers) - set(self.replicas)):
            del self.followers[gone]
        # The ISR may be down to this replica alone.
        self.maybe_increment_high_watermark(now_ms)
        return is_new_epoch

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """Follows `state.leader`; True when the leader or its epoch changed (the fetcher
        must restart with the new epoch)."""
        changed = state.leader_epoch > self.leader_epoch or state.leader != self.leader_id
        self._apply_assignment(state)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.followers = {}
        return changed

    def _apply_assignment(self, state: LeaderAndIsrPartitionState) -> None:
        self.controller_epoch = state.controller_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.maximal_isr = self.isr
        self.pending_isr = None

    def stop_leading(self) -> None:
        """StopReplica or deletion: no longer leader or follower of anything."""
        self.leader_id = NO_LEADER
        self.followers = {}
        self.pending_isr = None

    # -- epoch checks (KIP-320) ----------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise errors.FencedLeaderEpochError(
                f"{self.tp}: request epoch {current_leader_epoch} is older than the current "
                f"leader epoch {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise errors.UnknownLeaderEpochError(
                f"{self.tp}: request epoch {current_leader_epoch} is newer than the current "
                f"leader epoch {self.leader_epoch}"
            )

    def check_leader(self, current_leader_epoch: int = NO_EPOCH) -> None:
        self.check_leader_epoch(current_leader_epoch)
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp} "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})"
            )

    # -- the leader's side ---------------------------------------------------------------

    def append_as_leader(
        self, records: bytes, required_acks: int, min_insync_replicas: int, now_ms: int
    ) -> tuple[int, int]:
        """Appends a producer's batches; (first, last) offset. acks=all refuses before
        appending when the ISR is smaller than `min.insync.replicas`."""
        self.check_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_insync_replicas} for partition {self.tp}"
            )
        first, last = self.log.append(records, self.leader_epoch, now_ms=now_ms)
        self.maybe_increment_high_watermark(now_ms)
        return first, last

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        follower_log_start_offset: int,
        now_ms: int,
    ) -> bool:
        """Records a follower's fetch; True when the high watermark moved."""
        follower = self.followers.get(replica_id)
        if follower is None:
            raise errors.NotLeaderOrFollowerError(
                f"broker {replica_id} is not a replica of {self.tp} (replicas "
                f"{list(self.replicas)})"
            )
        follower.update_fetch_state(
            fetch_offset, follower_log_start_offset, now_ms, self.log_end_offset
        )
        return self.maybe_increment_high_watermark(now_ms)

    def delete_records_on_leader(self, offset: int) -> int:
        """Kafka's deleteRecordsOnLeader: moves the log start offset up to `offset` (-1: the
        high watermark), never past the high watermark; returns the offset asked for."""
        self.check_leader()
        wanted = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if wanted < 0 or wanted > self.high_watermark:
            raise errors.OffsetOutOfRangeError(
                f"cannot delete records of {self.tp} before offset {offset}: it must lie "
                f"within [0, the high watermark {self.high_watermark}]"
            )
        self.log.increment_log_start_offset(wanted)
        return wanted

    def low_watermark(self, live_brokers: Collection[int]) -> int:
        """Kafka's lowWatermarkIfLeader: the least log start offset of this replica and of
        the followers on live brokers whose start offset is known."""
        starts = [
            follower.log_start_offset
            for follower in self.followers.values()
            if follower.broker_id in live_brokers and follower.log_start_offset != UNKNOWN_OFFSET
        ]
        return min([*starts, self.log_start_offset])

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """HW = min LEO of the leader, the maximal ISR, and the caught-up followers; it never
        moves backwards. True when it moved."""
        if not self.is_leader:
            return False
        leader_end = self.log_end_offset
        new_hw = leader_end
        for replica_id in sorted(self.followers):
            follower = self.followers[replica_id]
            counts = replica_id in self.maximal_isr or follower.is_caught_up(
                leader_end, now_ms, self.replica_lag_time_max_ms
            )
            if counts and follower.log_end_offset < new_hw:
                new_hw = follower.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def is_follower_in_sync(self, replica_id: int) -> bool:
        follower = self.followers.get(replica_id)
        if follower is None or self.leader_epoch_start_offset is None:
            return False
        return (
            follower.log_end_offset >= self.high_watermark
            and follower.log_end_offset >= self.leader_epoch_start_offset
        )

    def propose_isr_expansion(self, replica_id: int) -> IsrProposal | None:
        """The ISR with `replica_id` added, when it is in sync and not in yet."""
        if (
            not self.is_leader
            or self.pending_isr is not None
            or replica_id in self.maximal_isr
            or replica_id not in self.replicas
            or not self.is_follower_in_sync(replica_id)
        ):
            return None
        proposal = self._proposal((*self.isr, replica_id))
        self.maximal_isr = proposal.isr  # optimistic: the HW waits for it from now on
        self.pending_isr = proposal
        return proposal

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        leader_end = self.log_end_offset
        return [
            replica
            for replica in self.isr
            if replica != self.local_broker_id
            and not self.followers.get(replica, FollowerState(replica)).is_caught_up(
                leader_end, now_ms, self.replica_lag_time_max_ms
            )
        ]

    def propose_isr_shrink(self, now_ms: int) -> IsrProposal | None:
        """The ISR without the followers that are not caught up, if any are not."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return None
        proposal = self._proposal(tuple(r for r in self.isr if r not in out))
        self.pending_isr = proposal  # pessimistic: maximal ISR stays until committed
        return proposal

    def _proposal(self, isr: tuple[int, ...]) -> IsrProposal:
        return IsrProposal(
            self.tp,
            self.local_broker_id,
            self.leader_epoch,
            isr,
            self.partition_epoch,
            self.controller_epoch,
        )

    def complete_isr_change(self, proposal: IsrProposal, new_partition_epoch: int | None) -> bool:
        """Applies a written proposal (`new_partition_epoch` is the znode's new version) or
        drops a failed one (None). Ignored when leadership moved on meanwhile."""
        if proposal is not self.pending_isr:
            return False
        self.pending_isr = None
        if new_partition_epoch is None or proposal.leader_epoch != self.leader_epoch:
            self.maximal_isr = self.isr
            return False
        self.isr = proposal.isr
        self.maximal_isr = proposal.isr
        self.partition_epoch = new_partition_epoch
        return True

    def check_enough_replicas_reach_offset(
        self, required_offset: int, min_insync_replicas: int
    ) -> tuple[bool, int]:
        """For an acks=all produce whose last offset is `required_offset - 1`: (done, error
        code). Done once the HW passes it; an ISR that shrank below min.insync by then
        answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records are written, not acked)."""
        if not self.is_leader:
            return True, errors.NotLeaderOrFollowerError.code
        if self.high_watermark < required_offset:
            return False, 0
        if len(self.isr) < min_insync_replicas:
            return True, errors.NotEnoughReplicasAfterAppendError.code
        return True, 0

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """The leader's answer to OffsetsForLeaderEpoch: (epoch, end offset)."""
        self.check_leader(current_leader_epoch)
        return self.log.end_offset_for_epoch(leader_epoch)

    def fetch_offset_snapshot(self) -> tuple[int, int, int]:
        return self.log_start_offset, self.high_watermark, self.log_end_offset

    def read(self, fetch_offset: int, max_bytes: int, *, up_to_high_watermark: bool) -> list[bytes]:
        """Batches from `fetch_offset`: consumers read below the HW only, followers to LEO."""
        limit = self.high_watermark if up_to_high_watermark else None
        if up_to_high_watermark and fetch_offset > self.high_watermark:
            # Between HW and LEO: valid, nothing readable yet.
            if fetch_offset <= self.log_end_offset:
                return []
        return self.log.read(fetch_offset, max_bytes, limit)

    def offset_for_timestamp(
        self, target: int, *, up_to_high_watermark: bool
    ) -> TimestampAndOffset | None:
        """ListOffsets by timestamp: the first record whose timestamp is at least `target`
        (MAX_TIMESTAMP: the record with the largest), below the high watermark for a
        consumer. A timestamp is looked up in the time index of the first segment that
        reaches it, and only the batches from its entry on are read; MAX_TIMESTAMP still
        scans the batch headers from the log start."""
        if target != MAX_TIMESTAMP:
            return self.log.offset_for_timestamp(
                target, self.high_watermark if up_to_high_watermark else None
            )
        offset = self.log_start_offset
        batches: list[bytes] = []
        while True:
            found = self.read(
                offset, _TIMESTAMP_SCAN_BYTES, up_to_high_watermark=up_to_high_watermark
            )
            if not found:
                break
            batches += found
            offset = parse_header(found[-1]).next_offset
        return max_timestamp(batches, self.log_start_offset)

    # -- the follower's side -------------------------------------------------------------

    def append_as_follower(self, records: bytes, leader_high_watermark: int) -> None:
        if records:
            self.log.append_as_follower(records)
        self.update_follower_high_watermark(leader_high_watermark)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        # A follower's HW is the leader's, capped by its own LEO; it may move back after a
        # truncation (Kafka's follower HW is not monotonic across leader changes).
        self.high_watermark = max(
            self.log_start_offset, min(leader_high_watermark, self.log_end_offset)
        )

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    def follower_end_offset_for(self, epoch: int) -> tuple[int, int] | None:
        """(largest epoch <= `epoch`, its end offset) from the local cache; None if unknown."""
        found_epoch, end_offset = self.log.end_offset_for_epoch(epoch)
        if found_epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
            return None
        return found_epoch, end_offset
