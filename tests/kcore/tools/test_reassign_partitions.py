"""`kcore reassign-partitions`: Kafka 3.5's kafka-reassign-partitions.sh text (the strings are
those of Kafka's ReassignPartitionsUnitTest), its checks of the JSON files and flags, and the
tool against a cluster over real TCP, where AlterPartitionReassignments and
ListPartitionReassignments also make a round trip through Kafka's own protocol."""

from __future__ import annotations

import json
import random
import struct

import pytest
import trio

import kcore
from kcore import errors
from kcore.assignment import assign_replicas_to_brokers
from kcore.client.admin import PartitionReassignment
from kcore.common import TopicPartition
from kcore.protocol import kafka as codec
from kcore.tools import ToolError
from kcore.tools import reassign_partitions as tool

pytestmark = pytest.mark.timeout(120)

FOO0, FOO1, BAR0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)


def test_the_rollback_text_is_kafkas():
    assert tool.rollback_text({FOO1: [4, 5, 6], BAR0: [7, 8]}) == "\n".join(
        [
            "Current partition replica assignment",
            "",
            '{"version":1,"partitions":'
            '[{"topic":"bar","partition":0,"replicas":[7,8],"log_dirs":["any","any"]},'
            '{"topic":"foo","partition":1,"replicas":[4,5,6],"log_dirs":["any","any","any"]}]'
            "}",
            "",
            "Save this to use as the --reassignment-json-file option during rollback",
        ]
    )


def test_generate_proposes_kafkas_assignment_over_the_given_brokers():
    current = {FOO0: [0, 1, 2], FOO1: [1, 2, 3], BAR0: [2, 3, 0]}
    proposed = tool.propose_assignment(current, [1, 2, 3], random.Random(7))
    # Per topic, in topic order, Kafka's algorithm at the topic's replication factor.
    rng = random.Random(7)
    bar = assign_replicas_to_brokers([1, 2, 3], 1, 3, rng=rng)
    foo = assign_replicas_to_brokers([1, 2, 3], 2, 3, rng=rng)
    assert proposed == {BAR0: bar[0], FOO0: foo[0], FOO1: foo[1]}
    assert tool.generate_text({FOO0: [0, 1]}, {FOO0: [1, 2]}) == (
        "Current partition replica assignment\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[0,1],'
        '"log_dirs":["any","any"]}]}\n'
        "\n"
        "Proposed partition reassignment configuration\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}'
    )
    with pytest.raises(ToolError, match="Replication factor: 3 larger than available brokers: 2"):
        tool.propose_assignment(current, [1, 2], random.Random(7))


def test_status_list_and_progress_lines_are_kafkas():
    assert tool.status_lines(
        {
            FOO0: ([1, 2, 3], [1, 2, 3], True),
            FOO1: ([1, 2, 3], [1, 2, 4], False),
            BAR0: ([1, 2, 3], [1, 2, 4], False),
            TopicPartition("baz", 0): ([1, 2], [2, 3], True),
        }
    ) == [
        "Status of partition reassignment:",
        "Reassignment of partition bar-0 is still in progress.",
        "There is no active reassignment of partition baz-0, but replica set is 1,2 rather "
        "than 2,3.",
        "Reassignment of partition foo-0 is completed.",
        "Reassignment of partition foo-1 is still in progress.",
    ]
    assert tool.list_text({}) == "No partition reassignments found."
    assert tool.list_text(
        {
            FOO1: PartitionReassignment((1, 2, 3), (4, 5), (1, 2)),
            BAR0: PartitionReassignment((2, 3, 0), (), (0,)),
            FOO0: PartitionReassignment((0, 1, 2), (4,), ()),
        }
    ) == "\n".join(
        [
            "Current partition reassignments:",
            "bar-0: replicas: 2,3,0. removing: 0.",
            "foo-0: replicas: 0,1,2. adding: 4.",
            "foo-1: replicas: 1,2,3. adding: 4,5. removing: 1,2.",
        ]
    )
    assert tool.started_line([FOO1, FOO0]) == (
        "Successfully started partition reassignments for foo-0,foo-1"
    )
    assert tool.started_line([FOO0]) == "Successfully started partition reassignment for foo-0"
    assert tool.cancelled_line([FOO0]) == (
        "Successfully cancelled partition reassignment for: foo-0"
    )


