"""GroupCoordinatorCore membership: join, sync, heartbeat, leave, static members, timers."""

from __future__ import annotations

import pytest

from kcore.coordinator.group import (
    GroupConfig,
    GroupState,
    HeartbeatTimer,
    JoinTimer,
    MemberIdentity,
    StoreGroup,
    SyncTimer,
)
from kcore.coordinator.group import _codes as E
from kcore.coordinator.group.state import VALID_PREVIOUS_STATES, GroupMetadata, MemberMetadata

from ._harness import RANGE, Shell, form_group, subscription


def test_first_joiner_becomes_leader_and_gets_the_members_metadata():
    shell = Shell()
    first = shell.join(client_id="consumer-1")
    # KIP-394: a v4+ dynamic member gets its id first and must come back with it.
    assert shell.responses[first]["error_code"] == E.MEMBER_ID_REQUIRED
    member_id = shell.responses[first]["member_id"]
    assert member_id == "consumer-1-1"
    assert shell.core.group("g").state is GroupState.EMPTY

    joined = shell.join(member_id=member_id, client_id="consumer-1")
    assert joined not in shell.responses  # parked for the initial rebalance delay
    assert shell.core.group("g").state is GroupState.PREPARING_REBALANCE
    assert shell.timers[JoinTimer("g")] == 3000

    shell.advance(2999)
    assert joined not in shell.responses
    shell.advance(1)
    response = shell.responses[joined]
    assert response["error_code"] == E.NONE
    assert response["generation_id"] == 1
    assert response["leader"] == member_id
    assert response["member_id"] == member_id
    assert response["protocol_type"] == "consumer"
    assert response["protocol_name"] == "range"
    assert response["skip_assignment"] is False
    assert response["members"] == [
        {"member_id": member_id, "group_instance_id": None, "metadata": subscription("t")}
    ]
    group = shell.core.group("g")
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert shell.timers[SyncTimer("g")] == 3000 + 30_000

    sync = shell.sync(member_id, 1, {member_id: b"assignment"})
    assert sync not in shell.responses  # answered once the assignment is stored
    (write,) = shell.group_writes
    assert write.value.generation == 1
    assert write.value.leader == member_id
    assert write.value.protocol == "range"
    assert [(m.member_id, m.assignment) for m in write.value.members] == [
        (member_id, b"assignment")
    ]
    shell.store_groups()
    assert shell.responses[sync] == {
        "throttle_time_ms": 0,
        "error_code": E.NONE,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignment": b"assignment",
    }
    assert group.state is GroupState.STABLE
    assert SyncTimer("g") not in shell.timers  # everyone synced


def test_initial_delay_is_extended_while_new_members_keep_arriving():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    t1 = shell.join(member_id=m1, client_id="a", rebalance_ms=10_000)
    shell.advance(1000)
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    t2 = shell.join(member_id=m2, client_id="b", rebalance_ms=10_000)
    shell.advance(2000)  # t=3000: the first delay ends, but a member arrived during it
    assert t1 not in shell.responses
    assert shell.timers[JoinTimer("g")] == 6000
    shell.advance(2999)
    assert t1 not in shell.responses
    shell.advance(1)  # t=6000: nobody new: the group forms
    assert shell.responses[t1]["generation_id"] == 1
    assert shell.responses[t2]["generation_id"] == 1
    assert shell.responses[t1]["leader"] == m1
    assert [m["member_id"] for m in shell.responses[t1]["members"]] == [m1, m2]
    assert shell.responses[t2]["members"] == []


def test_initial_delay_never_exceeds_the_rebalance_timeout():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    t1 = shell.join(member_id=m1, client_id="a", rebalance_ms=4000)
    shell.advance(2500)
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    shell.join(member_id=m2, client_id="b", rebalance_ms=4000)
    shell.advance(500)
    # remaining = 4000 - 3000 = 1000: one more delay of at most 1000 ms
    assert shell.timers[JoinTimer("g")] == 4000
    shell.advance(1000)
    assert shell.responses[t1]["generation_id"] == 1


