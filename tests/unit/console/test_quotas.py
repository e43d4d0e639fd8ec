"""The Quotas page's rows: configured quotas merged with what brokers measure, the metrics read from the
broker's own exporter (server/quota_metrics.py), so a renamed metric or a wrong entity match breaks it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from epochlog.clock import now_ms
from epochlog.console.quotas import Entity, entity_of, quota_metrics_of, quota_rows
from epochlog.server.quota_enforcement import FETCH, PRODUCE, ClientQuotas
from epochlog.server.quota_metrics import QuotaCollector

pytestmark = pytest.mark.unit

X: Entity = (("client-id", "X"),)
DEFAULT_CLIENT: Entity = (("client-id", None),)
ALICE_X: Entity = (("client-id", "X"), ("user", "alice"))
IP_DEFAULT: Entity = (("ip", None),)
CONFIGURED: list[tuple[Entity, dict[str, float]]] = [
    (X, {"producer_byte_rate": 100.0}),
    (DEFAULT_CLIENT, {"producer_byte_rate": 1000.0}),
    # As a broker may name the parts: user first. The console must still match it to ("alice", "X").
    ((("user", "alice"), ("client-id", "X")), {"consumer_byte_rate": 50.0}),
    (IP_DEFAULT, {"connection_creation_rate": 10.0}),
]


def _broker(records: list[tuple[str, str, str, float]]) -> tuple[ClientQuotas, str]:
    """A broker's quota managers over CONFIGURED after these (key, user, client id, bytes) requests, and its
    Prometheus page."""
    image = SimpleNamespace(quota_version=1, client_quotas={tuple(sorted(e)): v for e, v in CONFIGURED})
    quotas = ClientQuotas({}, lambda: image)
    for key, user, client, size in records:
        header = SimpleNamespace(session=SimpleNamespace(principal=f"User:{user}"), client_id=client, throttle_ms=0)
        quotas.record(key, header, size)
    registry = CollectorRegistry()
    registry.register(QuotaCollector(quotas))
    return quotas, generate_latest(registry).decode()


def _by_name(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in view["entities"]}


def test_configured_quotas_meet_each_brokers_metrics() -> None:
    q1, page1 = _broker(
        [
            (PRODUCE, "ANONYMOUS", "X", 5000),  # over client-id=X's 100 B/s: throttled
            (PRODUCE, "ANONYMOUS", "Y", 50000),  # no quota of its own: the default client-id's, throttled
            (PRODUCE, "alice", "X", 10),  # alice+X has no produce quota: client-id X's, measured with X's
            (FETCH, "alice", "X", 500),  # alice+X's consumer quota: measured under both tags
        ]
    )
    q2, page2 = _broker([(PRODUCE, "ANONYMOUS", "X", 3000)])
    view = quota_rows(CONFIGURED, {1: quota_metrics_of(page1), 2: quota_metrics_of(page2)})
    rows = _by_name(view)
    assert list(rows) == ["client-id=<default>", "client-id=X", "client-id=Y", "user=alice, client-id=X"]

    x = rows["client-id=X"]
    assert x["entity"] == {"client-id": "X"} and x["configured"] == {"producer_byte_rate": 100.0}
    assert x["applied"] == {"producer_byte_rate": {"value": 100.0, "from": "client-id=X", "own": True}}
    thr = {n: q.managers[PRODUCE].throttle_total_ms[("", "X")] for n, q in ((1, q1), (2, q2))}
    assert all(ms > 0 for ms in thr.values())
    assert {b: f["produce_throttle_ms"] for b, f in x["brokers"].items()} == {"1": thr[1], "2": thr[2]}
    assert x["total"]["produce_throttle_ms"] == x["total"]["throttle_ms"] == thr[1] + thr[2]
    rate1 = q1.managers[PRODUCE].rates[("", "X")].peek(now_ms())
    assert x["brokers"]["1"]["produce_byte_rate"] == pytest.approx(rate1, rel=0.05)
    assert x["total"]["produce_byte_rate"] > x["brokers"]["2"]["produce_byte_rate"] > 0

    # Throttled under the default: shown with no quota of its own, the default's named as the one applied.
    y = rows["client-id=Y"]
    assert y["configured"] == {}
    assert y["applied"]["producer_byte_rate"] == {"value": 1000.0, "from": "client-id=<default>", "own": False}
    assert y["total"]["produce_throttle_ms"] > 0 and list(y["brokers"]) == ["1"]

    # The user+client-id entity's fetch figures are its own, not client-id X's.
    ax = rows["user=alice, client-id=X"]
    assert ax["entity"] == {"client-id": "X", "user": "alice"}
    assert ax["applied"] == {"consumer_byte_rate": {"value": 50.0, "from": "user=alice, client-id=X", "own": True}}
    assert ax["brokers"]["1"]["fetch_byte_rate"] > 0 and "fetch_byte_rate" not in x["brokers"]["1"]

    default = rows["client-id=<default>"]
    assert default["brokers"] == {} and default["total"] is None
    assert view["ip"] == [
        {"entity": {"ip": None}, "name": "ip=<default>", "configured": {"connection_creation_rate": 10.0}}
    ]


def test_measured_tags_take_the_first_quota_of_their_shape() -> None:
    configured: list[tuple[Entity, dict[str, float]]] = [
        ((("client-id", None), ("user", None)), {"producer_byte_rate": 7.0}),
        ((("client-id", None), ("user", "alice")), {"producer_byte_rate": 9.0}),
        ((("user", None),), {"request_percentage": 5.0}),
    ]
    figures = {"produce_throttle_ms": 1.0}
    measured = {3: {("alice", "Z"): figures, ("bob", "Z"): figures, ("carol", ""): figures}}
    rows = _by_name(quota_rows(configured, measured))
    produce_from = {n: r["applied"]["producer_byte_rate"]["from"] for n, r in rows.items() if n.endswith("=Z")}
    assert produce_from == {
        "user=alice, client-id=Z": "user=alice, client-id=<default>",
        "user=bob, client-id=Z": "user=<default>, client-id=<default>",
    }
    # A user+client-id client is not under a user-alone quota (it would be measured as (user, "")).
    assert "request_percentage" not in rows["user=bob, client-id=Z"]["applied"]
    carol = rows["user=carol"]["applied"]
    assert carol == {"request_percentage": {"value": 5.0, "from": "user=<default>", "own": False}}
    # A default entity is a configuration: only its own quotas apply to it.
    assert list(rows["user=<default>, client-id=<default>"]["applied"]) == ["producer_byte_rate"]
    assert rows["user=<default>"]["applied"]["request_percentage"]["own"] is True


def test_entity_of_tags() -> None:
    assert entity_of(("", "X")) == (("client-id", "X"),)
    assert entity_of(("alice", "")) == (("user", "alice"),)
    assert entity_of(("alice", "X")) == (("client-id", "X"), ("user", "alice"))
    assert entity_of(("", "")) == (("client-id", ""),)
