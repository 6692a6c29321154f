"""multi_get (ZooKeeper 3.6's multiRead of getData ops) on every target: each path's data
and stat, or its error, in one request. kazoo has no multiRead: its adapter says so."""

import pytest

import zkstub

KAZOO_TARGETS = ("real", "kazoo-zkstub")


async def test_multi_get_reads_each_path_and_reports_each_missing_one(open_client, base, target):
    zk = await open_client()
    await zk.create(f"{base}/a", b"one")
    await zk.create(f"{base}/b", None)
    await zk.set(f"{base}/b", b"two")
    paths = [f"{base}/a", f"{base}/missing", f"{base}/b"]
    if target[0] in KAZOO_TARGETS:
        with pytest.raises(zkstub.UnimplementedError):
            await zk.multi_get(paths)
        return
    first, missing, second = await zk.multi_get(paths)
    assert first == await zk.get(f"{base}/a")
    assert isinstance(missing, zkstub.NoNodeError)
    assert second == await zk.get(f"{base}/b")
    assert second[0] == b"two" and second[1].version == 1
    assert await zk.multi_get([]) == []


async def test_multi_get_under_a_chroot_reads_relative_paths(open_client, base, target):
    zk = await open_client()
    await zk.create(f"{base}/c", b"x")
    rooted = await open_client(base)
    if target[0] in KAZOO_TARGETS:
        with pytest.raises(zkstub.UnimplementedError):
            await rooted.multi_get(["/c"])
        return
    ((data, stat),) = await rooted.multi_get(["/c"])
    assert data == b"x" and stat == (await zk.get(f"{base}/c"))[1]


async def test_multi_get_refuses_a_bad_path_before_reading(open_client, base, target):
    zk = await open_client()
    # kazoo's adapter refuses multi_get as a whole, before looking at a path.
    refusal = zkstub.UnimplementedError if target[0] in KAZOO_TARGETS else zkstub.BadArgumentsError
    with pytest.raises(refusal):
        await zk.multi_get([f"{base}", "no-slash"])