def test_initial_delay_rounds_stop_at_the_rebalance_timeout():
    shell = Shell()
    tokens = []
    for client_id, at in (("a", 0), ("b", 1000), ("c", 4000), ("d", 7000)):
        shell.advance(at - shell.now)
        member_id = shell.responses[shell.join(client_id=client_id)]["member_id"]
        tokens.append(shell.join(member_id=member_id, client_id=client_id, rebalance_ms=8000))
        if client_id == "c":
            assert shell.timers[JoinTimer("g")] == 6000
    # rounds: 0-3000 (b arrived), 3000-6000 (c arrived), then only the 2000 ms left of
    # the rebalance timeout, although d arrived in that round too
    assert shell.timers[JoinTimer("g")] == 8000
    shell.advance(8000 - shell.now)
    assert all(shell.responses[t]["generation_id"] == 1 for t in tokens)


def test_second_member_triggers_a_rebalance_that_completes_when_all_rejoin():
    shell = Shell()
    (m1,) = form_group(shell, "a")
    shell.advance(1000)
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    t2 = shell.join(member_id=m2, client_id="b")
    group = shell.core.group("g")
    assert group.state is GroupState.PREPARING_REBALANCE
    assert shell.timers[JoinTimer("g")] == shell.now + 30_000
    assert t2 not in shell.responses

    assert shell.heartbeat(m1, 1) == E.REBALANCE_IN_PROGRESS
    t1 = shell.join(member_id=m1, client_id="a")
    # every known member has rejoined: no waiting for the timeout
    assert shell.responses[t1]["generation_id"] == 2
    assert shell.responses[t2]["generation_id"] == 2
    assert shell.responses[t1]["leader"] == m1
    assert shell.responses[t2]["leader"] == m1
    assert {m["member_id"] for m in shell.responses[t1]["members"]} == {m1, m2}
    assert shell.responses[t2]["members"] == []
    assert JoinTimer("g") not in shell.timers
    assert group.state is GroupState.COMPLETING_REBALANCE


def test_rebalance_timeout_removes_the_member_that_did_not_rejoin():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b")
    # The leader rejoining forces a rebalance (e.g. it saw new partitions).
    t1 = shell.join(member_id=m1, client_id="a")
    assert t1 not in shell.responses
    assert shell.core.group("g").state is GroupState.PREPARING_REBALANCE
    # m2 keeps heartbeating but never rejoins
    shell.advance(5000)
    assert shell.heartbeat(m2, 1) == E.REBALANCE_IN_PROGRESS
    shell.advance(25_000)
    response = shell.responses[t1]
    assert response["generation_id"] == 2
    assert [m["member_id"] for m in response["members"]] == [m1]
    assert not shell.core.group("g").has(m2)
    assert shell.heartbeat(m2, 2) == E.UNKNOWN_MEMBER_ID
    assert HeartbeatTimer("g", m2) not in shell.timers


def test_member_id_required_and_pending_member_expiry():
    shell = Shell()
    first = shell.join(client_id="c", session_ms=6000)
    pending = shell.responses[first]["member_id"]
    group = shell.core.group("g")
    assert group.pending_members == {pending}
    assert shell.timers[HeartbeatTimer("g", pending)] == 6000
    # A made-up id is not accepted.
    made_up = shell.join(member_id="c-999", client_id="c")
    assert shell.responses[made_up]["error_code"] == E.UNKNOWN_MEMBER_ID
    # The pending member never comes back: its id is forgotten.
    shell.advance(6000)
    assert group.pending_members == set()
    late = shell.join(member_id=pending, client_id="c")
    assert shell.responses[late]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_join_before_v4_gets_a_member_id_at_once():
    shell = Shell()
    token = shell.join(client_id="old", version=3)
    assert token not in shell.responses
    shell.advance(3000)
    assert shell.responses[token]["error_code"] == E.NONE
    assert shell.responses[token]["member_id"] == "old-1"
    assert shell.responses[token]["protocol_name"] == "range"


def test_join_rejects_bad_session_timeout_and_inconsistent_protocols():
    shell = Shell()
    bad = shell.join(session_ms=5999)
    assert shell.responses[bad]["error_code"] == E.INVALID_SESSION_TIMEOUT
    bad = shell.join(session_ms=1_800_001)
    assert shell.responses[bad]["error_code"] == E.INVALID_SESSION_TIMEOUT
    form_group(shell, "a")
    other = shell.join(protocols=[("roundrobin", b"x")], client_id="b")
    assert shell.responses[other]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    other = shell.join(protocol_type="connect", client_id="b")
    assert shell.responses[other]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    empty_group_id = shell.join(group_id="")
    assert shell.responses[empty_group_id]["error_code"] == E.INVALID_GROUP_ID


