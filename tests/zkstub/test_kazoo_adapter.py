"""The kazoo adapter (`zookeeper://`) against a real ZooKeeper: the ZkClient contract's
calls, error mapping, watches, states and expiry hooks."""

from __future__ import annotations

import pytest
import trio

import zkstub
from zkstub.testing import find_zookeeper_classpath, java_available, run_real_zookeeper

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
async def real(require_external, tmp_path):
    require_external(
        "ZooKeeper",
        java_available() and find_zookeeper_classpath() is not None,
        "apt-get install zookeeper libslf4j-java default-jre-headless",
    )
    async with run_real_zookeeper(tmp_path, tick_ms=200) as server:
        yield server


@pytest.fixture
async def zk(real):
    async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=2.0) as client:
        yield client


async def test_create_get_set_exists_children_delete(zk):
    assert await zk.create("/a", b"x") == "/a"
    data, stat = await zk.get("/a")
    assert (data, stat.version, stat.dataLength) == (b"x", 0, 1)
    stat = await zk.set("/a", b"yz", version=0)
    assert (stat.version, stat.dataLength) == (1, 2)
    assert (await zk.exists("/a")).version == 1
    assert await zk.exists("/missing") is None
    await zk.create("/a/c", b"")
    await zk.create("/a/b", b"")
    assert await zk.get_children("/a") == ["b", "c"]
    await zk.delete("/a", recursive=True)
    assert await zk.exists("/a") is None


async def test_make_parents_sequence_and_ephemeral(zk):
    assert await zk.create("/p/q/r", b"v", make_parents=True) == "/p/q/r"
    path = await zk.create("/p/s-", b"", sequence=True)
    assert path == "/p/s-0000000001"  # /p has one child already
    await zk.create("/p/e", b"", ephemeral=True)
    assert (await zk.exists("/p/e")).ephemeralOwner == zk.session_id


async def test_null_data_is_distinct_from_empty(zk):
    await zk.create("/null", None)
    await zk.create("/empty", b"")
    await zk.multi([zkstub.Op.create("/null-in-multi", None), zkstub.Op.set("/empty", None)])
    assert (await zk.get("/null"))[0] is None
    assert (await zk.get("/null-in-multi"))[0] is None
    assert (await zk.get("/empty"))[0] is None
    await zk.set("/null", b"")
    assert (await zk.get("/null"))[0] == b""


async def test_session_timeout_is_the_negotiated_one(real):
    # tick 200 ms: ZooKeeper caps sessions at 20 ticks
    async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=30.0) as zk:
        assert zk.session_timeout == 4.0


async def test_errors_carry_zookeeper_codes(zk):
    with pytest.raises(zkstub.NoNodeError) as info:
        await zk.get("/nope")
    assert info.value.code == -101
    await zk.create("/x", b"")
    with pytest.raises(zkstub.NodeExistsError):
        await zk.create("/x", b"")
    with pytest.raises(zkstub.BadVersionError):
        await zk.set("/x", b"", version=7)
    await zk.create("/x/y", b"")
    with pytest.raises(zkstub.NotEmptyError):
        await zk.delete("/x")
    await zk.create("/eph", b"", ephemeral=True)
    with pytest.raises(zkstub.NoChildrenForEphemeralsError):
        await zk.create("/eph/child", b"")


async def test_multi_results_and_failed_transaction(zk):
    await zk.create("/m", b"")
    ok = await zk.multi(
        [zkstub.Op.check("/m", 0), zkstub.Op.create("/m/n", b"1"), zkstub.Op.set("/m", b"z")]
    )
    assert ok[0] is True and ok[1] == "/m/n" and ok[2].version == 1
    failed = await zk.multi(
        [zkstub.Op.create("/m/o", b""), zkstub.Op.delete("/absent"), zkstub.Op.set("/m", b"")]
    )
    assert [type(result) for result in failed] == [
        zkstub.RolledBackError,
        zkstub.NoNodeError,
        zkstub.RuntimeInconsistencyError,
    ]
    assert await zk.exists("/m/o") is None


async def test_watches_arrive_on_trio_side_in_order_before_replies(zk):
    events = []
    await zk.create("/w", b"")
    await zk.get("/w", watch=events.append)
    await zk.get_children("/w", watch=events.append)
    await zk.exists("/w/new", watch=events.append)
    await zk.create("/w/new", b"")
    await zk.set("/w", b"changed")
    assert events == [
        zkstub.WatchedEvent(zkstub.EventType.CREATED, "/w/new"),  # ZooKeeper: node, then parent
        zkstub.WatchedEvent(zkstub.EventType.CHILD, "/w"),
        zkstub.WatchedEvent(zkstub.EventType.CHANGED, "/w"),
    ]
    await zk.exists("/w/new", watch=events.append)
    await zk.delete("/w/new")
    assert events[-1] == zkstub.WatchedEvent(zkstub.EventType.DELETED, "/w/new")


async def test_chroot_is_stripped(real):
    async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=2.0) as root:
        await root.create("/kafka", b"")
    async with zkstub.connect(
        f"zookeeper://{real.connect_string}/kafka", session_timeout=2.0
    ) as zk:
        assert zk.chroot == "/kafka"
        assert await zk.create("/brokers/ids", b"", make_parents=True) == "/brokers/ids"
    async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=2.0) as root:
        assert await root.exists("/kafka/brokers/ids") is not None


async def test_closed_client_raises_closed_error(real):
    states = []
    async with zkstub.connect(f"zookeeper://{real.connect_string}", session_timeout=2.0) as zk:
        zk.add_listener(states.append)
    assert zk.state is zkstub.ClientState.CLOSED
    assert states[-1] is zkstub.ClientState.CLOSED
    with pytest.raises(zkstub.ClosedError):
        await zk.get("/")


async def test_expiry_runs_before_hooks_then_new_session_then_after_hooks(real, zk):
    steps = []
    states = []
    renewed = trio.Event()
    old_session = zk.session_id
    await zk.create("/owned", b"", ephemeral=True)

    async def before():
        steps.append(("before", zk.state))
        with pytest.raises(zkstub.SessionExpiredError):
            await zk.get("/")

    async def after():
        steps.append(("after", zk.state, zk.session_id != old_session))
        renewed.set()

    zk.add_session_hooks(before, after)
    zk.add_listener(states.append)
    await real.expire_session(zk.session_id, zk.session_password)
    with trio.fail_after(30):
        await renewed.wait()
    assert steps == [
        ("before", zkstub.ClientState.EXPIRED),
        ("after", zkstub.ClientState.CONNECTED, True),
    ]
    assert zkstub.ClientState.EXPIRED in states and states[-1] is zkstub.ClientState.CONNECTED
    assert await zk.exists("/owned") is None


async def test_abort_leaves_the_session_and_its_ephemerals_to_expire(real):
    """A crashed process, through kazoo: the connection goes without a CloseRequest, so
    ZooKeeper keeps the session's ephemeral until the session times out (a clean close would
    delete it at once)."""
    hosts = f"zookeeper://{real.connect_string}"
    async with zkstub.connect(hosts, session_timeout=2.0) as observer:
        async with zkstub.connect(hosts, session_timeout=2.0) as crashed:
            await crashed.create("/registration", b"", ephemeral=True)
            crashed.abort()
            assert crashed.state is zkstub.ClientState.CLOSED
            stat = await observer.exists("/registration")
            assert stat is not None and stat.ephemeralOwner == crashed.session_id
            with trio.fail_after(30):
                while await observer.exists("/registration") is not None:
                    await trio.sleep(0.1)  # real time: the real server's session expiry
