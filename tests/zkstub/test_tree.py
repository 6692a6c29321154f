"""The DataTree against ZooKeeper 3.8's rules, with hand-checked stats and zxids."""

import pytest

from zkstub import (
    AddWatchMode,
    BadArgumentsError,
    BadVersionError,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    NoWatcherError,
    Op,
    RolledBackError,
    RuntimeInconsistencyError,
    Stat,
    WatchedEvent,
    WatcherType,
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


# -- persistent and recursive watches (ZooKeeper 3.6+'s addWatch) ---------------------------

PERSISTENT, RECURSIVE = AddWatchMode.PERSISTENT, AddWatchMode.PERSISTENT_RECURSIVE


def event(kind, path, session=A):
    return (session, WatchedEvent(kind, path))


def test_persistent_watch_sees_its_node_and_children_and_stays(tree):
    tree.add_watch(A, "/p", PERSISTENT)  # the node need not exist
    assert create(tree, "/p")[1] == [event(EventType.CREATED, "/p")]
    assert tree.apply(B, Op.set("/p", b"1"))[1] == [event(EventType.CHANGED, "/p")]
    assert tree.apply(B, Op.set("/p", b"2"))[1] == [event(EventType.CHANGED, "/p")]
    assert create(tree, "/p/c", session=B)[1] == [event(EventType.CHILD, "/p")]
    assert tree.apply(B, Op.delete("/p/c"))[1] == [event(EventType.CHILD, "/p")]
    assert tree.apply(B, Op.delete("/p"))[1] == [event(EventType.DELETED, "/p")]
    # still there after its node is gone
    assert create(tree, "/p")[1] == [event(EventType.CREATED, "/p")]


def test_persistent_watch_ignores_what_happens_below_its_children(tree):
    create(tree, "/p")
    create(tree, "/p/c")
    tree.add_watch(A, "/p", PERSISTENT)
    assert tree.apply(B, Op.set("/p/c", b"x"))[1] == []
    assert create(tree, "/p/c/g", session=B)[1] == []


def test_recursive_watch_sees_every_change_below_but_a_child_watch_does_not(tree):
    create(tree, "/a")
    create(tree, "/a/b")
    create(tree, "/a/b/c")
    tree.add_watch(A, "/a", RECURSIVE)
    tree.get_children("/a/b", watcher=B)
    for data in (b"1", b"2"):
        assert tree.apply(B, Op.set("/a/b/c", data))[1] == [event(EventType.CHANGED, "/a/b/c")]
    assert tree.apply(B, Op.delete("/a/b/c"))[1] == [
        event(EventType.DELETED, "/a/b/c"),
        event(EventType.CHILD, "/a/b", session=B),  # B's child watch; A's recursive: none
    ]
    assert create(tree, "/a/b/d", session=B)[1] == [event(EventType.CREATED, "/a/b/d")]
    assert tree.apply(B, Op.set("/a", b"top"))[1] == [event(EventType.CHANGED, "/a")]


def test_recursive_watch_never_sees_children_changed(tree):
    tree.add_watch(A, "/a", RECURSIVE)
    assert create(tree, "/a")[1] == [event(EventType.CREATED, "/a")]
    # a create fires NodeCreated of the child and NodeChildrenChanged of the parent: only
    # the first reaches a recursive watch
    assert create(tree, "/a/b")[1] == [event(EventType.CREATED, "/a/b")]
    assert tree.apply(B, Op.delete("/a/b"))[1] == [event(EventType.DELETED, "/a/b")]
    # a sibling with the watched path as a string prefix is not below it
    assert create(tree, "/ab")[1] == []


def test_a_session_gets_one_event_per_change_however_many_watches_match(tree):
    create(tree, "/a")
    create(tree, "/a/b")
    tree.add_watch(A, "/", RECURSIVE)
    tree.add_watch(A, "/a", RECURSIVE)
    tree.add_watch(A, "/a/b", PERSISTENT)
    tree.get("/a/b", watcher=B)
    tree.add_watch(B, "/a", RECURSIVE)
    assert tree.apply(B, Op.set("/a/b", b"x"))[1] == [
        event(EventType.CHANGED, "/a/b"),
        event(EventType.CHANGED, "/a/b", session=B),
    ]
    # a delete: data and child halves of the persistent watch, and the recursive ones,
    # make one NodeDeleted for A; the parent's NodeChildrenChanged reaches no one
    assert tree.apply(B, Op.delete("/a/b"))[1] == [
        event(EventType.DELETED, "/a/b"),
        event(EventType.DELETED, "/a/b", session=B),
    ]


def test_a_watched_read_turns_a_persistent_data_watch_into_a_one_shot_one(tree):
    # ZooKeeper 3.8 keeps one mode per session, path and table (ZOOKEEPER-4466): the get
    # sets the data half to standard; the child half stays persistent.
    create(tree, "/p")
    tree.add_watch(A, "/p", PERSISTENT)
    tree.get("/p", watcher=A)
    assert tree.apply(B, Op.set("/p", b"1"))[1] == [event(EventType.CHANGED, "/p")]
    assert tree.apply(B, Op.set("/p", b"2"))[1] == []
    assert create(tree, "/p/c", session=B)[1] == [event(EventType.CHILD, "/p")]
    # adding the watch again makes it whole
    tree.add_watch(A, "/p", PERSISTENT)
    assert tree.apply(B, Op.set("/p", b"3"))[1] == [event(EventType.CHANGED, "/p")]


def test_closing_the_session_forgets_its_persistent_watches(tree):
    tree.add_watch(A, "/a", RECURSIVE)
    tree.add_watch(A, "/p", PERSISTENT)
    tree.close_session(A)
    assert create(tree, "/a", session=B)[1] == []
    assert create(tree, "/p", session=B)[1] == []
    assert (tree.data_watches, tree.child_watches, tree.recursive_watches) == ({}, {}, 0)


def test_set_watches_registers_persistent_watches_again_without_catching_up(tree):
    create(tree, "/p")
    seen = tree.zxid
    tree.apply(B, Op.set("/p", b"while away"))
    create(tree, "/a", session=B)
    events = tree.set_watches(A, seen, persistent=["/p"], persistent_recursive=["/a"])
    assert events == []
    assert tree.apply(B, Op.set("/p", b"back"))[1] == [event(EventType.CHANGED, "/p")]
    assert tree.apply(B, Op.set("/p", b"again"))[1] == [event(EventType.CHANGED, "/p")]
    assert create(tree, "/a/b", session=B)[1] == [event(EventType.CREATED, "/a/b")]


def test_add_watch_checks_path_and_mode(tree):
    with pytest.raises(BadArgumentsError):
        tree.add_watch(A, "/bad/", PERSISTENT)
    with pytest.raises(BadArgumentsError):
        tree.add_watch(A, "/a", 2)


# -- removeWatches / checkWatches -------------------------------------------------------------


def test_remove_watches_of_a_type_and_no_watcher_when_none(tree):
    create(tree, "/a")
    tree.get("/a", watcher=A)
    tree.get_children("/a", watcher=A)
    tree.get_children("/a", watcher=B)
    tree.remove_watches(A, "/a", WatcherType.DATA)
    with pytest.raises(NoWatcherError) as caught:
        tree.remove_watches(A, "/a", WatcherType.DATA)
    assert caught.value.code == -121
    assert tree.apply(B, Op.set("/a", b"x"))[1] == []
    tree.remove_watches(A, "/a", WatcherType.CHILDREN)
    # B's child watch is its own: still there
    assert create(tree, "/a/c", session=B)[1] == [event(EventType.CHILD, "/a", session=B)]
    with pytest.raises(NoWatcherError):
        tree.remove_watches(A, "/a", WatcherType.ANY)


def test_remove_data_watches_takes_the_data_half_of_a_persistent_watch(tree):
    # 3.8's DataTree.removeWatch(Data) removes the data table's entry whatever its mode
    create(tree, "/p")
    tree.add_watch(A, "/p", PERSISTENT)
    tree.remove_watches(A, "/p", WatcherType.DATA)
    assert tree.apply(B, Op.set("/p", b"x"))[1] == []
    assert create(tree, "/p/c", session=B)[1] == [event(EventType.CHILD, "/p")]
    tree.remove_watches(A, "/p", WatcherType.ANY)
    assert create(tree, "/p/d", session=B)[1] == []


def test_remove_persistent_types_take_only_that_mode(tree):
    create(tree, "/p")
    create(tree, "/r")
    tree.add_watch(A, "/p", PERSISTENT)
    tree.add_watch(A, "/r", RECURSIVE)
    tree.get_children("/r", watcher=A)  # the child half of /r turns standard
    with pytest.raises(NoWatcherError):
        tree.remove_watches(A, "/p", WatcherType.PERSISTENT_RECURSIVE)
    tree.remove_watches(A, "/p", WatcherType.PERSISTENT)
    assert tree.apply(B, Op.set("/p", b"x"))[1] == []
    tree.remove_watches(A, "/r", WatcherType.PERSISTENT_RECURSIVE)
    assert tree.recursive_watches == 0
    assert create(tree, "/r/c", session=B)[1] == [event(EventType.CHILD, "/r")]


def test_check_watches_only_tests(tree):
    create(tree, "/a")
    tree.add_watch(A, "/a", RECURSIVE)
    tree.exists("/x", watcher=B)
    tree.check_watches(A, "/a", WatcherType.ANY)
    tree.check_watches(A, "/a", WatcherType.DATA)
    tree.check_watches(A, "/a", WatcherType.PERSISTENT_RECURSIVE)
    with pytest.raises(NoWatcherError):
        tree.check_watches(A, "/a", WatcherType.PERSISTENT)
    with pytest.raises(NoWatcherError):
        tree.check_watches(A, "/x", WatcherType.DATA)  # B's watch, not A's
    with pytest.raises(BadArgumentsError):
        tree.check_watches(A, "/a", 9)
    assert tree.apply(B, Op.set("/a", b"x"))[1] == [event(EventType.CHANGED, "/a")]


# -- getEphemerals, getAllChildrenNumber, sync -------------------------------------------------


def test_get_ephemerals_by_string_prefix_sorted_per_session(tree):
    create(tree, "/a")
    for path in ("/a/z", "/a/b", "/ab", "/c"):
        create(tree, path, ephemeral=True)
    create(tree, "/a/other", session=B, ephemeral=True)
    assert tree.get_ephemerals(A) == ["/a/b", "/a/z", "/ab", "/c"]
    assert tree.get_ephemerals(A, "/") == tree.get_ephemerals(A, "") == tree.get_ephemerals(A)
    assert tree.get_ephemerals(A, "/a") == ["/a/b", "/a/z", "/ab"]
    assert tree.get_ephemerals(A, "/a/") == ["/a/b", "/a/z"]
    assert tree.get_ephemerals(B) == ["/a/other"]
    assert tree.get_ephemerals(99) == []


def test_all_children_number_counts_every_level(tree):
    assert tree.all_children_number("/") == 3  # /zookeeper, /zookeeper/quota, /zookeeper/config
    assert tree.all_children_number("/zookeeper") == 2
    create(tree, "/a")
    create(tree, "/a/b")
    create(tree, "/a/b/c")
    create(tree, "/a/d")
    create(tree, "/ab")
    assert tree.all_children_number("/a") == 3
    assert tree.all_children_number("/a/b/c") == 0
    assert tree.all_children_number("/") == 8
    with pytest.raises(NoNodeError):
        tree.all_children_number("/missing")


def test_sync_answers_its_path(tree):
    assert tree.sync("/anything") == "/anything"
    assert tree.zxid == 0
    with pytest.raises(BadArgumentsError):
        tree.sync("no-slash")
