"""The controller's listener: who may send what, from the metadata log's ACLs."""

from __future__ import annotations

import pytest

from epochlog.controller.image import ClusterImage
from epochlog.controller.records import AclCreated, AclRemoved
from epochlog.protocol.codec import RequestHeader
from epochlog.security.acl import Operation, PatternType, Permission, ResourceType
from epochlog.security.session import Session
from epochlog.server.cluster.controller_authz import ControllerAccess, controller_authorizer

pytestmark = pytest.mark.unit

PROPS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:broker",
}


def _header(key: int, principal: str) -> RequestHeader:
    h = RequestHeader(key, 0, 1, "c", 0)
    h.session = Session(principal=principal, client_host="127.0.0.1")
    return h


def _acl(acl_id: str, principal: str, op: Operation) -> AclCreated:
    return AclCreated(
        acl_id, int(ResourceType.CLUSTER), "kafka-cluster", int(PatternType.LITERAL), principal, "*", int(op),
        int(Permission.ALLOW),
    )  # fmt: skip


def test_no_authorizer_lets_everything_through() -> None:
    access = ControllerAccess(controller_authorizer({}))
    assert access.allows(ClusterImage(), _header(62, "User:anyone"))


def test_brokers_need_cluster_action_and_the_handshake_is_free() -> None:
    access = ControllerAccess(controller_authorizer(PROPS))
    image = ClusterImage()
    assert access.allows(image, _header(62, "User:broker"))  # a super user registers
    for key in (62, 63, 56, 1, 52, 55, 19):
        assert not access.allows(image, _header(key, "User:alice")), key
    for key in (17, 18, 36, 60):
        assert access.allows(image, _header(key, "User:alice")), key


def test_acl_changes_in_the_image_are_seen() -> None:
    access = ControllerAccess(controller_authorizer(PROPS))
    image = ClusterImage()
    assert not access.allows(image, _header(55, "User:alice"))
    image.apply(_acl("a1", "User:alice", Operation.DESCRIBE))
    assert access.allows(image, _header(55, "User:alice"))  # DescribeQuorum: DESCRIBE
    assert not access.allows(image, _header(63, "User:alice"))  # heartbeats: CLUSTER_ACTION
    image.apply(_acl("a2", "User:alice", Operation.ALTER))
    assert access.allows(image, _header(19, "User:alice"))  # a forwarded CreateTopics: ALTER will do
    image.apply(AclRemoved("a1"))
    image.apply(AclRemoved("a2"))
    assert not access.allows(image, _header(55, "User:alice"))
