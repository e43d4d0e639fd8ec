"""request_percentage on one `epochlog up` node: a client whose requests take more of the broker's handler
time than its share gets a throttle time (at most one window) in its answers and its connection is muted
for it (which client ids a quota applies to: tests/unit/quotas/test_request_quota.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.kafka_wire import WireClient
from tests.integration.test_client_quotas import alter

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _metadata_throttle_ms(c: WireClient) -> float:
    resp = c.request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return float(resp.throttle_time.total_seconds() * 1000)


def test_a_client_over_its_request_share_is_throttled_and_muted(broker_factory: Any) -> None:
    broker = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    # 0.01 % of a thread: a tenth of a millisecond of handler time per second; one Metadata request is more.
    resp = alter(broker.port, ({"client-id": "wire"}, {"request_percentage": 0.01}))
    assert int(resp.entries[0].error_code) == 0
    c = WireClient(broker.port)
    try:
        throttle, deadline = 0.0, time.monotonic() + 20
        while throttle == 0 and time.monotonic() < deadline:
            throttle = _metadata_throttle_ms(c)
        assert 0 < throttle <= 1000
        # Muted for the throttle time: the next request is not even read before it has passed.
        started = time.monotonic()
        _metadata_throttle_ms(c)
        assert time.monotonic() - started >= throttle / 1000 * 0.9
    finally:
        c.close()
