"""What a broker does with control requests before any replica work: epoch checks (and,
beyond Kafka, a newer controller epoch verified in ZooKeeper), the metadata cache; and
the control requests an attacker forges with nothing but a socket, refused."""

import contextlib
import json
import logging

import trio

import transport
from kcore.common import LEADER_DURING_DELETE, Broker, EndPoint, TopicPartition
from kcore.errors import StaleBrokerEpochError, StaleControllerEpochError
from kcore.protocol.api_keys import ApiKey
from kcore.protocol.control import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kcore.server.control_requests import (
    Claim,
    Verdict,
    VerifiedController,
    claim_refusal,
    control_request_error,
    zookeeper_may_lag,
)
from kcore.server.metadata_cache import MetadataCache
from kcore.testing import BROKER_PORT, ZK_NODE, broker_node, open_cluster
from kcore.wire import from_wire, to_wire

from ._replication_checks import replica_records, wait_for, wait_for_identical_replicas


def _check(broker_epoch_in_request, controller_epoch_in_request):
    return control_request_error(
        broker_epoch_in_request=broker_epoch_in_request,
        current_broker_epoch=100,
        controller_epoch_in_request=controller_epoch_in_request,
        current_controller_epoch=5,
    )


def test_a_request_for_an_earlier_incarnation_is_refused():
    assert _check(99, 5) == StaleBrokerEpochError.code


def test_a_newer_broker_epoch_or_an_unknown_one_is_accepted():
    assert _check(101, 5) == 0
    assert _check(-1, 5) == 0


def test_an_older_controller_is_refused_and_the_current_or_a_newer_accepted():
    assert _check(100, 4) == StaleControllerEpochError.code
    assert _check(100, 5) == 0
    assert _check(100, 6) == 0


def _state(topic, partition, leader):
    return UpdateMetadataPartitionState(topic, partition, 3, leader, 1, (1, 2), 0, (1, 2))


def test_update_metadata_replaces_brokers_and_merges_partitions():
    cache = MetadataCache(broker_id=1)
    broker = Broker(2, (EndPoint("broker-2", 9092),))
    first = UpdateMetadataRequest(
        1,
        3,
        10,
        (_state("a", 0, 1), _state("a", 1, 2)),
        (UpdateMetadataBroker.from_broker(broker),),
    )
    assert cache.update(first) == []
    assert (cache.controller_id, cache.controller_epoch) == (1, 3)
    assert cache.alive_broker(2) == broker
    assert cache.leader_of(TopicPartition("a", 1)) == 2
    second = UpdateMetadataRequest(2, 4, 10, (_state("a", 1, 1),), ())
    cache.update(second)
    assert cache.leader_of(TopicPartition("a", 0)) == 1  # not in the request: kept
    assert cache.leader_of(TopicPartition("a", 1)) == 1
    assert cache.alive_broker(2) is None  # the live broker list is replaced


def test_leader_during_delete_removes_the_partition():
    cache = MetadataCache(broker_id=1)
    cache.update(UpdateMetadataRequest(1, 1, 1, (_state("t", 0, 1),), (), {"t": "id-t"}))
    deleted = cache.update(
        UpdateMetadataRequest(1, 1, 1, (_state("t", 0, LEADER_DURING_DELETE),), ())
    )
    assert deleted == [TopicPartition("t", 0)]
    assert cache.topics() == [] and "t" not in cache.topic_ids


# -- beyond Kafka: a newer controller epoch is verified in ZooKeeper -----------------------


def test_a_newer_epoch_is_verified_and_the_verified_one_is_the_verified_controllers_only():
    verified = VerifiedController()
    assert verified.verdict(Claim(2, 1)) == Verdict.VERIFY
    verified.verified(Claim(2, 1))
    assert verified.verdict(Claim(2, 1)) == Verdict.OBEY
    assert verified.verdict(Claim(3, 1)) == Verdict.REFUSE  # another broker at that epoch
    assert verified.verdict(Claim(2, 0)) == Verdict.REFUSE  # an older epoch
    assert verified.verdict(Claim(3, 2)) == Verdict.VERIFY
    verified.verified(Claim(9, 0))  # never backwards
    assert (verified.epoch, verified.controller_id) == (1, 2)


def test_zookeeper_confirms_a_claim_only_with_that_epoch_and_that_controller():
    assert claim_refusal(Claim(2, 5), 2, 5) is None
    assert "holds 4" in claim_refusal(Claim(2, 5), 2, 4)
    assert "holds nothing" in claim_refusal(Claim(2, 5), None, None)
    assert "names broker 3" in claim_refusal(Claim(2, 5), 3, 5)
    assert "names broker nothing" in claim_refusal(Claim(2, 5), None, 5)
    # An answer older than the claim may be a lagging ZooKeeper server's: read again.
    assert zookeeper_may_lag(Claim(2, 5), 4) and zookeeper_may_lag(Claim(2, 5), None)
    assert not zookeeper_may_lag(Claim(2, 5), 5) and not zookeeper_may_lag(Claim(2, 5), 6)


