"""Vectors ported from Kafka's LeaderEpochFileCacheTest."""

import pytest

from kcore.log import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def cache():
    return LeaderEpochCache()


def assign_all(cache, *entries):
    for epoch, offset in entries:
        cache.assign(epoch, offset)


def test_add_epoch_and_message_offset(cache):
    cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.entries() == [(2, 10)]
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_latest_epoch_requested_returns_log_end_offset(cache):
    assign_all(cache, (2, 11), (2, 12))
    assert cache.end_offset_for(2, 14) == (2, 14)


def test_undefined_epoch_requested(cache):
    assign_all(cache, (2, 11), (3, 12))
    assert cache.end_offset_for(UNDEFINED_EPOCH, 20) == UNDEFINED


def test_does_not_overwrite_start_offset_once_assigned(cache):
    assign_all(cache, (2, 9), (2, 10))
    assert cache.entries() == [(2, 9)]
    cache2 = LeaderEpochCache()
    assign_all(cache2, (2, 6), (2, 10))
    assert cache2.entries() == [(2, 6)]


def test_new_epoch_at_same_offset_replaces_previous(cache):
    assign_all(cache, (2, 9), (3, 9))
    assert cache.entries() == [(3, 9)]


def test_empty_cache_is_undefined(cache):
    assert cache.latest_epoch is None
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    assert cache.epoch_for_offset(5) is None


def test_requested_epoch_below_first_returns_first_start_offset(cache):
    assign_all(cache, (5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 20) == (4, 11)


def test_matching_epoch_with_earlier_start_offset_truncates(cache):
    assign_all(cache, (5, 11), (6, 12), (7, 13), (7, 12))
    assert cache.entries() == [(5, 11), (7, 12)]
    assert cache.end_offset_for(5, 20) == (5, 12)
    assert cache.end_offset_for(6, 20) == (5, 12)


def test_previous_epoch_ends_at_start_of_next(cache):
    assign_all(cache, (1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert cache.end_offset_for(2, 17) == (2, 15)


def test_next_available_epoch_when_requested_is_missing(cache):
    assign_all(cache, (0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(1, 20) == (0, 13)
    assert cache.end_offset_for(2, 20) == (2, 17)
    assert cache.end_offset_for(3, 20) == (2, 17)


def test_epoch_above_latest_is_undefined(cache):
    cache.assign(2, 100)
    assert cache.end_offset_for(3, 100) == UNDEFINED


def test_lower_epoch_truncates_later_epochs(cache):
    assign_all(cache, (1, 5), (2, 6), (1, 7))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED
    assert cache.entries() == [(1, 7)]


def test_lower_offset_removes_conflicting_entry(cache):
    assign_all(cache, (2, 6), (3, 5))
    assert cache.entries() == [(3, 5)]


def test_leader_changes_many_times(cache):
    assign_all(cache, (0, 0), (1, 0))
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_follower_receives_many_messages(cache):
    assign_all(cache, (0, 0), (0, 1), (0, 2))
    assert cache.end_offset_for(0, 3) == (0, 3)
    assign_all(cache, (1, 3), (1, 4), (1, 5))
    assert cache.end_offset_for(1, 6) == (1, 6)
    assign_all(cache, (2, 6), (2, 7), (2, 8))
    assert cache.latest_epoch == 2
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        (8, [(2, 6)]),  # on an epoch boundary: inclusive
        (9, [(2, 6), (3, 8)]),  # between boundaries
        (0, []),  # before the first entry
        (6, []),  # on the first entry
        (11, [(2, 6), (3, 8)]),
        (12, [(2, 6), (3, 8), (4, 11)]),  # beyond the last: nothing
        (-1, [(2, 6), (3, 8), (4, 11)]),  # undefined: nothing
    ],
)
def test_truncate_from_end(cache, end_offset, expected):
    assign_all(cache, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(end_offset)
    assert cache.entries() == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (8, [(3, 8), (4, 11)]),  # on an epoch boundary: kept as is
        (9, [(3, 9), (4, 11)]),  # between boundaries: moved up
        (1, [(2, 6), (3, 8), (4, 11)]),  # before the first entry
        (6, [(2, 6), (3, 8), (4, 11)]),  # on the first entry
        (11, [(4, 11)]),
        (15, [(4, 15)]),  # beyond the last: the last moves up
        (-1, [(2, 6), (3, 8), (4, 11)]),
    ],
)
def test_truncate_from_start(cache, start_offset, expected):
    assign_all(cache, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(start_offset)
    assert cache.entries() == expected


def test_truncate_from_start_keeps_first_epoch_moved(cache):
    assign_all(cache, (0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert cache.entries() == [(0, 5), (1, 7), (2, 10)]


def test_clear_then_assign(cache):
    assign_all(cache, (2, 6), (3, 8))
    cache.clear()
    assert cache.entries() == []
    cache.assign(1, 0)
    assert cache.entries() == [(1, 0)]


def test_epoch_for_offset(cache):
    assign_all(cache, (2, 6), (3, 8), (4, 11))
    assert [cache.epoch_for_offset(offset) for offset in (5, 6, 7, 8, 10, 11, 99)] == [
        None, 2, 2, 3, 3, 4, 4,
    ]  # fmt: skip


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1)])
def test_negative_entries_are_rejected(cache, epoch, offset):
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        cache.assign(epoch, offset)


def test_persists_between_instances_in_kafka_format(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    assign_all(cache, (2, 6), (3, 8))
    assert path.read_bytes() == b"0\n2\n2 6\n3 8\n"
    assert LeaderEpochCache(path).entries() == [(2, 6), (3, 8)]
    cache.truncate_from_end(8)
    assert path.read_bytes() == b"0\n1\n2 6\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_malformed_checkpoint_is_named_and_left_for_the_log_to_rebuild(tmp_path, caplog):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    for text, reason in [("0\n2\n2 6\n", "announces 2"), ("1\n0\n", "version")]:
        path.write_text(text)
        caplog.clear()
        cache = LeaderEpochCache(path)
        assert cache.rebuild_needed and cache.entries() == []
        [warning] = caplog.records
        assert str(path) in warning.getMessage() and reason in warning.getMessage()
    cache.rebuild([(-1, 0), (2, 1), (2, 3), (4, 6)])
    assert not cache.rebuild_needed
    assert LeaderEpochCache(path).entries() == [(2, 1), (4, 6)]


def test_previous_epoch(cache):
    assert cache.previous_epoch is None
    cache.assign(2, 10)
    assert cache.previous_epoch is None
    assign_all(cache, (4, 15), (7, 20))
    assert cache.previous_epoch == 4
    cache.truncate_from_end(20)
    assert cache.previous_epoch == 2