def test_protocol_is_chosen_by_vote_among_common_protocols():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    t1 = shell.join(member_id=m1, client_id="a", protocols=[("range", b"1"), ("roundrobin", b"2")])
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    shell.join(member_id=m2, client_id="b", protocols=[("roundrobin", b"3"), ("range", b"4")])
    m3 = shell.responses[shell.join(client_id="c")]["member_id"]
    shell.join(
        member_id=m3,
        client_id="c",
        protocols=[("sticky", b"5"), ("roundrobin", b"6"), ("range", b"7")],
    )
    shell.advance(6000)  # two members arrived during the first delay
    assert shell.responses[t1]["protocol_name"] == "roundrobin"
    assert [m["metadata"] for m in shell.responses[t1]["members"]] == [b"2", b"3", b"6"]


def test_followers_wait_for_the_leaders_assignment():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    t1 = shell.join(member_id=m1, client_id="a")
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    t2 = shell.join(member_id=m2, client_id="b")
    shell.advance(6000)  # two members arrived during the first delay
    assert shell.responses[t1]["leader"] == m1 == shell.responses[t2]["leader"]

    follower = shell.sync(m2, 1)
    assert follower not in shell.responses
    stale = shell.sync(m2, 0)
    assert shell.responses[stale]["error_code"] == E.ILLEGAL_GENERATION
    stranger = shell.sync("nobody", 1)
    assert shell.responses[stranger]["error_code"] == E.UNKNOWN_MEMBER_ID
    # a commit between JoinGroup and SyncGroup is told to wait for the rebalance
    commit = shell.commit({("t", 0): 1}, member_id=m2, generation=1)
    assert shell.responses[commit]["topics"][0]["partitions"][0]["error_code"] == (
        E.REBALANCE_IN_PROGRESS
    )

    leader = shell.sync(m1, 1, {m1: b"p0", m2: b"p1"})
    assert leader not in shell.responses and follower not in shell.responses
    shell.store_groups()
    assert shell.responses[leader]["assignment"] == b"p0"
    assert shell.responses[follower]["assignment"] == b"p1"
    assert shell.responses[follower]["error_code"] == E.NONE
    assert shell.core.group("g").state is GroupState.STABLE
    # A sync in the stable generation just returns the member's assignment.
    again = shell.sync(m2, 1)
    assert shell.responses[again]["assignment"] == b"p1"


def test_members_the_leader_leaves_out_get_an_empty_assignment():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b")
    t1 = shell.join(member_id=m1, client_id="a")
    t2 = shell.join(member_id=m2, client_id="b")
    assert shell.responses[t1]["generation_id"] == 2 == shell.responses[t2]["generation_id"]
    follower = shell.sync(m2, 2)
    shell.sync(m1, 2, {m1: b"all"})
    (write,) = shell.group_writes
    assert {m.member_id: m.assignment for m in write.value.members} == {m1: b"all", m2: b""}
    shell.store_groups()
    assert shell.responses[follower]["assignment"] == b""


def test_failed_assignment_store_sends_members_back_to_join():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    shell.join(member_id=m1, client_id="a")
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    shell.join(member_id=m2, client_id="b")
    shell.advance(6000)  # two members arrived during the first delay
    follower = shell.sync(m2, 1)
    leader = shell.sync(m1, 1, {m1: b"x", m2: b"y"})
    shell.store_groups(error=E.NOT_ENOUGH_REPLICAS)
    # Kafka maps the append error to what the client can act on
    assert shell.responses[leader]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert shell.responses[follower]["error_code"] == E.COORDINATOR_NOT_AVAILABLE
    assert shell.responses[follower]["assignment"] == b""
    assert shell.core.group("g").state is GroupState.PREPARING_REBALANCE


def test_members_that_never_sync_are_removed_at_the_sync_deadline():
    shell = Shell()
    m1 = shell.responses[shell.join(client_id="a")]["member_id"]
    shell.join(member_id=m1, client_id="a", rebalance_ms=20_000)
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    shell.join(member_id=m2, client_id="b", rebalance_ms=20_000)
    shell.advance(6000)  # two members arrived during the first delay
    shell.sync(m1, 1, {m1: b"x", m2: b"y"})
    shell.store_groups()
    assert shell.core.group("g").state is GroupState.STABLE
    assert shell.timers[SyncTimer("g")] == 26_000
    # m1 heartbeats; m2 never syncs
    for _ in range(4):
        shell.advance(5000)
        shell.heartbeat(m1, 1)
    group = shell.core.group("g")
    assert not group.has(m2)
    assert group.state is GroupState.PREPARING_REBALANCE


