"""GroupCoordinatorCore offsets (commit, fetch, expiry), admin APIs (list, describe,
delete), partition load / unload, and the wire shape of its responses."""

from __future__ import annotations

import pytest

from kcore.coordinator.group import (
    GroupConfig,
    GroupMetadataValue,
    GroupState,
    HeartbeatTimer,
    MemberIdentity,
    MemberMetadataValue,
    OffsetCommitValue,
    OffsetsPartitionReplay,
    OffsetsRetentionTimer,
    Respond,
    partition_for,
)
from kcore.coordinator.group import _codes as E
from kcore.protocol.kafka import decode_request, decode_response, encode_request, encode_response

from ._harness import Shell, commit_errors, form_group, subscription


def test_member_commit_is_visible_only_once_stored():
    shell = Shell()
    m1, _m2 = form_group(shell, "a", "b")
    token = shell.commit(
        {("t", 0): 42, ("t", 1): 7}, member_id=m1, generation=1, metadata="m", leader_epoch=3
    )
    assert token not in shell.responses
    (write,) = shell.offset_writes
    assert write.group_id == "g" and write.partition == 0
    assert dict(write.offsets)[("t", 0)] == OffsetCommitValue(42, 3, "m", shell.now, -1)
    # pending: invisible, and UNSTABLE_OFFSET_COMMIT when the fetch requires stability
    assert shell.fetch(partitions=[("t", 0)])[("t", 0)] == (-1, -1, "", E.NONE)
    assert shell.fetch(partitions=[("t", 0)], require_stable=True)[("t", 0)] == (
        -1,
        -1,
        "",
        E.UNSTABLE_OFFSET_COMMIT,
    )
    shell.store_offsets()
    assert commit_errors(shell.responses[token]) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    fetched = shell.fetch()  # all partitions
    assert fetched == {None: E.NONE, ("t", 0): (42, 3, "m", E.NONE), ("t", 1): (7, 3, "m", E.NONE)}


def test_commit_from_unknown_member_or_wrong_generation_is_rejected():
    shell = Shell()
    m1, _ = form_group(shell, "a", "b")
    stranger = shell.commit({("t", 0): 1}, member_id="ghost", generation=1)
    assert commit_errors(shell.responses[stranger]) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    stale = shell.commit({("t", 0): 1}, member_id=m1, generation=0)
    assert commit_errors(shell.responses[stale]) == {("t", 0): E.ILLEGAL_GENERATION}
    # a simple (non-member) commit to a group with members
    simple = shell.commit({("t", 0): 1})
    assert commit_errors(shell.responses[simple]) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a generation this coordinator never saw, for a group it does not know
    unknown = shell.commit({("t", 0): 1}, group_id="other", member_id="x", generation=5)
    assert commit_errors(shell.responses[unknown]) == {("t", 0): E.ILLEGAL_GENERATION}
    assert shell.offset_writes == []


def test_simple_commit_creates_an_empty_group_and_a_failed_write_is_dropped():
    shell = Shell()
    token = shell.commit({("t", 0): 5}, group_id="simple")
    group = shell.core.group("simple")
    assert group.state is GroupState.EMPTY and group.generation_id == 0
    shell.store_offsets(error=E.NOT_LEADER_OR_FOLLOWER)
    assert commit_errors(shell.responses[token]) == {("t", 0): E.NOT_COORDINATOR}
    assert group.pending_offset_commits == {}
    assert shell.fetch("simple", [("t", 0)])[("t", 0)] == (-1, -1, "", E.NONE)
    token = shell.commit({("t", 0): 6}, group_id="simple")
    shell.store_offsets()
    assert commit_errors(shell.responses[token]) == {("t", 0): E.NONE}
    assert shell.fetch("simple", [("t", 0)])[("t", 0)] == (6, -1, "", E.NONE)


