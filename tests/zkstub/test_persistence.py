"""The data directory: restart recovers the tree, a torn log tail is cut off, snapshots."""

import itertools

import trio

import zkstub
from zkstub._storage import Storage
from zkstub._wal import decode_records, encode_record


def fake_clock():
    ticks = itertools.count(1_700_000_000)
    return lambda: float(next(ticks))


async def dump(zk, path="/"):
    """Every node under `path` (but /zookeeper) with its data and stat."""
    data, stat = await zk.get(path)
    found = {path: (data, stat)}
    for child in await zk.get_children(path):
        child_path = f"{path.rstrip('/')}/{child}"
        if child_path != "/zookeeper":
            found.update(await dump(zk, child_path))
    return found


async def workload(zk):
    await zk.create("/a", b"1")
    await zk.create("/a/b", None)
    await zk.set("/a", b"2")
    await zk.create("/a/s-", b"", sequence=True)
    try:
        await zk.create("/a")
    except zkstub.NodeExistsError:
        pass
    await zk.multi([zkstub.Op.create("/m", b"x"), zkstub.Op.set("/a/b", b"y")])
    await zk.multi([zkstub.Op.create("/never"), zkstub.Op.check("/a", 99)])
    await zk.delete("/a/s-0000000001")


def test_wal_stops_at_a_corrupt_record():
    data = encode_record(["one"]) + encode_record(["two"])
    assert decode_records(data) == ([["one"], ["two"]], len(data))
    assert decode_records(data[:-1]) == ([["one"]], len(encode_record(["one"])))
    flipped = data[:-1] + bytes([data[-1] ^ 1])
    assert decode_records(flipped)[0] == [["one"]]


async def test_restart_recovers_the_tree(autojump_clock, tmp_path):
    async with zkstub.open_server(data_dir=tmp_path, clock=fake_clock()) as server:
        async with server.connect_local() as zk:
            await workload(zk)
            before = await dump(zk)
    async with zkstub.open_server(data_dir=tmp_path, clock=fake_clock()) as server:
        async with server.connect_local() as zk:
            after = await dump(zk)
            assert after.keys() == before.keys()
            for path, (data, stat) in before.items():
                if path == "/":  # the new session's create and close moved nothing here
                    assert after[path][0] == data
                else:
                    assert after[path] == (data, stat)
            # the zxid counter continued: the next write gets a higher one
            await zk.create("/later")
            assert (await zk.exists("/later")).czxid > before["/m"][1].czxid


async def test_snapshots_and_logs_recover_together(autojump_clock, tmp_path):
    async with zkstub.open_server(data_dir=tmp_path, snapshot_every=3) as server:
        async with server.connect_local() as zk:
            await workload(zk)
            before = await dump(zk, "/a")
    assert list(tmp_path.glob("snapshot.*"))
    async with zkstub.open_server(data_dir=tmp_path, snapshot_every=3) as server:
        async with server.connect_local() as zk:
            assert await dump(zk, "/a") == before


async def test_a_torn_log_tail_is_discarded_and_the_rest_recovered(autojump_clock, tmp_path):
    async with zkstub.open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            await zk.create("/kept", b"k")
            await zk.create("/torn", b"t")
            zk.abort()  # no close-session record after the create of /torn
    (log,) = [p for p in tmp_path.glob("log.*") if p.stat().st_size]
    log.write_bytes(log.read_bytes()[:-3])  # a crash in the middle of the last append
    async with zkstub.open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            assert (await zk.get("/kept"))[0] == b"k"
            assert await zk.exists("/torn") is None
            await zk.create("/after", b"a")
    async with zkstub.open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            assert await zk.get_children("/") == ["after", "kept", "zookeeper"]


async def test_ephemerals_of_a_dead_session_go_one_timeout_after_recovery(autojump_clock, tmp_path):
    async with zkstub.open_server(data_dir=tmp_path, tick_time=1.0) as server:
        async with server.connect_local(session_timeout=5.0) as zk:
            await zk.create("/e", ephemeral=True)
            owner = zk.session_id
            zk.abort()
    async with zkstub.open_server(data_dir=tmp_path, tick_time=1.0) as server:
        async with server.connect_local() as zk:
            assert (await zk.exists("/e")).ephemeralOwner == owner
            assert zk.session_id != owner
            start = trio.current_time()
            with trio.fail_after(60):
                while await zk.exists("/e") is not None:
                    await trio.sleep(0.25)
            assert trio.current_time() - start >= 5.0


def write(zxid):
    return ["write", zxid, 0, 0, ["create", f"/n{zxid}", b"", False, False]]


def test_storage_keeps_snap_retain_count_snapshots_and_the_logs_they_need(tmp_path):
    storage, recovered = Storage.open(tmp_path)
    assert recovered.snapshot is None and recovered.records == []
    for zxid in range(1, 6):
        storage.append(write(zxid))
        storage.write_snapshot(zxid, {"zxid": zxid, "nodes": [], "sessions": []})
    storage.append(write(6))
    storage.close()
    assert sorted(p.name for p in tmp_path.glob("snapshot.*")) == [
        f"snapshot.{zxid:016x}" for zxid in (3, 4, 5)
    ]
    # the oldest retained snapshot (zxid 3) needs the records from zxid 4 on
    assert sorted(p.name for p in tmp_path.glob("log.*")) == [
        f"log.{zxid:016x}" for zxid in (4, 5, 6)
    ]
    _, recovered = Storage.open(tmp_path)
    assert recovered.snapshot["zxid"] == 5
    assert [r[1] for r in recovered.records] == [6]


def test_snap_retain_count_below_three_is_raised_to_three(tmp_path, caplog):
    storage, _ = Storage.open(tmp_path, snap_retain_count=1)
    assert storage.snap_retain_count == 3
    assert "Invalid autopurge.snapRetainCount: 1. Defaulting to 3" in caplog.text
    storage.close()


async def test_session_ids_are_not_reused_after_restart(autojump_clock, tmp_path):
    async with zkstub.open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            first = zk.session_id
    async with zkstub.open_server(data_dir=tmp_path) as server:
        async with server.connect_local() as zk:
            assert zk.session_id > first


async def test_a_write_cancelled_while_its_batch_is_fsynced_does_not_stall_later_writes(
    autojump_clock, tmp_path
):
    async with zkstub.open_server(data_dir=tmp_path, clock=fake_clock()) as server:
        async with server.connect_local() as doomed, server.connect_local() as zk:
            await doomed.create("/ephemeral", b"", ephemeral=True)
            with trio.CancelScope() as scope:
                scope.cancel()  # whoever asked went away while the batch was being synced
                await server.expire_session(doomed.session_id)
            with trio.fail_after(10):
                await zk.create("/next", b"")
            assert await zk.exists("/ephemeral") is None
    async with zkstub.open_server(data_dir=tmp_path, clock=fake_clock()) as server:
        async with server.connect_local() as zk:
            assert await zk.exists("/next") is not None
            assert await zk.exists("/ephemeral") is None