def test_heartbeat_answers_by_group_state_and_generation():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b")
    assert shell.heartbeat(m1, 1) == E.NONE
    assert shell.heartbeat(m1, 0) == E.ILLEGAL_GENERATION
    assert shell.heartbeat("stranger", 1) == E.UNKNOWN_MEMBER_ID
    assert shell.heartbeat(m1, 1, group_id="no-such-group") == E.UNKNOWN_MEMBER_ID
    deadline = shell.timers[HeartbeatTimer("g", m2)]
    shell.advance(1000)
    assert shell.heartbeat(m2, 1) == E.NONE
    assert shell.timers[HeartbeatTimer("g", m2)] == deadline + 1000  # re-armed
    shell.join(member_id=m1, client_id="a")
    assert shell.heartbeat(m2, 1) == E.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_the_member_and_rebalances():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b", session_ms=6000)
    for _ in range(3):
        shell.advance(3000)
        assert shell.heartbeat(m1, 1) in (E.NONE, E.REBALANCE_IN_PROGRESS)
    group = shell.core.group("g")
    assert not group.has(m2)
    assert group.state is GroupState.PREPARING_REBALANCE
    t1 = shell.join(member_id=m1, client_id="a", session_ms=6000)
    assert shell.responses[t1]["generation_id"] == 2
    assert [m["member_id"] for m in shell.responses[t1]["members"]] == [m1]


def test_a_new_member_parked_in_join_is_dropped_after_the_join_timeout():
    shell = Shell()
    (m1,) = form_group(shell, "a", session_ms=6000, rebalance_ms=600_000)
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    t2 = shell.join(member_id=m2, client_id="b", session_ms=6000, rebalance_ms=600_000)
    # m1 keeps heartbeating but never rejoins; m2 cannot heartbeat while parked
    for _ in range(100):
        shell.advance(3000)
        shell.heartbeat(m1, 1)
    assert shell.responses[t2]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert shell.responses[t2]["member_id"] == ""
    assert not shell.core.group("g").has(m2)


def test_leave_group_batch_and_last_member_leaving_empties_the_group():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b")
    response = shell.leave(MemberIdentity(m2, reason="closing"), MemberIdentity("ghost"))
    assert response["error_code"] == E.NONE
    assert response["members"] == [
        {"member_id": m2, "group_instance_id": None, "error_code": E.NONE},
        {"member_id": "ghost", "group_instance_id": None, "error_code": E.UNKNOWN_MEMBER_ID},
    ]
    group = shell.core.group("g")
    assert group.state is GroupState.PREPARING_REBALANCE
    t1 = shell.join(member_id=m1, client_id="a")
    assert shell.responses[t1]["generation_id"] == 2
    shell.sync(m1, 2, {m1: b"x"})
    shell.store_groups()

    # v0-v2: one member, the member's error at the top level
    assert shell.leave(MemberIdentity("ghost"), version=2)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert shell.leave(MemberIdentity(m1), version=1)["error_code"] == E.NONE
    # nobody left to rejoin: the join phase ends at once with an empty generation
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 3
    (write,) = shell.group_writes
    assert write.value.members == () and write.value.generation == 3
    assert shell.leave(MemberIdentity(m1), group_id="nope")["members"][0]["error_code"] == (
        E.UNKNOWN_MEMBER_ID
    )


def test_leave_of_a_member_parked_in_join_answers_its_join():
    shell = Shell()
    (m1,) = form_group(shell, "a")
    m2 = shell.responses[shell.join(client_id="b")]["member_id"]
    t2 = shell.join(member_id=m2, client_id="b")
    shell.leave(MemberIdentity(m2))
    assert shell.responses[t2]["error_code"] == E.UNKNOWN_MEMBER_ID
    t1 = shell.join(member_id=m1, client_id="a")
    assert shell.responses[t1]["generation_id"] == 2