def _plan(*entries) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def test_the_files_are_checked_as_kafka_checks_them():
    entry = {"topic": "foo", "partition": 0, "replicas": [1, 2]}
    assert tool.parse_reassignment(_plan(entry), "f") == [(FOO0, [1, 2])]
    assert tool.check_execution(tool.parse_reassignment(_plan(entry), "f")) == {FOO0: [1, 2]}
    cases = [
        (_plan(), "Partition reassignment list cannot be empty"),
        (_plan({**entry, "replicas": []}), "Partition replica list cannot be empty"),
        (_plan(entry, entry), "contains duplicate topic partitions: foo-0"),
        (_plan({**entry, "replicas": [0, 0]}), "foo-0 contains multiple entries for 0"),
    ]
    for text, message in cases:
        with pytest.raises(ToolError, match=message):
            tool.check_execution(tool.parse_reassignment(text, "f"))
    with pytest.raises(ToolError, match="is different from size of log dirs"):
        tool.parse_reassignment(_plan({**entry, "log_dirs": ["any"]}), "f")
    with pytest.raises(ToolError, match="does not move replicas between log directories"):
        tool.parse_reassignment(_plan({**entry, "log_dirs": ["/a", "/b"]}), "f")
    with pytest.raises(ToolError, match="Not supported version field value 2"):
        tool.parse_reassignment(json.dumps({"version": 2, "partitions": []}), "f")
    with pytest.raises(ToolError, match="f is not valid JSON"):
        tool.parse_reassignment("{", "f")
    with pytest.raises(ToolError, match=r"f is not \{"):
        tool.parse_reassignment(_plan({"topic": "foo"}), "f")
    assert tool.parse_topics_to_move('{"topics":[{"topic":"foo"}]}', "f") == ["foo"]
    with pytest.raises(ToolError, match="topics to reassign contains duplicate entries: foo"):
        tool.parse_topics_to_move('{"topics":[{"topic":"foo"},{"topic":"foo"}]}', "f")
    with pytest.raises(ToolError, match="Broker list contains duplicate entries: 1"):
        tool.parse_broker_list("1,2,1")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--execute"], 'Missing required argument "[reassignment-json-file]"'),
        (["--generate", "--broker-list", "1"], '"[topics-to-move-json-file]"'),
        (["--list", "--additional"], 'Option "[additional]" can\'t be used with action "[list]"'),
        (["--verify", "--reassignment-json-file", "f", "--timeout", "5"], '"[timeout]"'),
        (["--list", "--verify"], "not allowed with argument"),
    ],
)
async def test_flags_that_do_not_go_together_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        await tool.TOOL.main(["--bootstrap-server", "localhost:1", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


class _KafkaProtocolConnection:
    """One connection speaking Kafka's protocol through kcore's codec."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream, self.correlation_id, self.buffer = stream, 0, bytearray()

    async def request(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation_id += 1
        await self.stream.send_all(
            codec.encode_request(api_key, version, self.correlation_id, "t", body)
        )
        while len(self.buffer) < 4 or len(self.buffer) < 4 + self._size():
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the broker closed the connection"
            self.buffer += chunk
        size = self._size()
        frame = bytes(self.buffer[4 : 4 + size])
        del self.buffer[: 4 + size]
        correlation_id, body = codec.decode_response(api_key, version, frame)
        assert correlation_id == self.correlation_id
        return body

    def _size(self) -> int:
        return struct.unpack_from(">i", self.buffer)[0]


async def _connect(cluster, broker_id: int) -> _KafkaProtocolConnection:
    host, port = cluster.bootstrap_servers.split(",")[broker_id - 1].rsplit(":", 1)
    return _KafkaProtocolConnection(await trio.open_tcp_stream(host, int(port)))


async def _kafka_protocol_round_trip(cluster) -> None:
    """AlterPartitionReassignments / ListPartitionReassignments v0 as a Kafka client sends
    them: to the controller, and to a broker that is not (NOT_CONTROLLER)."""
    controller = await cluster.wait_for_controller()
    other = next(b for b in cluster.brokers if b != controller)
    client = await _connect(cluster, controller)
    elsewhere = await _connect(cluster, other)
    async with client.stream, elsewhere.stream:
        versions = await client.request(18, 3, {"client_software_name": "t",
                                                "client_software_version": "1"})  # fmt: skip
        served = {a["api_key"]: (a["min_version"], a["max_version"]) for a in versions["api_keys"]}
        assert served[45] == (0, 0) and served[46] == (0, 0)  # Kafka 3.5's versions
        altered = await client.request(45, 0, {"timeout_ms": 30000, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "replicas": [2, 3, 2]},
                                         {"partition_index": 1, "replicas": None}]},
            {"name": "nope", "partitions": [{"partition_index": 0, "replicas": [1]}]},
        ]})  # fmt: skip
        assert altered["error_code"] == 0
        results = {
            (t["name"], p["partition_index"]): p["error_code"]
            for t in altered["responses"]
            for p in t["partitions"]
        }
        assert results == {
            ("t", 0): errors.InvalidReplicaAssignmentError.code,
            ("t", 1): errors.NoReassignmentInProgressError.code,
            ("nope", 0): errors.UnknownTopicOrPartitionError.code,
        }
        listed = await client.request(46, 0, {"timeout_ms": 30000, "topics": None})
        assert listed["error_code"] == 0 and listed["topics"] == []
        refused = await elsewhere.request(46, 0, {"timeout_ms": 30000, "topics": [
            {"name": "t", "partition_indexes": [0]}]})  # fmt: skip
        assert refused["error_code"] == errors.NotControllerError.code


async def test_the_tool_moves_a_partition_of_a_cluster(tmp_path, capsys):
    async with kcore.open_cluster(brokers=3, data_dir=tmp_path / "cluster") as cluster:
        async with kcore.Admin(cluster.bootstrap_servers) as admin:
            await admin.create_topic("t", assignments={0: [1, 2], 1: [2, 1]})

            async def run(*argv: str) -> tuple[int, str, str]:
                status = await tool.TOOL.main(
                    ["--bootstrap-server", cluster.bootstrap_servers, *argv]
                )
                out, err = capsys.readouterr()
                return status, out, err

            topics = tmp_path / "topics.json"
            topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
            status, out, _ = await run(
                "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "2,3"
            )
            current, proposed = out.split("\n\n")
            assert status == 0
            assert current == (
                "Current partition replica assignment\n"
                + tool.reassignment_json({TopicPartition("t", 0): [1, 2],
                                          TopicPartition("t", 1): [2, 1]})
            )  # fmt: skip
            heading, plan_text, end = proposed.split("\n")
            assert heading == "Proposed partition reassignment configuration" and end == ""
            plan = json.loads(plan_text)
            assert [sorted(p["replicas"]) for p in plan["partitions"]] == [[2, 3], [2, 3]]

            plan_file = tmp_path / "plan.json"
            plan_file.write_text(_plan({"topic": "t", "partition": 0, "replicas": [3, 2]}))
            status, out, _ = await run("--execute", "--reassignment-json-file", str(plan_file))
            assert status == 0
            assert out == (
                tool.rollback_text({TopicPartition("t", 0): [1, 2]})
                + "\nSuccessfully started partition reassignment for t-0\n"
            )
            with trio.fail_after(30):
                while await admin.list_partition_reassignments():
                    await trio.sleep(0.05)
            assert await run("--verify", "--reassignment-json-file", str(plan_file)) == (
                0,
                "Status of partition reassignment:\nReassignment of partition t-0 is completed.\n",
                "",
            )
            assert (await admin.describe_topic("t")).partitions[0].replicas == (3, 2)
            assert await run("--list") == (0, "No partition reassignments found.\n", "")
            assert await run("--cancel", "--reassignment-json-file", str(plan_file)) == (
                0,
                "None of the specified partition reassignments are active.\n"
                "None of the specified partition moves are active.\n",
                "",
            )
            # Errors: one line on standard error, a non-zero status.
            plan_file.write_text(_plan({"topic": "t", "partition": 0, "replicas": [3, 7]}))
            assert await run("--execute", "--reassignment-json-file", str(plan_file)) == (
                1,
                "",
                "kcore reassign-partitions: Unknown broker id 7\n",
            )
            status, _, err = await run(
                "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "3"
            )
            assert status == 1
            assert err == (
                "kcore reassign-partitions: Replication factor: 2 larger than available "
                "brokers: 1\n"
            )
        await _kafka_protocol_round_trip(cluster)
