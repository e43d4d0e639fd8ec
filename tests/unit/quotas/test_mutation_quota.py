"""controller_mutation_rate decisions (Kafka's ControllerMutationQuotaManager): a token bucket of burst
quota x windows, strict versions refusing items while it is in debt (the item that takes it into debt still
goes), permissive versions letting everything through with a throttle time, refunds for what the controller
refused, and the long run held to the quota."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.quotas.mutations import KEY, MutationQuotas, TokenBucket, debt_ms, strict

pytestmark = pytest.mark.unit

CLIENT = (("client-id", "app"),)


def _quotas(rate: float, window_num: int = 2, window_ms: int = 1000) -> MutationQuotas:
    m = MutationQuotas(window_num, window_ms)
    m.update({CLIENT: {KEY: rate}})
    return m


def test_strictness_follows_kafkas_versions() -> None:
    assert [strict(19, v) for v in (5, 6, 7)] == [False, True, True]
    assert [strict(20, v) for v in (4, 5, 6)] == [False, True, True]
    assert [strict(37, v) for v in (2, 3)] == [False, True]


def test_a_bucket_starts_full_refills_at_the_rate_and_never_beyond_its_burst() -> None:
    b = TokenBucket(burst=20.0, last_ms=0)
    assert b.level(10.0, 0) == 20.0
    b.take(10.0, 25, 0)
    assert b.tokens == -5.0 and debt_ms(b.tokens, 10.0) == 500
    assert b.level(10.0, 500) == pytest.approx(0.0)
    assert b.level(10.0, 60_000) == 20.0


def test_strict_admits_while_out_of_debt_and_refuses_the_rest_with_the_time_to_pay_it_back() -> None:
    m = _quotas(10.0)  # burst 10 x 2 windows x 1 s = 20 partitions
    d = m.admit("", "app", [15, 10, 1, 1], strict=True, now_ms=1000)
    # 15 leaves 5 tokens, 10 takes it to -5 and still goes; the rest are refused while -5 lasts (500 ms).
    assert d.admitted == (True, True, False, False) and d.throttle_ms == 500
    assert m.admit("", "app", [1], strict=True, now_ms=1200).admitted == (False,)
    assert m.admit("", "app", [1], strict=True, now_ms=1500).admitted == (True,)


def test_strict_sets_no_throttle_when_nothing_was_refused() -> None:
    m = _quotas(10.0)
    assert m.admit("", "app", [30], strict=True, now_ms=0).throttle_ms == 0  # into debt, but admitted


def test_permissive_admits_everything_and_answers_the_debt() -> None:
    m = _quotas(10.0)
    d = m.admit("", "app", [15, 10, 5], strict=False, now_ms=0)
    assert d.admitted == (True, True, True) and d.throttle_ms == 1000


def test_without_a_quota_everything_goes_untouched() -> None:
    m = _quotas(10.0)
    d = m.admit("", "other", [1000], strict=True, now_ms=0)
    assert d.admitted == (True,) and d.throttle_ms == 0 and not m.buckets


def test_a_refund_gives_back_what_the_controller_refused() -> None:
    m = _quotas(10.0)
    m.admit("", "app", [20, 5], strict=True, now_ms=0)  # -5
    m.refund("", "app", 5, now_ms=0)
    assert m.admit("", "app", [1], strict=True, now_ms=0).admitted == (True,)


def test_a_lowered_quota_shrinks_the_burst() -> None:
    m = _quotas(10.0)
    m.admit("", "app", [1], strict=True, now_ms=0)  # 19 tokens left of a burst of 20
    m.update({CLIENT: {KEY: 1.0}})  # burst 2: the 19 are capped to it
    d = m.admit("", "app", [2, 1, 1], strict=True, now_ms=0)
    assert d.admitted == (True, True, False)


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(1, 20),
    sizes=st.lists(st.integers(1, 10), min_size=50, max_size=200),
)
def test_a_client_that_waits_out_its_throttles_is_held_to_the_rate(rate: int, sizes: list[int]) -> None:
    """Strict: over a long run the partitions admitted are at most the burst plus rate x elapsed."""
    m = _quotas(float(rate), window_num=3)
    now, admitted = 0, 0
    for n in sizes:
        d = m.admit("", "app", [n], strict=True, now_ms=now)
        if d.admitted[0]:
            admitted += n
        now += max(d.throttle_ms, 10)
    burst = rate * 3
    # The last admitted item may overdraw by its own size.
    assert admitted <= burst + rate * now / 1000 + max(sizes)


def test_broken_on_purpose_a_client_that_ignores_refusals_is_still_held() -> None:
    """Asking again at once does not help: refused items take no tokens, the debt is paid only by time."""
    m = _quotas(5.0, window_num=1)
    admitted = sum(n for n in [1] * 1000 if m.admit("", "app", [n], strict=True, now_ms=0).admitted[0])
    assert admitted == 6  # the burst of 5, and the one that took it into debt
