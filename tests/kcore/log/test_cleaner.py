"""Log compaction's rules, decided without I/O (kcore.log._cleaner): what a batch keeps,
which offsets are cleanable, which log is cleaned first."""

import pytest

from kcore import errors
from kcore.log import (
    OffsetMap,
    SegmentSummary,
    build_batch,
    check_keys_for_compaction,
    cleanable_offsets,
    filthiest,
    iter_records,
    log_to_clean,
    max_compaction_delay,
    offset_map_capacity,
    parse_header,
    validate_batch,
)
from kcore.log._cleaner import clean_batch, delete_horizon_ms, group_segments_by_size

DAY_MS = 86_400_000


def batch(base_offset, *records, compression="none", **producer):
    """A batch of (key, value) records stamped 1000, 1001, ... from `base_offset`."""
    rows = [(1000 + i, key, value) for i, (key, value) in enumerate(records)]
    return build_batch(rows, base_offset=base_offset, compression=compression, **producer)


def mapped(*batches, capacity=1000, start=0):
    offset_map = OffsetMap(capacity)
    for data in batches:
        if offset_map.add_batch(parse_header(data), data, start):
            break
    return offset_map


def clean(data, offset_map, now_ms=0, delete_retention_ms=DAY_MS, producer_last_batch=False):
    return clean_batch(
        parse_header(data),
        data,
        offset_map,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        producer_last_batch=producer_last_batch,
    )


def kept(data):
    if data is None:
        return None
    validate_batch(data)
    return [(r.offset, r.key, r.value) for r in iter_records(data)]


# -- what a batch keeps ------------------------------------------------------------------


