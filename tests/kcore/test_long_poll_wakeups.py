"""A record reaches a consumer without waiting out a long poll (simulated network, virtual
time): the leader's append completes the followers' fetches parked in its purgatory, the
followers' next fetches move the high watermark, which completes the acks=all produce and
the consumer's parked fetch (Kafka's tryCompleteElseWatch / checkAndComplete). The long
polls here wait 20 s: a wake-up that is missed costs a whole one."""

import trio

from kcore.common import TopicPartition
from kcore.testing import open_cluster

LONG_POLL_MS = 20_000
BROKER_CONFIG = {"replica.fetch.wait.max.ms": LONG_POLL_MS}
TP = TopicPartition("t", 0)


async def test_an_acks_all_record_is_acked_and_consumed_without_waiting_out_a_long_poll(
    autojump_clock,
):
    async with open_cluster(brokers=3, seed=5, broker_config=BROKER_CONFIG) as cluster:
        await cluster.wait_for_controller(timeout=30)
        async with cluster.admin() as admin:
            await admin.create_topic(
                "t", partitions=1, replication_factor=3, config={"min.insync.replicas": "3"}
            )
        async with (
            cluster.producer(acks="all") as producer,
            cluster.consumer(fetch_max_wait_ms=LONG_POLL_MS, request_timeout_ms=60_000) as consumer,
        ):
            consumer.assign([TP])
            consumer.seek_to_beginning()
            await producer.send_and_wait("t", b"warm-up", partition=0)
            assert [r.value for r in await consumer.poll(timeout=30)] == [b"warm-up"]
            for number in range(3):
                # Every fetch (the followers', the consumer's) is parked again, waiting.
                async with trio.open_nursery() as nursery:
                    received = []

                    async def consume(received=received):
                        received.extend(await consumer.poll(timeout=30))

                    nursery.start_soon(consume)
                    await trio.sleep(1)
                    sent_at = trio.current_time()
                    meta = await producer.send_and_wait("t", b"r%d" % number, partition=0)
                    acked_after = trio.current_time() - sent_at
                assert [r.value for r in received] == [b"r%d" % number]
                assert meta.offset == received[0].offset == number + 1
                received_after = trio.current_time() - sent_at
                # Network hops only, far from one long poll.
                assert acked_after < LONG_POLL_MS / 1000 / 10
                assert received_after < LONG_POLL_MS / 1000 / 10
