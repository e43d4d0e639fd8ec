"""request_percentage (Kafka's ClientRequestQuotaManager): a client's handler time in percent of one thread's
time, checked before each request and recorded after it, the throttle bounded by one window, exempt
requests (followers, connection setup) never held; and a client that waits out its throttles uses about its
share of the broker's time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from epochlog import clock
from epochlog.quotas.core import QuotaManager
from epochlog.server.quota_enforcement import REQUEST, ClientQuotas

pytestmark = pytest.mark.unit


@dataclass
class _Header:
    client_id: str = "app"
    api_key: int = 3
    throttle_ms: int = 0
    quota_exempt: bool = False
    session: Any = field(default_factory=lambda: SimpleNamespace(principal="User:ANONYMOUS"))


@pytest.fixture
def manual() -> Iterator[clock.ManualClock]:
    c = clock.ManualClock(1_000_000)
    previous = clock.install(c)
    yield c
    clock.install(previous)


def _quotas(percent: float, window_num: int = 11) -> ClientQuotas:
    image = SimpleNamespace(quota_version=1, client_quotas={(("client-id", "app"),): {REQUEST: percent}})
    return ClientQuotas({"quota.window.num": str(window_num), "quota.window.size.seconds": "1"}, lambda: image)


def test_throttle_of_checks_without_recording() -> None:
    m = QuotaManager(REQUEST, 2, 1000)
    m.update({(("client-id", "app"),): {REQUEST: 10.0}})
    assert m.throttle_of("u", "app", 0) == 0  # nothing recorded yet
    m.record("u", "app", 30.0, 0)  # 30 percent-seconds over the minimum of one window: 30 % against 10 %
    assert m.throttle_of("u", "app", 0) == 2000
    assert m.throttle_of("u", "app", 0) == 2000  # checking again changes nothing


def test_a_client_over_its_share_is_throttled_by_at_most_one_window(manual: clock.ManualClock) -> None:
    q = _quotas(10.0)
    h = _Header()
    assert q.request_throttle(h) == 0
    q.record_request_time(h, 5.0)  # five seconds of handler time: far beyond 10 % of 10 windows
    h2 = _Header()
    assert q.request_throttle(h2) == 1000 and h2.throttle_ms == 1000
    assert q.managers[REQUEST].throttle_total_ms


def test_exempt_requests_are_neither_recorded_nor_held(manual: clock.ManualClock) -> None:
    q = _quotas(10.0)
    q.record_request_time(_Header(quota_exempt=True), 5.0)  # a follower's fetch
    q.record_request_time(_Header(api_key=18), 5.0)  # ApiVersions
    assert q.request_throttle(_Header()) == 0
    q.record_request_time(_Header(), 5.0)
    assert q.request_throttle(_Header(api_key=17)) == 0  # SaslHandshake still answered at once
    assert q.request_throttle(_Header(client_id="other")) == 0  # no quota for this client id


def test_a_client_that_waits_out_its_throttles_uses_about_its_share(manual: clock.ManualClock) -> None:
    """Requests of 20 ms each, back to back unless throttled: a 10 % share over 60 s is about 6 s of
    handler time. Broken on purpose (throttles ignored), the client would use all 60."""
    q = _quotas(10.0, window_num=5)
    start, used = manual.now_ms(), 0.0
    while manual.now_ms() - start < 60_000:
        h = _Header()
        wait = q.request_throttle(h)
        if wait:
            manual.advance(wait)
            continue
        q.record_request_time(h, 0.02)
        used += 0.02
        manual.advance(20)
    # The first windows' worth goes unthrottled, as in Kafka: 6 s plus at most num - 1 windows of share.
    assert 6.0 * 0.8 <= used <= 6.0 + 0.4 + 0.1
