"""kcore's producer and consumer on a secured cluster (virtual time) give up at once when the
brokers answer a topic's metadata with TOPIC_AUTHORIZATION_FAILED, raising
TopicAuthorizationFailedError as Kafka's clients do, instead of waiting max_block_ms for
metadata that will never come (and then blaming an unknown topic)."""

from __future__ import annotations

import pytest
import trio

from kcore import errors
from kcore.testing import open_cluster

from .test_acl_cluster import SECURED, as_user

MAX_BLOCK_MS = 600_000  # ten minutes: the refusal must not wait for it


async def test_a_user_without_describe_is_refused_at_once(autojump_clock):
    async with open_cluster(brokers=2, seed=5, logs="memory", broker_config=SECURED) as cluster:
        await cluster.wait_for_controller()
        async with cluster.admin(**as_user("admin")) as admin:
            await admin.create_topic("orders", partitions=1, replication_factor=2)
        async with cluster.producer(**as_user("admin")) as producer:
            await producer.send_and_wait("orders", b"v")

        started = trio.current_time()
        async with cluster.producer(**as_user("alice"), max_block_ms=MAX_BLOCK_MS) as producer:
            with pytest.raises(errors.TopicAuthorizationFailedError) as refused:
                await producer.send("orders", b"v")
        assert str(refused.value).startswith("Not authorized to access topics: [orders]")
        assert trio.current_time() - started < MAX_BLOCK_MS / 1000

        async with cluster.consumer(**as_user("alice")) as consumer:
            consumer.assign([("orders", 0)])
            with pytest.raises(errors.TopicAuthorizationFailedError, match=r"\[orders\]"):
                await consumer.poll(timeout=MAX_BLOCK_MS / 1000)
        assert trio.current_time() - started < MAX_BLOCK_MS / 1000