def test_only_the_last_record_of_each_key_is_kept_at_its_offset():
    first = batch(0, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"))
    second = batch(3, (b"c", b"1"), (b"b", b"2"))
    offset_map = mapped(first, second)
    assert offset_map.latest_offset == 4
    assert kept(clean(first, offset_map)) == [(2, b"a", b"2")]
    assert kept(clean(second, offset_map)) == [(3, b"c", b"1"), (4, b"b", b"2")]


def test_a_batch_keeps_its_offsets_and_producer_fields_when_records_go():
    data = batch(
        10, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"), producer_id=7, producer_epoch=2,
        base_sequence=40,
    )  # fmt: skip
    later = batch(13, (b"a", b"3"))
    cleaned = clean(data, mapped(data, later))
    header, original = parse_header(cleaned), parse_header(data)
    # The last record (offset 12) went, yet the batch still ends at 12: the producer's
    # last sequence (base sequence + last offset delta) is what it was.
    assert kept(cleaned) == [(11, b"b", b"1")]
    assert (header.base_offset, header.last_offset, header.record_count) == (10, 12, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    assert header.partition_leader_epoch == original.partition_leader_epoch


def test_an_untouched_batch_is_kept_byte_for_byte():
    data = batch(0, (b"a", b"1"), (b"b", b"1"))
    assert clean(data, mapped(data)) == data


def test_records_past_the_map_are_kept():
    first = batch(0, (b"a", b"1"), (b"b", b"1"))
    second = batch(2, (b"a", b"2"), (b"b", b"2"), (b"c", b"1"))
    offset_map = mapped(first, second, capacity=1)  # room for one key: "a" at 0, full at 1
    assert offset_map.latest_offset == 0
    assert clean(first, offset_map) == first
    assert clean(second, offset_map) == second


def test_an_emptied_batch_is_dropped_unless_it_is_its_producers_last():
    data = batch(0, (b"a", b"1"), producer_id=5, producer_epoch=0, base_sequence=9)
    offset_map = mapped(data, batch(1, (b"a", b"2")))
    assert clean(data, offset_map) is None
    empty = clean(data, offset_map, producer_last_batch=True)
    header = parse_header(empty)
    validate_batch(empty)
    assert kept(empty) == []
    assert (header.base_offset, header.last_offset, header.record_count) == (0, 0, 0)
    assert (header.producer_id, header.base_sequence) == (5, 9)
    assert header.max_timestamp == parse_header(data).max_timestamp
    # A batch without a producer has no state to keep.
    plain = batch(0, (b"a", b"1"))
    assert clean(plain, offset_map, producer_last_batch=True) is None


def test_a_tombstone_is_kept_for_delete_retention_ms_after_the_clean_that_saw_it():
    value = batch(0, (b"a", b"1"), (b"b", b"1"))
    tombstone = batch(2, (b"a", None))
    offset_map = mapped(value, tombstone)
    # The clean at t=5000 removes what the tombstone deletes and stamps its horizon.
    assert kept(clean(value, offset_map, now_ms=5000)) == [(1, b"b", b"1")]
    stamped = clean(tombstone, offset_map, now_ms=5000, delete_retention_ms=100)
    assert kept(stamped) == [(2, b"a", None)]
    assert delete_horizon_ms(parse_header(stamped)) == 5100
    assert [r.timestamp for r in iter_records(stamped)] == [1000]  # record times kept
    # Later cleans: kept until the horizon, then dropped; the horizon is not moved.
    offset_map = mapped(stamped)
    assert clean(stamped, offset_map, now_ms=5099, delete_retention_ms=100) == stamped
    assert clean(stamped, offset_map, now_ms=5100, delete_retention_ms=100) is None


def test_a_tombstone_kept_beside_other_records_gets_the_horizon_once():
    data = batch(0, (b"a", None), (b"b", b"1"), (b"b", b"2"))
    offset_map = mapped(data)
    cleaned = clean(data, offset_map, now_ms=10, delete_retention_ms=50)
    assert kept(cleaned) == [(0, b"a", None), (2, b"b", b"2")]
    assert delete_horizon_ms(parse_header(cleaned)) == 60
    assert clean(cleaned, mapped(cleaned), now_ms=20, delete_retention_ms=50) == cleaned
    assert kept(clean(cleaned, mapped(cleaned), now_ms=60)) == [(2, b"b", b"2")]


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_a_rewritten_batch_keeps_its_compression(compression):
    data = batch(0, (b"a", b"1"), (b"b", b"x" * 100), (b"a", b"2"), compression=compression)
    cleaned = clean(data, mapped(data))
    assert parse_header(cleaned).compression == compression
    assert kept(cleaned) == [(1, b"b", b"x" * 100), (2, b"a", b"2")]


def test_a_log_append_time_batch_keeps_its_timestamp():
    from kcore.log import with_log_append_time

    data = with_log_append_time(batch(0, (b"a", b"1"), (b"a", b"2")), 777)
    cleaned = clean(data, mapped(data))
    assert parse_header(cleaned).is_log_append_time
    assert [(r.offset, r.timestamp) for r in iter_records(cleaned)] == [(1, 777)]


def test_records_with_headers_survive_a_rewrite():
    rows = [(5, b"a", b"1", [("h", b"x")]), (6, b"a", b"2", [("h", None), ("i", b"y")])]
    data = build_batch(rows)
    ((record,),) = [list(iter_records(clean(data, mapped(data))))]
    assert (record.offset, record.timestamp, record.headers) == (1, 6, (("h", None), ("i", b"y")))


def test_the_cleaner_drops_records_without_a_key():
    data = batch(0, (None, b"1"), (b"a", b"1"))
    assert kept(clean(data, mapped(data))) == [(1, b"a", b"1")]


# -- what a compacted topic accepts ------------------------------------------------------


def test_a_compacted_topic_refuses_a_record_without_a_key():
    data = batch(0, (b"a", b"1"), (None, b"2"))
    with pytest.raises(errors.InvalidRecordError) as info:
        check_keys_for_compaction(parse_header(data), data, "t-0")
    assert info.value.code == 87
    assert "Compacted topic cannot accept message without key in topic partition t-0." in str(
        info.value
    )
    assert "batchIndex=1" in str(info.value)
    keyed = batch(0, (b"a", b"1"))
    check_keys_for_compaction(parse_header(keyed), keyed, "t-0")


# -- the offset map ----------------------------------------------------------------------


def test_the_offset_map_takes_as_many_keys_as_kafkas_dedupe_buffer():
    # 128 MiB / 24 bytes a slot, 90% full (Kafka's defaults).
    assert offset_map_capacity(128 * 1024 * 1024, 1, 0.9) == 5_033_164
    assert offset_map_capacity(128 * 1024 * 1024, 2, 0.9) == 2_516_581
    with pytest.raises(ValueError, match="too small to fit in even a single message"):
        OffsetMap(0)


def test_the_map_starts_at_the_first_dirty_offset():
    data = batch(0, (b"a", b"1"), (b"a", b"2"), (b"b", b"1"))
    offset_map = mapped(data, start=1)
    assert (len(offset_map), offset_map.get(b"a"), offset_map.latest_offset) == (2, 1, 2)


# -- which offsets are cleanable ---------------------------------------------------------


def segments(*specs):
    """(base_offset, size, max_timestamp) per segment; the last is the active one."""
    return [SegmentSummary(base, size, stamp, stamp) for base, size, stamp in specs]


LOG = segments((0, 100, 10), (10, 100, 20), (20, 100, 30), (30, 50, 40))


def offsets(checkpoint=None, hw=35, lag=0, now=1000, start=0, end=35):
    return cleanable_offsets(
        LOG,
        log_start_offset=start,
        log_end_offset=end,
        checkpoint=checkpoint,
        last_stable_offset=hw,
        min_compaction_lag_ms=lag,
        now_ms=now,
    )


def test_the_active_segment_is_never_cleanable():
    assert (offsets().first_dirty_offset, offsets().first_uncleanable_dirty_offset) == (0, 30)


def test_nothing_at_or_above_the_high_watermark_is_cleanable():
    assert offsets(hw=15).first_uncleanable_dirty_offset == 15
    # ... and the cleaner stops at the segment holding it.
    assert log_to_clean("t", LOG, offsets(hw=15), **NOT_NOW).first_uncleanable_offset == 10


NOT_NOW = {"needs_compaction_now": False, "min_cleanable_ratio": 0.5}


def test_segments_younger_than_the_minimum_compaction_lag_wait():
    # At 1000 the segment at 10 holds records 980 ms old at most, the one at 20 970 ms.
    assert offsets(lag=990).first_uncleanable_dirty_offset == 10
    assert offsets(lag=975).first_uncleanable_dirty_offset == 20
    assert offsets(lag=970).first_uncleanable_dirty_offset == 30


def test_a_checkpoint_that_no_longer_fits_the_log_restarts_from_the_log_start():
    assert offsets(checkpoint=20) == offsets(checkpoint=20)
    assert offsets(checkpoint=20).first_dirty_offset == 20
    assert not offsets(checkpoint=20).force_update_checkpoint
    below_start = offsets(checkpoint=5, start=10)
    assert (below_start.first_dirty_offset, below_start.force_update_checkpoint) == (10, True)
    beyond_end = offsets(checkpoint=40, start=0)
    assert (beyond_end.first_dirty_offset, beyond_end.force_update_checkpoint) == (0, True)


def test_a_record_older_than_the_maximum_compaction_lag_asks_for_a_clean_now():
    # The first dirty segment's first batch is stamped 20; at 1000 that is 980 ms ago.
    assert max_compaction_delay(LOG, 10, max_compaction_lag_ms=900, now_ms=1000) == 80
    assert max_compaction_delay(LOG, 10, max_compaction_lag_ms=990, now_ms=1000) == 0
    # the active segment's records do not count
    assert max_compaction_delay(LOG, 30, max_compaction_lag_ms=0, now_ms=1000) == 0


def test_the_dirtiest_log_is_cleaned_first():
    clean_mostly = log_to_clean("a", LOG, offsets(checkpoint=20), **NOT_NOW)
    dirty_mostly = log_to_clean("b", LOG, offsets(checkpoint=10), **NOT_NOW)
    assert (clean_mostly.clean_bytes, clean_mostly.cleanable_bytes) == (200, 100)
    assert (dirty_mostly.clean_bytes, dirty_mostly.cleanable_bytes) == (100, 200)
    assert filthiest([clean_mostly, dirty_mostly]).key == "b"
    # Below its min.cleanable.dirty.ratio a log waits, unless a record is overdue.
    assert filthiest([clean_mostly]) is None
    overdue = log_to_clean(
        "a", LOG, offsets(checkpoint=20), needs_compaction_now=True, min_cleanable_ratio=0.5
    )
    assert filthiest([overdue]).key == "a"
    # A clean log (nothing cleanable) is never chosen, overdue or not.
    done = log_to_clean(
        "c", LOG, offsets(checkpoint=30), needs_compaction_now=True, min_cleanable_ratio=0
    )
    assert filthiest([done]) is None


def test_segments_are_grouped_to_fit_one_segment():
    summaries = segments((0, 60, 0), (10, 30, 0), (20, 30, 0), (30, 80, 0), (40, 10, 0))
    groups = group_segments_by_size(summaries, 100, 50)
    assert [[s.base_offset for s in group] for group in groups] == [[0, 10], [20], [30, 40]]
    # offsets must fit a segment's 32-bit relative offsets
    wide = segments((0, 1, 0), (2**31, 1, 0), (2**31 + 10, 1, 0))
    groups = group_segments_by_size(wide, 100, 2**31 + 20)
    assert [[s.base_offset for s in group] for group in groups] == [[0], [2**31, 2**31 + 10]]
