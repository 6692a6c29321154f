"""Fetch sessions (KIP-227) without I/O, as Kafka 3.5's FetchSessionTest checks them: which
context a fetch gets from its session id and epoch, what an incremental response leaves
out, and which sessions the cache keeps when it is full."""

from __future__ import annotations

import random
import uuid

from kcore import errors
from kcore.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchManager,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionFetch,
    SessionErrorContext,
    SessionlessFetchContext,
    TopicIdPartition,
    next_epoch,
)

ZERO = uuid.UUID(int=0)
FOO_ID = uuid.UUID(int=1)
BAR_ID = uuid.UUID(int=2)
FOO0, FOO1 = TopicIdPartition(ZERO, "foo", 0), TopicIdPartition(ZERO, "foo", 1)
BAR0 = TopicIdPartition(ZERO, "bar", 0)


def manager(slots: int = 10) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, random.Random(7)))


def fetch(offset: int = 0) -> PartitionFetch:
    return PartitionFetch(offset, 1000)


def answer(hw: int = 10, records: bytes = b"", error_code: int = 0, **extra) -> dict:
    return {"error_code": error_code, "high_watermark": hw, "log_start_offset": 0,
            "records": records, "preferred_read_replica": -1, **extra}  # fmt: skip


def context(mgr, session_id, epoch, data=None, forget=(), version=12, now=0, names=None):
    return mgr.new_context(
        version, session_id, epoch, False, data or {}, list(forget), names or {}, now
    )


def open_session(mgr, partitions=(FOO0, FOO1), version=12, now=0) -> int:
    ctx = context(mgr, 0, INITIAL_EPOCH, {tp: fetch() for tp in partitions}, version=version,
                  now=now)  # fmt: skip
    assert isinstance(ctx, FullFetchContext)
    result = ctx.respond({tp: answer() for tp, _ in ctx.partitions()}, now)
    assert result.error_code == 0 and result.session_id != 0
    return result.session_id


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, FINAL_EPOCH]


def test_a_fetch_with_the_final_epoch_is_sessionless_and_answered_in_full():
    mgr = manager()
    ctx = context(mgr, 0, FINAL_EPOCH, {FOO0: fetch(), FOO1: fetch()})
    assert isinstance(ctx, SessionlessFetchContext)
    result = ctx.respond({FOO0: answer(), FOO1: answer()}, 0)
    assert (result.error_code, result.session_id, list(result.partitions)) == (0, 0, [FOO0, FOO1])
    assert mgr.cache.size == 0


def test_an_incremental_fetch_reads_the_whole_session_and_answers_only_what_changed():
    mgr = manager()
    session_id = open_session(mgr)
    assert mgr.cache.total_partitions == 2
    # Epoch 1, naming nothing: every partition of the session is fetched.
    ctx = context(mgr, session_id, 1)
    assert isinstance(ctx, IncrementalFetchContext)
    assert [tp for tp, _ in ctx.partitions()] == [FOO0, FOO1]
    result = ctx.respond({FOO0: answer(), FOO1: answer()}, 10)
    assert (result.error_code, result.session_id, result.partitions) == (0, session_id, {})
    # A new high watermark, records, a diverging epoch: sent; the rest left out.
    ctx = context(mgr, session_id, 2)
    result = ctx.respond({FOO0: answer(hw=11), FOO1: answer()}, 20)
    assert list(result.partitions) == [FOO0]
    ctx = context(mgr, session_id, 3)
    result = ctx.respond({FOO0: answer(hw=11), FOO1: answer(records=b"batch")}, 30)
    assert list(result.partitions) == [FOO1]
    ctx = context(mgr, session_id, 4)
    diverging = {"epoch": 3, "end_offset": 5}
    result = ctx.respond({FOO0: answer(hw=11, diverging_epoch=diverging), FOO1: answer()}, 40)
    assert list(result.partitions) == [FOO0]


def test_a_partition_that_got_records_moves_to_the_end_of_the_session():
    mgr = manager()
    session_id = open_session(mgr, (FOO0, FOO1, BAR0))
    ctx = context(mgr, session_id, 1)
    ctx.respond({FOO0: answer(records=b"x"), FOO1: answer(), BAR0: answer()}, 0)
    ctx = context(mgr, session_id, 2)
    assert [tp for tp, _ in ctx.partitions()] == [FOO1, BAR0, FOO0]


