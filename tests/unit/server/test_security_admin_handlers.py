"""DescribeAcls / CreateAcls / DeleteAcls / Describe+AlterUserScramCredentials on a broker, without a
controller: the answers built from the broker's image, authorization and SECURITY_DISABLED refusals
(whole request), and that every answer encodes at every served version."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_writer

from epochlog.controller.controller import Controller
from epochlog.controller.scram import ScramUpsertion
from epochlog.protocol.api_versions import supported_range
from epochlog.protocol.codec import RequestHeader, encode_response, request_class
from epochlog.protocol.errors import Err
from epochlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from epochlog.security.authorizer import StandardAuthorizer
from epochlog.security.scram_credentials import salted_password
from epochlog.server.handlers.acls import (
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from epochlog.server.handlers.item_errors import error_on_every_item
from epochlog.server.handlers.scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials

pytestmark = pytest.mark.unit

READ = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW
)
PRE = AclBinding(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:alice", "*", Operation.WRITE, Permission.ALLOW)
GROUP = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:bob", "*", Operation.READ, Permission.ALLOW)


class Denying(StandardAuthorizer):
    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        return False


def _broker(authorizer: StandardAuthorizer | None) -> Any:
    c = Controller()
    c.create_acls([READ, PRE, GROUP])
    salt = b"s" * 16
    c.alter_scram(
        [],
        [
            ScramUpsertion("alice", 2, 8192, salt, salted_password("SCRAM-SHA-512", "pw", salt, 8192)),
            ScramUpsertion("bob", 1, 4096, salt, salted_password("SCRAM-SHA-256", "pw", salt, 4096)),
        ],
    )
    return SimpleNamespace(authorizer=authorizer, image=SimpleNamespace(cluster=c.image))


def _frame(key: int, version: int, **fields: Any) -> tuple[RequestHeader, memoryview]:
    cls = request_class(key, version)
    out = io.BytesIO()
    entity_writer(cls)(out, cls(**fields))
    header = RequestHeader(api_key=key, api_version=version, correlation_id=1, client_id="c", size=0)
    return header, memoryview(out.getvalue()).toreadonly()


def _module(key: int, version: int) -> Any:
    cls = request_class(key, version)
    return __import__(cls.__module__, fromlist=["x"])


def _describe_filter(**kw: Any) -> dict[str, Any]:
    f: dict[str, Any] = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    f.update(kw)
    return f


def _versions(key: int) -> range:
    low, high = supported_range(key)  # type: ignore[misc]
    return range(low, high + 1)


def test_describe_acls_groups_by_resource_pattern_and_filters() -> None:
    # The request has no session: the broker's own principal, a super user here, so the ACLs are shown.
    broker = _broker(StandardAuthorizer({"User:ANONYMOUS"}))
    for version in _versions(29):
        header, frame = _frame(29, version, **_describe_filter())
        body = handle_describe_acls(broker, header, frame)
        assert body["error_code"] == Err.NONE
        assert [
            (r["resource_type"], r["resource_name"], r["pattern_type"], len(r["acls"])) for r in body["resources"]
        ] == [
            (2, "ord", 4, 1),
            (2, "orders", 3, 1),
            (3, "g", 3, 1),
        ]
        assert encode_response(29, version, 1, body)
    header, frame = _frame(
        29, 3, **_describe_filter(resource_type_filter=2, resource_name_filter="orders-x", pattern_type_filter=2)
    )
    body = handle_describe_acls(broker, header, frame)
    assert [r["resource_name"] for r in body["resources"]] == ["ord"]
    header, frame = _frame(29, 3, **_describe_filter(operation=0))
    assert handle_describe_acls(broker, header, frame)["error_code"] == Err.INVALID_REQUEST


def test_acl_apis_without_an_authorizer_answer_security_disabled() -> None:
    broker = _broker(None)
    header, frame = _frame(29, 3, **_describe_filter())
    body = handle_describe_acls(broker, header, frame)
    assert body["error_code"] == Err.SECURITY_DISABLED and body["resources"] == []
    mod = _module(30, 3)
    creation = mod.AclCreation(
        resource_type=2,
        resource_name="t",
        resource_pattern_type=3,
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    )
    header, frame = _frame(30, 3, creations=(creation, creation))
    body = handle_create_acls(broker, header, frame)
    assert [r["error_code"] for r in body["results"]] == [Err.SECURITY_DISABLED] * 2
    mod = _module(31, 3)
    header, frame = _frame(31, 3, filters=(mod.DeleteAclsFilter(**_describe_filter()),))
    body = handle_delete_acls(broker, header, frame)
    assert [r["error_code"] for r in body["filter_results"]] == [Err.SECURITY_DISABLED]
    assert encode_response(31, 3, 1, body)


def test_a_principal_without_cluster_permission_is_refused_on_the_whole_request() -> None:
    broker = _broker(Denying(set()))
    header, frame = _frame(29, 3, **_describe_filter())
    assert handle_describe_acls(broker, header, frame)["error_code"] == Err.CLUSTER_AUTHORIZATION_FAILED
    mod = _module(31, 3)
    header, frame = _frame(31, 3, filters=(mod.DeleteAclsFilter(**_describe_filter()),) * 2)
    body = handle_delete_acls(broker, header, frame)
    assert [r["error_code"] for r in body["filter_results"]] == [Err.CLUSTER_AUTHORIZATION_FAILED] * 2
    header, frame = _frame(50, 0, users=None)
    body = handle_describe_user_scram_credentials(broker, header, frame)
    assert body["error_code"] == Err.CLUSTER_AUTHORIZATION_FAILED
    mod = _module(51, 0)
    header, frame = _frame(51, 0, deletions=(mod.ScramCredentialDeletion(name="alice", mechanism=1),), upsertions=())
    body = handle_alter_user_scram_credentials(broker, header, frame)
    assert body["results"] == [
        {
            "user": "alice",
            "error_code": Err.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": body["results"][0]["error_message"],
        }
    ]
    assert encode_response(51, 0, 1, body)


def test_describe_user_scram_credentials() -> None:
    broker = _broker(None)  # credentials need no authorizer
    header, frame = _frame(50, 0, users=None)
    body = handle_describe_user_scram_credentials(broker, header, frame)
    rows = {r["user"]: r for r in body["results"]}
    assert rows["alice"]["credential_infos"] == [{"mechanism": 2, "iterations": 8192}]
    assert rows["bob"]["credential_infos"] == [{"mechanism": 1, "iterations": 4096}]
    assert encode_response(50, 0, 1, body)
    mod = _module(50, 0)
    names = tuple(mod.UserName(name=n) for n in ("alice", "carol", "bob", "bob"))
    header, frame = _frame(50, 0, users=names)
    rows = {r["user"]: r for r in handle_describe_user_scram_credentials(broker, header, frame)["results"]}
    assert rows["alice"]["error_code"] == 0
    assert rows["carol"]["error_code"] == Err.RESOURCE_NOT_FOUND
    assert rows["bob"]["error_code"] == Err.DUPLICATE_RESOURCE and rows["bob"]["credential_infos"] == []


@pytest.mark.parametrize("key", [30, 31, 51])
def test_error_on_every_item_encodes_at_every_version(key: int) -> None:
    req = SimpleNamespace(
        creations=[object(), object()],
        filters=[object()],
        deletions=[SimpleNamespace(name="a")],
        upsertions=[SimpleNamespace(name="a"), SimpleNamespace(name="b")],
    )
    for version in _versions(key):
        body = error_on_every_item(key, version, req, Err.NOT_CONTROLLER, "not active")
        rows = body.get("results") or body.get("filter_results")
        assert rows and all(r["error_code"] == Err.NOT_CONTROLLER for r in rows)
        assert len(rows) == {30: 2, 31: 1, 51: 2}[key]
        assert encode_response(key, version, 1, body)


class Recording(StandardAuthorizer):
    def __init__(self) -> None:
        super().__init__(set())
        self.calls: list[dict[str, AclBinding]] = []

    def set_acls(self, acls: Any) -> None:
        super().set_acls(acls)
        self.calls.append(dict(acls))


def test_the_broker_hands_every_acl_to_its_authorizer_on_change_and_after_a_snapshot() -> None:
    from epochlog.controller.records import AclCreated, AclRemoved, ScramCredentialSet
    from epochlog.server.cluster.broker import ClusterBroker
    from epochlog.server.cluster.image import MetadataImage
    from epochlog.server.cluster.metadata_publisher import MetadataPublisher

    az = Recording()
    b: Any = SimpleNamespace(image=MetadataImage(), authorizer=az)
    publisher = MetadataPublisher(b)
    b._refresh_acls = publisher.refresh_acls
    b.image.apply(AclCreated("a", 2, "orders", 3, "User:alice", "*", 3, 3))
    b.image.apply(AclCreated("b", 3, "g", 3, "User:bob", "*", 3, 3))
    b._refresh_acls()
    assert az.calls == [{"a": READ, "b": GROUP}]
    b._refresh_acls()
    assert len(az.calls) == 1  # nothing changed, nothing handed over
    b.image.apply(ScramCredentialSet("alice", "SCRAM-SHA-512", b"s", b"k", b"v", 4096))
    b._refresh_acls()
    assert len(az.calls) == 1
    assert ClusterBroker.scram_credential(b, "alice", "SCRAM-SHA-512").iterations == 4096
    assert ClusterBroker.scram_credential(b, "alice", "SCRAM-SHA-256") is None
    b.image.apply(AclRemoved("a"))
    b._refresh_acls()
    assert az.calls[-1] == {"b": GROUP}
    # A snapshot without "b": the authorizer must forget it too.
    publisher.reset_image([AclCreated("c", 2, "orders", 3, "User:alice", "*", 3, 3)])
    assert az.calls[-1] == {"c": READ}


@pytest.mark.parametrize("key", [30, 31, 51])
def test_a_standby_controller_answer_sends_the_broker_on_to_the_active_one(key: int) -> None:
    from epochlog.server.cluster.controller_channel import says_not_controller
    from epochlog.server.cluster.not_controller import not_controller
    from epochlog.server.handlers.forwarding import unanswered

    req = SimpleNamespace(
        creations=[object()], filters=[object()], deletions=[], upsertions=[SimpleNamespace(name="a")]
    )
    body = not_controller(key, 0, req)

    def as_object(row: Any) -> Any:
        return SimpleNamespace(**{k: [as_object(r) for r in v] if isinstance(v, list) else v for k, v in row.items()})

    assert says_not_controller(as_object(body))
    header = RequestHeader(api_key=key, api_version=0, correlation_id=1, client_id="c", size=0)
    timed_out = unanswered(header, req, Err.REQUEST_TIMED_OUT, "no controller")
    assert not says_not_controller(as_object(timed_out))
