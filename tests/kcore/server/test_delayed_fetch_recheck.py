"""A parked fetch woken by a move of its partition reads again only when something new may
be readable or a partition fails (Kafka's DelayedFetch.tryComplete compares offsets)."""

from kcore.common import TopicPartition
from kcore.protocol.data import FetchPartition, FetchPartitionResponse, FetchRequest
from kcore.server.purgatory import DelayedFetch

A = TopicPartition("t", 0)


def _request():
    return FetchRequest(-1, -1, 500, 1, 1 << 20, (FetchPartition("t", 0, 0, 1 << 20),))


def test_a_woken_fetch_reads_again_only_when_its_partition_may_answer_more():
    reads = []
    available = [b""]
    readable = [False]

    def read(request):
        reads.append(request)
        records = available[0]
        return (FetchPartitionResponse("t", 0, 0, records=records),), len(records), False

    fetch = DelayedFetch(_request(), read, may_read=lambda request: readable[0])
    assert not fetch.try_complete()  # the first check always reads
    assert len(reads) == 1
    assert not fetch.try_complete()  # woken, nothing new: no read
    assert len(reads) == 1 and fetch.response is None
    available[0], readable[0] = b"abc", True
    assert fetch.try_complete()
    assert len(reads) == 2 and fetch.response.partitions[0].records == b"abc"


def test_a_fetch_at_its_deadline_answers_what_it_reads_then():
    available = [b""]

    def read(request):
        records = available[0]
        return (FetchPartitionResponse("t", 0, 0, records=records),), len(records), False

    fetch = DelayedFetch(_request(), read, may_read=lambda request: False)
    assert not fetch.try_complete()
    available[0] = b"late"
    fetch.on_expiration()
    assert fetch.response.partitions[0].records == b"late"
