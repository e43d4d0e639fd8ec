"""Client quotas in the metadata log: the record's stored form and apply (live, replayed, from a snapshot),
the controller's AlterClientQuotas decisions (Kafka's ClientQuotaControlManager checks and errors) and
DescribeClientQuotas filters (exact, default, any; strict), and the broker's answers at every version."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_writer

from epochlog.codes import Err
from epochlog.controller.client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    DescribeError,
    QuotaAlteration,
    describe,
)
from epochlog.controller.controller import Controller
from epochlog.controller.records import ClientQuotaRecord, UnknownRecord, from_json, to_json
from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.codec import RequestHeader, encode_response, request_class
from epochlog.security.acl import Operation, ResourceType
from epochlog.security.authorizer import StandardAuthorizer
from epochlog.server.handlers.client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from epochlog.server.handlers.item_errors import error_on_every_item
from epochlog.storage.metadata_raft_log import decode_record, encode_record, parse_snapshot

pytestmark = pytest.mark.unit

ALICE = (("user", "alice"),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))
DEFAULT_USER = (("user", None),)
APP = (("client-id", "app"),)


def alt(entity: Any, *ops: tuple[str, float | None]) -> QuotaAlteration:
    return QuotaAlteration(tuple(entity), tuple(ops))


def test_the_record_round_trips_through_json_and_the_log_encoding() -> None:
    for record in (
        ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 1048576.0),
        ClientQuotaRecord(DEFAULT_USER, "request_percentage", remove=True),
    ):
        kind, data = to_json(record)
        assert from_json(kind, data) == record
        assert decode_record(encode_record(record)) == record
    _kind, data = to_json(ClientQuotaRecord(DEFAULT_USER, "k", 1.0))
    with pytest.raises(UnknownRecord):
        from_json("ClientQuotaRecord", {**data, "extra": 1})


def test_alter_sets_and_removes_and_the_image_shows_it() -> None:
    c = Controller()
    out = c.alter_client_quotas(
        [
            alt(ALICE, ("producer_byte_rate", 1024.0), ("request_percentage", 12.5)),
            alt(DEFAULT_USER, ("consumer_byte_rate", 10.0)),
        ]
    )
    assert [o.error_code for o in out] == [0, 0]
    assert c.image.client_quotas == {
        ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        DEFAULT_USER: {"consumer_byte_rate": 10.0},
    }
    # The same value again and removing an absent key record nothing.
    before = c.image.quota_version
    out = c.alter_client_quotas([alt(ALICE, ("producer_byte_rate", 1024.0), ("consumer_byte_rate", None))])
    assert out[0].error_code == 0 and c.image.quota_version == before
    c.alter_client_quotas([alt(ALICE, ("producer_byte_rate", None), ("request_percentage", None))])
    assert ALICE not in c.image.client_quotas


def test_entity_parts_in_either_order_are_the_same_entity() -> None:
    c = Controller()
    c.alter_client_quotas([alt((("user", "alice"), ("client-id", "app")), ("producer_byte_rate", 5.0))])
    c.alter_client_quotas([alt((("client-id", "app"), ("user", "alice")), ("consumer_byte_rate", 6.0))])
    assert c.image.client_quotas == {ALICE_APP: {"producer_byte_rate": 5.0, "consumer_byte_rate": 6.0}}


@pytest.mark.parametrize(
    ("alteration", "message"),
    [
        (alt(ALICE, ("no_such_key", 1.0)), "Invalid configuration key no_such_key"),
        (alt(ALICE, ("producer_byte_rate", -1.0)), "Quota producer_byte_rate must be greater than 0"),
        (alt(ALICE, ("producer_byte_rate", 0.0)), "Quota producer_byte_rate must be greater than 0"),
        (alt(ALICE, ("producer_byte_rate", 1.5)), "producer_byte_rate cannot be a fractional value."),
        (alt(ALICE, ("producer_byte_rate", 1e30)), "Proposed value for producer_byte_rate is too large for a LONG."),
        (alt(ALICE, ("request_percentage", float("nan"))), "Quota request_percentage must be a finite number"),
        (alt((), ("producer_byte_rate", 1.0)), "Invalid empty client quota entity"),
        (alt((("group", "g"),), ("producer_byte_rate", 1.0)), "Unhandled client quota entity type: group"),
        (alt((("user", ""),), ("producer_byte_rate", 1.0)), "Empty user not supported"),
        (alt((("user", "a"), ("user", "b")), ("producer_byte_rate", 1.0)), "duplicate entity entry user"),
        (alt((("ip", "1.2.3.4"), ("user", "a")), ("connection_creation_rate", 1.0)), "IP entity should"),
        (alt((("ip", "not an address"),), ("connection_creation_rate", 1.0)), "is not a valid IP"),
        (alt((("ip", "1.2.3.4"),), ("producer_byte_rate", 1.0)), "Invalid configuration key producer_byte_rate"),
        (alt((("ip", None),), ("connection_creation_rate", 3e9)), "too large for an INT"),
        (alt(ALICE, ("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)), "Ignoring duplicate entity"),
    ],
)
def test_bad_alterations_are_refused_with_kafkas_errors_and_record_nothing(
    alteration: QuotaAlteration, message: str
) -> None:
    c = Controller()
    good = alt(APP, ("consumer_byte_rate", 100.0))
    out = c.alter_client_quotas([alteration, good])
    assert out[0].error_code == Err.INVALID_REQUEST and message in (out[0].message or "")
    assert out[1].error_code == 0
    assert c.image.client_quotas == {APP: {"consumer_byte_rate": 100.0}}


def test_one_bad_value_refuses_the_whole_entity() -> None:
    c = Controller()
    out = c.alter_client_quotas([alt(ALICE, ("producer_byte_rate", 10.0), ("consumer_byte_rate", -1.0))])
    assert out[0].error_code == Err.INVALID_REQUEST and c.image.client_quotas == {}


def test_an_entity_named_twice_changes_nothing() -> None:
    c = Controller()
    out = c.alter_client_quotas([alt(ALICE, ("producer_byte_rate", 10.0)), alt(ALICE, ("consumer_byte_rate", 5.0))])
    assert len(out) == 1 and out[0].error_code == Err.INVALID_REQUEST
    assert c.image.client_quotas == {}


def test_validate_only_decides_but_records_nothing() -> None:
    c = Controller()
    out = c.alter_client_quotas([alt(ALICE, ("producer_byte_rate", 10.0)), alt(ALICE_APP, ("x", 1.0))], True)
    assert [o.error_code for o in out] == [0, Err.INVALID_REQUEST] and c.image.client_quotas == {}


def test_a_snapshot_rebuilds_the_quotas_and_one_without_them_loses_them() -> None:
    c = Controller()
    c.alter_client_quotas(
        [alt(ALICE_APP, ("producer_byte_rate", 2048.0)), alt(DEFAULT_USER, ("controller_mutation_rate", 0.5))]
    )
    body = b"".join(encode_record(r) + b"\n" for r in c.image.snapshot())
    assert Controller.replay(parse_snapshot(body)).image.client_quotas == c.image.client_quotas
    partial = [r for r in c.image.snapshot() if not isinstance(r, ClientQuotaRecord)]
    assert Controller.replay(partial).image.client_quotas != c.image.client_quotas


# -- DescribeClientQuotas -------------------------------------------------------------------------------

QUOTAS = {
    ALICE: {"producer_byte_rate": 1.0},
    ALICE_APP: {"producer_byte_rate": 2.0},
    DEFAULT_USER: {"producer_byte_rate": 3.0},
    APP: {"producer_byte_rate": 4.0},
    (("client-id", None), ("user", None)): {"producer_byte_rate": 5.0},
    (("ip", "1.2.3.4"),): {"connection_creation_rate": 6.0},
}


def _values(components: list[tuple[str, int, str | None]], strict: bool) -> list[float]:
    return sorted(v for _e, vals in describe(QUOTAS, components, strict) for v in vals.values())


def test_describe_filters_as_kafka_matches() -> None:
    assert _values([("user", MATCH_EXACT, "alice")], False) == [1.0, 2.0]
    assert _values([("user", MATCH_EXACT, "alice")], True) == [1.0]
    assert _values([("user", MATCH_DEFAULT, None)], False) == [3.0, 5.0]
    assert _values([("user", MATCH_DEFAULT, None)], True) == [3.0]
    assert _values([("user", MATCH_SPECIFIED, None)], False) == [1.0, 2.0, 3.0, 5.0]
    assert _values([("user", MATCH_SPECIFIED, None), ("client-id", MATCH_EXACT, "app")], True) == [2.0]
    assert _values([("client-id", MATCH_SPECIFIED, None)], True) == [4.0]
    assert _values([], False) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert _values([], True) == []


@pytest.mark.parametrize(
    ("components", "code"),
    [
        ([("", MATCH_EXACT, "x")], Err.INVALID_REQUEST),
        ([("user", MATCH_EXACT, "a"), ("user", MATCH_SPECIFIED, None)], Err.INVALID_REQUEST),
        ([("group", MATCH_EXACT, "g")], Err.UNSUPPORTED_VERSION),
        ([("user", MATCH_EXACT, None)], Err.INVALID_REQUEST),
        ([("user", MATCH_DEFAULT, "a")], Err.INVALID_REQUEST),
        ([("user", MATCH_SPECIFIED, "a")], Err.INVALID_REQUEST),
        ([("user", 7, None)], Err.INVALID_REQUEST),
        ([("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)], Err.INVALID_REQUEST),
    ],
)
def test_describe_refuses_bad_filters(components: list[tuple[str, int, str | None]], code: int) -> None:
    with pytest.raises(DescribeError) as e:
        describe(QUOTAS, components, False)
    assert e.value.code == code


# -- the broker's handlers ------------------------------------------------------------------------------


class Denying(StandardAuthorizer):
    def __init__(self, denied: Operation) -> None:
        super().__init__(set())
        self.denied = denied

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        return not (op == self.denied and rtype == ResourceType.CLUSTER)


def _broker(authorizer: StandardAuthorizer | None = None) -> Any:
    c = Controller()
    c.alter_client_quotas(
        [alt(ALICE_APP, ("producer_byte_rate", 2048.0)), alt(DEFAULT_USER, ("request_percentage", 50))]
    )
    return SimpleNamespace(authorizer=authorizer, image=SimpleNamespace(cluster=c.image))


def _frame(key: int, version: int, **fields: Any) -> tuple[RequestHeader, memoryview]:
    cls = request_class(key, version)
    out = io.BytesIO()
    entity_writer(cls)(out, cls(**fields))
    header = RequestHeader(api_key=key, api_version=version, correlation_id=1, client_id="c", size=0)
    return header, memoryview(out.getvalue()).toreadonly()


def _mod(key: int, version: int) -> Any:
    return __import__(request_class(key, version).__module__, fromlist=["x"])


def _versions(key: int) -> range:
    low, high = supported_range(key)  # type: ignore[misc]
    return range(low, high + 1)


def test_describe_answers_from_the_image_at_every_version() -> None:
    broker = _broker()
    for version in _versions(48):
        mod = _mod(48, version)
        comp = mod.ComponentData(entity_type="user", match_type=MATCH_SPECIFIED, match=None)
        header, frame = _frame(48, version, components=(comp,), strict=False)
        body = handle_describe_client_quotas(broker, header, frame)
        assert body["error_code"] == 0
        got = {
            tuple((e["entity_type"], e["entity_name"]) for e in row["entity"]): row["values"] for row in body["entries"]
        }
        assert got == {
            ALICE_APP: [{"key": "producer_byte_rate", "value": 2048.0}],
            DEFAULT_USER: [{"key": "request_percentage", "value": 50.0}],
        }
        assert encode_response(48, version, 1, body)
        bad = mod.ComponentData(entity_type="user", match_type=MATCH_EXACT, match=None)
        header, frame = _frame(48, version, components=(bad,), strict=False)
        body = handle_describe_client_quotas(broker, header, frame)
        assert body["error_code"] == Err.INVALID_REQUEST and body["entries"] is None
        assert encode_response(48, version, 1, body)


def test_describe_needs_describe_configs_and_alter_needs_alter_configs_on_the_cluster() -> None:
    broker = _broker(Denying(Operation.DESCRIBE_CONFIGS))
    header, frame = _frame(48, 1, components=(), strict=False)
    body = handle_describe_client_quotas(broker, header, frame)
    assert body["error_code"] == Err.CLUSTER_AUTHORIZATION_FAILED and body["entries"] is None
    broker = _broker(Denying(Operation.ALTER_CONFIGS))
    mod = _mod(49, 1)
    entry = mod.EntryData(
        entity=(mod.EntityData(entity_type="user", entity_name="alice"),),
        ops=(mod.OpData(key="producer_byte_rate", value=1.0, remove=False),),
    )
    header, frame = _frame(49, 1, entries=(entry, entry), validate_only=False)
    body = handle_alter_client_quotas(broker, header, frame)
    assert [r["error_code"] for r in body["entries"]] == [Err.CLUSTER_AUTHORIZATION_FAILED] * 2
    assert body["entries"][0]["entity"] == [{"entity_type": "user", "entity_name": "alice"}]
    assert encode_response(49, 1, 1, body)


def test_alter_error_on_every_item_encodes_at_every_version() -> None:
    req = SimpleNamespace(
        entries=[SimpleNamespace(entity=[SimpleNamespace(entity_type="user", entity_name=None)], ops=[])] * 2
    )
    for version in _versions(49):
        body = error_on_every_item(49, version, req, Err.NOT_CONTROLLER, "not active")
        assert [r["error_code"] for r in body["entries"]] == [Err.NOT_CONTROLLER] * 2
        assert encode_response(49, version, 1, body)
