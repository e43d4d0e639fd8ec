"""KIP-227 fetch sessions, the cache's rules alone (Kafka's FetchSessionTest cases, in our words): full and
incremental requests, the session errors, what an incremental answer leaves out, and eviction."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.replication.fetch_sessions import (
    FINAL_EPOCH,
    INT_MAX,
    FetchSessionCache,
    Full,
    Incremental,
    Outcome,
    SessionError,
    Sessionless,
    next_epoch,
)

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def quiet(hw: int = 10) -> Outcome:
    return Outcome(records_size=0, high_watermark=hw, log_start_offset=0)


def open_session(cache: FetchSessionCache, keys=(A, B), now: int = 0, privileged: bool = False) -> int:
    ctx = cache.new_context(False, 0, 0, privileged, [(k, f"p{k}") for k in keys], [], now)
    assert isinstance(ctx, Full)
    return cache.answer(ctx, [(k, quiet()) for k in keys], now).session_id


def test_epochs_wrap_past_int_max_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1 and next_epoch(INT_MAX) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_request_opens_a_session_and_incremental_omits_what_did_not_change() -> None:
    cache = FetchSessionCache(seed=1)
    sid = open_session(cache)
    assert sid != 0 and cache.sessions[sid].epoch == 1
    ctx = cache.new_context(False, sid, 1, False, [], [], 10)
    assert isinstance(ctx, Incremental) and [k for k, _p in ctx.partitions] == [A, B]
    data = Outcome(records_size=100, high_watermark=11, log_start_offset=0)
    answer = cache.answer(ctx, [(A, quiet()), (B, data)], 10)
    assert (answer.error, answer.session_id, answer.include) == (Err.NONE, sid, [False, True])
    # B returned records: it goes to the end, so the next read starts with A.
    assert list(cache.sessions[sid].partitions) == [A, B]
    ctx = cache.new_context(False, sid, 2, False, [], [], 20)
    assert cache.answer(ctx, [(A, quiet(hw=12)), (B, quiet(hw=11))], 20).include == [True, False]


def test_errors_are_always_answered_and_sent_again_when_they_clear() -> None:
    cache = FetchSessionCache(seed=1)
    sid = open_session(cache)
    ctx = cache.new_context(False, sid, 1, False, [], [], 1)
    bad = Outcome(0, -1, -1, error=Err.NOT_LEADER_OR_FOLLOWER)
    assert cache.answer(ctx, [(A, bad), (B, quiet())], 1).include == [True, False]
    ctx = cache.new_context(False, sid, 2, False, [], [], 2)
    assert cache.answer(ctx, [(A, quiet()), (B, quiet())], 2).include == [True, False]


def test_session_errors() -> None:
    cache = FetchSessionCache(seed=1)
    sid = open_session(cache)
    assert cache.new_context(False, sid + 1, 1, False, [], [], 1) == SessionError(Err.FETCH_SESSION_ID_NOT_FOUND)
    assert cache.new_context(False, sid, 5, False, [], [], 1) == SessionError(Err.INVALID_FETCH_SESSION_EPOCH)
    assert cache.new_context(True, sid, 1, False, [], [], 1) == SessionError(Err.FETCH_SESSION_TOPIC_ID_ERROR)
    # None of those moved the session on: the right request still works.
    assert isinstance(cache.new_context(False, sid, 1, False, [], [], 1), Incremental)


def test_a_duplicate_request_that_waited_is_answered_invalid_epoch() -> None:
    cache = FetchSessionCache(seed=1)
    sid = open_session(cache)
    first = cache.new_context(False, sid, 1, False, [], [], 1)
    second = cache.new_context(False, sid, 2, False, [], [], 2)  # the client moved on meanwhile
    assert cache.answer(first, [(A, quiet()), (B, quiet())], 3).error == Err.INVALID_FETCH_SESSION_EPOCH
    assert cache.answer(second, [(A, quiet()), (B, quiet())], 3).error == Err.NONE


def test_adding_and_forgetting_partitions_and_closing() -> None:
    cache = FetchSessionCache(seed=1)
    sid = open_session(cache)
    ctx = cache.new_context(False, sid, 1, False, [(C, "pC"), (A, "pA2")], [B], 1)
    assert isinstance(ctx, Incremental) and ctx.partitions == [(A, "pA2"), (C, "pC")]
    # A new partition is always answered (nothing was sent for it yet).
    assert cache.answer(ctx, [(A, quiet()), (C, quiet())], 1).include == [False, True]
    ctx = cache.new_context(False, sid, 2, False, [], [A, C], 2)
    assert ctx == Sessionless([]) and sid not in cache.sessions
    sid = open_session(cache)
    assert cache.new_context(False, sid, FINAL_EPOCH, False, [(A, "p")], [], 3) == Sessionless([(A, "p")])
    assert sid not in cache.sessions
    sid = open_session(cache)
    ctx = cache.new_context(False, sid, 0, False, [(A, "p")], [], 4)  # a new full request replaces it
    assert isinstance(ctx, Full) and sid not in cache.sessions


def test_no_slot_no_session() -> None:
    assert open_session(FetchSessionCache(max_slots=0)) == 0
    cache = FetchSessionCache(max_slots=1, seed=1)
    assert open_session(cache, now=0) != 0
    assert open_session(cache, now=1) == 0, "a young session of the same size is not evicted"


def test_idle_sessions_are_evicted_first() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=100, seed=1)
    open_session(cache, now=0)
    s2 = open_session(cache, now=50)
    s3 = open_session(cache, now=120)  # s1 idle for 120 > 100 ms
    assert s3 and set(cache.sessions) == {s2, s3} and cache.evictions == 1


def test_bigger_and_privileged_sessions_win_slots() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=100, seed=1)
    consumer = open_session(cache, keys=(A, B, C), now=0)
    # A follower may take a consumer's slot at once, whatever its size.
    follower = open_session(cache, keys=(A,), now=1, privileged=True)
    assert follower and consumer not in cache.sessions
    # A consumer may not take a follower's slot while the follower's session is young...
    assert open_session(cache, keys=(A, B, C), now=2) == 0
    # ...nor once it is old, if it is not more privileged (a consumer never is).
    ctx = cache.new_context(False, follower, 1, True, [], [], 150)  # touched when older than eviction_ms
    cache.answer(ctx, [(A, quiet())], 150)
    assert open_session(cache, keys=(A, B, C), now=160) == 0
    # Between consumers the bigger one wins once the other is old.
    cache = FetchSessionCache(max_slots=1, eviction_ms=100, seed=1)
    small = open_session(cache, keys=(A,), now=0)
    ctx = cache.new_context(False, small, 1, False, [], [], 150)
    cache.answer(ctx, [(A, quiet())], 150)
    assert open_session(cache, keys=(B,), now=160) == 0, "an equal size does not evict (the newcomer's id 0 is lower)"
    assert open_session(cache, keys=(A, B), now=160) != 0, "a bigger one does"
    assert small not in cache.sessions and cache.evictions == 1
    cache = FetchSessionCache(max_slots=1, eviction_ms=100, seed=1)
    big = open_session(cache, keys=(A, B, C), now=0)
    ctx = cache.new_context(False, big, 1, False, [], [], 150)
    cache.answer(ctx, [(k, quiet()) for k in (A, B, C)], 150)
    assert open_session(cache, keys=(A,), now=160) == 0, "a smaller session does not evict a bigger one"
