"""ZooKeeper 3.6+'s calls through zkstub's server and clients: persistent and recursive
watches (addWatch), removeWatches / checkWatches, getEphemerals, getAllChildrenNumber and
sync. The in-process client and the network client (zkstub's protocol over a SimNetwork on
virtual time, and once over TCP). kazoo 2.11 has none of these calls but sync, so they are
tested here rather than in the conformance contract (whose real-ZooKeeper target goes
through kazoo)."""

import contextlib
import random

import pytest
import trio
from kazoo.client import KazooClient

import transport
import zkstub
from zkstub import (
    AddWatchMode,
    BadArgumentsError,
    ClientState,
    EventType,
    NoNodeError,
    NoWatcherError,
    UnimplementedError,
    WatchedEvent,
    WatcherType,
)
from zkstub import _protocol as proto
from zkstub._kazoo_client import KazooZkClient


@contextlib.asynccontextmanager
async def serving(kind):
    """(server, open_client(chroot="")) for the in-process client or a SimNetwork one."""
    if kind == "local":
        async with zkstub.open_server() as server:
            yield server, lambda chroot="": server.connect_local(chroot=chroot)
        return
    network = transport.SimNetwork(0)
    async with zkstub.open_server(
        network=network.node("zk"), address=("zk", 2181), tick_time=1.0
    ) as server:
        names = iter(range(1000))

        def open_client(chroot=""):
            name = f"c{next(names)}"
            return zkstub.connect(
                f"zk:2181{chroot}", network=network.node(name), rng=random.Random(name)
            )

        yield server, open_client


KINDS = pytest.mark.parametrize("kind", ["local", "sim"])


async def wait_for(predicate, limit=120):
    with trio.fail_after(limit):  # virtual seconds but for the TCP test
        while not predicate():
            await trio.sleep(0.01)


def ev(kind, path):
    return WatchedEvent(kind, path)


async def settle(zk):
    """A round trip on zk's connection: the events pushed before its reply are in."""
    await zk.exists("/")


@KINDS
async def test_persistent_and_recursive_watchers_stay_after_firing(autojump_clock, kind):
    async with serving(kind) as (_, open_client):
        async with open_client() as zk, open_client() as writer:
            persistent, recursive = [], []
            await zk.add_watch("/p", persistent.append)
            await zk.add_watch("/r", recursive.append, recursive=True)
            await writer.create("/p")
            await writer.set("/p", b"1")
            await writer.set("/p", b"2")
            await writer.create("/p/c")
            await writer.set("/p/c", b"not seen")
            await writer.delete("/p", recursive=True)
            await writer.create("/r")
            await writer.create("/r/a/b", make_parents=True)
            await writer.set("/r/a/b", b"1")
            await writer.set("/r/a/b", b"2")
            await writer.create("/rx")  # "/r" is a string prefix of it, not a parent
            await settle(zk)
            assert persistent == [
                ev(EventType.CREATED, "/p"),
                ev(EventType.CHANGED, "/p"),
                ev(EventType.CHANGED, "/p"),
                ev(EventType.CHILD, "/p"),
                ev(EventType.CHILD, "/p"),  # /p/c deleted
                ev(EventType.DELETED, "/p"),
            ]
            assert recursive == [
                ev(EventType.CREATED, "/r"),
                ev(EventType.CREATED, "/r/a"),
                ev(EventType.CREATED, "/r/a/b"),
                ev(EventType.CHANGED, "/r/a/b"),
                ev(EventType.CHANGED, "/r/a/b"),
            ]


@KINDS
async def test_one_event_per_watcher_and_no_children_event_for_a_recursive_one(
    autojump_clock, kind
):
    async with serving(kind) as (_, open_client):
        async with open_client() as zk, open_client() as writer:
            await writer.create("/a/b", make_parents=True)
            events = []
            await zk.add_watch("/", events.append, recursive=True)
            await zk.add_watch("/a", events.append, recursive=True)
            await zk.add_watch("/a/b", events.append)
            await zk.get("/a/b", watch=events.append)
            children = []
            await zk.get_children("/a/b", watch=children.append)  # the server sends a CHILD
            await writer.set("/a/b", b"x")
            await writer.create("/a/b/c")
            await settle(zk)
            assert children == [ev(EventType.CHILD, "/a/b")]
            # the persistent watcher on /a/b gets the CHILD; the recursive ones do not
            assert events == [
                ev(EventType.CHANGED, "/a/b"),
                ev(EventType.CREATED, "/a/b/c"),
                ev(EventType.CHILD, "/a/b"),
            ]


