"""Per-client fetch metrics stay bounded: a client names itself, so a hostile one inventing a new client id for
every request must not add a label set (memory, and a scrape that grows) for each."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from epochlog.server.metrics import MAX_CLIENT_IDS, OTHER_CLIENTS, BrokerMetrics

pytestmark = pytest.mark.unit


def _series(m: BrokerMetrics) -> dict[str, float]:
    out = {}
    for line in generate_latest(m.registry).decode().splitlines():
        if line.startswith("kafka_server_fetch_client_bytes_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels] = float(value)
    return out


def test_each_client_is_counted_on_its_own() -> None:
    m = BrokerMetrics()
    m.client_fetched("a", "t", 10)
    m.client_fetched("a", "t", 5)
    m.client_fetched("b", "t", 7)
    assert _series(m) == {
        'kafka_server_fetch_client_bytes_total{client_id="a",topic="t"}': 15.0,
        'kafka_server_fetch_client_bytes_total{client_id="b",topic="t"}': 7.0,
    }


def test_client_ids_past_the_cap_are_counted_together() -> None:
    m = BrokerMetrics()
    for i in range(MAX_CLIENT_IDS + 500):
        m.client_fetched(f"c-{i}", "t", 1)
    series = _series(m)
    assert len(series) == MAX_CLIENT_IDS + 1
    assert series[f'kafka_server_fetch_client_bytes_total{{client_id="{OTHER_CLIENTS}",topic="t"}}'] == 500.0
    m.client_fetched("c-0", "t", 1)  # a client counted before the cap keeps its own series
    assert _series(m)['kafka_server_fetch_client_bytes_total{client_id="c-0",topic="t"}'] == 2.0
