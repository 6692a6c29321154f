"""The DataTree against ZooKeeper 3.8's rules, with hand-checked stats and zxids."""

import pytest

from zkstub import (
    BadArgumentsError,
    BadVersionError,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    RolledBackError,
    RuntimeInconsistencyError,
    Stat,
    WatchedEvent,
)
from zkstub._tree import DataTree

A, B = 11, 22  # two session ids


@pytest.fixture
def tree():
    now = iter(range(1000, 10**6, 1000))
    return DataTree(clock=lambda: next(now))


def create(tree, path, data=b"", session=A, **kw):
    result, events = tree.apply(session, Op.create(path, data, **kw))
    return result, events


def test_create_sets_stat_and_bumps_parent(tree):
    assert create(tree, "/a", b"xy") == ("/a", [])
    _, stat = tree.get("/a")
    assert stat == Stat(
        czxid=1, mzxid=1, ctime=1000, mtime=1000, version=0, cversion=0, aversion=0,
        ephemeralOwner=0, dataLength=2, numChildren=0, pzxid=1,
    )  # fmt: skip
    create(tree, "/a/b")
    parent = tree.exists("/a")
    assert (parent.cversion, parent.pzxid, parent.numChildren, parent.mzxid) == (1, 2, 1, 1)


def test_none_data_is_distinct_from_empty(tree):
    create(tree, "/n", None)
    create(tree, "/e", b"")
    assert tree.get("/n")[0] is None
    assert tree.get("/e")[0] == b""


def test_set_bumps_version_mzxid_mtime(tree):
    create(tree, "/a")
    stat, _ = tree.apply(A, Op.set("/a", b"v", version=0))
    assert (stat.version, stat.mzxid, stat.czxid, stat.mtime, stat.dataLength) == (1, 2, 1, 2000, 1)
    with pytest.raises(BadVersionError):
        tree.apply(A, Op.set("/a", b"w", version=0))


def test_delete_moves_parent_pzxid_and_reported_cversion(tree):
    create(tree, "/a")
    create(tree, "/a/b")
    tree.apply(A, Op.delete("/a/b"))
    parent = tree.exists("/a")
    # ZooKeeper reports 2 * creates - numChildren: creates plus deletes
    assert (parent.cversion, parent.pzxid, parent.numChildren) == (2, 3, 0)


def test_initial_tree_matches_a_fresh_zookeeper(tree):
    assert tree.get_children("/") == ["zookeeper"]
    assert tree.get("/")[0] == tree.get("/zookeeper")[0] == b""
    assert tree.exists("/").cversion == -1
    assert tree.exists("/zookeeper").cversion == -2
    assert tree.exists("/zookeeper/config").aversion == -1
    assert create(tree, "/", sequence=True)[0] == "/0000000000"


def test_failed_writes_consume_a_zxid_reads_do_not(tree):
    create(tree, "/a")
    assert tree.zxid == 1
    with pytest.raises(NodeExistsError):
        create(tree, "/a")
    assert tree.zxid == 2
    tree.get("/a")
    tree.exists("/zz")
    tree.get_children("/")
    assert tree.zxid == 2
    create(tree, "/b")
    assert tree.exists("/b").czxid == 3


def test_sequential_suffix_is_parents_cversion(tree):
    create(tree, "/q")
    create(tree, "/q/x")
    assert create(tree, "/q/n-", sequence=True)[0] == "/q/n-0000000001"
    tree.apply(A, Op.delete("/q/x"))
    # the suffix counts creates only, though the reported cversion (3) counts the delete
    assert tree.exists("/q").cversion == 3
    assert create(tree, "/q/", sequence=True)[0] == "/q/0000000002"


def test_ephemerals_have_no_children_and_belong_to_their_session(tree):
    create(tree, "/e", ephemeral=True, session=B)
    assert tree.exists("/e").ephemeralOwner == B
    with pytest.raises(NoChildrenForEphemeralsError):
        create(tree, "/e/c")
    # NodeExists is checked before NoChildrenForEphemerals
    with pytest.raises(NodeExistsError):
        create(tree, "/e")


def test_delete_checks_version_before_emptiness(tree):
    create(tree, "/a")
    create(tree, "/a/b")
    with pytest.raises(BadVersionError):
        tree.apply(A, Op.delete("/a", version=5))
    with pytest.raises(NotEmptyError):
        tree.apply(A, Op.delete("/a", version=0))
    with pytest.raises(NoNodeError):
        tree.apply(A, Op.delete("/zz"))


def test_errors_for_missing_parent_and_reserved_paths(tree):
    with pytest.raises(NoNodeError):
        create(tree, "/x/y")
    with pytest.raises(BadArgumentsError):
        tree.apply(A, Op.delete("/zookeeper"))
    with pytest.raises(NodeExistsError):
        create(tree, "/")
    assert create(tree, "/zookeeper/mine")[0] == "/zookeeper/mine"
    tree.apply(A, Op.delete("/zookeeper/mine"))
    with pytest.raises(BadArgumentsError):
        create(tree, "/bad/")
    assert tree.get_children("/") == ["zookeeper"]