def _static_group(shell: Shell, version: int = 9) -> tuple[str, str]:
    ta = shell.join(instance_id="ia", client_id="a", version=version)
    tb = shell.join(instance_id="ib", client_id="b", version=version)
    shell.advance(6000)  # two members arrived during the first delay
    a, b = shell.responses[ta]["member_id"], shell.responses[tb]["member_id"]
    assert (a, b) == ("ia-1", "ib-2")  # static member ids are prefixed by the instance id
    shell.sync(a, 1, {a: b"A", b: b"B"}, instance_id="ia")
    shell.sync(b, 1, instance_id="ib")
    shell.store_groups()
    assert shell.core.group("g").state is GroupState.STABLE
    return a, b


def test_static_member_rejoins_stable_group_without_rebalance():
    shell = Shell()
    a, b = _static_group(shell)
    rejoin = shell.join(instance_id="ib", client_id="b", version=8)
    group = shell.core.group("g")
    assert group.state is GroupState.STABLE  # no rebalance
    (write,) = shell.group_writes
    new_b = "ib-3"
    assert {m.member_id: m.group_instance_id for m in write.value.members} == {
        a: "ia",
        new_b: "ib",
    }
    assert rejoin not in shell.responses  # after the new member id is stored
    shell.store_groups()
    response = shell.responses[rejoin]
    assert response["error_code"] == E.NONE
    assert response["member_id"] == new_b
    assert response["generation_id"] == 1
    assert response["leader"] == a
    assert response["members"] == []
    assert group.get(new_b).assignment == b"B"
    # the old incarnation is fenced
    assert shell.heartbeat(b, 1, instance_id="ib") == E.FENCED_INSTANCE_ID
    assert shell.heartbeat(new_b, 1, instance_id="ib") == E.NONE
    sync = shell.sync(new_b, 1, instance_id="ib")
    assert shell.responses[sync]["assignment"] == b"B"


def test_static_leader_rejoin_v9_is_told_to_skip_assignment():
    shell = Shell()
    _a, b = _static_group(shell)
    rejoin = shell.join(instance_id="ia", client_id="a", version=9)
    shell.store_groups()
    response = shell.responses[rejoin]
    assert response["member_id"] == "ia-3"
    assert response["leader"] == "ia-3"
    assert response["skip_assignment"] is True
    assert {m["member_id"] for m in response["members"]} == {"ia-3", b}
    assert shell.core.group("g").state is GroupState.STABLE


def test_static_member_rejoin_with_a_failed_store_reverts_to_the_old_member_id():
    shell = Shell()
    _a, b = _static_group(shell)
    rejoin = shell.join(instance_id="ib", client_id="b")
    shell.store_groups(error=E.NOT_LEADER_OR_FOLLOWER)
    assert shell.responses[rejoin]["error_code"] == E.NOT_COORDINATOR
    assert shell.responses[rejoin]["member_id"] == ""
    assert shell.core.group("g").current_static_member_id("ib") == b
    assert shell.heartbeat(b, 1, instance_id="ib") == E.NONE


def test_static_member_with_changed_protocol_triggers_a_rebalance_and_is_kept_on_timeout():
    shell = Shell()
    a, _b = _static_group(shell)
    rejoin = shell.join(instance_id="ib", client_id="b", protocols=[("range", b"new")])
    # Same protocol selected: no rebalance, even though the metadata changed.
    assert shell.core.group("g").state is GroupState.STABLE
    shell.store_groups()
    assert shell.responses[rejoin]["error_code"] == E.NONE
    # A leader rejoin starts a rebalance; the static follower does not come back in time
    # but, unlike a dynamic member, keeps its place until its session expires.
    new_b = shell.responses[rejoin]["member_id"]
    ta = shell.join(member_id=a, instance_id="ia", client_id="a")
    shell.advance(10_000)  # b's session (10 s) expires first: it is removed
    assert shell.responses[ta]["generation_id"] == 2
    assert not shell.core.group("g").has(new_b)