def test_incremental_fetches_add_update_and_forget_partitions():
    mgr = manager()
    session_id = open_session(mgr)
    ctx = context(mgr, session_id, 1, {BAR0: fetch(5), FOO0: fetch(7)}, forget=[FOO1])
    assert {tp: f.fetch_offset for tp, f in ctx.partitions()} == {FOO0: 7, BAR0: 5}
    result = ctx.respond({FOO0: answer(), BAR0: answer()}, 0)
    assert list(result.partitions) == [BAR0]  # new to the session: never sent before
    assert mgr.cache.total_partitions == 2
    # Forgetting the last partitions closes the session: a sessionless answer.
    ctx = context(mgr, session_id, 2, forget=[FOO0, BAR0])
    assert isinstance(ctx, SessionlessFetchContext)
    assert mgr.cache.get(session_id) is None and mgr.cache.total_partitions == 0


def test_errors_are_always_sent_and_the_partition_again_once_they_are_gone():
    mgr = manager()
    session_id = open_session(mgr)
    not_leader = errors.NotLeaderOrFollowerError.code
    for epoch in (1, 2):
        result = context(mgr, session_id, epoch).respond(
            {FOO0: answer(hw=-1, error_code=not_leader), FOO1: answer()}, 0
        )
        assert list(result.partitions) == [FOO0]
    # The same high watermark as before the error: still sent, the error having passed.
    result = context(mgr, session_id, 3).respond({FOO0: answer(), FOO1: answer()}, 0)
    assert list(result.partitions) == [FOO0]


def test_session_errors_unknown_id_wrong_epoch_and_topic_ids_across_versions():
    mgr = manager()
    session_id = open_session(mgr)
    unknown = context(mgr, session_id + 1, 1)
    assert isinstance(unknown, SessionErrorContext)
    result = unknown.respond({}, 0)
    assert (result.error_code, result.session_id, result.partitions) == (
        errors.FetchSessionIdNotFoundError.code, 0, {},
    )  # fmt: skip
    stale = context(mgr, session_id, 5).respond({}, 0)
    assert stale.error_code == errors.InvalidFetchSessionEpochError.code
    by_ids = context(mgr, session_id, 1, version=13).respond({}, 0)
    assert by_ids.error_code == errors.FetchSessionTopicIdError.code
    # None of the refused requests moved the session on.
    assert isinstance(context(mgr, session_id, 1), IncrementalFetchContext)


def test_a_duplicate_request_gets_invalid_epoch_when_a_later_one_overtook_it():
    mgr = manager()
    session_id = open_session(mgr)
    first = context(mgr, session_id, 1)
    context(mgr, session_id, 2).respond({FOO0: answer(), FOO1: answer()}, 0)
    result = first.respond({FOO0: answer(hw=99), FOO1: answer()}, 0)
    assert (result.error_code, result.session_id) == (
        errors.InvalidFetchSessionEpochError.code, session_id,
    )  # fmt: skip


def test_a_full_fetch_naming_a_session_closes_it():
    mgr = manager()
    session_id = open_session(mgr)
    renewed = open_session_with_id(mgr, session_id)
    assert renewed != session_id and mgr.cache.get(session_id) is None
    closing = context(mgr, renewed, FINAL_EPOCH, {FOO0: fetch()})
    assert isinstance(closing, SessionlessFetchContext)
    assert mgr.cache.size == 0


def open_session_with_id(mgr, session_id):
    ctx = context(mgr, session_id, INITIAL_EPOCH, {FOO0: fetch()})
    return ctx.respond({FOO0: answer()}, 0).session_id


def test_topic_id_sessions_resolve_a_name_learned_later():
    mgr = manager()
    unknown = TopicIdPartition(BAR_ID, None, 0)
    foo = TopicIdPartition(FOO_ID, "foo", 0)
    ctx = context(mgr, 0, INITIAL_EPOCH, {foo: fetch(), unknown: fetch()}, version=13,
                  names={FOO_ID: "foo"})  # fmt: skip
    session_id = ctx.respond({foo: answer(), unknown: answer(hw=-1, error_code=100)}, 0).session_id
    ctx = context(mgr, session_id, 1, version=13, names={FOO_ID: "foo", BAR_ID: "bar"})
    assert [tp for tp, _ in ctx.partitions()] == [foo, TopicIdPartition(BAR_ID, "bar", 0)]
    # Forgotten by id, whatever the name.
    ctx = context(mgr, session_id, 2, version=13, forget=[TopicIdPartition(FOO_ID, None, 0)])
    assert [tp.topic_id for tp, _ in ctx.partitions()] == [BAR_ID]