async def test_watches_under_a_chroot(autojump_clock):
    async with serving("sim") as (_, open_client):
        async with open_client() as root:
            await root.create("/kafka")
            async with open_client("/kafka") as zk:
                events = []
                await zk.add_watch("/", events.append, recursive=True)
                await root.create("/kafka/x")
                await root.create("/kafkaesque")
                await root.set("/kafka", b"top")
                await settle(zk)
                assert events == [ev(EventType.CREATED, "/x"), ev(EventType.CHANGED, "/")]
                assert zk.watched_paths()[4] == ["/kafka"]


async def _reconnect_after(server, zk, writer, changes):
    """Cuts zk's connection and, before it can reconnect, makes `changes` ([op, args]
    requests of `writer`'s session, handled at once by the server); then waits for the
    reconnect and one round trip, so whatever the reconnect brought is in."""
    states = []
    zk.add_listener(states.append)
    server.drop_connections(zk.session_id)
    for op, args in changes:
        server.handle(writer.session_id, op, args)
    await wait_for(lambda: ClientState.SUSPENDED in states)
    await wait_for(lambda: zk.state is ClientState.CONNECTED)
    await settle(zk)
    zk.remove_listener(states.append)


async def test_persistent_watches_survive_a_reconnect_with_no_catch_up(autojump_clock):
    """As ZooKeeper: its server drops a connection's watches with it and the reconnect's
    setWatches2 registers persistent ones again, with no event for what changed in between
    (the client must read again); standard watches do get that event."""
    async with serving("sim") as (server, open_client):
        async with open_client() as zk, open_client() as writer:
            await writer.create("/p")
            await writer.create("/s")
            persistent, standard = [], []
            await zk.add_watch("/p", persistent.append)
            await zk.add_watch("/r", persistent.append, recursive=True)
            await zk.get("/s", watch=standard.append)
            changes = [
                ["set", ["/p", b"while away", -1]],
                ["create", ["/r", b"", False, False]],
                ["set", ["/s", b"while away", -1]],
            ]
            await _reconnect_after(server, zk, writer, changes)
            assert persistent == []
            assert standard == [ev(EventType.CHANGED, "/s")]
            await writer.set("/p", b"back")
            await writer.create("/r/x")
            await settle(zk)
            assert persistent == [ev(EventType.CHANGED, "/p"), ev(EventType.CREATED, "/r/x")]


async def test_a_local_client_gets_the_events_held_while_it_was_away(autojump_clock):
    """The in-process link reconnects without setWatches: the server kept the session's
    watches and hands over the events it held, persistent ones included (unlike
    ZooKeeper, where a persistent watch sees nothing of what changed while disconnected)."""
    async with serving("local") as (server, open_client):
        async with open_client() as zk, open_client() as writer:
            events = []
            await zk.add_watch("/p", events.append)
            await _reconnect_after(server, zk, writer, [["create", ["/p", b"", False, False]]])
            assert events == [ev(EventType.CREATED, "/p")]
            await writer.set("/p", b"back")
            await settle(zk)
            assert events[1:] == [ev(EventType.CHANGED, "/p")]


async def test_persistent_watch_survives_a_reconnect_over_tcp():
    async with zkstub.open_server(network=transport.TcpNetwork()) as server:
        host, port = server.address
        async with (
            zkstub.connect(f"{host}:{port}", session_timeout=10.0) as zk,
            zkstub.connect(f"{host}:{port}", session_timeout=10.0) as writer,
        ):
            events = []
            await zk.add_watch("/t", events.append, recursive=True)
            await _reconnect_after(server, zk, writer, [["create", ["/t", b"", False, False]]])
            assert events == []
            await writer.create("/t/u")
            await wait_for(lambda: events, limit=10)
            assert events == [ev(EventType.CREATED, "/t/u")]


@KINDS
async def test_closing_or_expiring_the_session_forgets_its_persistent_watches(autojump_clock, kind):
    async with serving(kind) as (server, open_client):
        async with open_client() as zk:
            await zk.add_watch("/p", lambda event: None)
            await zk.add_watch("/r", lambda event: None, recursive=True)
            assert (
                server.tree.data_watches.keys()
                == server.tree.child_watches.keys()
                == {
                    "/p",
                    "/r",
                }
            )
        assert (server.tree.data_watches, server.tree.child_watches) == ({}, {})
        async with open_client() as zk:
            await zk.add_watch("/p", lambda event: None)
            expired = zk.session_id
            await server.expire_session(expired)
            await wait_for(lambda: zk.state is ClientState.CONNECTED and zk.session_id != expired)
            assert zk.watched_paths() == ([], [], [], [], [])
            assert server.tree.data_watches == {}