_INT32_MAX = 2**31 - 1
TP = TopicPartition("t", 0)
RECORDS = [b"acknowledged-%d" % i for i in range(5)]


@contextlib.asynccontextmanager
async def _cluster_with_acknowledged_data(seed):
    async with open_cluster(brokers=3, seed=seed) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=3)
        async with cluster.producer(acks="all") as producer:
            for value in RECORDS:
                await producer.send_and_wait("t", value, partition=0)
        await wait_for_identical_replicas(cluster, TP, [1, 2, 3])
        yield cluster


@contextlib.asynccontextmanager
async def _attacker(cluster, broker_id):
    """A raw transport connection to a broker's port, as anyone on the network can open."""
    async with transport.open_rpc_connection(
        cluster.network.node("attacker"),
        (broker_node(broker_id), BROKER_PORT),
        client_id="attacker",
    ) as connection:
        yield connection


async def _send(connection, api_key, request, response_type):
    response = await connection.request(api_key, to_wire(request))
    assert response.error_code == 0
    return from_wire(response_type, response.body)


async def _public_epochs(cluster, broker_id):
    """What an attacker reads from an open ZooKeeper: the controller and its epoch, and the
    broker's epoch (its registration's czxid)."""
    data, _ = await cluster.zk.get("/controller_epoch")
    data_controller, _ = await cluster.zk.get("/controller")
    _, stat = await cluster.zk.get(f"/brokers/ids/{broker_id}")
    return json.loads(data_controller)["brokerid"], int(data), stat.czxid


async def _consumed(cluster):
    async with cluster.consumer() as consumer:
        consumer.assign([("t", 0)])
        consumer.seek_to_beginning()
        values = []
        with trio.fail_after(30):
            while len(values) < len(RECORDS):
                values.extend(r.value for r in await consumer.poll(timeout=1.0))
        return values


async def _still_controlled(cluster, controller):
    """The real controller still commands every broker: a topic created now is hosted, led
    and served everywhere it is placed."""
    async with cluster.admin() as admin:
        await admin.create_topic("after", partitions=3, replication_factor=3)
    async with cluster.producer(acks="all") as producer:
        for partition in range(3):
            await producer.send_and_wait("after", b"v", partition=partition)
    epoch = cluster.brokers[controller].controller.epoch
    for broker in cluster.brokers.values():
        assert broker.replica_manager.controller_epoch == epoch
        assert broker.metadata_cache.controller_epoch == epoch
        assert broker.replica_manager.partition(TopicPartition("after", 0)) is not None


async def test_forged_stop_replica_and_leader_and_isr_with_newer_epochs_are_refused(
    autojump_clock, caplog
):
    caplog.set_level(logging.WARNING, logger="kcore.server.controller_epochs")
    async with _cluster_with_acknowledged_data(seed=41) as cluster:
        controller = cluster.controller_id()
        for broker_id in (1, 2, 3):
            _, epoch, broker_epoch = await _public_epochs(cluster, broker_id)
            async with _attacker(cluster, broker_id) as attacker:
                for forged_epoch in (epoch + 1, _INT32_MAX):
                    for claimed_controller in (controller, broker_id):
                        stop = StopReplicaRequest(
                            claimed_controller, forged_epoch, broker_epoch,
                            (StopReplicaPartitionState("t", 0, -2, True),),
                        )  # fmt: skip
                        answer = await _send(
                            attacker, ApiKey.STOP_REPLICA, stop, StopReplicaResponse
                        )
                        assert answer.error_code == StaleControllerEpochError.code
                # Leadership to the attacker's broker id, followers fetching from a made-up
                # address.
                state = LeaderAndIsrPartitionState("t", 0, _INT32_MAX, 99, 1000, (99,), 1000,
                                                   (1, 2, 3, 99))  # fmt: skip
                forged = LeaderAndIsrRequest(
                    controller, _INT32_MAX, broker_epoch, (state,),
                    (LiveLeader(99, "attacker.example", 9092),),
                )  # fmt: skip
                answer = await _send(attacker, ApiKey.LEADER_AND_ISR, forged, LeaderAndIsrResponse)
                assert answer.error_code == StaleControllerEpochError.code
            # The broker's epoch did not move: the real controller is not locked out.
            assert cluster.brokers[broker_id].replica_manager.controller_epoch == epoch
        refusals = [r.getMessage() for r in caplog.records if "refuses" in r.getMessage()]
        assert any(
            f"claiming controller {controller} at epoch {_INT32_MAX}" in m and "attacker" in m
            for m in refusals
        )
        assert await _consumed(cluster) == RECORDS
        for broker_id in (1, 2, 3):
            assert replica_records(cluster.brokers[broker_id], TP) == list(enumerate(RECORDS))
        await _still_controlled(cluster, controller)


