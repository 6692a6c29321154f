"""RequestMetrics' RequestQueueTimeMs and ResponseSendTimeMs: the transport says when it read
a request, started its handler, had its answer and had written it (`request.timing`), and the
broker's RequestMetrics turn that into Kafka's per-request-type histograms."""

import math
import random

import trio

import transport
from actors import MetricsRegistry
from kcore.metrics import exposition, prometheus_registry
from kcore.metrics._requests import RequestMetrics
from kcore.testing import open_cluster, poll_until

REQUESTS = 4


def _histogram(registry, name, request):
    return registry.get(f"kafka.network:type=RequestMetrics,name={name},request={request}")


async def test_a_request_waiting_behind_others_counts_that_wait_as_queue_time(autojump_clock):
    registry = MetricsRegistry()

    async def produce(request):
        await trio.sleep(0.010)
        return request.body

    # An ordered server runs a connection's requests one at a time: the n-th waits for the
    # n-1 before it, 10 ms each.
    server = transport.RpcServer(
        RequestMetrics(registry).instrument({0: produce}, kafka_protocol=False),
        name="broker",
        ordered=True,
    )
    network = transport.SimNetwork(1, latency=(0.0, 0.0))
    async with trio.open_nursery() as nursery:
        await nursery.start(
            network.node("broker").serve, ("broker", 9092), server.handle_connection
        )
        async with transport.open_rpc_client(
            network.node("client"), ("broker", 9092), client_id="c", rng=random.Random(0)
        ) as client:
            answers = []

            async def send(n):
                answers.append((await client.request(0, n)).body)

            async with trio.open_nursery() as senders:
                for n in range(REQUESTS):
                    senders.start_soon(send, n)
                    await trio.lowlevel.checkpoint()  # sent in this order
        sent = _histogram(registry, "ResponseSendTimeMs", "Produce")
        await poll_until(lambda: sent is not None and sent.count == REQUESTS)
        nursery.cancel_scope.cancel()

    assert sorted(answers) == list(range(REQUESTS))
    queued = _histogram(registry, "RequestQueueTimeMs", "Produce")
    total = _histogram(registry, "TotalTimeMs", "Produce")
    local = _histogram(registry, "LocalTimeMs", "Produce")
    assert queued.count == total.count == local.count == REQUESTS
    assert (queued.min, queued.max) == (0.0, (REQUESTS - 1) * 10.0)
    # TotalTimeMs counts the wait too: the last request was read at once and answered last.
    assert math.isclose(total.max, REQUESTS * 10.0)
    assert math.isclose(local.max, 10.0)
    assert sent.min >= 0.0


async def test_a_brokers_produce_requests_have_queue_and_send_times(autojump_clock):
    async with open_cluster(brokers=1, seed=3) as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            await admin.create_topic("t", partitions=1, replication_factor=1)
        async with cluster.producer(acks=1) as producer:
            for n in range(REQUESTS):
                await producer.send_and_wait("t", b"v%d" % n, partition=0)
        registry = cluster.brokers[1].metrics
        sent = _histogram(registry, "ResponseSendTimeMs", "Produce")
        await poll_until(lambda: sent is not None and sent.count == REQUESTS)
        queued = _histogram(registry, "RequestQueueTimeMs", "Produce")
        assert queued.count == _histogram(registry, "TotalTimeMs", "Produce").count == REQUESTS
        assert queued.min >= 0.0 and sent.min >= 0.0
        text = exposition(prometheus_registry(registry)).decode()

    for name in ("requestqueuetimems", "responsesendtimems"):
        assert (
            f'kafka_network_requestmetrics_{name}_count{{request="Produce"}} {REQUESTS}.0' in text
        )
        assert f'kafka_network_requestmetrics_{name}{{quantile="0.99",request="Produce"}}' in text
