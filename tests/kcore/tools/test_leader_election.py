"""`kcore leader-election`: Kafka's kafka-leader-election.sh output for each outcome, and
the tool against a cluster over real TCP."""

from __future__ import annotations

import json

import pytest

import kcore
from kcore import errors
from kcore.common import TopicPartition
from kcore.tools import ToolError, leader_election

pytestmark = pytest.mark.timeout(120)


def test_the_outcomes_read_as_kafkas_tool_prints_them():
    outcomes = {
        TopicPartition("t", 1): None,
        TopicPartition("t", 0): None,
        TopicPartition("t", 2): errors.ElectionNotNeededError("not needed"),
        TopicPartition("u", 0): errors.PreferredLeaderNotAvailableError("not in sync"),
    }
    lines, failed = leader_election.outcome_lines("PREFERRED", outcomes)
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions t-2",
        "Error completing leader election (PREFERRED) for partition: u-0: "
        "PreferredLeaderNotAvailableError: not in sync",
    ]
    assert failed == 1


def test_a_json_file_names_partitions_as_kafkas_does():
    text = json.dumps({"partitions": [{"topic": "t", "partition": 1}]})
    assert leader_election.partitions_from_json(text, "f.json") == [TopicPartition("t", 1)]
    with pytest.raises(ToolError, match=r"f\.json is not"):
        leader_election.partitions_from_json("{}", "f.json")
    twice = json.dumps({"partitions": [{"topic": "t", "partition": 1}] * 2})
    with pytest.raises(ToolError, match="duplicate partitions: t-1"):
        leader_election.partitions_from_json(twice, "f.json")


async def test_the_tool_against_a_cluster(tmp_path, capsys):
    async with kcore.open_cluster(brokers=3, data_dir=tmp_path) as cluster:
        async with kcore.Admin(cluster.bootstrap_servers) as admin:
            await admin.create_topic("t", partitions=2, replication_factor=3)
        bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
        status = await leader_election.TOOL.main(
            [*bootstrap, "--election-type", "preferred", "--all-topic-partitions"]
        )
        out, _ = capsys.readouterr()
        assert status == 0
        assert out == "Valid replica already elected for partitions t-0, t-1\n"
        status = await leader_election.TOOL.main(
            [*bootstrap, "--election-type", "PREFERRED", "--topic", "nope", "--partition", "0"]
        )
        out, err = capsys.readouterr()
        assert status == 1
        assert out.startswith("Error completing leader election (PREFERRED) for partition: nope-0")
        assert err == "kcore leader-election: 1 replica(s) could not be elected\n"
