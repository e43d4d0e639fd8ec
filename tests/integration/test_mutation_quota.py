"""controller_mutation_rate on one `epochlog up` node: CreateTopics, CreatePartitions and DeleteTopics over
the client's quota are answered THROTTLING_QUOTA_EXCEEDED (89) item by item with a throttle time (strict
versions), older versions go through with the throttle time only, and the refused topics were not created."""

from __future__ import annotations

import time
from typing import Any

import pytest

from epochlog.codes import Err
from epochlog.protocol.codec import build, request_class
from tests.integration.kafka_wire import WireClient
from tests.integration.test_client_quotas import alter

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# A burst of rate x 2 windows x 1 s: 4 partitions at a rate of 2 per second.
WINDOWS = {"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"}


def _create(c: WireClient, version: int, topics: dict[str, int]) -> Any:
    rows = [
        {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
        for n, p in topics.items()
    ]
    req = build(request_class(19, version), {"topics": rows, "timeout_ms": 10_000, "validate_only": False})
    return c.request(19, version, topics=req.topics, timeout=req.timeout, validate_only=False)


def _delete(c: WireClient, names: list[str]) -> Any:
    req = build(request_class(20, 6), {"topics": [{"name": n} for n in names], "timeout_ms": 10_000})
    return c.request(20, 6, topics=req.topics, timeout=req.timeout)


def _throttle_ms(resp: Any) -> float:
    return float(resp.throttle_time.total_seconds() * 1000)


def _codes(resp: Any, field: str = "topics") -> dict[str, int]:
    return {str(r.name): int(r.error_code) for r in getattr(resp, field)}


def test_topic_changes_over_the_mutation_quota_are_refused_item_by_item(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    resp = alter(broker.port, ({"client-id": "wire"}, {"controller_mutation_rate": 2.0}))
    assert int(resp.entries[0].error_code) == 0
    c, other = WireClient(broker.port), WireClient(broker.port)
    try:
        # 3 leaves 1 token, the next 3 take the bucket to -2 and still go, the last is refused.
        resp = _create(c, 7, {"qa": 3, "qb": 3, "qc": 1})
        assert _codes(resp) == {"qa": 0, "qb": 0, "qc": Err.THROTTLING_QUOTA_EXCEEDED}, resp
        assert 0 < _throttle_ms(resp) <= 1000
        # `c` is muted for the throttle time (which pays the debt back); on another connection of the same
        # client id a deletion is refused meanwhile (strict since DeleteTopics v5).
        assert _codes(_delete(other, ["qa"]), "responses") == {"qa": Err.THROTTLING_QUOTA_EXCEEDED}
        # An old CreateTopics version is permissive: created, with the debt as throttle time.
        resp = _create(c, 5, {"qd": 4})
        assert _codes(resp) == {"qd": 0} and _throttle_ms(resp) > 0, resp
        # Once the debt is paid (by time alone), the deletion goes through.
        deadline = time.monotonic() + 15
        codes = _codes(_delete(other, ["qa"]), "responses")
        while codes["qa"] == Err.THROTTLING_QUOTA_EXCEEDED and time.monotonic() < deadline:
            time.sleep(0.2)
            codes = _codes(_delete(other, ["qa"]), "responses")
        assert codes == {"qa": 0}
    finally:
        c.close()
        other.close()
    # The refused topic was never created (a client without the quota asks: the quota is on "wire").
    from confluent_kafka.admin import AdminClient

    names = set(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics)
    assert {"qb", "qd"} <= names and "qc" not in names and "qa" not in names
