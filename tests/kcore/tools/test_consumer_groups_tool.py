"""`kcore consumer-groups` against a 3-broker cluster over real TCP, with a group that
librdkafka's consumer (confluent-kafka, in a thread: it blocks) formed and committed in."""

from __future__ import annotations

import importlib.util

import pytest
import trio

import kcore
from kcore.tools import consumer_groups

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def cluster(tmp_path):
    settings = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4}
    async with kcore.open_cluster(brokers=3, data_dir=tmp_path, broker_config=settings) as c:
        yield c


def _run(cluster, *argv):
    return consumer_groups.TOOL.main(["--bootstrap-server", cluster.bootstrap_servers, *argv])


async def test_lists_describes_and_deletes_a_group(cluster, capsys, require_external):
    has_client = importlib.util.find_spec("confluent_kafka") is not None
    require_external("confluent_kafka", has_client, "pip install -e '.[kafka-clients]'")
    import confluent_kafka as confluent

    async with cluster.admin() as admin:
        await admin.create_topic("orders", 2, 3)
    async with cluster.producer() as producer:
        for value in (b"a", b"b", b"c"):
            await producer.send_and_wait("orders", value, partition=0)
    consumer = confluent.Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "billing",
        "client.id": "biller", "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip

    def read_three_and_commit() -> None:
        consumer.subscribe(["orders"])
        got = []
        while len(got) < 3:
            got += [m for m in consumer.consume(10, timeout=0.5) if m.error() is None]
        consumer.commit(asynchronous=False)

    try:
        with trio.fail_after(60):
            await trio.to_thread.run_sync(read_three_and_commit)
        assert await _run(cluster, "--list") == 0
        assert capsys.readouterr().out == "billing\n"
        assert await _run(cluster, "--describe", "--group", "billing") == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == "" and lines[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID",
        ]  # fmt: skip
        rows = sorted(line.split() for line in lines[2:])
        assert [row[:6] for row in rows] == [
            ["billing", "orders", "0", "3", "3", "0"],
            ["billing", "orders", "1", "-", "0", "-"],
        ]
        assert all(row[8] == "biller" for row in rows)
        assert await _run(cluster, "--describe", "--group", "billing", "--state") == 0
        state = capsys.readouterr().out.splitlines()[2].split()
        assert state[0] == "billing" and state[-3:] == ["range", "Stable", "1"]
    finally:
        await trio.to_thread.run_sync(consumer.close)
    assert await _run(cluster, "--describe", "--group", "billing") == 0
    out = capsys.readouterr().out
    assert "Consumer group 'billing' has no active members." in out
    assert await _run(cluster, "--delete", "--group", "billing") == 0
    assert capsys.readouterr().out == (
        "Deletion of requested consumer groups ('billing') was successful.\n"
    )
    assert await _run(cluster, "--list") == 0
    assert capsys.readouterr().out == ""
