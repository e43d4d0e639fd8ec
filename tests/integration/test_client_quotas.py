"""Client quotas on one `epochlog up` node: AlterClientQuotas (49) and DescribeClientQuotas (48) over the
wire (neither confluent-kafka 2.16 nor kafka-python 3.0 exposes them), refused values with Kafka's errors,
and quotas that survive a restart (they are metadata records)."""

from __future__ import annotations

from typing import Any

import pytest

from epochlog.codes import Err
from epochlog.protocol.codec import build, request_class
from tests.broker_process import BrokerProcess
from tests.integration.kafka_wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def alter(port: int, *entries: tuple[dict[str, str | None], dict[str, float | None]], validate: bool = False) -> Any:
    body = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
            "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops.items()],
        }
        for entity, ops in entries
    ]
    c = WireClient(port)
    try:
        req = build(request_class(49, 1), {"entries": body, "validate_only": validate})
        return c.request(49, 1, entries=req.entries, validate_only=validate)
    finally:
        c.close()


def described(port: int, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    c = WireClient(port)
    try:
        comps = [{"entity_type": t, "match_type": m, "match": x} for t, m, x in components]
        req = build(request_class(48, 1), {"components": comps, "strict": strict})
        resp = c.request(48, 1, components=req.components, strict=strict)
    finally:
        c.close()
    if int(resp.error_code):
        return int(resp.error_code)
    return {
        tuple((e.entity_type, e.entity_name) for e in row.entity): {v.key: v.value for v in row.values}
        for row in resp.entries
    }


def test_alter_then_describe_and_the_quotas_survive_a_restart(broker: BrokerProcess) -> None:
    resp = alter(
        broker.port,
        ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 1048576.0}),
        ({"user": None}, {"consumer_byte_rate": 2048.0, "request_percentage": 25.5}),
        ({"client-id": "app"}, {"controller_mutation_rate": 10.0}),
    )
    assert [int(e.error_code) for e in resp.entries] == [0, 0, 0]
    # Answered once this broker's image shows the change: the next Describe sees it.
    assert described(broker.port, [("user", 2, None)]) == {
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1048576.0},
        (("user", None),): {"consumer_byte_rate": 2048.0, "request_percentage": 25.5},
    }
    assert described(broker.port, [("user", 1, None)], strict=True) == {
        (("user", None),): {"consumer_byte_rate": 2048.0, "request_percentage": 25.5}
    }
    assert described(broker.port, [("client-id", 0, "app")], strict=True) == {
        (("client-id", "app"),): {"controller_mutation_rate": 10.0}
    }
    resp = alter(broker.port, ({"user": None}, {"request_percentage": None}))
    assert int(resp.entries[0].error_code) == 0
    broker.restart()
    assert described(broker.port, [("user", 1, None)]) == {(("user", None),): {"consumer_byte_rate": 2048.0}}
    assert len(described(broker.port, [])) == 3


def test_bad_values_and_filters_are_refused_with_kafkas_errors(broker: BrokerProcess) -> None:
    resp = alter(
        broker.port,
        ({"user": "bob"}, {"producer_byte_rate": -5.0}),
        ({"user": "carol"}, {"producer_byte_rate": 10.5}),
        ({"user": "dave"}, {"no_such_quota": 1.0}),
        ({"group": "g"}, {"producer_byte_rate": 1.0}),
        ({"user": "erin"}, {"consumer_byte_rate": 100.0}),
    )
    rows = [(int(e.error_code), e.error_message) for e in resp.entries]
    assert rows[0] == (Err.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")
    assert rows[1] == (Err.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value.")
    assert rows[2] == (Err.INVALID_REQUEST, "Invalid configuration key no_such_quota")
    assert rows[3] == (Err.INVALID_REQUEST, "Unhandled client quota entity type: group")
    assert rows[4] == (0, None)
    assert described(broker.port, [("user", 2, None)]) == {(("user", "erin"),): {"consumer_byte_rate": 100.0}}
    # validate_only decides and changes nothing
    resp = alter(broker.port, ({"user": "frank"}, {"producer_byte_rate": 1.0}), validate=True)
    assert int(resp.entries[0].error_code) == 0
    assert described(broker.port, [("user", 0, "frank")]) == {}
    assert described(broker.port, [("user", 0, None)]) == Err.INVALID_REQUEST
    assert described(broker.port, [("group", 2, None)]) == Err.UNSUPPORTED_VERSION
