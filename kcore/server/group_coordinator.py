"""The group coordinator on every broker: the Trio shell around `GroupCoordinatorCore`
(Kafka's GroupCoordinator + GroupMetadataManager, `kcore/coordinator/group`).

The core decides; this shell carries out what it returns: it answers a waiting request
(`Respond`), keeps the core's timers on Trio's clock, appends group metadata and offset
commits to `__consumer_offsets` with acks=all through the replica manager and reports the
outcome back (`group_stored` / `offsets_stored`), and follows the leadership of the offsets
partitions: becoming a partition's leader loads its groups from the log (everything up to
the log end, as Kafka's loadGroupsAndOffsets reads), losing it unloads them (their clients
get NOT_COORDINATOR and find the new coordinator).

Every call into the core happens on the broker's one Trio thread with no await in between,
so the core sees one event at a time, as Kafka's group locks give it. Timestamps the core
stores (commit times, state times) come from the broker's wall clock; timers run on Trio's
clock, so a whole cluster replays under a MockClock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kcore.common import OFFSETS_TOPIC, TopicPartition
from kcore.coordinator.group import (
    AppendTombstones,
    CancelTimer,
    Effect,
    GroupCoordinatorCore,
    Respond,
    SetTimer,
    StoreGroup,
    StoreOffsets,
    TimerKey,
)
from kcore.coordinator.group.records import (
    GroupMetadataKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from kcore.coordinator.group.stored import OffsetsPartitionReplay
from kcore.log import build_batch, iter_records, parse_header
from kcore.protocol.data import ProducePartitionData, ProduceRequest

if TYPE_CHECKING:
    from kcore.server.replica_manager import ReplicaManager

logger = logging.getLogger("kcore.server.group_coordinator")

LOAD_READ_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size


@attrs.define(eq=False)
class _Answer:
    """A request waiting for the core's `Respond`."""

    done: trio.Event = attrs.field(factory=trio.Event)
    body: dict | None = None