@KINDS
async def test_remove_watches(autojump_clock, kind):
    async with serving(kind) as (server, open_client):
        async with open_client() as zk, open_client() as writer:
            await writer.create("/a")
            persistent, standard, other = [], [], []
            await zk.get("/a", watch=standard.append)
            await zk.exists("/a", watch=other.append)  # the same watch on the server
            await zk.add_watch("/b", persistent.append)
            with pytest.raises(NoWatcherError):
                await zk.remove_watches("/b", WatcherType.PERSISTENT_RECURSIVE)
            with pytest.raises(NoWatcherError):
                await zk.remove_watches("/a", WatcherType.CHILDREN, standard.append)
            # one watcher: only this client forgets it; the server keeps the session's watch
            await zk.remove_watches("/a", WatcherType.DATA, other.append)
            await writer.set("/a", b"x")
            await settle(zk)
            assert (standard, other) == ([ev(EventType.CHANGED, "/a")], [])
            # every watcher of the type: the server forgets too
            await zk.get("/a", watch=standard.append)
            await zk.remove_watches("/a", WatcherType.DATA)
            assert "/a" not in server.tree.data_watches
            await writer.set("/a", b"y")
            await settle(zk)
            assert len(standard) == 1
            await zk.remove_watches("/b", WatcherType.PERSISTENT)
            await writer.create("/b")
            await settle(zk)
            assert persistent == []
            assert zk.watched_paths() == ([], [], [], [], [])
            with pytest.raises(NoWatcherError):
                await zk.remove_watches("/a", WatcherType.ANY)


@KINDS
async def test_ephemerals_all_children_number_and_sync(autojump_clock, kind):
    async with serving(kind) as (_, open_client):
        async with open_client() as root:
            assert await root.get_all_children_number("/") == 3  # the /zookeeper nodes
            await root.create("/kafka/b", make_parents=True)
            await root.create("/mine", ephemeral=True)
            async with open_client("/kafka") as zk:
                await zk.create("/a", ephemeral=True)
                await zk.create("/b/c", ephemeral=True)
                await zk.create("/bc", ephemeral=True)
                assert await zk.get_ephemerals() == ["/a", "/b/c", "/bc"]
                assert await zk.get_ephemerals("/b") == ["/b/c", "/bc"]
                with pytest.raises(BadArgumentsError):  # a path, as ZooKeeper's client wants
                    await zk.get_ephemerals("/b/")
                assert await root.get_ephemerals() == ["/mine"]
                assert await zk.get_all_children_number("/") == 4
                assert await zk.get_all_children_number("/b") == 1
                assert await root.get_all_children_number("/") == 3 + 1 + 4 + 1
                with pytest.raises(NoNodeError):
                    await zk.get_all_children_number("/missing")
                assert await zk.sync("/a") == "/a"
                assert await zk.sync("/") == "/"
                with pytest.raises(BadArgumentsError):
                    await zk.sync("a")


def test_the_wire_checks_the_new_requests():
    assert proto.request_from_wire("add_watch", ["/a", 1]) == ("/a", 1)
    assert proto.request_from_wire("remove_watches", ["/a", 5]) == ("/a", 5)
    assert proto.request_from_wire("ephemerals", [""]) == ""
    assert proto.request_from_wire("sync", ["/a"]) == "/a"
    bad = [
        ("add_watch", ["/a", 2]),
        ("add_watch", ["/a", True]),
        ("add_watch", ["/a"]),
        ("remove_watches", ["/a", 0]),
        ("check_watches", ["a", 1]),
        ("ephemerals", [3]),
        ("all_children_number", ["/a/"]),
        ("sync", []),
    ]
    for op, args in bad:
        with pytest.raises(BadArgumentsError):
            proto.request_from_wire(op, args)
    old = proto.connect_from_wire([6.0, 1, b"pw", [7, ["/d"], [], []]])
    assert old.watches == (7, ["/d"], [], [], [], [])
    new = proto.connect_from_wire([6.0, 1, b"pw", [7, [], [], [], ["/p"], ["/r"]]])
    assert new.watches == (7, [], [], [], ["/p"], ["/r"])
    with pytest.raises(BadArgumentsError):
        proto.connect_from_wire([6.0, 1, b"pw", [7, [], [], [], ["/p"]]])
    with pytest.raises(BadArgumentsError):
        proto.connect_from_wire([6.0, 1, b"pw", [7, [], [], [], ["/p"], ["bad"]]])
    assert AddWatchMode.PERSISTENT_RECURSIVE == 1 and WatcherType.PERSISTENT_RECURSIVE == 5


async def test_the_kazoo_adapter_says_kazoo_cannot():
    kazoo = KazooClient(hosts="127.0.0.1:1")
    client = KazooZkClient(kazoo, trio.lowlevel.current_trio_token())
    calls = [
        client.add_watch("/a", print),
        client.remove_watches("/a", WatcherType.ANY),
        client.get_ephemerals(),
        client.get_all_children_number("/"),
    ]
    for call in calls:
        with pytest.raises(UnimplementedError, match="kazoo"):
            await call
    kazoo.close()