def test_multi_commits_all_in_one_zxid(tree):
    create(tree, "/a")
    results, _ = tree.multi(
        A, [Op.check("/a", 0), Op.create("/b"), Op.set("/a", b"z"), Op.create("/b/c")]
    )
    assert results[0] is True and results[1] == "/b" and results[3] == "/b/c"
    assert isinstance(results[2], Stat) and results[2].version == 1
    assert tree.zxid == 2
    assert tree.exists("/b/c").czxid == 2 and tree.exists("/a").mzxid == 2


def test_failed_multi_applies_nothing_and_reports_per_op(tree):
    create(tree, "/a")
    ops = [Op.create("/b"), Op.check("/a", 7), Op.delete("/a")]
    results, events = tree.multi(A, ops)
    assert [type(r) for r in results] == [
        RolledBackError, BadVersionError, RuntimeInconsistencyError
    ]  # fmt: skip
    assert events == []
    assert tree.exists("/b") is None
    assert tree.zxid == 2  # the failed transaction consumed one


def test_multi_later_ops_see_earlier_ones(tree):
    results, _ = tree.multi(A, [Op.create("/p"), Op.create("/p/c"), Op.delete("/p/c")])
    assert results == ["/p", "/p/c", True]
    assert tree.get_children("/p") == []


def test_watch_firing_rules(tree):
    create(tree, "/p")
    assert tree.exists("/p/c", watcher=A) is None  # leaves a watch on a missing node
    tree.get_children("/p", watcher=B)
    _, events = create(tree, "/p/c")
    assert events == [
        (A, WatchedEvent(EventType.CREATED, "/p/c")),
        (B, WatchedEvent(EventType.CHILD, "/p")),
    ]
    tree.get("/p/c", watcher=A)
    tree.get("/p/c", watcher=A)  # the same watcher twice fires once
    _, events = tree.apply(B, Op.set("/p/c", b"1"))
    assert events == [(A, WatchedEvent(EventType.CHANGED, "/p/c"))]
    _, events = tree.apply(B, Op.set("/p/c", b"2"))
    assert events == []  # one-shot


def test_delete_fires_deleted_once_per_watcher_then_child_on_parent(tree):
    create(tree, "/p")
    create(tree, "/p/c")
    tree.get("/p/c", watcher=A)
    tree.get_children("/p/c", watcher=A)
    tree.get_children("/p/c", watcher=B)
    tree.get_children("/p", watcher=A)
    _, events = tree.apply(B, Op.delete("/p/c"))
    assert events == [
        (A, WatchedEvent(EventType.DELETED, "/p/c")),
        (B, WatchedEvent(EventType.DELETED, "/p/c")),
        (A, WatchedEvent(EventType.CHILD, "/p")),
    ]


def test_failed_read_leaves_no_watch(tree):
    with pytest.raises(NoNodeError):
        tree.get("/m", watcher=A)
    with pytest.raises(NoNodeError):
        tree.get_children("/m", watcher=A)
    _, events = create(tree, "/m")
    assert events == []


def test_close_session_deletes_ephemerals_in_one_zxid_and_fires_others_watches(tree):
    create(tree, "/e1", ephemeral=True, session=A)
    create(tree, "/e2", ephemeral=True, session=A)
    create(tree, "/keep", ephemeral=True, session=B)
    tree.exists("/e1", watcher=B)
    tree.exists("/e2", watcher=A)  # the closing session's own watches go with it
    events = tree.close_session(A)
    assert events == [(B, WatchedEvent(EventType.DELETED, "/e1"))]
    assert tree.zxid == 4
    assert tree.get_children("/") == ["keep", "zookeeper"]
    assert tree.exists("/").pzxid == 4


def test_set_watches_fires_what_changed_since_and_registers_the_rest(tree):
    create(tree, "/same")
    create(tree, "/changed")
    create(tree, "/kids")
    seen = tree.zxid
    tree.apply(B, Op.set("/changed", b"x"))
    create(tree, "/kids/k")
    create(tree, "/born")
    events = tree.set_watches(
        A, seen, data=["/same", "/changed", "/gone"], exist=["/born", "/unborn"],
        child=["/kids", "/same"],
    )  # fmt: skip
    assert events == [
        (A, WatchedEvent(EventType.CHANGED, "/changed")),
        (A, WatchedEvent(EventType.DELETED, "/gone")),
        (A, WatchedEvent(EventType.CREATED, "/born")),
        (A, WatchedEvent(EventType.CHILD, "/kids")),
    ]
    # the others are registered again and fire on the next change
    _, events = create(tree, "/unborn")
    assert events == [(A, WatchedEvent(EventType.CREATED, "/unborn"))]
    _, events = tree.apply(B, Op.set("/same", b"y"))
    assert events == [(A, WatchedEvent(EventType.CHANGED, "/same"))]
    # watches the tree still holds are left alone: nothing fires twice
    tree.get("/same", watcher=A)
    assert tree.set_watches(A, 0, data=["/same"]) == []
