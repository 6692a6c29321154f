"""Two brokers' replica managers wired by hand (no controller, no clients): LeaderAndIsr
requests are written here, produce goes straight to the leader's replica manager, and the
followers fetch over a SimNetwork. This pins the data path on its own."""

import contextlib
import errno
import random

import attrs
import trio

import transport
import zkstub
from kcore import zkdata
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.config import KafkaConfig
from kcore.log import MemoryPartitionLog, build_batch, iter_batch_records
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LiveLeader
from kcore.protocol.data import (
    FetchPartition,
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
    ProducePartitionData,
    ProduceRequest,
)
from kcore.server.apis import decode_body
from kcore.server.log_dir_failure import LogDirFailureChannel
from kcore.server.log_manager import LogManager, MemoryLogStorage
from kcore.server.replica_manager import ReplicaManager
from kcore.wire import to_wire
from kcore.zk_client import KafkaZkClient

TP = TopicPartition("t", 0)
LAG_MS = 4000


def _handlers(manager):
    async def fetch(request):
        return to_wire(await manager.fetch_messages(decode_body(FetchRequest, request)))

    async def epochs(request):
        message = decode_body(OffsetForLeaderEpochRequest, request)
        return to_wire(manager.last_offsets_for_leader_epochs(message))

    async def offsets(request):
        return to_wire(manager.list_offsets(decode_body(ListOffsetsRequest, request)))

    return {
        ApiKey.FETCH: fetch,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: epochs,
        ApiKey.LIST_OFFSETS: offsets,
    }


@contextlib.asynccontextmanager
async def _brokers(count=2, storages=None):
    """`storages`: broker id -> its MemoryLogStorage, for the brokers given one."""
    storages = storages or {}
    network = transport.SimNetwork(5)
    async with zkstub.open_server() as server, server.connect_local() as zk:
        await zk.create(zkdata.partition_state_path(TP), b"{}", make_parents=True)
        managers = {}
        async with trio.open_nursery() as nursery:
            for broker_id in range(1, count + 1):
                config = KafkaConfig.from_dict(
                    {
                        "broker.id": broker_id,
                        "zookeeper.connect": "unused:1",
                        "replica.lag.time.max.ms": LAG_MS,
                        "replica.fetch.backoff.ms": 200,
                    }
                )
                node = network.node(f"broker-{broker_id}")
                manager = ReplicaManager(
                    config,
                    broker_id,
                    KafkaZkClient(zk, lambda: 0.0),
                    LogManager(
                        ["/nonexistent"], memory=storages.get(broker_id) or MemoryLogStorage()
                    ),
                    node,
                    random.Random(broker_id),
                    broker_epoch=lambda: 1,
                    wall_clock_ms=lambda: 0,
                    log_dir_failures=LogDirFailureChannel(),
                )
                await nursery.start(manager.run)
                server_rpc = transport.RpcServer(_handlers(manager), name=f"broker-{broker_id}")
                await nursery.start(
                    node.serve, (f"broker-{broker_id}", 9092), server_rpc.handle_connection
                )
                managers[broker_id] = manager
            yield network, zk, managers
            nursery.cancel_scope.cancel()


async def _lead(zk, managers, leader, epoch, isr, replicas=(1, 2)):
    """What the controller would do: write the state znode, send LeaderAndIsr."""
    _, stat = await zk.get(zkdata.partition_state_path(TP))
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr)), 1)
    stat = await zk.set(zkdata.partition_state_path(TP), zkdata.encode_partition_state(state))
    live = tuple(LiveLeader(b, f"broker-{b}", 9092) for b in sorted(managers))
    for broker_id in replicas:
        if broker_id in managers:
            request = LeaderAndIsrRequest(
                1,
                1,
                1,
                (
                    LeaderAndIsrPartitionState(
                        "t", 0, 1, leader, epoch, tuple(isr), stat.version, tuple(replicas)
                    ),
                ),
                live,
            )
            response = await managers[broker_id].become_leader_or_follower(request)
            assert response.partition_errors[0].error_code == 0


async def _produce(manager, acks, *values):
    request = ProduceRequest(
        acks, 10_000, (ProducePartitionData("t", 0, build_batch([(0, None, v) for v in values])),)
    )
    return (await manager.append_records(request)).partitions[0]


def _records(manager):
    log = manager.partition(TP).log
    return [r.value for r in iter_batch_records(log.read(0, 1 << 20))] if log.log_end_offset else []


async def _wait(predicate, timeout=60):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.05)


async def test_acks_all_completes_once_the_follower_has_the_records(autojump_clock):
    async with _brokers() as (_network, _zk, managers):
        await _lead(_zk, managers, leader=1, epoch=0, isr=(1, 2))
        answer = await _produce(managers[1], -1, b"a", b"b")
        assert (answer.error_code, answer.base_offset) == (0, 0)
        assert managers[1].partition(TP).high_watermark == 2
        assert _records(managers[2]) == [b"a", b"b"]
        await _wait(lambda: managers[2].partition(TP).high_watermark == 2)


