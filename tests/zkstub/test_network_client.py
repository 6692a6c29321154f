"""The network client against a zkstub server on a SimNetwork, on virtual time."""

import contextlib
import random

import pytest
import trio

import transport
import zkstub
from zkstub import ClientState, EventType, WatchedEvent


@contextlib.asynccontextmanager
async def sim_server(tick_time=1.0):
    network = transport.SimNetwork(0)
    async with zkstub.open_server(
        network=network.node("zk"), address=("zk", 2181), tick_time=tick_time
    ) as server:
        yield network, server


def client(network, name, session_timeout=6.0):
    return zkstub.connect(
        "zk:2181", session_timeout=session_timeout, network=network.node(name),
        rng=random.Random(name),
    )  # fmt: skip


async def wait_for(predicate):
    with trio.fail_after(120):  # virtual seconds: a missing event fails, never hangs
        while not predicate():
            await trio.sleep(0.05)


async def test_session_survives_a_dropped_connection_with_its_watches(autojump_clock):
    async with sim_server() as (network, server), client(network, "c1") as zk:
        async with client(network, "c2") as other:
            states = []
            zk.add_listener(states.append)
            sid = zk.session_id
            await zk.create("/e", b"", ephemeral=True)
            events = []
            await zk.get("/e", watch=events.append)
            server.drop_connections(sid)
            await wait_for(lambda: ClientState.SUSPENDED in states)
            await other.set("/e", b"while away")  # held for the session, sent on reconnect
            await wait_for(lambda: zk.state is ClientState.CONNECTED)
            assert zk.session_id == sid
            assert (await zk.get("/e"))[0] == b"while away"
            assert events == [WatchedEvent(EventType.CHANGED, "/e")]
            assert (await other.exists("/e")).ephemeralOwner == sid


async def test_a_watch_event_lost_with_its_connection_fires_after_the_reconnect(autojump_clock):
    """The server fires a watch into a connection that is already dead on the client's
    side (the push sits on a cut link, and the client gives up on that connection): the
    reconnect's setWatches brings the event back, as ZooKeeper's does."""
    async with sim_server() as (network, _server), client(network, "c1") as zk:
        async with client(network, "c2") as other:
            states = []
            zk.add_listener(states.append)
            children = []
            await zk.get_children("/", watch=children.append)
            network.partition(["c1"], ["zk"])  # held, not lost, until the heal
            await other.create("/new", b"")  # fires c1's watch: the push is held
            await wait_for(lambda: ClientState.SUSPENDED in states)
            network.heal()
            await wait_for(lambda: zk.state is ClientState.CONNECTED)
            await wait_for(lambda: children)
            assert children == [WatchedEvent(EventType.CHILD, "/")]


async def test_a_request_waiting_out_a_disconnection_fails_when_its_session_expires(
    autojump_clock,
):
    """It must not run later in the next session (ZooKeeper fails it with
    SessionExpired), nor wait forever for its own session to come back."""
    async with sim_server() as (network, server), client(network, "c1") as zk:
        async with client(network, "c2") as other:
            states = []
            zk.add_listener(states.append)
            old = zk.session_id
            network.partition(["c1"], ["zk"])
            await wait_for(lambda: ClientState.SUSPENDED in states)
            outcome = []

            async def waiting_create():
                try:
                    await zk.create("/late", b"")
                    outcome.append("created")
                except zkstub.SessionExpiredError:
                    outcome.append("expired")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiting_create)
                await server.expire_session(old)
                network.heal()
                await wait_for(lambda: outcome)
            assert outcome == ["expired"]
            await wait_for(lambda: zk.state is ClientState.CONNECTED)
            assert zk.session_id != old
            assert await other.exists("/late") is None


async def test_watch_event_arrives_before_the_reply_that_shows_the_change(autojump_clock):
    async with sim_server() as (network, _server), client(network, "c1") as zk:
        async with client(network, "c2") as other:
            events = []
            await zk.exists("/n", watch=events.append)
            await other.create("/n", b"v")
            data, _ = await zk.get("/n")
            assert data == b"v"
            assert events == [WatchedEvent(EventType.CREATED, "/n")]


async def test_partition_longer_than_the_timeout_expires_the_session(autojump_clock):
    async with sim_server() as (network, _server), client(network, "c1", 4.0) as zk:
        async with client(network, "c2", 20.0) as other:
            await zk.create("/e", ephemeral=True)
            deleted = []
            await other.exists("/e", watch=deleted.append)
            log = []

            async def before():
                log.append(("before", zk.state))

            async def after():
                log.append(("after", zk.state))

            zk.add_session_hooks(before, after)
            old = zk.session_id
            network.partition(["c1"], ["zk"])
            await wait_for(lambda: deleted)
            assert deleted == [WatchedEvent(EventType.DELETED, "/e")]
            network.heal()
            await wait_for(lambda: len(log) == 2)
            assert log == [("before", ClientState.EXPIRED), ("after", ClientState.CONNECTED)]
            assert zk.session_id != old
            await zk.create("/again", ephemeral=True)
            assert (await other.exists("/again")).ephemeralOwner == zk.session_id


async def test_heartbeats_keep_an_idle_session_alive(autojump_clock):
    async with sim_server() as (network, _server), client(network, "c1", 4.0) as zk:
        await zk.create("/e", ephemeral=True)
        await trio.sleep(60)
        assert zk.state is ClientState.CONNECTED
        assert await zk.exists("/e") is not None


async def test_abort_keeps_the_session_until_the_server_expires_it(autojump_clock):
    async with sim_server() as (network, _server), client(network, "c2") as other:
        async with client(network, "c1", 4.0) as zk:
            await zk.create("/e", ephemeral=True)
            zk.abort()
        assert await other.exists("/e") is not None
        with trio.fail_after(30):
            while await other.exists("/e") is not None:
                await trio.sleep(0.5)


async def test_close_removes_ephemerals_at_once(autojump_clock):
    async with sim_server() as (network, _server), client(network, "c2") as other:
        async with client(network, "c1") as zk:
            await zk.create("/e", ephemeral=True)
        assert await other.exists("/e") is None
        with pytest.raises(zkstub.ClosedError):
            await zk.get("/")


async def test_watches_are_set_again_after_a_server_restart(autojump_clock, tmp_path):
    network = transport.SimNetwork(0)

    def server():
        return zkstub.open_server(
            network=network.node("zk"), address=("zk", 2181), tick_time=1.0, data_dir=tmp_path
        )

    async with server():
        async with client(network, "setup") as setup:
            await setup.create("/data", b"0")
            await setup.create("/dir")
    async with trio.open_nursery() as nursery:
        restarted = trio.Event()
        events = []

        async def watcher(*, task_status=trio.TASK_STATUS_IGNORED):
            async with client(network, "c1", 10.0) as zk:
                await zk.get("/data", watch=events.append)
                await zk.exists("/new", watch=events.append)
                await zk.get_children("/dir", watch=events.append)
                sid = zk.session_id
                task_status.started()
                await restarted.wait()
                await wait_for(lambda: len(events) == 3)
                assert zk.session_id == sid

        async with server():
            await nursery.start(watcher)
        # the server is down; it comes back with the session, but no watches
        async with server(), client(network, "c2") as other:
            await other.set("/data", b"1")
            await other.create("/new")
            await other.create("/dir/x")
            restarted.set()
            await wait_for(lambda: len(events) == 3)
            assert sorted(events, key=lambda e: e.path) == [
                WatchedEvent(EventType.CHANGED, "/data"),
                WatchedEvent(EventType.CHILD, "/dir"),
                WatchedEvent(EventType.CREATED, "/new"),
            ]
