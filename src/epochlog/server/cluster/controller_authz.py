"""What a principal needs on the controller's listener, with authorizer.class.name set there too.

Kafka's ControllerApis: the quorum's own requests and the brokers' (registration, heartbeats,
AlterPartition, metadata fetches) need CLUSTER_ACTION on the cluster; DescribeQuorum needs DESCRIBE.
Admin requests reach the controller forwarded by a broker that already checked the client's ACLs, so
on the controller they need CLUSTER_ACTION (the broker's principal) or ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from epochlog.controller.image import ClusterImage
from epochlog.protocol.codec import RequestHeader
from epochlog.security.acl import CLUSTER_NAME, Operation, ResourceType
from epochlog.security.authorizer import StandardAuthorizer
from epochlog.security.session import INTERNAL, Session

UNCHECKED = {17, 18, 36, 60}  # the SASL exchange, ApiVersions and DescribeCluster
DESCRIBE_ONLY = {55}
FORWARDED = {19, 20, 30, 31, 33, 37, 43, 44, 45, 46, 51}


def controller_authorizer(props: dict[str, str]) -> StandardAuthorizer | None:
    from epochlog.server.config import authorizer_settings

    name, supers, everyone = authorizer_settings(props)
    return StandardAuthorizer(set(supers), everyone) if name else None


class ControllerAccess:
    def __init__(self, authorizer: StandardAuthorizer | None) -> None:
        self.authorizer = authorizer
        self._version = -1

    def allows(self, image: ClusterImage, header: RequestHeader) -> bool:
        az = self.authorizer
        key = header.api_key
        if az is None or key in UNCHECKED:
            return True
        if image.acl_version != self._version:
            az.set_acls(image.acls)
            self._version = image.acl_version
        s: Any = header.session
        session = s if isinstance(s, Session) else INTERNAL

        def may(op: Operation) -> bool:
            return az.authorize(session.principal, session.client_host, op, ResourceType.CLUSTER, CLUSTER_NAME)

        if key in DESCRIBE_ONLY:
            return may(Operation.DESCRIBE)
        if key in FORWARDED:
            return may(Operation.CLUSTER_ACTION) or may(Operation.ALTER)
        return may(Operation.CLUSTER_ACTION)