async def test_forged_update_metadata_cannot_poison_what_clients_are_told(autojump_clock):
    async with _cluster_with_acknowledged_data(seed=43) as cluster:
        controller = cluster.controller_id()
        _, _, broker_epoch = await _public_epochs(cluster, 1)
        made_up = Broker(1, (EndPoint("attacker.example", 9092),))
        forged = UpdateMetadataRequest(
            controller, _INT32_MAX, broker_epoch, (_state("t", 0, 1),),
            (UpdateMetadataBroker.from_broker(made_up),),
        )  # fmt: skip
        async with _attacker(cluster, 1) as attacker:
            answer = await _send(attacker, ApiKey.UPDATE_METADATA, forged, UpdateMetadataResponse)
        assert answer.error_code == StaleControllerEpochError.code
        async with cluster.admin() as admin:
            described = await admin.describe_cluster()
        assert "attacker.example" not in repr(described)
        assert cluster.brokers[1].metadata_cache.alive_broker(1).endpoints[0].host == "broker-1"
        await _still_controlled(cluster, controller)


async def test_a_forged_controlled_shutdown_cannot_empty_a_healthy_broker(autojump_clock):
    async with _cluster_with_acknowledged_data(seed=47) as cluster:
        controller = cluster.controller_id()
        victim = next(b for b in (1, 2, 3) if b != controller)
        async with cluster.admin() as admin:
            await admin.create_topic("led", partitions=6, replication_factor=2)
            before = await admin.describe_topic("led")
        led_by_victim = [p.partition for p in before.partitions if p.leader == victim]
        assert led_by_victim
        _, _, victim_epoch = await _public_epochs(cluster, victim)
        async with _attacker(cluster, controller) as attacker:
            for forged_epoch in (-1, victim_epoch - 1, victim_epoch + 1):
                answer = await _send(
                    attacker,
                    ApiKey.CONTROLLED_SHUTDOWN,
                    ControlledShutdownRequest(victim, forged_epoch),
                    ControlledShutdownResponse,
                )
                assert answer.error_code == StaleBrokerEpochError.code
        async with cluster.admin() as admin:
            after = await admin.describe_topic("led")
        assert [p.partition for p in after.partitions if p.leader == victim] == led_by_victim
        assert after.partitions == before.partitions
        # The victim is no shutting-down broker: new topics still place replicas on it.
        async with cluster.admin() as admin:
            await admin.create_topic("placed", partitions=3, replication_factor=3)
            placed = await admin.describe_topic("placed")
        assert all(victim in p.isr for p in placed.partitions)


async def test_a_controller_failover_is_obeyed_once_zookeeper_confirms_it(autojump_clock, caplog):
    """The new controller's epoch is newer than any broker has seen: each one checks it in
    ZooKeeper. One that cannot reach ZooKeeper then closes the controller's connection
    unanswered, and obeys the retry once ZooKeeper answers again."""
    caplog.set_level(logging.WARNING, logger="kcore.server.controller_epochs")
    async with _cluster_with_acknowledged_data(seed=53) as cluster:
        old = cluster.controller_id()
        old_epoch = cluster.controller_epoch()
        cut_off = next(b for b in (1, 2, 3) if b != old)
        cluster.network.partition(broker_node(cut_off), ZK_NODE)
        await cluster.expire_session(old)
        await wait_for(lambda: (cluster.controller_epoch() or 0) > old_epoch, timeout=30)
        new = cluster.controller_id()
        new_epoch = cluster.controller_epoch()
        assert new != cut_off
        await wait_for(
            lambda: any("ZooKeeper did not answer" in r.getMessage() for r in caplog.records),
            timeout=30,
        )
        assert cluster.brokers[cut_off].replica_manager.controller_epoch == old_epoch
        cluster.network.heal()

        def obeyed():
            return all(
                b.replica_manager.controller_epoch == new_epoch
                and b.metadata_cache.controller_id == new
                for b in cluster.brokers.values()
            )

        await wait_for(obeyed, timeout=30)
        assert not [r for r in caplog.records if "refuses" in r.getMessage()]
        assert await _consumed(cluster) == RECORDS
        await _still_controlled(cluster, new)
