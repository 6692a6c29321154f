"""KafkaZkClient's broker-side operations: the session, the admin writes, topic configs, and
a leader's own ISR write across a lost connection (sent again once connected, and a first
attempt that did apply is recognised as ours: Kafka's conditionalUpdatePath checker)."""

import random

import pytest
import trio

import transport
import zkstub
from kcore import errors, zkdata
from kcore.common import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kcore.zk_client import KafkaZkClient, ZooKeeperError, open_kafka_zk_client

TP = TopicPartition("t", 0)
PROPOSED = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 1), 1)


def _stat(version):
    return zkstub.Stat(0, 0, 0, 0, version, 0, 0, 0, 0, 0, 0)


class _Znode:
    """One state znode whose next `set` replies with a lost connection, the write having
    applied (`applied=True`) or not."""

    def __init__(self, *, applied):
        before = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 1), 1)
        self.data, self.version = zkdata.encode_partition_state(before), 1
        self.applied = applied
        self.lose_next_reply = True
        self.lose_next_read = applied  # still disconnected when the check reads

    async def set(self, path, data, version):
        if version != self.version:
            raise zkstub.BadVersionError(path)
        if self.lose_next_reply:
            self.lose_next_reply = False
            if self.applied:
                self.data, self.version = data, self.version + 1
            raise zkstub.ConnectionLossError("reply lost")
        self.data, self.version = data, self.version + 1
        return _stat(self.version)

    async def get(self, path):
        if self.lose_next_read:
            self.lose_next_read = False
            raise zkstub.ConnectionLossError("still disconnected")
        return self.data, _stat(self.version)


def _client(zk):
    return KafkaZkClient(zk, clock=lambda: 0.0)


async def test_a_write_whose_reply_was_lost_is_found_applied(autojump_clock):
    znode = _Znode(applied=True)
    assert await _client(znode).conditional_update_partition_state(TP, PROPOSED, 1) == 2
    assert znode.version == 2


async def test_a_write_lost_with_the_connection_is_sent_again(autojump_clock):
    znode = _Znode(applied=False)
    assert await _client(znode).conditional_update_partition_state(TP, PROPOSED, 1) == 2
    assert znode.version == 2


async def test_a_write_on_a_stale_partition_epoch_is_refused(autojump_clock):
    znode = _Znode(applied=False)
    znode.lose_next_reply = False
    znode.version = 5  # the controller changed the partition meanwhile
    assert await _client(znode).conditional_update_partition_state(TP, PROPOSED, 1) is None


@pytest.fixture
async def zk_client():
    async with zkstub.open_server() as server, server.connect_local() as zk:
        client = _client(zk)
        await client.create_top_level_paths()
        yield client


async def test_a_topic_is_created_with_its_config_first(zk_client):
    await zk_client.create_topic("t", "id-1", {0: [1, 2], 1: (2, 1)}, {"retention.ms": "5"})
    assert await zk_client.read_topic_configs("t") == {"retention.ms": "5"}
    topic_id, assignment = await zk_client.get_replica_assignment("t")
    assert topic_id == "id-1"
    assert {p: a.replicas for p, a in assignment.items()} == {0: (1, 2), 1: (2, 1)}
    with pytest.raises(errors.TopicAlreadyExistsError):
        await zk_client.create_topic("t", "id-2", {0: [1]}, {})


async def test_a_topic_without_overrides_reads_an_empty_config(zk_client):
    assert await zk_client.read_topic_configs("absent") == {}


async def test_marking_a_topic_for_deletion_twice_is_one_mark(zk_client):
    await zk_client.mark_topic_for_deletion("t")
    await zk_client.mark_topic_for_deletion("t")
    assert await zk_client.zk.get_children(zkdata.DELETE_TOPICS) == ["t"]


async def test_producer_id_blocks_follow_each_other(zk_client):
    first = await zk_client.allocate_producer_id_block(1)
    second = await zk_client.allocate_producer_id_block(2)
    assert first == (0, zkdata.PRODUCER_ID_BLOCK_SIZE - 1)
    assert second == (zkdata.PRODUCER_ID_BLOCK_SIZE, 2 * zkdata.PRODUCER_ID_BLOCK_SIZE - 1)


