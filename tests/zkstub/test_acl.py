"""ACLs and digest authentication: the sans-IO rules (`zkstub._acl`, the tree's checks),
the super digest, and ACLs across a restart. What every client sees, on zkstub and on a
real ZooKeeper, is in tests/conformance/test_acl.py."""

import pytest

import zkstub
from actors.testing import poll_until
from zkstub import ACL, ClientState, Perms
from zkstub._acl import (
    SUPER,
    allowed,
    authenticate,
    fixup_acl,
    parse_acl,
    perms_to_letters,
    redacted,
)
from zkstub._server import open_server
from zkstub._snapshot import restore_snapshot, take_snapshot
from zkstub._tree import DataTree
from zkstub._types import CreateOp, DeleteOp, SetACLOp, SetDataOp

ALICE_ID = ("digest", "alice:JYdjG/dL2+v79QyuS8/0gpT+rQQ=")
ALICE_ALL = (ACL(Perms.ALL, *ALICE_ID),)


def test_digest_is_zookeepers():
    # What ZooKeeper 3.8's DigestAuthenticationProvider main prints for these.
    assert zkstub.digest("alice:alice-secret") == ALICE_ID[1]
    assert zkstub.digest("super:s3cret") == "super:3/BRixgtJK5zIu/gWZCB29+Rzoo="


def test_authenticate_knows_digest_and_the_super_digest_only():
    assert authenticate("digest", b"alice:alice-secret") == [ALICE_ID]
    super_digest = zkstub.digest("super:s3cret")
    assert authenticate("digest", b"super:s3cret", super_digest)[0] == SUPER
    assert authenticate("digest", b"super:wrong", super_digest)[0] != SUPER
    assert authenticate("sasl", b"alice") == []


def test_fixup_expands_auth_and_refuses_what_is_invalid():
    identities = [("ip", "127.0.0.1"), ALICE_ID]
    creator = fixup_acl("/n", identities, zkstub.CREATOR_ALL_ACL)
    assert creator == ALICE_ALL  # ip is not an authenticated scheme
    world_twice = (*zkstub.OPEN_ACL_UNSAFE, *zkstub.OPEN_ACL_UNSAFE)
    assert fixup_acl("/n", (), world_twice) == zkstub.OPEN_ACL_UNSAFE
    for invalid in [(), zkstub.CREATOR_ALL_ACL, (ACL(31, "digest", "no-colon"),),
                    (ACL(31, "ip", "300.1.1.1"),), (ACL(31, "sasl", "bob"),)]:  # fmt: skip
        with pytest.raises(zkstub.InvalidACLError):
            fixup_acl("/n", [("ip", "127.0.0.1")], invalid)


def test_allowed_per_permission_scheme_and_address():
    acl = (ACL(Perms.READ, "world", "anyone"), ACL(Perms.WRITE, "ip", "10.0.0.0/8"), *ALICE_ALL)
    assert allowed(acl, Perms.READ, ())
    assert not allowed(acl, Perms.WRITE, ())
    assert allowed(acl, Perms.WRITE, [("ip", "10.1.2.3")])
    assert not allowed(acl, Perms.WRITE, [("ip", "11.1.2.3")])
    assert not allowed(acl, Perms.ADMIN, [("ip", "10.1.2.3")])
    assert allowed(acl, Perms.ADMIN, [ALICE_ID])
    assert allowed(acl, Perms.ADMIN, [SUPER])
    assert allowed((), Perms.ADMIN, ())  # an empty ACL checks nothing, as ZooKeeper


def test_zkcli_acl_text():
    acl = parse_acl("world:anyone:r,digest:alice:JYdjG/dL2+v79QyuS8/0gpT+rQQ=:cdrwa")
    assert acl == (ACL(Perms.READ, "world", "anyone"), *ALICE_ALL)
    assert perms_to_letters(Perms.ALL) == "rwcda"
    assert redacted(ALICE_ALL) == (ACL(Perms.ALL, "digest", "alice:x"),)


