"""zkstub's client over jute (`JuteLink`) against a real ZooKeeper 3.8: the calls and their
errors, watches, ephemeral and sequential nodes, multi, a reconnect that keeps the session
and its watches (and hears what changed while it was away), closeSession, and expiry.

One real server serves the whole module (a JVM takes seconds to start); it runs in a
thread with its own Trio loop, since each test runs in a fresh `trio.run`. Every test
works under its own path."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
import trio

import transport
import zkstub
from zkstub import ClientState, EventType, Op, WatchedEvent
from zkstub._client import open_client
from zkstub._jute_link import JuteLink
from zkstub.testing import RealZooKeeperThread, find_zookeeper_classpath, java_available

pytestmark = pytest.mark.zookeeper

SESSION_TIMEOUT = 4.0  # the most a 200 ms tick grants (20 ticks)
WAIT = 15.0  # for anything a test waits on


@pytest.fixture(scope="module")
def server(require_external):
    require_external(
        "ZooKeeper",
        java_available() and find_zookeeper_classpath() is not None,
        "apt-get install zookeeper libslf4j-java default-jre-headless",
    )
    with tempfile.TemporaryDirectory(prefix="zk-jute-") as data_dir:
        runner = RealZooKeeperThread(Path(data_dir), tick_ms=200)
        runner.start()
        try:
            yield runner
        finally:
            runner.stop()


@pytest.fixture
def base(request):
    """A path of the test's own (created by the test's first client)."""
    return f"/jute-{request.node.name.replace('[', '_').replace(']', '')}"


class GatedNetwork:
    """TcpNetwork whose connects wait while the gate is closed: a test holds a client
    disconnected while another changes what it watches."""

    def __init__(self) -> None:
        self._network = transport.TcpNetwork()
        self.open = True
        self._opened = trio.Event()

    def close_gate(self) -> None:
        self.open = False
        self._opened = trio.Event()

    def open_gate(self) -> None:
        self.open = True
        self._opened.set()

    async def connect(self, address, *, timeout=None):
        if not self.open:
            await self._opened.wait()
        return await self._network.connect(address, timeout=timeout)


@contextlib.asynccontextmanager
async def jute_client(server, *, network=None, chroot: str = ""):
    """A ZkClientImpl over a JuteLink to the real server, as `open_client` builds one.
    (open_client sets `link.nursery` only for RpcLink today: the link gets one here.)"""
    async with trio.open_nursery() as nursery:
        link = JuteLink(network or transport.TcpNetwork(), [("127.0.0.1", server.real.port)])
        link.nursery = nursery
        async with open_client(link, session_timeout=SESSION_TIMEOUT, chroot=chroot) as client:
            yield client
        nursery.cancel_scope.cancel()


class Events:
    """A watch callback that records what it is told."""

    def __init__(self) -> None:
        self.seen: list[WatchedEvent] = []
        self._changed = trio.Event()

    def __call__(self, event: WatchedEvent) -> None:
        self.seen.append(event)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, count: int) -> list[WatchedEvent]:
        with trio.fail_after(WAIT):
            while len(self.seen) < count:
                await self._changed.wait()
        return self.seen


async def _wait_state(client, state: ClientState) -> None:
    with trio.fail_after(WAIT):
        while client.state is not state:
            await client._state_changed.wait()


async def test_reads_writes_and_their_errors(server, base):
    async with jute_client(server) as zk:
        assert await zk.create(base, b"x") == base
        data, stat = await zk.get(base)
        assert (data, stat.version, stat.dataLength, stat.ephemeralOwner) == (b"x", 0, 1, 0)
        stat = await zk.set(base, b"yz", version=0)
        assert (stat.version, stat.dataLength) == (1, 2)
        assert (await zk.exists(base)).version == 1
        assert await zk.exists(f"{base}/missing") is None
        await zk.create(f"{base}/b", None)
        await zk.create(f"{base}/a")
        assert await zk.get_children(base) == ["a", "b"]
        assert (await zk.get(f"{base}/b"))[0] is None  # null data stays null
        with pytest.raises(zkstub.NodeExistsError):
            await zk.create(base)
        with pytest.raises(zkstub.NoNodeError):
            await zk.get(f"{base}/missing")
        with pytest.raises(zkstub.NoNodeError):
            await zk.create(f"{base}/missing/child")
        with pytest.raises(zkstub.BadVersionError):
            await zk.set(base, b"", version=7)
        with pytest.raises(zkstub.NotEmptyError):
            await zk.delete(base)
        await zk.delete(base, recursive=True)
        assert await zk.exists(base) is None


async def test_watches_fire_once_with_zookeepers_event_types(server, base):
    async with jute_client(server) as zk, jute_client(server) as other:
        await zk.create(base)
        data_events, child_events, exist_events = Events(), Events(), Events()
        await zk.get(base, watch=data_events)
        await zk.get_children(base, watch=child_events)
        assert await zk.exists(f"{base}/new", watch=exist_events) is None

        await other.set(base, b"changed")
        await other.create(f"{base}/new")
        assert await data_events.wait_for(1) == [WatchedEvent(EventType.CHANGED, base)]
        assert await child_events.wait_for(1) == [WatchedEvent(EventType.CHILD, base)]
        assert await exist_events.wait_for(1) == [WatchedEvent(EventType.CREATED, f"{base}/new")]
        # The event comes before the reply that follows it: the new data is there.
        assert (await zk.get(base))[0] == b"changed"

        deleted = Events()
        await zk.exists(f"{base}/new", watch=deleted)
        await other.delete(f"{base}/new")
        assert await deleted.wait_for(1) == [WatchedEvent(EventType.DELETED, f"{base}/new")]
        await other.set(base, b"again")  # one-shot: the data watch is spent
        assert (await zk.get(base))[0] == b"again"
        assert len(data_events.seen) == 1


async def test_chroot_paths(server, base):
    async with jute_client(server) as root:
        await root.create(base)
    async with jute_client(server, chroot=base) as zk:
        events = Events()
        assert await zk.create("/inside", b"") == "/inside"
        await zk.get("/inside", watch=events)
        await zk.set("/inside", b"v")
        assert await events.wait_for(1) == [WatchedEvent(EventType.CHANGED, "/inside")]


async def test_ephemeral_and_sequential_nodes(server, base):
    async with jute_client(server) as zk, jute_client(server) as other:
        await zk.create(base)
        first = await zk.create(f"{base}/s-", b"", sequence=True)
        second = await zk.create(f"{base}/s-", b"", sequence=True, ephemeral=True)
        assert (first, second) == (f"{base}/s-0000000000", f"{base}/s-0000000001")
        await zk.create(f"{base}/e", b"", ephemeral=True)
        assert (await other.exists(f"{base}/e")).ephemeralOwner == zk.session_id
        with pytest.raises(zkstub.NoChildrenForEphemeralsError):
            await zk.create(f"{base}/e/child")
        # closeSession, answered: the ephemerals are gone by the time the client is closed.
        await zk.aclose()
        assert await other.exists(f"{base}/e") is None
        assert await other.get_children(base) == ["s-0000000000"]


async def test_multi_success_and_failure(server, base):
    async with jute_client(server) as zk:
        await zk.create(base)
        results = await zk.multi(
            [
                Op.create(f"{base}/a", b"1"),
                Op.create(f"{base}/q-", b"", sequence=True),
                Op.set(f"{base}/a", b"2"),
                Op.check(f"{base}/a", 1),
                Op.delete(f"{base}/a"),
            ]
        )
        assert results[:2] == [f"{base}/a", f"{base}/q-0000000001"]
        assert isinstance(results[2], zkstub.Stat) and results[2].version == 1
        assert results[3:] == [True, True]
        assert await zk.exists(f"{base}/a") is None

        results = await zk.multi(
            [
                Op.create(f"{base}/b", b""),
                Op.check(f"{base}/q-0000000001", 5),
                Op.delete(f"{base}/q-0000000001"),
            ]
        )
        assert [type(r) for r in results] == [
            zkstub.RolledBackError,
            zkstub.BadVersionError,
            zkstub.RuntimeInconsistencyError,
        ]
        assert await zk.exists(f"{base}/b") is None  # nothing was applied
        assert await zk.exists(f"{base}/q-0000000001") is not None


async def test_a_lone_check_is_answered(server, base):
    async with jute_client(server) as zk:
        await zk.create(base)
        link = zk.link
        assert await link.call("check", [base, 0]) is True
        with pytest.raises(zkstub.BadVersionError):
            await link.call("check", [base, 3])
        with pytest.raises(zkstub.NoNodeError):
            await link.call("check", [f"{base}/missing", -1])


async def test_a_dropped_connection_keeps_the_session_and_its_watches(server, base):
    network = GatedNetwork()
    async with jute_client(server, network=network) as zk, jute_client(server) as other:
        await zk.create(base)
        await zk.create(f"{base}/kept", b"", ephemeral=True)
        changed_away, created_away, child_away = Events(), Events(), Events()
        await zk.get(base, watch=changed_away)
        assert await zk.exists(f"{base}/new", watch=created_away) is None
        await zk.get_children(base, watch=child_away)
        session = zk.session_id

        network.close_gate()
        zk.link.drop()
        await _wait_state(zk, ClientState.SUSPENDED)
        await other.set(base, b"while away")  # the server has no watch on it now
        await other.create(f"{base}/new")
        network.open_gate()
        await _wait_state(zk, ClientState.CONNECTED)

        assert zk.session_id == session
        # setWatches with the last zxid seen: the server fires what changed meanwhile.
        assert await changed_away.wait_for(1) == [WatchedEvent(EventType.CHANGED, base)]
        assert await created_away.wait_for(1) == [WatchedEvent(EventType.CREATED, f"{base}/new")]
        assert await child_away.wait_for(1) == [WatchedEvent(EventType.CHILD, base)]
        assert (await other.exists(f"{base}/kept")).ephemeralOwner == session

        # A watch set again after the reconnect is served as before.
        again = Events()
        await zk.get(base, watch=again)
        await other.set(base, b"after")
        assert await again.wait_for(1) == [WatchedEvent(EventType.CHANGED, base)]


async def test_watches_unchanged_while_away_fire_later(server, base):
    async with jute_client(server) as zk, jute_client(server) as other:
        await zk.create(base)
        events = Events()
        await zk.get(base, watch=events)
        session = zk.session_id
        zk.link.drop()
        await _wait_state(zk, ClientState.SUSPENDED)
        await _wait_state(zk, ClientState.CONNECTED)
        assert zk.session_id == session
        await other.set(base, b"later")
        assert await events.wait_for(1) == [WatchedEvent(EventType.CHANGED, base)]


async def test_calls_on_a_dropped_connection_fail_with_connection_loss(server, base):
    async with jute_client(server) as zk:
        link = zk.link
        link.drop()
        with pytest.raises(zkstub.ConnectionLossError):
            await link.call("exists", ["/", False])


async def test_an_expired_session_is_replaced(server, base):
    network = GatedNetwork()
    async with jute_client(server, network=network) as zk, jute_client(server) as other:
        renewed = trio.Event()

        async def after_new_session() -> None:
            renewed.set()

        zk.add_session_hooks(after_initializing_session=after_new_session)
        await zk.create(base, b"", ephemeral=True)
        old_session = zk.session_id
        # Held disconnected, the client cannot take the session back from the expiring
        # connection (each connection to a session closes the one before).
        network.close_gate()
        zk.link.drop()
        await _wait_state(zk, ClientState.SUSPENDED)
        await server.call(server.real.expire_session, zk.session_id, zk.session_password)
        network.open_gate()
        # The reconnect is told the session is gone (a ConnectResponse with no timeout),
        # and a new one is opened.
        with trio.fail_after(WAIT):
            await renewed.wait()
        assert zk.session_id != old_session
        assert await other.exists(base) is None


async def test_session_ops_and_persistent_watches_across_a_reconnect(server, base):
    async with jute_client(server) as zk, jute_client(server) as other:
        await zk.create(base)
        await zk.create(f"{base}/e1", b"", ephemeral=True)
        await zk.create(f"{base}/d/x", b"", make_parents=True)
        assert await zk.get_ephemerals(base) == [f"{base}/e1"]
        assert await zk.get_all_children_number(base) == 3
        assert await zk.sync(base) == base

        persistent, recursive = Events(), Events()
        await zk.add_watch(base, persistent)
        await zk.add_watch(f"{base}/d", recursive, recursive=True)
        zk.link.drop()  # the watches go back in a setWatches2
        await _wait_state(zk, ClientState.SUSPENDED)
        await _wait_state(zk, ClientState.CONNECTED)
        await other.set(base, b"1")
        await other.set(f"{base}/d/x", b"2")
        await other.set(base, b"3")
        assert await persistent.wait_for(2) == [WatchedEvent(EventType.CHANGED, base)] * 2
        assert await recursive.wait_for(1) == [WatchedEvent(EventType.CHANGED, f"{base}/d/x")]

        await zk.remove_watches(base, zkstub.WatcherType.ANY)
        with pytest.raises(zkstub.NoWatcherError):
            await zk.link.call("check_watches", [base, zkstub.WatcherType.ANY.value])