def test_a_full_cache_hands_out_no_session_until_one_is_stale():
    mgr = manager(slots=1)
    first = open_session(mgr, now=0)
    ctx = context(mgr, 0, INITIAL_EPOCH, {BAR0: fetch()}, now=1000)
    assert ctx.respond({BAR0: answer()}, 1000).session_id == 0  # answered, no session
    # Unused for longer than the eviction time (120 s): any newcomer takes its slot.
    ctx = context(mgr, 0, INITIAL_EPOCH, {BAR0: fetch()}, now=121_000)
    second = ctx.respond({BAR0: answer()}, 121_000).session_id
    assert second != 0 and mgr.cache.get(first) is None and mgr.cache.evictions == 1
    assert mgr.cache.total_partitions == 1


def test_a_bigger_session_evicts_a_smaller_one_older_than_the_eviction_time():
    cache = FetchSessionCache(1, random.Random(1))
    small = cache.maybe_create_session(0, False, 1, False, dict)
    cache.get(small).partitions = {("foo", 0): None}
    cache.touch(cache.get(small), 130_000)  # used recently, created long ago
    assert cache.maybe_create_session(131_000, False, 1, False, dict) == 0  # not bigger
    big = cache.maybe_create_session(131_000, False, 2, False, dict)
    assert big != 0 and cache.get(small) is None


def test_privileged_sessions_evict_young_unprivileged_ones_and_are_kept_from_them():
    cache = FetchSessionCache(1, random.Random(1))
    consumer = cache.maybe_create_session(0, False, 5, False, dict)
    follower = cache.maybe_create_session(10, True, 1, False, dict)
    assert follower != 0 and cache.get(consumer) is None
    # An unprivileged newcomer evicts no privileged session, even once that is old.
    cache.touch(cache.get(follower), 200_000)
    assert cache.maybe_create_session(200_000, False, 50, False, dict) == 0
    assert cache.get(follower) is not None


def test_no_slots_no_sessions():
    mgr = manager(slots=0)
    ctx = context(mgr, 0, INITIAL_EPOCH, {FOO0: fetch()})
    assert ctx.respond({FOO0: answer()}, 0).session_id == 0


def test_random_clients_keep_the_cache_consistent():
    """Clients opening, using, renewing and closing sessions at random times, against a
    small cache: never more sessions than slots, the partition count right, and a client
    whose session survived goes on in step with it."""
    rng = random.Random(2718)
    mgr = manager(slots=4)
    cache = mgr.cache
    pool = [TopicIdPartition(ZERO, t, p) for t in ("a", "b", "c") for p in range(3)]
    clients: dict[int, tuple[int, int]] = {}  # client -> (session id, next epoch)
    now = incremental = 0
    for _ in range(3000):
        now += rng.choice((0, 10, 1000, 60_000))
        client = rng.randrange(8)
        session_id, epoch = clients.get(client, (0, INITIAL_EPOCH))
        action = rng.random()
        if session_id == 0 or action < 0.1:
            wanted = rng.sample(pool, rng.randrange(1, 5))
            ctx = context(mgr, session_id, INITIAL_EPOCH, {tp: fetch() for tp in wanted}, now=now)
        elif action < 0.15:
            ctx = context(mgr, session_id, FINAL_EPOCH, {pool[0]: fetch()}, now=now)
        else:
            added = {tp: fetch() for tp in rng.sample(pool, rng.randrange(0, 2))}
            forgotten = rng.sample(pool, rng.randrange(0, 2))
            ctx = context(mgr, session_id, epoch, added, forgotten, now=now)
        result = ctx.respond({tp: answer(hw=rng.randrange(3)) for tp, _ in ctx.partitions()}, now)
        if result.error_code == errors.FetchSessionIdNotFoundError.code:
            assert cache.get(session_id) is None  # evicted meanwhile: the client starts over
            clients[client] = (0, INITIAL_EPOCH)
        else:
            assert result.error_code == 0
            clients[client] = (result.session_id, 1 if result.session_id else INITIAL_EPOCH)
            if isinstance(ctx, IncrementalFetchContext):
                incremental += 1
                clients[client] = (session_id, next_epoch(epoch))
                assert result.session_id == session_id
        assert cache.size <= 4
        assert cache.total_partitions == sum(s.size for s in cache.sessions.values())
        for live_id, live_epoch in clients.values():
            session = cache.get(live_id)
            if session is not None:
                assert session.epoch == live_epoch
    assert cache.evictions > 0 and incremental > 500
