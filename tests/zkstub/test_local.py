"""The in-process client of `open_server(network=None)`, on virtual time."""

import pytest
import trio

import zkstub
from zkstub import ClientState, EventType, WatchedEvent


async def test_watch_fires_before_the_writer_call_returns(autojump_clock):
    async with zkstub.open_server() as server:
        async with server.connect_local() as a, server.connect_local() as b:
            events = []
            await a.create("/x", b"1")
            await a.get("/x", watch=events.append)
            await b.set("/x", b"2")
            assert events == [WatchedEvent(EventType.CHANGED, "/x")]
            assert (await a.get("/x"))[0] == b"2"


async def test_chroot_is_joined_and_stripped(autojump_clock):
    async with zkstub.open_server() as server:
        async with server.connect_local() as root:
            await root.create("/kafka")
            async with server.connect_local(chroot="/kafka") as zk:
                assert zk.chroot == "/kafka"
                assert await zk.create("/a", sequence=True) == "/a0000000000"
                events = []
                await zk.get_children("/", watch=events.append)
                assert await zk.multi([zkstub.Op.create("/b")]) == ["/b"]
                assert events == [WatchedEvent(EventType.CHILD, "/")]
            assert await root.get_children("/kafka") == ["a0000000000", "b"]


async def test_session_expiry_runs_hooks_in_order_and_deletes_ephemerals(autojump_clock):
    async with zkstub.open_server(tick_time=1.0) as server:
        async with server.connect_local(session_timeout=4.0) as zk, server.connect_local() as w:
            await zk.create("/e", ephemeral=True)
            deleted = []
            await w.exists("/e", watch=deleted.append)
            log = []
            states = []
            zk.add_listener(states.append)

            async def before():
                log.append(("before", zk.state))

            async def after():
                log.append(("after", zk.state, zk.session_id))

            zk.add_session_hooks(before, after)
            old = zk.session_id
            await server.expire_session(old)
            with trio.fail_after(60):
                while len(log) < 2:
                    await trio.sleep(0.1)
            assert log[0] == ("before", ClientState.EXPIRED)
            assert log[1][1] is ClientState.CONNECTED and log[1][2] != old
            assert states[0] is ClientState.EXPIRED and states[-1] is ClientState.CONNECTED
            assert await w.exists("/e") is None
            assert deleted == [WatchedEvent(EventType.DELETED, "/e")]


async def test_close_deletes_ephemerals_at_once_abort_leaves_them_until_expiry(autojump_clock):
    async with zkstub.open_server(tick_time=1.0) as server:
        async with server.connect_local() as w:
            async with server.connect_local(session_timeout=4.0) as zk:
                await zk.create("/closed", ephemeral=True)
            assert await w.exists("/closed") is None
            async with server.connect_local(session_timeout=4.0) as zk:
                await zk.create("/crashed", ephemeral=True)
                zk.abort()
                assert zk.state is ClientState.CLOSED
            assert await w.exists("/crashed") is not None
            start = trio.current_time()
            with trio.fail_after(60):
                while await w.exists("/crashed") is not None:
                    await trio.sleep(0.5)
            assert trio.current_time() - start >= 3.0


async def test_calls_on_a_closed_client_raise_closed(autojump_clock):
    async with zkstub.open_server() as server:
        async with server.connect_local() as zk:
            pass
        with pytest.raises(zkstub.ClosedError):
            await zk.get("/")


async def test_dropped_local_connection_reconnects_to_the_same_session(autojump_clock):
    async with zkstub.open_server() as server:
        async with server.connect_local() as zk, server.connect_local() as other:
            states = []
            zk.add_listener(states.append)
            sid = zk.session_id
            await zk.create("/e", ephemeral=True)
            events = []
            await zk.exists("/e", watch=events.append)
            server.drop_connections(sid)
            await other.set("/e", b"x")
            with trio.fail_after(60):
                while zk.state is not ClientState.CONNECTED or not states:
                    await trio.sleep(0.05)
            assert states == [ClientState.SUSPENDED, ClientState.CONNECTED]
            assert zk.session_id == sid
            assert events == [WatchedEvent(EventType.CHANGED, "/e")]


