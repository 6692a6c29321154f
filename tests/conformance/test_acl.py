"""ACLs and digest authentication, on every target (see conftest.py): what a client is
allowed, refused (NoAuth), and shown, as ZooKeeper 3.8 decides it."""

import pytest

import zkstub
from actors.testing import poll_until
from zkstub import ACL, ClientState, Perms

ALICE = "alice:alice-secret"
ALICE_ALL = (ACL(Perms.ALL, "digest", zkstub.digest(ALICE)),)


async def test_a_digest_acl_admits_its_user_and_refuses_others(open_client, base):
    alice, anonymous = await open_client(), await open_client()
    await alice.add_auth("digest", ALICE)
    await alice.create(f"{base}/secret", b"s", acl=ALICE_ALL)
    assert (await alice.get(f"{base}/secret"))[0] == b"s"
    await alice.set(f"{base}/secret", b"t")
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.get(f"{base}/secret")
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.set(f"{base}/secret", b"x")
    assert (await anonymous.exists(f"{base}/secret")).dataLength == 1  # 3.8.0: no check
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.create(f"{base}/secret/child")
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.get_acl(f"{base}/secret")
    # Deleting is the parent's business: its ACL is open.
    await anonymous.delete(f"{base}/secret")
    assert await alice.exists(f"{base}/secret") is None


async def test_a_wrong_password_is_a_different_identity(open_client, base):
    alice, mallory = await open_client(), await open_client()
    await alice.add_auth("digest", ALICE)
    await alice.create(f"{base}/secret", b"s", acl=ALICE_ALL)
    await mallory.add_auth("digest", "alice:guessed")  # digest never fails to authenticate
    with pytest.raises(zkstub.NoAuthError):
        await mallory.get(f"{base}/secret")


async def test_the_auth_scheme_stands_for_the_creators_identities(open_client, base):
    alice, anonymous = await open_client(), await open_client()
    with pytest.raises(zkstub.InvalidACLError):  # no identity to stand for yet
        await anonymous.create(f"{base}/mine", acl=zkstub.CREATOR_ALL_ACL)
    await alice.add_auth("digest", ALICE)
    read_all = ACL(Perms.READ, "world", "anyone")
    await alice.create(f"{base}/mine", b"m", acl=(*zkstub.CREATOR_ALL_ACL, read_all))
    acl, stat = await alice.get_acl(f"{base}/mine")
    assert set(acl) == {ALICE_ALL[0], read_all}
    assert stat.aversion == 0
    assert (await anonymous.get(f"{base}/mine"))[0] == b"m"
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.set(f"{base}/mine", b"x")
    # Without ADMIN, getACL hides the digest's hash.
    acl, _ = await anonymous.get_acl(f"{base}/mine")
    assert ACL(Perms.ALL, "digest", "alice:x") in acl


async def test_set_acl_needs_admin_and_checks_the_acl_version(open_client, base):
    alice, anonymous = await open_client(), await open_client()
    await alice.add_auth("digest", ALICE)
    await alice.create(f"{base}/n", b"", acl=ALICE_ALL)
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.set_acl(f"{base}/n", zkstub.OPEN_ACL_UNSAFE)
    with pytest.raises(zkstub.BadVersionError):
        await alice.set_acl(f"{base}/n", zkstub.OPEN_ACL_UNSAFE, version=3)
    stat = await alice.set_acl(f"{base}/n", zkstub.OPEN_ACL_UNSAFE, version=0)
    assert (stat.aversion, stat.version) == (1, 0)
    await anonymous.set(f"{base}/n", b"open now")
    with pytest.raises(zkstub.InvalidACLError):
        await alice.set_acl(f"{base}/n", ())
    with pytest.raises(zkstub.NoNodeError):
        await alice.set_acl(f"{base}/missing", zkstub.OPEN_ACL_UNSAFE)


async def test_permissions_are_checked_one_by_one(open_client, base):
    alice, anonymous = await open_client(), await open_client()
    await alice.add_auth("digest", ALICE)
    # Everyone may create children and read; only alice may delete them.
    acl = (ACL(Perms.CREATE | Perms.READ, "world", "anyone"), *ALICE_ALL)
    await alice.create(f"{base}/dir", acl=acl)
    await anonymous.create(f"{base}/dir/c")
    assert await anonymous.get_children(f"{base}/dir") == ["c"]
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.delete(f"{base}/dir/c")
    with pytest.raises(zkstub.NoAuthError):
        await anonymous.set(f"{base}/dir", b"x")
    await alice.delete(f"{base}/dir/c")


async def test_a_refused_op_fails_its_whole_multi(open_client, base):
    alice, anonymous = await open_client(), await open_client()
    await alice.add_auth("digest", ALICE)
    await alice.create(f"{base}/locked", acl=ALICE_ALL)
    results = await anonymous.multi(
        [zkstub.Op.create(f"{base}/free"), zkstub.Op.set(f"{base}/locked", b"x")]
    )
    assert isinstance(results[0], zkstub.RolledBackError)
    assert isinstance(results[1], zkstub.NoAuthError)
    assert await alice.exists(f"{base}/free") is None
    restricted = zkstub.Op.create(f"{base}/via-multi", b"", acl=ALICE_ALL)
    await alice.multi([restricted])
    assert (await alice.get_acl(f"{base}/via-multi"))[0] == ALICE_ALL


async def test_an_ip_acl_admits_its_address(open_client, target, base):
    zk = await open_client()
    acl = (ACL(Perms.ALL, "ip", "127.0.0.0/8"),)
    await zk.create(f"{base}/local-only", b"here", acl=acl)
    if target[0] == "local":  # an in-process client has no address for an ip ACL to admit
        with pytest.raises(zkstub.NoAuthError):
            await zk.get(f"{base}/local-only")
        return
    assert (await zk.get(f"{base}/local-only"))[0] == b"here"
    await zk.set_acl(f"{base}/local-only", (ACL(Perms.ALL, "ip", "10.0.0.1"),))
    with pytest.raises(zkstub.NoAuthError):
        await zk.get(f"{base}/local-only")


async def test_the_built_in_config_node_is_read_only(open_client):
    zk = await open_client()
    acl, stat = await zk.get_acl("/zookeeper/config")
    assert stat.aversion == -1  # as ZooKeeper reports it
    assert acl == zkstub.READ_ACL_UNSAFE
    with pytest.raises(zkstub.NoAuthError):
        await zk.set("/zookeeper/config", b"x")


async def test_authentication_survives_a_reconnection(open_client, controls, base):
    alice = await open_client()
    await alice.add_auth("digest", ALICE)
    await alice.create(f"{base}/secret", b"s", acl=ALICE_ALL)
    states = []
    alice.add_listener(states.append)
    await controls.drop_connection(alice)
    await poll_until(lambda: ClientState.SUSPENDED in states)
    await poll_until(lambda: alice.state is ClientState.CONNECTED)
    # The client authenticated its new connection again before anything else.
    assert (await alice.get(f"{base}/secret"))[0] == b"s"


async def test_an_unknown_scheme_fails_authentication(open_client):
    zk = await open_client()
    with pytest.raises(zkstub.AuthFailedError):
        await zk.add_auth("no-such-scheme", "whatever")
