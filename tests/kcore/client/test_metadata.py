"""Building the client's cluster view from MetadataResponse."""

import logging
import math
import random

from kcore.client._metadata import Cluster, MetadataManager
from kcore.common import TopicPartition
from kcore.protocol.data import MetadataBroker, MetadataPartition, MetadataResponse, MetadataTopic


def response(topics, brokers=(1, 2)):
    return MetadataResponse(
        tuple(MetadataBroker(b, f"broker-{b}", 9092) for b in brokers), 2, tuple(topics), "c1"
    )


def test_cluster_from_response():
    cluster, topic_errors = Cluster.from_response(
        response(
            [
                MetadataTopic(
                    "t",
                    0,
                    (
                        MetadataPartition(1, 5, -1, 3, (1, 2), (1,), (2,)),
                        MetadataPartition(0, 0, 2, 7, (2, 1), (2, 1)),
                    ),
                    "id-t",
                ),
                MetadataTopic("gone", 3),
            ]
        )
    )
    assert topic_errors == {"gone": 3}
    assert cluster.controller_id == 2 and cluster.cluster_id == "c1"
    assert cluster.address_of(1) == ("broker-1", 9092)
    topic = cluster.topic("t")
    assert [p.partition for p in topic.partitions] == [0, 1]  # sorted
    assert cluster.leader_for(TopicPartition("t", 0)) == 2
    assert cluster.leader_epoch(TopicPartition("t", 0)) == 7
    assert cluster.leader_for(TopicPartition("t", 1)) is None
    assert topic.partitions[1].offline_replicas == (2,)
    assert topic.available_partitions() == (0,)
    assert cluster.leader_for(TopicPartition("t", 2)) is None
    assert cluster.topic("gone") is None


def test_leader_not_in_brokers_counts_as_none():
    cluster, _ = Cluster.from_response(
        response([MetadataTopic("t", 0, (MetadataPartition(0, 0, 9, 1, (9,), (9,)),))])
    )
    assert cluster.leader_for(TopicPartition("t", 0)) is None


def test_merge_keeps_topics_not_asked_about():
    old, _ = Cluster.from_response(
        response([MetadataTopic("a", 0, (MetadataPartition(0, 0, 1, 0, (1,), (1,)),))])
    )
    newer, _ = Cluster.from_response(
        response([MetadataTopic("b", 0, (MetadataPartition(0, 0, 2, 0, (2,), (2,)),))])
    )
    assert sorted(old.merged(newer, ["b"]).topics) == ["a", "b"]
    assert sorted(old.merged(newer, ["a", "b"]).topics) == ["b"]  # "a" was asked: gone
    assert sorted(old.merged(newer, None).topics) == ["b"]


def one_partition(leader, epoch, topic_id="id-t"):
    cluster, _ = Cluster.from_response(
        response(
            [
                MetadataTopic(
                    "t", 0, (MetadataPartition(0, 0, leader, epoch, (1, 2), (1, 2)),), topic_id
                )
            ]
        )
    )
    return cluster


def test_merge_keeps_a_partition_whose_answer_has_an_older_leader_epoch():
    # Kafka's Metadata.updateLatestMetadata: a broker whose cache lags names an old leader.
    known = one_partition(leader=2, epoch=1)
    for requested in (["t"], None):
        merged = known.merged(one_partition(leader=1, epoch=0), requested)
        assert merged.leader_for(TopicPartition("t", 0)) == 2
        assert merged.leader_epoch(TopicPartition("t", 0)) == 1
    # The same epoch or a newer one is taken (the ISR may have changed).
    assert known.merged(one_partition(leader=2, epoch=1), ["t"]).topic("t").partitions[0].isr
    assert (
        known.merged(one_partition(leader=1, epoch=2), None).leader_epoch(TopicPartition("t", 0))
        == 2
    )


def test_merge_takes_a_recreated_topics_partitions_whatever_their_epochs():
    known = one_partition(leader=2, epoch=5, topic_id="id-old")
    merged = known.merged(one_partition(leader=1, epoch=0, topic_id="id-new"), ["t"])
    assert merged.leader_for(TopicPartition("t", 0)) == 1


class AnswersInTurn:
    """Connections whose metadata requests get `answers` in turn, whichever broker."""

    def __init__(self, *answers):
        self.answers = list(answers)

    async def request(self, address, api_key, request, response_type, timeout):
        return self.answers.pop(0)

    def backing_off_until(self, address):
        return -math.inf

    def in_flight(self, address):
        return 0


def manager(*answers):
    return MetadataManager(
        AnswersInTurn(*answers),
        [("broker-1", 9092)],
        rng=random.Random(0),
        retry_backoff=0.0,
        request_timeout=1.0,
        logger=logging.getLogger("test"),
    )


def answer(leader, epoch):
    return response(
        [MetadataTopic("t", 0, (MetadataPartition(0, 0, leader, epoch, (1, 2), (1, 2)),), "id-t")]
    )


async def test_an_epoch_seen_elsewhere_makes_older_metadata_name_no_leader():
    # KIP-320: a committed offset written at leader epoch 2 means a broker whose cache says
    # epoch 0 is behind, even when this client never had metadata of the partition.
    tp = TopicPartition("t", 0)
    metadata = manager(answer(leader=1, epoch=0), answer(leader=1, epoch=0), answer(2, 2))
    assert metadata.update_last_seen_epoch_if_newer(tp, 2)
    assert (await metadata.refresh(["t"])).leader_for(tp) is None
    await metadata.refresh(["t"])
    assert metadata.cluster.leader_for(tp) is None
    assert (await metadata.refresh(["t"])).leader_for(tp) == 2
    # Not newer than what the metadata says: nothing changes.
    assert not metadata.update_last_seen_epoch_if_newer(tp, 1)
    assert metadata.cluster.leader_for(tp) == 2


async def test_an_epoch_seen_elsewhere_hides_a_known_older_leader_until_a_refresh():
    tp = TopicPartition("t", 0)
    metadata = manager(answer(leader=1, epoch=0), answer(leader=2, epoch=3))
    await metadata.refresh(["t"])
    assert metadata.cluster.leader_for(tp) == 1
    assert metadata.update_last_seen_epoch_if_newer(tp, 3)
    assert metadata.cluster.leader_for(tp) is None
    assert (await metadata.refresh(["t"])).leader_for(tp) == 2


class Loads(AnswersInTurn):
    """Connections with requests in flight to some brokers, and one backing off."""

    def __init__(self, in_flight, backing_off):
        super().__init__()
        self.loads, self.backing_off = in_flight, backing_off

    def backing_off_until(self, address):
        return math.inf if address in self.backing_off else -math.inf

    def in_flight(self, address):
        return self.loads.get(address, 0)


def test_metadata_goes_to_the_least_loaded_broker_and_a_backing_off_one_last():
    # Kafka's leastLoadedNode: a broker answers a connection's requests in order, so a
    # Metadata request behind a parked acks=all produce waits as long as it does.
    addresses = [(f"broker-{n}", 9092) for n in (1, 2, 3, 4)]
    loads = Loads({addresses[0]: 0, addresses[1]: 3, addresses[2]: 1}, {addresses[3]})
    metadata = MetadataManager(
        loads, addresses, rng=random.Random(0), retry_backoff=0.0, request_timeout=1.0,
        logger=logging.getLogger("test"),
    )  # fmt: skip
    assert metadata._candidates() == [addresses[0], addresses[2], addresses[1], addresses[3]]
