"""The handlers' one question to the authorizer: may this request's principal do this?

With no authorizer configured (authorizer.class.name unset) everything is allowed, as in Kafka."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from epochlog.protocol.codec import RequestHeader
from epochlog.security.acl import CLUSTER_NAME, Operation, ResourceType
from epochlog.security.session import INTERNAL, Session

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


def session_of(header: RequestHeader) -> Session:
    s = header.session
    return s if isinstance(s, Session) else INTERNAL


def client_host(header: RequestHeader) -> str:
    """Where the request came from, as Kafka's group APIs show a member's host ("/" and the address)."""
    host = session_of(header).client_host
    return f"/{host}" if host else ""


def enabled(broker: Broker) -> bool:
    """Whether any check can fail: the hot paths skip their per-topic checks when not."""
    return broker.authorizer is not None


def allowed(broker: Broker, header: RequestHeader, op: Operation, rtype: ResourceType, name: str) -> bool:
    az = broker.authorizer
    if az is None:
        return True
    s = session_of(header)
    return bool(az.authorize(s.principal, s.client_host, op, rtype, name))


def cluster_allowed(broker: Broker, header: RequestHeader, op: Operation) -> bool:
    return allowed(broker, header, op, ResourceType.CLUSTER, CLUSTER_NAME)


def any_allowed(broker: Broker, header: RequestHeader, op: Operation, rtype: ResourceType) -> bool:
    az = broker.authorizer
    if az is None:
        return True
    s = session_of(header)
    return bool(az.authorize_any(s.principal, s.client_host, op, rtype))


def topic_allowed(broker: Broker, header: RequestHeader, op: Operation, name: str) -> bool:
    return allowed(broker, header, op, ResourceType.TOPIC, name)


def group_allowed(broker: Broker, header: RequestHeader, op: Operation, name: str) -> bool:
    return allowed(broker, header, op, ResourceType.GROUP, name)


def txn_allowed(broker: Broker, header: RequestHeader, op: Operation, name: str) -> bool:
    return allowed(broker, header, op, ResourceType.TRANSACTIONAL_ID, name)


def denied_topics(broker: Broker, header: RequestHeader, op: Operation, names: Iterable[str | None]) -> set[str]:
    """The names among ``names`` the caller may not ``op``: one question per distinct topic, however many
    of its partitions the request names (empty with no authorizer)."""
    az = broker.authorizer
    if az is None:
        return set()
    s = session_of(header)
    out: set[str] = set()
    for name in set(names):
        if name is not None and not az.authorize(s.principal, s.client_host, op, ResourceType.TOPIC, name):
            out.add(name)
    return out
