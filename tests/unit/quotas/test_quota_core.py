"""The client quota core: Kafka's precedence of quota entities, the sampled rate, throttle times, and the
long-run property that matters: a client that waits out every throttle it is given is held to its quota,
and a client within its quota is never throttled."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.quotas.core import QuotaManager, SampledRate, resolve, throttle_ms

pytestmark = pytest.mark.unit

KEY = "producer_byte_rate"
LEVELS = {
    "user+client": (("client-id", "app"), ("user", "alice")),
    "user+default-client": (("client-id", None), ("user", "alice")),
    "user": (("user", "alice"),),
    "default-user+client": (("client-id", "app"), ("user", None)),
    "default-user+default-client": (("client-id", None), ("user", None)),
    "default-user": (("user", None),),
    "client": (("client-id", "app"),),
    "default-client": (("client-id", None),),
}
TAGS = {
    "user+client": ("alice", "app"),
    "user+default-client": ("alice", "app"),
    "user": ("alice", ""),
    "default-user+client": ("alice", "app"),
    "default-user+default-client": ("alice", "app"),
    "default-user": ("alice", ""),
    "client": ("", "app"),
    "default-client": ("", "app"),
}


def test_precedence_is_kafkas_most_specific_first() -> None:
    names = list(LEVELS)
    for i, level in enumerate(names):
        # Every level from this one down is set (value = its rank): the most specific wins.
        quotas = {LEVELS[n]: {KEY: float(j + 1)} for j, n in enumerate(names) if j >= i}
        assert resolve(quotas, KEY, "alice", "app") == (TAGS[level], float(i + 1)), level


def test_quotas_are_resolved_per_key_and_only_for_matching_names() -> None:
    quotas = {LEVELS["user"]: {"consumer_byte_rate": 5.0}, LEVELS["client"]: {KEY: 7.0}}
    assert resolve(quotas, KEY, "alice", "app") == (("", "app"), 7.0)
    assert resolve(quotas, "consumer_byte_rate", "alice", "app") == (("alice", ""), 5.0)
    assert resolve(quotas, KEY, "bob", "other") is None
    assert resolve({}, KEY, "alice", "app") is None


def test_a_rate_counts_at_least_window_num_minus_one_windows() -> None:
    r = SampledRate(window_num=11, window_size_ms=1000)
    r.record(10_000, now_ms=0)
    assert r.window_ms(0) == 10_000 and r.measure(0) == pytest.approx(1000.0)
    for t in range(0, 30_000, 100):
        r.record(100, t)
    # 1000 B/s steady: measured close to it once the windows are full.
    assert r.measure(30_000) == pytest.approx(1000.0, rel=0.1)


def test_old_samples_are_forgotten() -> None:
    r = SampledRate(window_num=3, window_size_ms=1000)
    r.record(1e6, 0)
    assert r.measure(100) > 0
    assert r.measure(10_000) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    window_num=st.integers(min_value=1, max_value=11),
    steps=st.lists(st.tuples(st.integers(min_value=0, max_value=4000), st.floats(0, 1e6)), max_size=60),
)
def test_one_pass_measure_and_window_answer_as_the_separate_calls(
    window_num: int, steps: list[tuple[int, float]]
) -> None:
    """The produce path's one pass over the samples (for speed) against measure() and window_ms()."""
    fast, slow = SampledRate(window_num, 1000), SampledRate(window_num, 1000)
    now = 0
    for gap, value in steps:
        now += gap
        fast.record(value, now)
        slow.record(value, now)
        observed, window = fast.measure_and_window(now)
        assert window == slow.window_ms(now)
        assert observed == pytest.approx(slow.measure(now))


def test_throttle_time_is_kafkas_formula() -> None:
    assert throttle_ms(2000.0, 1000.0, 10_000) == 10_000
    assert throttle_ms(1500.0, 1000.0, 10_000) == 5000
    assert throttle_ms(999.0, 1000.0, 10_000) == 0


def test_a_changed_quota_takes_effect_on_the_next_request() -> None:
    m = QuotaManager(KEY)
    m.update({LEVELS["client"]: {KEY: 1e9}})
    assert m.record("alice", "app", 100_000, 0) == 0
    m.update({LEVELS["client"]: {KEY: 1000.0}})
    assert m.record("alice", "app", 100_000, 10) > 0
    m.update({})
    assert m.record("alice", "app", 100_000, 20) == 0 and not m.enabled


def _run(quota: float, factor: float, size: int, seconds: int, honour: bool = True) -> tuple[float, int]:
    """A client sending ``size``-byte requests back to back at ``factor`` x ``quota``, waiting out every
    throttle time it is given (as a client that honours it, or a muted connection, does): its long-run rate
    and the throttle times handed out."""
    m = QuotaManager(KEY)
    m.update({LEVELS["user"]: {KEY: quota}})
    gap = size / (quota * factor) * 1000.0  # ms between requests at the offered rate
    now, sent, throttled = 0.0, 0, 0
    end = seconds * 1000.0
    while now < end:
        t = m.record("alice", "app", size, int(now))
        sent += size
        throttled += t
        now += max(gap, t) if honour else gap
    return sent / (now / 1000.0), throttled


@settings(max_examples=40, deadline=None)
@given(
    quota=st.floats(min_value=10_000, max_value=10_000_000),
    factor=st.floats(min_value=1.5, max_value=20.0),
    requests_per_window=st.integers(min_value=5, max_value=200),
)
def test_a_client_over_its_quota_is_held_to_it_within_20_percent(
    quota: float, factor: float, requests_per_window: int
) -> None:
    size = max(1, int(quota / requests_per_window))
    rate, throttled = _run(quota, factor, size, seconds=60)
    assert throttled > 0
    assert rate == pytest.approx(quota, rel=0.2)


@settings(max_examples=40, deadline=None)
@given(
    quota=st.floats(min_value=10_000, max_value=10_000_000),
    factor=st.floats(min_value=0.05, max_value=0.8),
    requests_per_window=st.integers(min_value=5, max_value=200),
)
def test_a_client_within_its_quota_is_never_throttled(quota: float, factor: float, requests_per_window: int) -> None:
    size = max(1, int(quota * factor / requests_per_window))
    _rate, throttled = _run(quota, factor, size, seconds=30)
    assert throttled == 0


def test_broken_on_purpose_throttle_times_nobody_waits_out_hold_nobody() -> None:
    """The property above can fail: a client that ignores its throttle times on a connection that is not
    muted (no KIP-219) keeps its offered rate, far past its quota."""
    rate, throttled = _run(100_000, 10.0, 10_000, seconds=30, honour=False)
    assert throttled > 0 and rate != pytest.approx(100_000, rel=0.2)


def test_fetch_bytes_are_capped_to_the_window_and_unrecorded_when_throttled() -> None:
    m = QuotaManager("consumer_byte_rate")
    assert m.max_in_window("alice", "app") is None
    m.update({LEVELS["default-client"]: {"consumer_byte_rate": 1000.0}})
    assert m.max_in_window("alice", "app") == 10_000.0
    t = m.record("alice", "app", 50_000, 0)
    assert t > 0
    m.unrecord("alice", "app", 50_000, 0)
    assert m.record("alice", "app", 1, 1) == 0