def test_the_tree_checks_each_op_against_its_node_or_parent():
    tree = DataTree(clock=lambda: 0)
    alice = [ALICE_ID]
    parent_acl = (ACL(Perms.CREATE | Perms.READ, "world", "anyone"), *ALICE_ALL)
    tree.apply(1, CreateOp("/p", b"", acl=parent_acl), identities=alice)
    tree.apply(2, CreateOp("/p/c", b""))  # anyone may create under /p
    with pytest.raises(zkstub.NoAuthError):
        tree.apply(2, DeleteOp("/p/c"))  # but not delete there
    with pytest.raises(zkstub.NoAuthError):
        tree.apply(2, SetDataOp("/p", b"x"))
    with pytest.raises(zkstub.NoAuthError):
        tree.apply(2, SetACLOp("/p", zkstub.OPEN_ACL_UNSAFE))
    tree.apply(1, CreateOp("/q", b"", acl=ALICE_ALL), identities=alice)
    with pytest.raises(zkstub.NoAuthError):
        tree.get("/q", None, [("ip", "1.2.3.4")])
    assert tree.get("/q", None, alice)[0] == b""
    assert tree.get("/q")[0] == b""  # the server's own look (no identities) is not checked
    stat, _ = tree.apply(1, SetACLOp("/p", zkstub.OPEN_ACL_UNSAFE, 0), identities=alice)
    assert stat.aversion == 1
    with pytest.raises(zkstub.BadVersionError):
        tree.apply(1, SetACLOp("/p", zkstub.OPEN_ACL_UNSAFE, 0))
    tree.apply(2, DeleteOp("/p/c"))


def test_closing_a_session_removes_its_ephemerals_whatever_the_acls():
    tree = DataTree(clock=lambda: 0)
    tree.apply(1, CreateOp("/p", b"", acl=ALICE_ALL), identities=[ALICE_ID])
    tree.apply(1, CreateOp("/p/e", b"", ephemeral=True), identities=[ALICE_ID])
    tree.close_session(1)
    assert tree.exists("/p/e") is None


def test_a_snapshot_keeps_acls_and_reads_one_from_before_them():
    tree = DataTree(clock=lambda: 0)
    tree.apply(1, CreateOp("/secret", b"", acl=ALICE_ALL), identities=[ALICE_ID])
    snapshot = take_snapshot(tree, {})
    restored = DataTree(clock=lambda: 0)
    restore_snapshot(snapshot, restored)
    assert restored.nodes["/secret"].acl == ALICE_ALL
    assert restored.nodes["/zookeeper/config"].acl == zkstub.READ_ACL_UNSAFE
    # A snapshot written before ACLs: rows of path and the ten fields, all nodes open.
    old = {**snapshot, "nodes": [row[:11] for row in snapshot["nodes"]]}
    restore_snapshot(old, restored)
    assert restored.nodes["/secret"].acl == zkstub.OPEN_ACL_UNSAFE
    assert restored.nodes["/zookeeper/config"].acl == zkstub.READ_ACL_UNSAFE


async def test_the_super_digest_passes_every_check(autojump_clock):
    async with open_server(super_digest=zkstub.digest("super:s3cret")) as server:
        async with server.connect_local() as alice, server.connect_local() as admin:
            await alice.add_auth("digest", "alice:alice-secret")
            await alice.create("/secret", b"s", acl=ALICE_ALL)
            with pytest.raises(zkstub.NoAuthError):
                await admin.get("/secret")
            await admin.add_auth("digest", "super:s3cret")
            assert (await admin.get("/secret"))[0] == b"s"
            await admin.set_acl("/secret", zkstub.READ_ACL_UNSAFE)
            acl, _ = await alice.get_acl("/secret")
            assert acl == zkstub.READ_ACL_UNSAFE


async def test_acls_and_the_checks_of_logged_writes_survive_a_restart(autojump_clock, tmp_path):
    async with open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as alice, server.connect_local() as other:
            await alice.add_auth("digest", "alice:alice-secret")
            await alice.create("/mine", b"m", acl=zkstub.CREATOR_ALL_ACL)
            with pytest.raises(zkstub.NoAuthError):  # logged: its replay must fail too
                await other.set("/mine", b"x")
            await alice.set("/mine", b"n")
            await alice.create("/open")
            await alice.set_acl("/open", (ACL(Perms.READ, "world", "anyone"),))
    async with open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            with pytest.raises(zkstub.NoAuthError):
                await zk.get("/mine")
            await zk.add_auth("digest", "alice:alice-secret")
            assert (await zk.get_acl("/mine"))[0] == ALICE_ALL
            data, stat = await zk.get("/mine")
            assert (data, stat.version) == (b"n", 1)
            assert (await zk.get_acl("/open"))[1].aversion == 1
            server.write_snapshot()
    async with open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            assert (await zk.get_acl("/open"))[0] == zkstub.READ_ACL_UNSAFE


async def test_a_failed_authentication_closes_the_connection_not_the_session(autojump_clock):
    async with open_server() as server:
        async with server.connect_local() as zk:
            session = zk.session_id
            states = []
            zk.add_listener(states.append)
            with pytest.raises(zkstub.AuthFailedError):
                await zk.add_auth("sasl", "bob")
            await poll_until(lambda: states == [ClientState.SUSPENDED, ClientState.CONNECTED])
            await zk.create("/after")  # on a new connection, the same session
            assert zk.session_id == session
