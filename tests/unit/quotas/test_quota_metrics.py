"""Per quota entity metrics on the Prometheus endpoint: byte rates, request time, throttle time handed out
and mutation tokens per (user, client id), as the quota managers measure them, with at most MAX_CLIENT_IDS
entities per metric however many client ids come and go."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from epochlog import clock
from epochlog.server.metrics import MAX_CLIENT_IDS, OTHER_CLIENTS
from epochlog.server.quota_enforcement import PRODUCE, ClientQuotas
from epochlog.server.quota_metrics import QuotaCollector

pytestmark = pytest.mark.unit


@pytest.fixture
def manual() -> Iterator[clock.ManualClock]:
    c = clock.ManualClock(1_000_000)
    previous = clock.install(c)
    yield c
    clock.install(previous)


def _scrape(quotas: ClientQuotas) -> list[str]:
    r = CollectorRegistry()
    r.register(QuotaCollector(quotas))
    return generate_latest(r).decode().splitlines()


def _header(client: str) -> SimpleNamespace:
    return SimpleNamespace(client_id=client, session=None, throttle_ms=0, api_key=0)


def test_byte_rate_and_throttle_time_per_entity(manual: clock.ManualClock) -> None:
    image = SimpleNamespace(quota_version=1, client_quotas={(("client-id", None),): {PRODUCE: 1000.0}})
    q = ClientQuotas({"quota.window.num": "2", "quota.window.size.seconds": "1"}, lambda: image)
    q.record(PRODUCE, _header("slow"), 500)  # within quota over the one-window minimum
    # 3000 B over 1 s against 1000 B/s: throttled 2 s. A client id quota is measured over every user (user="").
    q.record(PRODUCE, _header("slow"), 2500)
    lines = _scrape(q)
    assert 'kafka_server_produce_byte_rate{client_id="slow",user=""} 3000.0' in lines
    assert 'kafka_server_produce_throttle_time_ms_total{client_id="slow",user=""} 2000.0' in lines


def test_entities_are_capped_and_the_rest_summed(manual: clock.ManualClock) -> None:
    image = SimpleNamespace(quota_version=1, client_quotas={(("client-id", None),): {PRODUCE: 1e12}})
    q = ClientQuotas({}, lambda: image)
    for i in range(MAX_CLIENT_IDS + 5):
        q.record(PRODUCE, _header(f"c{i:05d}"), 10_000)
    series = [x for x in _scrape(q) if x.startswith("kafka_server_produce_byte_rate{")]
    assert len(series) == MAX_CLIENT_IDS + 1
    other = [x for x in series if f'client_id="{OTHER_CLIENTS}"' in x]
    assert other and float(other[0].rsplit(" ", 1)[1]) == pytest.approx(5 * 1000.0)  # 5 x 10 kB over 10 s


@pytest.mark.parametrize(
    "name, value",
    [
        ("quota.window.num", "0"),
        ("quota.window.size.seconds", "-1"),
        ("quota.window.size.seconds", "1.5"),
        ("controller.quota.window.num", "many"),
    ],
)
def test_bad_quota_windows_are_refused_by_name(name: str, value: str) -> None:
    from epochlog.config_error import ConfigError
    from epochlog.server.quota_enforcement import ClientQuotas

    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        ClientQuotas({name: value}, lambda: None)
    ClientQuotas({name: "2"}, lambda: None)  # a good value is taken