@attrs.define(eq=False)
class GroupCoordinator:
    broker_id: int
    replica_manager: ReplicaManager
    core: GroupCoordinatorCore
    wall_clock_ms: Callable[[], int]
    partition_exists: Callable[[str, int], bool]  # OffsetCommit's check, on the metadata
    # Kafka's offsets.commit.timeout.ms: how long a store waits for its acks=all.
    commit_timeout_ms: int = 5000
    _waiting: dict[object, _Answer] = attrs.field(factory=dict)
    _timers: dict[TimerKey, float] = attrs.field(factory=dict)  # key -> Trio deadline
    _timers_changed: trio.Event = attrs.field(factory=trio.Event)
    _nursery: trio.Nursery | None = None
    _loaded: dict[int, int] = attrs.field(factory=dict)  # partition -> its leader epoch

    # -- life -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._apply(self.core.startup(self.wall_clock_ms()))
            task_status.started()
            try:
                await self._run_timers()
            finally:
                self._apply(self.core.shutdown(self.wall_clock_ms()))
                self._nursery = None

    # -- requests -------------------------------------------------------------------------

    async def handle(
        self, api_key: int, api_version: int, body: dict, client_id: str, client_host: str
    ) -> dict:
        """A group API request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
        OffsetFetch, ListGroups, DescribeGroups, DeleteGroups): its response body, once the
        core has one (a JoinGroup waits for the rebalance, a commit for its replication)."""
        token = object()
        answer = self._waiting[token] = _Answer()
        try:
            self._apply(
                self.core.handle_request(
                    api_key, api_version, body, token, now_ms=self.wall_clock_ms(),
                    client_id=client_id, client_host=client_host,
                    partition_exists=self.partition_exists,
                )
            )  # fmt: skip
            await answer.done.wait()
        finally:
            self._waiting.pop(token, None)
        assert answer.body is not None
        return answer.body

    # -- the core's effects ---------------------------------------------------------------

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Respond(token=token, body=body):
                    answer = self._waiting.get(token)
                    if answer is not None:  # else its connection went meanwhile
                        answer.body = body
                        answer.done.set()
                case SetTimer(key=key, deadline_ms=deadline_ms):
                    delay = max(0.0, (deadline_ms - self.wall_clock_ms()) / 1000)
                    self._timers[key] = trio.current_time() + delay
                    self._timers_changed.set()
                case CancelTimer(key=key):
                    self._timers.pop(key, None)
                case StoreGroup() | StoreOffsets() | AppendTombstones():
                    if self._nursery is None:  # shutting down: the core forgets it anyway
                        continue
                    self._nursery.start_soon(self._store, effect)

    async def _run_timers(self) -> None:
        while True:
            changed = self._timers_changed = trio.Event()
            if not self._timers:
                await changed.wait()
                continue
            with trio.move_on_at(min(self._timers.values())):
                await changed.wait()
            now = trio.current_time()
            for key in [k for k, deadline in self._timers.items() if deadline <= now]:
                del self._timers[key]
                self._apply(self.core.on_timer(key, self.wall_clock_ms()))

    async def _store(self, effect: StoreGroup | StoreOffsets | AppendTombstones) -> None:
        now_ms = self.wall_clock_ms()
        records: list[tuple[int, bytes, bytes | None]] = []
        match effect:
            case StoreGroup():
                key = encode_key(GroupMetadataKey(effect.group_id))
                records.append((now_ms, key, encode_group_value(effect.value)))
            case StoreOffsets():
                for (topic, partition), value in effect.offsets:
                    key = encode_key(OffsetKey(effect.group_id, topic, partition))
                    records.append((now_ms, key, encode_offset_value(value)))
            case AppendTombstones():
                for topic, partition in effect.offsets:
                    key = encode_key(OffsetKey(effect.group_id, topic, partition))
                    records.append((now_ms, key, None))
                if effect.group_metadata:
                    records.append((now_ms, encode_key(GroupMetadataKey(effect.group_id)), None))
        acks = 1 if isinstance(effect, AppendTombstones) else -1
        request = ProduceRequest(
            acks, self.commit_timeout_ms,
            (ProducePartitionData(OFFSETS_TOPIC, effect.partition, build_batch(records)),),
        )  # fmt: skip
        response = await self.replica_manager.append_records(request)
        answer = response.partitions[0]
        if answer.error_code:
            logger.info("Appending to %s-%d for group %s failed with error %d",
                        OFFSETS_TOPIC, effect.partition, effect.group_id,
                        answer.error_code)  # fmt: skip
        now_ms = self.wall_clock_ms()
        match effect:
            case StoreGroup():
                self._apply(self.core.group_stored(effect.write_id, answer.error_code, now_ms))
            case StoreOffsets():
                offset = answer.base_offset if not answer.error_code else None
                self._apply(self.core.offsets_stored(effect.write_id, answer.error_code,
                                                     now_ms, record_offset=offset))  # fmt: skip

    # -- leadership of the offsets partitions ---------------------------------------------

    def on_leadership_change(
        self, leaders: dict[TopicPartition, int], followers: list[TopicPartition]
    ) -> None:
        """Called by the replica manager after a LeaderAndIsr (and with `followers` for the
        partitions it stopped hosting): loads the groups of each offsets partition this
        broker now leads, unloads those of the ones it no longer does."""
        now_ms = self.wall_clock_ms()
        # Only the offsets topic's partitions matter: picked out before sorting, since a
        # LeaderAndIsr may carry thousands of others.
        for tp in sorted(tp for tp in followers if tp.topic == OFFSETS_TOPIC):
            if self._loaded.pop(tp.partition, None) is not None:
                logger.info("Unloading the groups of %s (no longer its leader)", tp)
                self._apply(self.core.unload_groups(tp.partition, now_ms))
        offsets_leaders = [
            (tp, epoch) for tp, epoch in leaders.items() if tp.topic == OFFSETS_TOPIC
        ]
        for tp, leader_epoch in sorted(offsets_leaders):
            if self._loaded.get(tp.partition) == leader_epoch:
                continue
            self._loaded[tp.partition] = leader_epoch
            self._load(tp, leader_epoch, now_ms)

    def _load(self, tp: TopicPartition, leader_epoch: int, now_ms: int) -> None:
        self._apply(self.core.begin_loading(tp.partition, leader_epoch))
        partition = self.replica_manager.partition(tp)
        replay = OffsetsPartitionReplay()
        records = 0
        if partition is not None:
            offset = partition.log_start_offset
            while offset < partition.log_end_offset:
                batches = partition.read(offset, LOAD_READ_BYTES, up_to_high_watermark=False)
                if not batches:
                    break
                for batch in batches:
                    for record in iter_records(batch):
                        self._replay(replay, record)
                        records += 1
                    offset = parse_header(batch).next_offset
        groups = replay.loaded_groups()
        for loaded in groups:
            self._apply(self.core.load_group(loaded, now_ms))
        self._apply(self.core.finish_loading(tp.partition, now_ms))
        logger.info("Loaded %d groups from %d records of %s (leader epoch %d)",
                    len(groups), records, tp, leader_epoch)  # fmt: skip

    @staticmethod
    def _replay(replay: OffsetsPartitionReplay, record: Any) -> None:
        if record.key is None:
            return
        key = decode_key(record.key)
        if isinstance(key, OffsetKey):
            value = decode_offset_value(record.value)
            replay.offset_commit(key.group, key.topic, key.partition, value, record.offset)
        elif isinstance(key, GroupMetadataKey):
            replay.group_metadata(key.group, decode_group_value(record.value))
