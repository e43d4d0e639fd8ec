"""The follower's fetch backoff (replica.fetch.backoff.ms): which partitions sit a round out after an error or
a fenced answer, the whole leader after a failed request, and how long an idle round waits."""

from __future__ import annotations

import pytest

from epochlog.replication.fetch_backoff import DEFAULT_BACKOFF_MS, IDLE_POLL_MS, FetchBackoff
from epochlog.replication.types import FetchOutcome

pytestmark = pytest.mark.unit

A = ("t", 0)
B = ("t", 1)
EPOCH = 4


def test_kafkas_default_is_a_second() -> None:
    assert DEFAULT_BACKOFF_MS == 1000
    assert FetchBackoff().backoff_ms == 1000


@pytest.mark.parametrize("outcome", [FetchOutcome.ERROR, FetchOutcome.FENCED])
def test_an_error_or_fenced_answer_holds_that_partition_back_for_the_backoff(outcome: FetchOutcome) -> None:
    b = FetchBackoff(1000)
    b.after_answer(A, outcome, EPOCH, now_ms=10_000)
    assert not b.may_fetch(A, EPOCH, 10_000)
    assert not b.may_fetch(A, EPOCH, 10_999)
    assert b.may_fetch(B, EPOCH, 10_001)  # the other partitions at that leader go on
    assert b.may_fetch(A, EPOCH, 11_000)
    assert b.wait_ms(10_001) == 0  # not the whole leader


@pytest.mark.parametrize(
    "outcome", [FetchOutcome.APPENDED, FetchOutcome.TRUNCATED, FetchOutcome.RESTARTED, FetchOutcome.STALE]
)
def test_other_answers_cost_nothing(outcome: FetchOutcome) -> None:
    b = FetchBackoff(1000)
    b.after_answer(A, outcome, EPOCH, now_ms=10_000)
    assert b.may_fetch(A, EPOCH, 10_000)


def test_a_new_leader_epoch_ends_the_wait() -> None:
    # The fenced answer was about the old term: new metadata is fetched for at once.
    b = FetchBackoff(1000)
    b.after_answer(A, FetchOutcome.FENCED, EPOCH, now_ms=10_000)
    assert b.may_fetch(A, EPOCH + 1, 10_010)


def test_a_good_answer_clears_a_wait_and_a_stale_one_does_not() -> None:
    b = FetchBackoff(1000)
    b.after_answer(A, FetchOutcome.ERROR, EPOCH, now_ms=10_000)
    b.after_answer(A, FetchOutcome.STALE, EPOCH, now_ms=10_005)  # an answer to an older fetch
    assert not b.may_fetch(A, EPOCH, 10_010)
    b.after_answer(A, FetchOutcome.APPENDED, EPOCH, now_ms=10_020)
    assert b.may_fetch(A, EPOCH, 10_020)


def test_a_failed_request_holds_back_the_whole_leader() -> None:
    b = FetchBackoff(1000)
    b.after_failure(now_ms=5_000)
    assert b.wait_ms(5_000) == 1000
    assert b.wait_ms(5_600) == 400
    assert not b.may_fetch(A, EPOCH, 5_999)
    assert not b.may_fetch(B, EPOCH + 1, 5_999)  # a new epoch does not help: the leader is unreachable
    assert b.wait_ms(6_000) == 0
    assert b.may_fetch(A, EPOCH, 6_000)


def test_an_idle_round_waits_for_the_first_partition_due_but_polls() -> None:
    b = FetchBackoff(1000)
    assert b.idle_ms(0) == IDLE_POLL_MS  # nothing waits (say, throttled): poll
    b.after_answer(A, FetchOutcome.ERROR, EPOCH, now_ms=0)
    assert b.idle_ms(0) == IDLE_POLL_MS  # due in a second, but new metadata may end the wait sooner
    assert b.idle_ms(990) == 10
    assert b.idle_ms(1_000) >= 1  # never a busy loop


def test_a_zero_backoff_never_waits() -> None:
    b = FetchBackoff(0)
    b.after_answer(A, FetchOutcome.ERROR, EPOCH, now_ms=10)
    b.after_failure(now_ms=10)
    assert b.may_fetch(A, EPOCH, 10)
    assert b.wait_ms(10) == 0