def test_commit_checks_metadata_size_and_partition_existence():
    shell = Shell(GroupConfig(offsets_topic_num_partitions=1, offset_metadata_max_bytes=4))
    token = shell.token()
    shell.apply(
        shell.core.commit_offsets(
            token,
            group_id="g",
            topics=[
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": "ok"},
                        {
                            "partition_index": 1,
                            "committed_offset": 1,
                            "committed_metadata": "long!",
                        },
                        {"partition_index": 9, "committed_offset": 1, "committed_metadata": None},
                    ],
                }
            ],
            now_ms=shell.now,
            partition_exists=lambda topic, partition: partition < 2,
        )
    )
    (write,) = shell.offset_writes
    assert [tp for tp, _ in write.offsets] == [("t", 0)]
    shell.store_offsets()
    assert commit_errors(shell.responses[token]) == {
        ("t", 0): E.NONE,
        ("t", 1): E.OFFSET_METADATA_TOO_LARGE,
        ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_commit_renews_the_members_session():
    shell = Shell()
    m1, _ = form_group(shell, "a", "b")
    shell.advance(4000)
    shell.commit({("t", 0): 1}, member_id=m1, generation=1)
    assert shell.timers[HeartbeatTimer("g", m1)] == shell.now + 10_000


def test_fetch_offsets_v8_many_groups_and_v7_single_group_shape():
    shell = Shell()
    shell.commit({("t", 0): 5}, group_id="a")
    shell.store_offsets()
    token = shell.token()
    shell.apply(
        shell.core.fetch_offsets(
            token,
            [("a", None), ("b", [{"name": "t", "partition_indexes": [0]}]), ("", None)],
            api_version=8,
        )
    )
    groups = shell.responses[token]["groups"]
    assert [g["group_id"] for g in groups] == ["a", "b", ""]
    assert groups[0]["topics"][0]["partitions"][0]["committed_offset"] == 5
    assert groups[1]["topics"][0]["partitions"][0]["committed_offset"] == -1
    assert groups[2] == {"group_id": "", "topics": [], "error_code": E.NONE}
    token = shell.token()
    shell.apply(shell.core.fetch_offsets(token, [("a", None)], api_version=7))
    body = shell.responses[token]
    assert body["error_code"] == E.NONE
    assert body["topics"][0]["partitions"][0]["committed_offset"] == 5


def test_list_describe_and_delete_groups():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b", group_id="busy")
    shell.commit({("t", 0): 1}, group_id="idle")
    shell.store_offsets()

    token = shell.token()
    shell.apply(shell.core.list_groups(token))
    assert shell.responses[token]["groups"] == [
        {"group_id": "busy", "protocol_type": "consumer", "group_state": "Stable"},
        {"group_id": "idle", "protocol_type": "", "group_state": "Empty"},
    ]
    token = shell.token()
    shell.apply(shell.core.list_groups(token, ["Empty"]))
    assert [g["group_id"] for g in shell.responses[token]["groups"]] == ["idle"]

    described = shell.core.describe_group("busy")
    assert described["group_state"] == "Stable"
    assert described["protocol_type"] == "consumer"
    assert described["protocol_data"] == "range"
    assert [
        (m["member_id"], m["client_id"], m["member_metadata"], m["member_assignment"])
        for m in described["members"]
    ] == [(m1, "a", subscription("t"), b"\x00"), (m2, "b", subscription("t"), b"\x01")]
    assert shell.core.describe_group("nope")["group_state"] == "Dead"
    # during a rebalance, no protocol, metadata or assignment
    shell.join("busy", m1, client_id="a")
    rebalancing = shell.core.describe_group("busy")
    assert rebalancing["group_state"] == "PreparingRebalance"
    assert rebalancing["protocol_data"] == ""
    assert rebalancing["members"][0]["member_assignment"] == b""

    token = shell.token()
    shell.apply(shell.core.delete_groups(token, ["busy", "idle", "nope", "idle"], shell.now))
    assert shell.responses[token]["results"] == [
        {"group_id": "busy", "error_code": E.NON_EMPTY_GROUP},
        {"group_id": "idle", "error_code": E.NONE},
        {"group_id": "nope", "error_code": E.GROUP_ID_NOT_FOUND},
    ]
    (tombstones,) = shell.tombstones
    assert tombstones.group_id == "idle"
    assert tombstones.offsets == (("t", 0),)
    assert tombstones.group_metadata is False  # generation 0: never had a metadata record
    assert shell.core.group("idle") is None


def test_deleting_a_group_that_had_generations_tombstones_its_metadata():
    shell = Shell()
    (m1,) = form_group(shell, "a")
    shell.leave(MemberIdentity(m1))
    assert shell.core.group("g").state is GroupState.EMPTY
    token = shell.token()
    shell.apply(shell.core.delete_groups(token, ["g"], shell.now))
    (tombstones,) = shell.tombstones
    assert tombstones.group_metadata is True and tombstones.offsets == ()


def test_offsets_of_an_empty_group_expire_after_the_retention():
    config = GroupConfig(
        offsets_topic_num_partitions=1,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=10_000,
    )
    shell = Shell(config)
    (m1,) = form_group(shell, "a")
    shell.commit({("t", 0): 3}, member_id=m1, generation=1)
    shell.store_offsets()
    shell.leave(MemberIdentity(m1))
    empty_since = shell.now
    shell.advance(50_000)
    assert shell.tombstones == []
    shell.advance(60_000 - (shell.now - empty_since) + 10_000)
    (tombstones,) = shell.tombstones
    assert tombstones.offsets == (("t", 0),)
    assert tombstones.group_metadata is True
    assert shell.core.group("g") is None


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics():
    config = GroupConfig(offsets_topic_num_partitions=1, offsets_retention_minutes=1)
    shell = Shell(config)
    (m1,) = form_group(shell, "a", session_ms=600_000)
    shell.commit({("t", 0): 3, ("old", 0): 9}, member_id=m1, generation=1)
    shell.store_offsets()
    shell.now += 120_000
    shell.apply(shell.core.expire_offsets(shell.now))
    (tombstones,) = shell.tombstones
    assert tombstones.offsets == (("old", 0),)  # "t" is subscribed
    assert shell.fetch(partitions=[("t", 0)])[("t", 0)][0] == 3


def _owner_and_other(num_partitions: int = 4) -> tuple[int, int]:
    mine = partition_for("g", num_partitions)
    return mine, (mine + 1) % num_partitions


def test_groups_of_partitions_not_owned_or_loading_are_refused():
    mine, other = _owner_and_other()
    shell = Shell(GroupConfig(offsets_topic_num_partitions=4), own=(other,))
    token = shell.join()
    assert shell.responses[token]["error_code"] == E.NOT_COORDINATOR
    shell.apply(shell.core.begin_loading(mine, 3))
    token = shell.join()
    assert shell.responses[token]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS
    token = shell.sync("m", 1)
    assert shell.responses[token]["error_code"] == E.REBALANCE_IN_PROGRESS
    assert shell.heartbeat("m", 1) == E.NONE  # answered blindly while loading
    assert shell.fetch()[None] == E.COORDINATOR_LOAD_IN_PROGRESS
    token = shell.token()
    shell.apply(shell.core.list_groups(token))
    assert shell.responses[token]["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS


def test_load_then_unload():
    mine, other = _owner_and_other()
    shell = Shell(GroupConfig(offsets_topic_num_partitions=4), own=(other,))
    shell.apply(shell.core.begin_loading(mine, 1))
    replay = OffsetsPartitionReplay()
    member = MemberMetadataValue("m-1", None, "c", "/h", 30_000, 10_000, subscription("t"), b"A")
    replay.group_metadata("g", GroupMetadataValue("consumer", 4, "range", "m-1", 1000, (member,)))
    replay.offset_commit("g", "t", 0, OffsetCommitValue(1, -1, "", 1000), 10)
    replay.offset_commit("g", "t", 0, OffsetCommitValue(8, 2, "x", 2000), 11)
    replay.offset_commit("g", "t", 1, OffsetCommitValue(4, -1, "", 1000), 12)
    replay.offset_commit("g", "t", 1, None, 13)  # tombstone
    replay.group_metadata("gone", GroupMetadataValue("consumer", 1, None, None, 5, ()))
    replay.group_metadata("gone", None)
    (loaded,) = replay.loaded_groups()
    shell.apply(shell.core.load_group(loaded, shell.now))
    shell.apply(shell.core.finish_loading(mine, shell.now))

    group = shell.core.group("g")
    assert group.state is GroupState.STABLE and group.generation_id == 4
    assert shell.timers[HeartbeatTimer("g", "m-1")] == shell.now + 10_000
    assert shell.fetch() == {None: E.NONE, ("t", 0): (8, 2, "x", E.NONE)}
    assert shell.heartbeat("m-1", 4) == E.NONE
    sync = shell.sync("m-1", 4)
    assert shell.responses[sync]["assignment"] == b"A"

    # a member rejoins, then the partition moves away: its JoinGroup gets NOT_COORDINATOR
    parked = shell.join(member_id="m-1", client_id="c")
    m2 = shell.responses[shell.join(client_id="d")]["member_id"]
    shell.join(member_id=m2, client_id="d")
    assert parked not in shell.responses or shell.responses[parked]["generation_id"] == 5
    shell.apply(shell.core.unload_groups(mine, shell.now, coordinator_epoch=2))
    assert shell.core.group("g") is None
    assert not any(key.__class__ is HeartbeatTimer for key in shell.timers)
    token = shell.join()
    assert shell.responses[token]["error_code"] == E.NOT_COORDINATOR
    assert all(count == 1 for count in shell.answer_counts.values())


def test_unload_answers_waiting_joins_with_not_coordinator():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    parked = shell.join(member_id=m1, client_id="a")
    shell.apply(shell.core.unload_groups(0, shell.now))
    assert shell.responses[parked]["error_code"] == E.NOT_COORDINATOR
    assert list(shell.timers) == [OffsetsRetentionTimer()]


def test_unload_with_an_older_epoch_is_ignored():
    shell = Shell()
    shell.apply(shell.core.begin_loading(0, 5))
    shell.apply(shell.core.finish_loading(0, shell.now))
    assert shell.core.unload_groups(0, shell.now, coordinator_epoch=4) == []
    token = shell.join()
    assert shell.responses[token]["error_code"] == E.MEMBER_ID_REQUIRED


# -- the wire -----------------------------------------------------------------------------


def _round_trip(api_key: int, version: int, body: dict) -> dict:
    frame = encode_response(api_key, version, 7, body)
    correlation_id, decoded = decode_response(api_key, version, frame[4:])
    assert correlation_id == 7
    return decoded


def test_responses_encode_for_every_version_clients_use():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b")
    join = shell.join(member_id=m1, client_id="a")
    shell.join(member_id=m2, client_id="b")
    sync = shell.sync(m1, 2, {m1: b"x", m2: b"y"})
    shell.store_groups()
    shell.commit({("t", 0): 1}, member_id=m1, generation=2)
    shell.store_offsets()
    commit = max(shell.responses)
    bodies = {
        11: (range(5, 10), shell.responses[join]),
        14: (range(3, 6), shell.responses[sync]),
        12: (range(3, 5), {"throttle_time_ms": 0, "error_code": 0}),
        8: (range(2, 9), shell.responses[commit]),
    }
    for api_key, (versions, body) in bodies.items():
        for version in versions:
            decoded = _round_trip(api_key, version, body)
            assert decoded["error_code" if api_key != 8 else "topics"] is not None
    assert _round_trip(11, 9, shell.responses[join])["members"][0]["metadata"] == subscription("t")
    assert _round_trip(11, 5, shell.responses[join])["leader"] == m1

    leave = shell.leave(MemberIdentity(m2))
    for version in range(3, 6):
        assert _round_trip(13, version, leave)["members"][0]["member_id"] == m2

    for version, groups in (
        (1, [("g", [{"name": "t", "partition_indexes": [0]}])]),
        (7, [("g", None)]),
        (8, [("g", None), ("h", None)]),
    ):
        token = shell.token()
        shell.apply(shell.core.fetch_offsets(token, groups, api_version=version))
        decoded = _round_trip(9, version, shell.responses[token])
        topics = decoded["groups"][0]["topics"] if version >= 8 else decoded["topics"]
        assert topics[0]["partitions"][0]["committed_offset"] == 1

    token = shell.token()
    shell.apply(shell.core.describe_groups(token, ["g", "nope"]))
    for version in range(6):
        assert _round_trip(15, version, shell.responses[token])["groups"][0]["group_id"] == "g"
    token = shell.token()
    shell.apply(shell.core.list_groups(token))
    for version in range(5):
        assert _round_trip(16, version, shell.responses[token])["groups"][0]["group_id"] == "g"
    token = shell.token()
    shell.apply(shell.core.delete_groups(token, ["g"], shell.now))
    for version in range(3):
        results = _round_trip(42, version, shell.responses[token])["results"]
        assert results == [{"group_id": "g", "error_code": E.NON_EMPTY_GROUP}]


@pytest.mark.parametrize("version", [5, 7, 9])
def test_handle_request_takes_decoded_request_bodies(version):
    shell = Shell()
    body = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 20_000,
        "member_id": "",
        "group_instance_id": "static-1",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription("t")}],
    }
    frame = encode_request(11, version, 1, "client", body)
    _, decoded = decode_request(frame[4:])
    effects = shell.apply(
        shell.core.handle_request(
            11,
            version,
            decoded,
            "tok",
            now_ms=shell.now,
            client_id="client",
            client_host="/1.2.3.4",
        )
    )
    assert not any(isinstance(e, Respond) for e in effects)
    shell.advance(3000)
    member_id = shell.responses["tok"]["member_id"]
    assert member_id == "static-1-1"
    member = shell.core.group("g").get(member_id)
    assert (member.client_id, member.client_host, member.rebalance_timeout_ms) == (
        "client",
        "/1.2.3.4",
        20_000,
    )
    frame = encode_request(
        14,
        5,
        2,
        "client",
        {
            "group_id": "g",
            "generation_id": 1,
            "member_id": member_id,
            "group_instance_id": "static-1",
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": member_id, "assignment": b"mine"}],
        },
    )
    _, decoded = decode_request(frame[4:])
    shell.apply(shell.core.handle_request(14, 5, decoded, "sync", now_ms=shell.now))
    shell.store_groups()
    assert shell.responses["sync"]["assignment"] == b"mine"
    frame = encode_request(
        8,
        8,
        3,
        "client",
        {
            "group_id": "g",
            "generation_id_or_member_epoch": 1,
            "member_id": member_id,
            "group_instance_id": "static-1",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 9}]}
            ],
        },
    )
    _, decoded = decode_request(frame[4:])
    shell.apply(shell.core.handle_request(8, 8, decoded, "commit", now_ms=shell.now))
    shell.store_offsets()
    assert commit_errors(shell.responses["commit"]) == {("t", 0): E.NONE}