async def test_a_cut_off_follower_leaves_the_isr_in_zookeeper_and_returns(autojump_clock):
    async with _brokers() as (network, zk, managers):
        await _lead(zk, managers, leader=1, epoch=0, isr=(1, 2))
        await _produce(managers[1], -1, b"a")
        network.partition("broker-1", "broker-2")
        # A follower is out of sync once it falls behind new writes (Kafka: a caught-up
        # follower of an idle partition stays in the ISR).
        assert (await _produce(managers[1], 1, b"b")).error_code == 0

        async def isr():
            data, _ = await zk.get(zkdata.partition_state_path(TP))
            return list(zkdata.decode_partition_state(TP, data, 0).leader_and_isr.isr)

        with trio.fail_after(LAG_MS / 1000 * 3):
            while await isr() != [1]:
                await trio.sleep(0.1)
        network.heal()
        with trio.fail_after(60):
            while await isr() != [1, 2]:
                await trio.sleep(0.1)
        assert _records(managers[2]) == [b"a", b"b"]
        assert managers[1].isr_propagation.pending or await zk.get_children(
            "/isr_change_notification"
        )


async def test_kip101_old_leader_truncates_its_unreplicated_record(autojump_clock):
    async with _brokers() as (network, zk, managers):
        await _lead(zk, managers, leader=1, epoch=0, isr=(1, 2))
        await _produce(managers[1], -1, b"m0")
        network.partition("broker-1", "broker-2")
        assert (await _produce(managers[1], 1, b"m1")).base_offset == 1
        await _lead(zk, managers, leader=2, epoch=1, isr=(2,))
        assert (await _produce(managers[2], 1, b"m2")).base_offset == 1
        network.heal()
        await _wait(lambda: _records(managers[1]) == [b"m0", b"m2"])
        assert _records(managers[2]) == [b"m0", b"m2"]


async def test_a_stale_leader_epoch_fetch_is_fenced(autojump_clock):
    async with _brokers() as (_network, zk, managers):
        await _lead(zk, managers, leader=1, epoch=3, isr=(1, 2))
        ask = FetchPartition("t", 0, 0, 1 << 20, current_leader_epoch=2)
        stale = FetchRequest(2, 1, 0, 1, 1 << 20, (ask,))
        answer = (await managers[1].fetch_messages(stale)).partitions[0]
        assert answer.error_code == 74  # FENCED_LEADER_EPOCH


async def test_kip279_fast_double_failover_ends_with_identical_logs(autojump_clock):
    async with _brokers() as (network, zk, managers):
        await _lead(zk, managers, leader=1, epoch=0, isr=(1, 2))
        await _produce(managers[1], -1, b"m0")
        network.partition("broker-1", "broker-2")
        await _produce(managers[1], 1, b"m1")  # epoch 0, never replicated
        await _lead(zk, managers, leader=2, epoch=1, isr=(2,))
        await _produce(managers[2], 1, b"m2")  # epoch 1, never replicated
        await _lead(zk, managers, leader=1, epoch=2, isr=(1,))  # back, uncleanly
        await _produce(managers[1], 1, b"m3")
        network.heal()
        await _wait(lambda: _records(managers[2]) == [b"m0", b"m1", b"m3"])
        assert _records(managers[1]) == [b"m0", b"m1", b"m3"]
        assert managers[2].partition(TP).log.epoch_cache.entries() == [(0, 0), (2, 2)]


class _Disk(MemoryLogStorage):
    """A simulated disk whose logs are `log_type`'s."""

    def __init__(self, log_type):
        super().__init__()
        self.log_type = log_type

    def new_log(self, tp, *, segment_bytes, segment_ms):
        log = self.log_type(segment_bytes=segment_bytes, segment_ms=segment_ms)
        self.logs[tp] = log
        return log


class _FailsOnceAsFollower(MemoryPartitionLog):
    """The first follower append meets a bug (an unexpected error, not an I/O one)."""

    failures = 0

    def append_as_follower(self, batch_bytes, **kwargs):
        if not self.failures:
            self.failures += 1
            raise RuntimeError("injected fault")
        return super().append_as_follower(batch_bytes, **kwargs)


class _UnwritableAsLeader(MemoryPartitionLog):
    def append(self, batch_bytes, leader_epoch, **kwargs):
        raise OSError(errno.EIO, "Input/output error")


async def test_a_fetcher_that_fails_is_restarted_and_its_follower_catches_up(autojump_clock):
    follower_disk = _Disk(_FailsOnceAsFollower)
    async with _brokers(storages={2: follower_disk}) as (_network, zk, managers):
        await _lead(zk, managers, leader=1, epoch=0, isr=(1, 2))
        # acks=all: answered once the follower holds the records, past the fault.
        answer = await _produce(managers[1], -1, b"a", b"b")
        assert (answer.error_code, answer.base_offset) == (0, 0)
        assert follower_disk.logs[TP].failures == 1
        assert _records(managers[2]) == [b"a", b"b"]
        assert await _produce(managers[1], -1, b"c") == attrs.evolve(answer, base_offset=2)
        assert _records(managers[2]) == [b"a", b"b", b"c"]


async def test_a_log_dir_io_error_answers_kafka_storage_error_and_is_reported(autojump_clock):
    async with _brokers(storages={1: _Disk(_UnwritableAsLeader)}) as (_network, zk, managers):
        await _lead(zk, managers, leader=1, epoch=0, isr=(1, 2))
        answer = await _produce(managers[1], 1, b"a")
        assert answer.error_code == 56  # KAFKA_STORAGE_ERROR
        log_dir, cause = await managers[1].log_dir_failures.wait()
        assert log_dir == "/nonexistent" and isinstance(cause, OSError)
        # The dir is offline: its partitions answer KAFKA_STORAGE_ERROR to reads too.
        ask = FetchPartition("t", 0, 0, 1 << 20)
        fetch = await managers[1].fetch_messages(FetchRequest(-1, -1, 0, 1, 1 << 20, (ask,)))
        assert fetch.partitions[0].error_code == 56