async def test_calls_while_expired_raise_session_expired(autojump_clock):
    async with zkstub.open_server() as server:
        async with server.connect_local() as zk:
            seen = []
            hook_may_finish = trio.Event()

            async def before():
                try:
                    await zk.get("/")
                except zkstub.SessionExpiredError as error:
                    seen.append(error)
                await hook_may_finish.wait()

            zk.add_session_hooks(before_initializing_session=before)
            await server.expire_session(zk.session_id)
            with trio.fail_after(60):
                while not seen:
                    await trio.sleep(0.05)
                hook_may_finish.set()
                while zk.state is not ClientState.CONNECTED:
                    await trio.sleep(0.05)
            assert await zk.get_children("/") == ["zookeeper"]


async def test_a_slow_expiry_does_not_expire_the_sessions_that_kept_pinging(
    autojump_clock, monkeypatch
):
    """Expiring a session with very many ephemerals keeps the one-threaded server busy (here
    10 s, more than the other session's whole timeout): nobody could be heard meanwhile, so
    that time must not count against the session that was pinging all along."""
    async with zkstub.open_server(tick_time=1.0) as server:
        async with server.connect_local(session_timeout=4.0) as live:
            session_id = live.session_id
            async with server.connect_local(session_timeout=4.0) as doomed:
                await doomed.create("/many", ephemeral=True)
                doomed_id = doomed.session_id
                tree_type = type(server.tree)
                close_in_tree = tree_type.close_session

                def slow_close(tree, session_id, now_ms):
                    if session_id == doomed_id:
                        autojump_clock.jump(10.0)  # the work of a million deletes
                    return close_in_tree(tree, session_id, now_ms)

                monkeypatch.setattr(tree_type, "close_session", slow_close)
                server_type = type(server)
                ping = server_type.ping

                def lost_pings(server, session_id):
                    if session_id != doomed_id:  # the doomed client is cut off
                        ping(server, session_id)

                monkeypatch.setattr(server_type, "ping", lost_pings)
                with trio.fail_after(30):
                    while await live.exists("/many") is not None:
                        await trio.sleep(0.5)
                for _ in range(10):  # another 5 s of pings, well past the stall
                    await live.exists("/")
                    await trio.sleep(0.5)
                assert live.state is ClientState.CONNECTED
                assert live.session_id == session_id
                assert session_id in server.sessions.sessions


async def test_a_session_silent_only_while_the_server_was_busy_is_not_expired(
    autojump_clock, monkeypatch
):
    """A request that keeps the server busy for 10 s (a huge multi, say): the pings sent
    meanwhile wait in the socket, and the first ping after it arrives a moment later. The
    10 s the server could not listen do not count: the session lives."""
    async with zkstub.open_server(tick_time=1.0) as server:
        async with server.connect_local(session_timeout=4.0) as live:
            session_id = live.session_id
            busy_until = None
            server_type = type(server)
            ping = server_type.ping

            def ping_after_the_stall(server, session_id):
                # Pings sent during the stall are read a second after it: they are late.
                if busy_until is None or trio.current_time() >= busy_until + 1.0:
                    ping(server, session_id)

            monkeypatch.setattr(server_type, "ping", ping_after_the_stall)
            tree_type = type(server.tree)
            apply = tree_type.apply

            def slow_apply(tree, session_id, op, now_ms=None, identities=()):
                nonlocal busy_until
                if getattr(op, "path", None) == "/huge":
                    autojump_clock.jump(10.0)
                    busy_until = trio.current_time()
                return apply(tree, session_id, op, now_ms, identities)

            monkeypatch.setattr(tree_type, "apply", slow_apply)
            async with server.connect_local(session_timeout=4.0) as writer:
                await writer.create("/huge")
                for _ in range(10):
                    await trio.sleep(0.5)
                    await live.exists("/")
                assert live.state is ClientState.CONNECTED
                assert live.session_id == session_id
                assert session_id in server.sessions.sessions