def test_static_member_that_does_not_rejoin_keeps_its_place_until_its_session_expires():
    shell = Shell()
    ta = shell.join(instance_id="ia", client_id="a", session_ms=20_000, rebalance_ms=5000)
    tb = shell.join(instance_id="ib", client_id="b", session_ms=20_000, rebalance_ms=5000)
    shell.advance(6000)
    a, b = shell.responses[ta]["member_id"], shell.responses[tb]["member_id"]
    shell.sync(a, 1, {a: b"A", b: b"B"}, instance_id="ia")
    shell.sync(b, 1, instance_id="ib")
    shell.store_groups()
    rejoin = shell.join(
        member_id=a, instance_id="ia", client_id="a", session_ms=20_000, rebalance_ms=5000
    )
    shell.advance(3000)
    assert shell.heartbeat(b, 1, instance_id="ib") == E.REBALANCE_IN_PROGRESS
    shell.advance(2000)  # the rebalance timeout: a dynamic member would be dropped here
    response = shell.responses[rejoin]
    assert response["generation_id"] == 2
    assert {m["member_id"] for m in response["members"]} == {a, b}
    assert shell.core.group("g").has(b)
    shell.sync(a, 2, {a: b"A", b: b"B"}, instance_id="ia")
    shell.store_groups()
    # but b never sends SyncGroup for generation 2: it goes at the sync deadline
    shell.advance(4999)
    assert shell.core.group("g").has(b)
    shell.advance(1)
    assert not shell.core.group("g").has(b)
    assert shell.core.group("g").state is GroupState.PREPARING_REBALANCE


def test_static_member_rejoining_during_completing_rebalance_restarts_the_rebalance():
    shell = Shell()
    ta = shell.join(instance_id="ia", client_id="a")
    tb = shell.join(instance_id="ib", client_id="b")
    shell.advance(6000)  # two members arrived during the first delay
    b = shell.responses[tb]["member_id"]
    follower_sync = shell.sync(b, 1, instance_id="ib")
    rejoin = shell.join(instance_id="ib", client_id="b")
    assert shell.responses[follower_sync]["error_code"] == E.FENCED_INSTANCE_ID
    group = shell.core.group("g")
    assert group.state is GroupState.PREPARING_REBALANCE
    a = shell.responses[ta]["member_id"]
    ta2 = shell.join(member_id=a, instance_id="ia", client_id="a")
    assert shell.responses[ta2]["generation_id"] == 2
    assert shell.responses[rejoin]["generation_id"] == 2


def test_group_max_size():
    shell = Shell(GroupConfig(offsets_topic_num_partitions=1, group_max_size=1))
    form_group(shell, "a")
    # the size check comes before a member id is handed out
    t = shell.join(client_id="b")
    assert shell.responses[t]["error_code"] == E.GROUP_MAX_SIZE_REACHED
    assert shell.responses[t]["member_id"] == ""
    assert shell.core.group("g").pending_members == set()


def test_every_request_is_answered_exactly_once():
    shell = Shell()
    m1, m2 = form_group(shell, "a", "b")
    shell.join(member_id=m1, client_id="a")
    shell.join(member_id=m2, client_id="b")
    shell.leave(MemberIdentity(m2))
    shell.advance(60_000)
    assert all(count == 1 for count in shell.answer_counts.values())


def test_stale_timer_firings_are_ignored():
    shell = Shell()
    m1, _ = form_group(shell, "a", "b")
    key = HeartbeatTimer("g", m1)
    old_deadline = shell.timers[key]
    shell.now = old_deadline - 1
    shell.heartbeat(m1, 1)  # re-arms the deadline
    # the shell's old timer fires late anyway
    assert shell.core.on_timer(key, old_deadline) == []
    assert shell.core.group("g").has(m1)
    assert shell.core.on_timer(JoinTimer("nope"), 10**9) == []


def test_group_state_table_and_member_helpers():
    assert VALID_PREVIOUS_STATES[GroupState.STABLE] == {GroupState.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS_STATES[GroupState.EMPTY] == {GroupState.PREPARING_REBALANCE}
    group = GroupMetadata("g", GroupState.EMPTY, 0)
    with pytest.raises(RuntimeError):
        group.transition_to(GroupState.STABLE, 1)
    assert group.can_rebalance
    group.transition_to(GroupState.PREPARING_REBALANCE, 5)
    assert not group.can_rebalance
    assert group.current_state_timestamp == 5
    member = MemberMetadata("m", None, "c", "h", 1, 1, "consumer", list(RANGE))
    assert member.matches(RANGE)
    assert not member.matches([("range", b"other")])
    assert member.vote({"range", "x"}) == "range"


def test_storing_an_empty_generation_is_a_store_group_effect():
    shell = Shell()
    (m1,) = form_group(shell, "a")
    shell.leave(MemberIdentity(m1))
    (write,) = [w for w in shell.log if isinstance(w, StoreGroup)][-1:]
    assert write.value.generation == 2
    assert write.value.protocol is None
    shell.store_groups(error=E.REQUEST_TIMED_OUT)  # only logged
    assert shell.core.group("g").state is GroupState.EMPTY
