"""ACLs and SCRAM credentials in the metadata log: the records' stored form, their apply (live, replayed,
from a snapshot), and the controller's CreateAcls / DeleteAcls / AlterUserScramCredentials decisions."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.controller.controller import Controller
from epochlog.controller.image import ClusterImage
from epochlog.controller.records import (
    AclCreated,
    AclRemoved,
    BootstrapApplied,
    ScramCredentialRemoved,
    ScramCredentialSet,
    UnknownRecord,
    from_json,
    to_json,
)
from epochlog.controller.scram import ScramDeletion, ScramUpsertion
from epochlog.security.acl import CLUSTER_NAME, AclBinding, Operation, PatternType, Permission, ResourceType
from epochlog.security.acl_filters import AclFilter
from epochlog.security.scram_credentials import credential_from_password, salted_password
from epochlog.storage.metadata_raft_log import decode_record, encode_record, parse_snapshot

pytestmark = pytest.mark.unit

READ_ORDERS = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW
)
WRITE_PREFIX = AclBinding(
    ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:bob", "*", Operation.WRITE, Permission.ALLOW
)
DENY_GROUP = AclBinding(
    ResourceType.GROUP, "g", PatternType.LITERAL, "User:bob", "10.0.0.1", Operation.ALL, Permission.DENY
)


def upsert(name: str, mech: int = 2, iterations: int = 8192, password: str = "pw", salt: bytes = b"s" * 16):
    name_of = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
    salted = salted_password(name_of.get(mech, "SCRAM-SHA-512"), password, salt, max(iterations, 1))
    return ScramUpsertion(name, mech, iterations, salt, salted)


# -- records ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        AclCreated("id-1", 2, "orders", 3, "User:alice", "*", 3, 3),
        AclRemoved("id-1"),
        ScramCredentialSet("alice", "SCRAM-SHA-512", b"\x00salt\xff", b"stored", b"server", 8192),
        ScramCredentialRemoved("alice", "SCRAM-SHA-512"),
        BootstrapApplied(2),
    ],
)
def test_new_records_round_trip_through_json_and_the_log_encoding(record: object) -> None:
    kind, data = to_json(record)  # type: ignore[arg-type]
    assert from_json(kind, data) == record
    assert decode_record(encode_record(record)) == record  # type: ignore[arg-type]


def test_credential_bytes_are_stored_as_base64_text() -> None:
    _kind, data = to_json(ScramCredentialSet("a", "SCRAM-SHA-256", b"\x01\x02", b"k", b"s", 4096))
    assert data["salt"] == "AQI=" and isinstance(data["stored_key"], str)


def test_from_json_refuses_unknown_fields_and_bad_base64() -> None:
    _kind, data = to_json(AclRemoved("x"))
    with pytest.raises(UnknownRecord):
        from_json("AclRemoved", {**data, "extra": 1})
    _kind, data = to_json(ScramCredentialSet("a", "SCRAM-SHA-256", b"1", b"2", b"3", 4096))
    with pytest.raises(UnknownRecord):
        from_json("ScramCredentialSet", {**data, "salt": "not base64!"})


# -- image and snapshots --------------------------------------------------------------------------------


def _image_with_everything() -> ClusterImage:
    c = Controller()
    c.create_acls([READ_ORDERS, WRITE_PREFIX, DENY_GROUP])
    c.alter_scram([], [upsert("alice"), upsert("bob", mech=1, iterations=4096)])
    c.delete_acls([AclFilter(ResourceType.GROUP)])
    c.bootstrap([])
    return c.image


def test_a_snapshot_rebuilds_acls_credentials_and_the_bootstrap_mark() -> None:
    image = _image_with_everything()
    body = b"".join(encode_record(r) + b"\n" for r in image.snapshot())
    again = Controller.replay(parse_snapshot(body)).image
    assert again.acls == image.acls and set(again.acls.values()) == {READ_ORDERS, WRITE_PREFIX}
    assert again.scram == image.scram and set(again.scram) == {("alice", "SCRAM-SHA-512"), ("bob", "SCRAM-SHA-256")}
    assert again.bootstrapped


def test_a_snapshot_missing_the_acl_records_loses_them() -> None:
    """The check above can fail: drop the ACL records from a snapshot and the rebuilt image differs."""
    image = _image_with_everything()
    partial = [r for r in image.snapshot() if not isinstance(r, AclCreated)]
    assert Controller.replay(partial).image.acls != image.acls


def test_apply_reports_acl_changes_only_for_acl_records() -> None:
    image = ClusterImage()
    assert image.apply(AclCreated("a", 2, "t", 3, "User:x", "*", 3, 3)).acls
    assert not image.apply(ScramCredentialRemoved("nobody", "SCRAM-SHA-256")).acls
    assert image.apply(AclRemoved("a")).acls
    assert not image.apply(AclRemoved("a")).acls  # already gone: nothing changed


# -- CreateAcls -----------------------------------------------------------------------------------------


def _with(b: AclBinding, **changes: object) -> AclBinding:
    import dataclasses

    return dataclasses.replace(b, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        _with(READ_ORDERS, pattern_type=PatternType.MATCH),
        _with(READ_ORDERS, pattern_type=PatternType.ANY),
        _with(READ_ORDERS, operation=Operation.ANY),
        _with(READ_ORDERS, operation=Operation.UNKNOWN),
        _with(READ_ORDERS, permission=Permission.ANY),
        _with(READ_ORDERS, resource_type=ResourceType.ANY),
        _with(READ_ORDERS, principal="alice"),
        _with(READ_ORDERS, resource_type=ResourceType.CLUSTER, resource_name="my-cluster"),
        _with(READ_ORDERS, resource_name=""),
    ],
)
def test_create_acls_refuses_invalid_bindings_alone(bad: AclBinding) -> None:
    c = Controller()
    outcomes = c.create_acls([bad, READ_ORDERS])
    assert outcomes[0].error_code == Err.INVALID_REQUEST and outcomes[0].message
    assert outcomes[1].error_code == 0
    assert list(c.image.acls.values()) == [READ_ORDERS]


def test_create_acls_on_the_cluster_resource_and_repeats_write_nothing_new() -> None:
    c = Controller()
    cluster = _with(
        READ_ORDERS, resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME, operation=Operation.ALTER
    )
    assert [o.error_code for o in c.create_acls([cluster, READ_ORDERS, READ_ORDERS])] == [0, 0, 0]
    assert len(c.records) == 2
    assert [o.error_code for o in c.create_acls([READ_ORDERS])] == [0]
    assert len(c.records) == 2 and len(c.image.acls) == 2
    assert all(isinstance(r, AclCreated) for r in c.records) and len({r.id for r in c.records}) == 2


# -- DeleteAcls ---------------------------------------------------------------------------------------


def test_delete_acls_lists_matches_per_filter_and_removes_each_once() -> None:
    c = Controller()
    c.create_acls([READ_ORDERS, WRITE_PREFIX, DENY_GROUP])
    before = len(c.records)
    outcomes = c.delete_acls(
        [
            AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH),  # the literal and the covering prefix
            AclFilter(principal="User:bob"),  # WRITE_PREFIX again, and DENY_GROUP
            AclFilter(ResourceType.TOPIC, "zzz", PatternType.LITERAL),
        ]
    )
    assert set(outcomes[0].matched) == {READ_ORDERS, WRITE_PREFIX}
    assert set(outcomes[1].matched) == {WRITE_PREFIX, DENY_GROUP}
    assert outcomes[2].matched == () and outcomes[2].error_code == 0
    removed = [r for r in c.records[before:] if isinstance(r, AclRemoved)]
    assert len(removed) == 3 and not c.image.acls


def test_delete_acls_refuses_unknown_filters_and_keeps_the_acls() -> None:
    c = Controller()
    c.create_acls([READ_ORDERS])
    outcomes = c.delete_acls([AclFilter(operation=Operation.UNKNOWN), AclFilter(pattern_type=PatternType.UNKNOWN)])
    assert [o.error_code for o in outcomes] == [Err.INVALID_REQUEST, Err.INVALID_REQUEST]
    assert list(c.image.acls.values()) == [READ_ORDERS]


# -- AlterUserScramCredentials ---------------------------------------------------------------------


def _codes(outcomes: list) -> dict[str, int]:
    return {o.user: o.error_code for o in outcomes}


def test_upsert_stores_what_a_server_needs_and_never_the_password() -> None:
    c = Controller()
    u = upsert("alice", mech=2, iterations=8192, password="alice-secret")
    assert _codes(c.alter_scram([], [u])) == {"alice": 0}
    stored = c.image.scram[("alice", "SCRAM-SHA-512")]
    assert stored == credential_from_password("SCRAM-SHA-512", "alice-secret", 8192, u.salt)
    assert b"alice-secret" not in repr(c.records).encode()


@pytest.mark.parametrize(
    ("upsertion", "code"),
    [
        (upsert("a", iterations=4095), Err.UNACCEPTABLE_CREDENTIAL),
        (upsert("a", iterations=16385), Err.UNACCEPTABLE_CREDENTIAL),
        (upsert("", iterations=8192), Err.UNACCEPTABLE_CREDENTIAL),
        (upsert("a", mech=3), Err.UNSUPPORTED_SASL_MECHANISM),
        (upsert("a", iterations=4096), 0),
        (upsert("a", iterations=16384), 0),
    ],
)
def test_upsert_validation(upsertion: ScramUpsertion, code: int) -> None:
    c = Controller()
    assert [o.error_code for o in c.alter_scram([], [upsertion])] == [code]
    assert bool(c.image.scram) == (code == 0)


def test_one_user_twice_in_a_request_is_refused_entirely() -> None:
    c = Controller()
    c.alter_scram([], [upsert("alice", mech=1), upsert("carol")])
    before = dict(c.image.scram)
    outcomes = c.alter_scram(
        [ScramDeletion("alice", 1), ScramDeletion("carol", 2), ScramDeletion("carol", 1)],
        [upsert("alice", mech=2), upsert("bob", mech=1), upsert("bob", mech=2), upsert("dave")],
    )
    assert _codes(outcomes) == {
        "alice": Err.DUPLICATE_RESOURCE,
        "carol": Err.DUPLICATE_RESOURCE,
        "bob": Err.DUPLICATE_RESOURCE,
        "dave": 0,
    }
    assert {k: v for k, v in c.image.scram.items() if k[0] != "dave"} == before
    assert ("dave", "SCRAM-SHA-512") in c.image.scram


def test_deleting_a_missing_credential_is_resource_not_found() -> None:
    c = Controller()
    c.alter_scram([], [upsert("alice", mech=1)])
    outcomes = c.alter_scram([ScramDeletion("alice", 2), ScramDeletion("bob", 1)], [])
    assert _codes(outcomes) == {"alice": Err.RESOURCE_NOT_FOUND, "bob": Err.RESOURCE_NOT_FOUND}
    assert _codes(c.alter_scram([ScramDeletion("alice", 1)], [])) == {"alice": 0}
    assert not c.image.scram


# -- bootstrap ----------------------------------------------------------------------------------------


def test_bootstrap_records_are_appended_once_in_the_life_of_the_log() -> None:
    cred = ScramCredentialSet("admin", "SCRAM-SHA-512", b"s", b"k", b"v", 4096)
    c = Controller()
    assert c.bootstrap([cred])
    assert c.records == [cred, BootstrapApplied(1)]
    assert not c.bootstrap([cred])
    again = Controller.replay(c.records)
    assert not again.bootstrap([cred]) and again.records == c.records
    from_snapshot = Controller.replay(again.image.snapshot())
    assert not from_snapshot.bootstrap([cred])


def test_a_request_writing_too_many_records_is_refused_whole() -> None:

    c = Controller()
    many = [_with(READ_ORDERS, resource_name=f"t{i}") for i in range(5)]
    assert {o.error_code for o in c.create_acls(many, max_records=4)} == {Err.POLICY_VIOLATION}
    assert not c.records
    assert {o.error_code for o in c.create_acls(many, max_records=5)} == {0}
    assert {o.error_code for o in c.delete_acls([AclFilter()], max_records=4)} == {Err.POLICY_VIOLATION}
    assert len(c.image.acls) == 5


def test_dump_log_redacts_credentials() -> None:
    from epochlog.storage.dump_log import _decoded

    shown = _decoded(encode_record(ScramCredentialSet("alice", "SCRAM-SHA-256", b"salt", b"stored", b"server", 4096)))
    assert shown["data"]["name"] == "alice" and shown["data"]["iterations"] == 4096
    assert {shown["data"][k] for k in ("salt", "stored_key", "server_key")} == {"(redacted)"}