async def test_an_isr_change_notification_names_its_partitions(zk_client):
    await zk_client.create_isr_change_notification([TP, TopicPartition("u", 3)])
    names = await zk_client.get_isr_change_notifications()
    assert len(names) == 1
    assert await zk_client.read_isr_change_notifications(names) == {TP, TopicPartition("u", 3)}


async def test_an_update_that_lost_to_another_writer_reads_as_none(zk_client):
    await zk_client.create_topic("t", "id-1", {0: [1]}, {})
    _, epoch_zk_version = await zk_client.register_controller_and_increment_controller_epoch(1)
    created = await zk_client.create_partition_states({TP: PROPOSED}, epoch_zk_version)
    assert created == {TP: None}
    assert await zk_client.conditional_update_partition_state(TP, PROPOSED, 0) == 1
    # Written on the same version by someone else, with another ISR: not ours.
    other = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 1)
    assert await zk_client.conditional_update_partition_state(TP, other, 0) is None


def _connect(server_address, network):
    return open_kafka_zk_client(
        f"{server_address[0]}:{server_address[1]}",
        session_timeout=6.0,
        connect_timeout=6.0,
        network=network,
        rng=random.Random(0),
        clock=lambda: 0.0,
    )


async def test_a_closed_session_takes_its_ephemerals_at_once(autojump_clock):
    network = transport.SimNetwork(0)
    async with (
        zkstub.open_server(network=network.node("zk"), address=("zk", 2181)) as server,
        server.connect_local() as observer,
    ):
        async with _connect(server.address, network.node("b1")) as client:
            assert client.session_id != 0
            await client.zk.create("/e", b"", ephemeral=True)
            await client.close()
        assert await observer.exists("/e") is None


async def test_an_aborted_session_keeps_its_ephemerals_until_it_expires(autojump_clock):
    network = transport.SimNetwork(0)
    async with (
        zkstub.open_server(network=network.node("zk"), address=("zk", 2181)) as server,
        server.connect_local() as observer,
    ):
        with trio.CancelScope() as crashed:
            async with _connect(server.address, network.node("b1")) as client:
                await client.zk.create("/e", b"", ephemeral=True)
                client.abort()
                crashed.cancel()
        gone = trio.Event()
        assert await observer.exists("/e", watch=lambda _event: gone.set()) is not None
        await gone.wait()  # when the session expires


def test_zookeeper_errors_are_zkstubs():
    assert issubclass(zkstub.NoNodeError, ZooKeeperError)


def _broker(broker_id):
    from kcore.common import Broker, EndPoint

    return Broker(broker_id, (EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT"),))


async def test_a_restarted_broker_waits_for_its_crashed_registration_to_expire(autojump_clock):
    # kill -9, then a quick restart: the old session's /brokers/ids/1 is still there.
    async with zkstub.open_server(tick_time=1.0) as server:
        async with server.connect_local(session_timeout=4.0) as crashed:
            await _client(crashed).create_top_level_paths()
            await _client(crashed).register_broker(_broker(1))
            async with server.connect_local(session_timeout=4.0) as restarted:

                async def crashed_session_expires_a_second_later():
                    await trio.sleep(1.0)
                    await server.expire_session(crashed.session_id)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(crashed_session_expires_a_second_later)
                    epoch = await _client(restarted).register_broker(_broker(1))
                    registered_at = trio.current_time()
                assert registered_at >= 1.0  # it waited for the old registration to go
                _, stat = await restarted.get("/brokers/ids/1")
                assert (stat.ephemeralOwner, stat.czxid) == (restarted.session_id, epoch)


async def test_a_registration_held_by_a_live_session_is_refused_after_the_wait(autojump_clock):
    async with zkstub.open_server(tick_time=1.0) as server:
        async with server.connect_local(session_timeout=4.0) as other:
            await _client(other).create_top_level_paths()
            await _client(other).register_broker(_broker(1))
            async with server.connect_local(session_timeout=4.0) as second:
                with pytest.raises(zkstub.NodeExistsError, match="same id"):
                    await _client(second).register_broker(_broker(1))
