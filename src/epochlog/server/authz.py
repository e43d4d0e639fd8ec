"""The handlers' one question to the authorizer: may this request's principal do this?

With no authorizer configured (authorizer.class.name unset) everything is allowed, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochlog.protocol.codec import RequestHeader
from epochlog.security.acl import CLUSTER_NAME, Operation, ResourceType
from epochlog.security.session import INTERNAL, Session

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def session_of(header: RequestHeader) -> Session:
    s = header.session
    return s if isinstance(s, Session) else INTERNAL


def allowed(broker: Broker, header: RequestHeader, op: Operation, rtype: ResourceType, name: str) -> bool:
    az = broker.authorizer
    if az is None:
        return True
    s = session_of(header)
    return az.authorize(s.principal, s.client_host, op, rtype, name)


def cluster_allowed(broker: Broker, header: RequestHeader, op: Operation) -> bool:
    return allowed(broker, header, op, ResourceType.CLUSTER, CLUSTER_NAME)


def any_allowed(broker: Broker, header: RequestHeader, op: Operation, rtype: ResourceType) -> bool:
    az = broker.authorizer
    if az is None:
        return True
    s = session_of(header)
    return az.authorize_any(s.principal, s.client_host, op, rtype)
