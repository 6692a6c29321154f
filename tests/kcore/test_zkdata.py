"""The ZooKeeper data kcore writes is byte for byte what Kafka writes (seed 003, ZkData)."""

import json

import pytest

from kcore import zkdata
from kcore.common import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)


def test_controller_znode_is_kafkas_json():
    data = zkdata.encode_controller(104, 1554349916898)
    assert data == b'{"version":1,"brokerid":104,"timestamp":"1554349916898"}'
    assert zkdata.decode_controller(data) == 104
    assert zkdata.encode_controller_epoch(17) == b"17"
    assert zkdata.decode_controller_epoch(b"17") == 17


def test_broker_registration_round_trips_with_epoch_from_czxid():
    broker = Broker(7, (EndPoint("hadoop7", 9092),), rack="r1")
    data = zkdata.encode_broker(broker, timestamp_ms=1554349917296)
    registration = json.loads(data)
    assert registration["endpoints"] == ["PLAINTEXT://hadoop7:9092"]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert (registration["host"], registration["port"], registration["version"]) == (
        "hadoop7",
        9092,
        5,
    )
    assert registration["timestamp"] == "1554349917296"
    assert zkdata.decode_broker(7, data, czxid=4242) == Broker(
        7, (EndPoint("hadoop7", 9092),), "r1", 4242
    )


def test_broker_registration_from_the_seed_decodes():
    seed = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://hadoop7:9092"],"jmx_port":9393,"host":"hadoop7",'
        b'"timestamp":"1554349917296","port":9092,"version":4}'
    )
    assert zkdata.decode_broker(103, seed).endpoints == (EndPoint("hadoop7", 9092),)


def test_topic_assignment_round_trips():
    assignment = {
        1: ReplicaAssignment((106,)),
        0: ReplicaAssignment((105, 106), adding_replicas=(106,)),
    }
    data = zkdata.encode_topic("AAAAAAAAAAAAAAAAAAAAAA", assignment)
    assert json.loads(data)["partitions"] == {"0": [105, 106], "1": [106]}
    topic_id, decoded = zkdata.decode_topic("t", data)
    assert topic_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert decoded == dict(sorted(assignment.items()))


def test_seed_topic_json_decodes():
    topic_id, assignment = zkdata.decode_topic(
        "t", b'{"version":1,"partitions":{"8":[103],"4":[109],"0":[105]}}'
    )
    assert topic_id is None
    assert assignment == {0: ReplicaAssignment((105,)), 4: ReplicaAssignment((109,)),
                          8: ReplicaAssignment((103,))}  # fmt: skip


def test_partition_state_takes_its_partition_epoch_from_the_znode_version():
    tp = TopicPartition("t", 3)
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(105, 2, (105,)), 17)
    data = zkdata.encode_partition_state(state)
    assert json.loads(data) == {
        "controller_epoch": 17,
        "leader": 105,
        "version": 1,
        "leader_epoch": 2,
        "isr": [105],
    }
    decoded = zkdata.decode_partition_state(tp, data, znode_version=5)
    assert decoded.leader_and_isr == LeaderAndIsr(105, 2, (105,), partition_epoch=5)
    assert zkdata.partition_state_path(tp) == "/brokers/topics/t/partitions/3/state"


def test_admin_and_notification_payloads_round_trip():
    partitions = {TopicPartition("b", 0), TopicPartition("a", 1)}
    for encode, decode in [
        (zkdata.encode_isr_change, zkdata.decode_isr_change),
        (zkdata.encode_preferred_replica_election, zkdata.decode_preferred_replica_election),
    ]:
        data = encode(partitions)
        assert json.loads(data)["partitions"][0] == {"topic": "a", "partition": 1}
        assert decode(data) == partitions
    reassignment = {TopicPartition("w", 1): (0, 1, 3)}
    assert zkdata.decode_reassignment(zkdata.encode_reassignment(reassignment)) == reassignment
    assert zkdata.isr_change_path() == "/isr_change_notification/isr_change_"
    assert (
        zkdata.isr_change_path("isr_change_0000000003")
        == "/isr_change_notification/isr_change_0000000003"
    )


def test_cluster_id_config_and_producer_id_block():
    assert zkdata.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert zkdata.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert zkdata.decode_config("/config/topics/t", zkdata.encode_config({"a": "1"})) == {"a": "1"}
    assert zkdata.decode_config("/config/topics/t", None) == {}
    block = zkdata.encode_producer_id_block(1, 0, 999)
    assert zkdata.decode_producer_id_block(block) == (1, 0, 999)
    assert zkdata.decode_producer_id_block(b"") is None
    with pytest.raises(ValueError, match="unknown config entity type 'nope'"):
        zkdata.config_path("nope", "x")


@pytest.mark.parametrize(
    "data, reason",
    [
        (None, "no data"),
        (b"\xff", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"leader":"1","leader_epoch":0,"isr":[1],"controller_epoch":1}', "'leader'"),
        (b'{"leader":1,"leader_epoch":0,"isr":[true],"controller_epoch":1}', "isr"),
        (b'{"leader":true,"leader_epoch":0,"isr":[1],"controller_epoch":1}', "'leader'"),
        (b'{"leader":1,"leader_epoch":0.0,"isr":[1],"controller_epoch":1}', "'leader_epoch'"),
        (b'{"leader":1,"leader_epoch":0,"isr":[1]}', "'controller_epoch'"),
    ],
)
def test_bad_partition_state_names_the_path(data, reason):
    with pytest.raises(zkdata.ZkDataError, match=reason) as raised:
        zkdata.decode_partition_state(TopicPartition("t", 0), data, 0)
    assert "/brokers/topics/t/partitions/0/state" in str(raised.value)


def test_top_level_paths_are_kafkas():
    assert zkdata.PERSISTENT_PATHS[:3] == ("/consumers", "/brokers/ids", "/brokers/topics")
    assert "/config/topics" in zkdata.PERSISTENT_PATHS
    assert "/latest_producer_id_block" in zkdata.PERSISTENT_PATHS
