"""Client quotas on one `epochlog up` node: AlterClientQuotas (49) and DescribeClientQuotas (48) over the
wire (neither confluent-kafka 2.16 nor kafka-python 3.0 exposes them), refused values with Kafka's errors,
and quotas that survive a restart (they are metadata records)."""

from __future__ import annotations

import subprocess
import sys
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


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "configs", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_epochlog_configs_alters_and_describes_quotas_as_kafka_configs_does(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    r = _cli(
        b, "--entity-type", "clients", "--entity-name", "app", "--alter", "--add-config", "producer_byte_rate=1048576"
    )
    assert r.returncode == 0 and r.stdout.strip() == "Completed updating config for client app.", r.stderr
    r = _cli(b, "--entity-type", "users", "--entity-default", "--alter", "--add-config", "consumer_byte_rate=2048")
    assert r.stdout.strip() == "Completed updating default config for users in the cluster.", r.stderr
    r = _cli(
        b,
        "--entity-type",
        "users",
        "--entity-default",
        "--entity-type",
        "clients",
        "--entity-name",
        "app",
        "--alter",
        "--add-config",
        "request_percentage=12.5,controller_mutation_rate=3",
    )
    assert r.returncode == 0, r.stderr
    assert described(broker.port, [("user", 1, None), ("client-id", 0, "app")], strict=True) == {
        (("client-id", "app"), ("user", None)): {"request_percentage": 12.5, "controller_mutation_rate": 3.0}
    }
    r = _cli(b, "--entity-type", "clients", "--entity-name", "app", "--describe")
    assert r.stdout.strip() == "Quota configs for client-id 'app' are producer_byte_rate=1048576.0"
    r = _cli(b, "--entity-type", "users", "--entity-type", "clients", "--describe")
    assert "Quota configs for the default user-principal, client-id 'app' are" in r.stdout
    # Refusals: the broker's (Kafka's message), and the command's own before anything is sent.
    r = _cli(b, "--entity-type", "clients", "--entity-name", "x", "--alter", "--add-config", "producer_byte_rate=-1")
    assert r.returncode == 1 and "INVALID_REQUEST: Quota producer_byte_rate must be greater than 0" in r.stderr
    r = _cli(b, "--entity-type", "clients", "--entity-name", "x", "--alter", "--add-config", "retention.ms=1")
    assert r.returncode == 1 and "Unexpected config names: retention.ms" in r.stderr
    r = _cli(b, "--entity-type", "clients", "--entity-name", "app", "--alter", "--delete-config", "consumer_byte_rate")
    assert r.returncode == 1 and "Invalid config(s): consumer_byte_rate" in r.stderr
    r = _cli(b, "--entity-type", "clients", "--entity-name", "app", "--alter", "--delete-config", "producer_byte_rate")
    assert r.returncode == 0, r.stderr
    assert _cli(b, "--entity-type", "clients", "--entity-name", "app", "--describe").stdout == ""
