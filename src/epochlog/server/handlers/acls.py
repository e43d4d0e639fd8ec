"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31).

The ACLs live in the metadata log: DescribeAcls answers from this broker's image, the changes are the
controller's (forwarded, answered once this broker's image shows them, as topic changes are). All three
need the cluster permission (DESCRIBE, ALTER, ALTER) and an authorizer: without one Kafka answers
SECURITY_DISABLED, there being no ACLs to speak of.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from epochlog.security.acl_filters import AclFilter, matches, problem
from epochlog.server.authz import cluster_allowed
from epochlog.server.handlers.forwarding import answer_field, forward
from epochlog.server.handlers.item_errors import error_on_every_item

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

NO_AUTHORIZER = "No Authorizer is configured."
NOT_ALLOWED = "Cluster authorization failed."

E = TypeVar("E", bound=IntEnum)


def enum_of(cls: type[E], value: Any, unknown: E) -> E:
    """A wire code as its enumeration; a code Kafka does not define reads as UNKNOWN (refused later)."""
    try:
        return cls(int(value))
    except ValueError:
        return unknown


def filter_of(f: Any) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter (same fields) as an AclFilter."""
    return AclFilter(
        enum_of(ResourceType, f.resource_type_filter, ResourceType.UNKNOWN),
        f.resource_name_filter,
        enum_of(PatternType, f.pattern_type_filter, PatternType.UNKNOWN),
        f.principal_filter,
        f.host_filter,
        enum_of(Operation, f.operation, Operation.UNKNOWN),
        enum_of(Permission, f.permission_type, Permission.UNKNOWN),
    )


def binding_of(c: Any) -> AclBinding:
    """One CreateAcls creation as a binding (its validity is the controller's to judge)."""
    return AclBinding(
        enum_of(ResourceType, c.resource_type, ResourceType.UNKNOWN),
        c.resource_name,
        enum_of(PatternType, c.resource_pattern_type, PatternType.UNKNOWN),
        c.principal,
        c.host,
        enum_of(Operation, c.operation, Operation.UNKNOWN),
        enum_of(Permission, c.permission_type, Permission.UNKNOWN),
    )


def binding_row(b: AclBinding) -> dict[str, Any]:
    """A DeleteAcls matching_acls row."""
    return {
        "error_code": Err.NONE,
        "error_message": None,
        "resource_type": int(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": int(b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission_type": int(b.permission),
    }


def described(bindings: Iterable[AclBinding]) -> list[dict[str, Any]]:
    """DescribeAcls' resources: one row per resource pattern, its ACLs under it (as Kafka groups them)."""
    by_pattern: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in bindings:
        key = (int(b.resource_type), b.resource_name, int(b.pattern_type))
        by_pattern.setdefault(key, []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": int(b.operation),
                "permission_type": int(b.permission),
            }
        )
    return [
        {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
        for (t, n, p), acls in sorted(by_pattern.items())
    ]


def handle_describe_acls(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)

    def answer(code: int, message: str | None, resources: list[dict[str, Any]]) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": resources}

    if not cluster_allowed(broker, header, Operation.DESCRIBE):
        return answer(Err.CLUSTER_AUTHORIZATION_FAILED, NOT_ALLOWED, [])
    if broker.authorizer is None:
        return answer(Err.SECURITY_DISABLED, NO_AUTHORIZER, [])
    f = filter_of(req)
    why = problem(f)
    if why is not None:
        return answer(Err.INVALID_REQUEST, why, [])
    acls = broker.image.cluster.acls.values()
    return answer(Err.NONE, None, described(b for b in acls if matches(f, b)))


def _refused(broker: Broker, header: RequestHeader, req: Any, op: Operation) -> dict[str, Any] | None:
    if not cluster_allowed(broker, header, op):
        code = Err.CLUSTER_AUTHORIZATION_FAILED
        return error_on_every_item(header.api_key, header.api_version, req, code, NOT_ALLOWED)
    if broker.authorizer is None and header.api_key in (30, 31):
        return error_on_every_item(header.api_key, header.api_version, req, Err.SECURITY_DISABLED, NO_AUTHORIZER)
    return None


def handle_create_acls(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    refused = _refused(broker, header, req, Operation.ALTER)
    if refused is not None:
        return refused

    async def go() -> Any:
        resp = await forward(broker, header, req, None, True)
        made = [
            binding_of(c)
            for c, r in zip(req.creations, _rows(resp, "results"), strict=False)
            if not int(answer_field(r, "error_code") or 0)
        ]

        def shown() -> bool:
            present = set(broker.image.cluster.acls.values())
            return all(b in present for b in made)

        if made:
            await broker.wait_for_metadata(shown)
        return resp

    return go()


def handle_delete_acls(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    refused = _refused(broker, header, req, Operation.ALTER)
    if refused is not None:
        return refused

    async def go() -> Any:
        resp = await forward(broker, header, req, None, True)
        gone = {
            binding_of_row(m)
            for r in _rows(resp, "filter_results")
            if not int(answer_field(r, "error_code") or 0)
            for m in _rows(r, "matching_acls")
        }

        def shown() -> bool:
            return not gone.intersection(broker.image.cluster.acls.values())

        if gone:
            await broker.wait_for_metadata(shown)
        return resp

    return go()


def binding_of_row(m: Any) -> AclBinding:
    return AclBinding(
        enum_of(ResourceType, answer_field(m, "resource_type"), ResourceType.UNKNOWN),
        str(answer_field(m, "resource_name")),
        enum_of(PatternType, answer_field(m, "pattern_type"), PatternType.UNKNOWN),
        str(answer_field(m, "principal")),
        str(answer_field(m, "host")),
        enum_of(Operation, answer_field(m, "operation"), Operation.UNKNOWN),
        enum_of(Permission, answer_field(m, "permission_type"), Permission.UNKNOWN),
    )


def _rows(obj: Any, key: str) -> list[Any]:
    return list(answer_field(obj, key) or ())
