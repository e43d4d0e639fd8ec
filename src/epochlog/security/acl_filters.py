"""Which ACLs a DescribeAcls or DeleteAcls filter selects (Kafka's AclBindingFilter.matches).

A filter names each field of a binding or leaves it open: ANY for an enumeration, None for a name,
principal or host. Its pattern type is either one to equal (LITERAL, PREFIXED), ANY (any pattern whose
name equals the filter's), or MATCH: every stored pattern that would apply to a resource of exactly the
filter's name, i.e. that literal name, the literal wildcard ``*``, and every prefix of the name.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.security.acl import CLUSTER_NAME, WILDCARD, AclBinding, Operation, PatternType, Permission, ResourceType


@dataclass(frozen=True)
class AclFilter:
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY


ANY_ACL = AclFilter()


def problem(f: AclFilter) -> str | None:
    """Why a filter can match nothing meaningful (an UNKNOWN field), as Kafka refuses it; None if fine."""
    if f.resource_type == ResourceType.UNKNOWN:
        return "Unknown resource type"
    if f.pattern_type == PatternType.UNKNOWN:
        return "Unknown pattern type"
    if f.operation == Operation.UNKNOWN:
        return "Unknown operation"
    if f.permission == Permission.UNKNOWN:
        return "Unknown permission type"
    return None


def _name_matches(f: AclFilter, b: AclBinding) -> bool:
    if f.resource_name is None:
        return True
    if f.pattern_type in (PatternType.ANY, b.pattern_type):
        return f.resource_name == b.resource_name
    # MATCH: the patterns that would apply to a resource named f.resource_name.
    if b.pattern_type == PatternType.LITERAL:
        return b.resource_name in (f.resource_name, WILDCARD)
    if b.pattern_type == PatternType.PREFIXED:
        return f.resource_name.startswith(b.resource_name)
    return False


def matches(f: AclFilter, b: AclBinding) -> bool:
    if f.resource_type != ResourceType.ANY and f.resource_type != b.resource_type:
        return False
    if f.pattern_type not in (PatternType.ANY, PatternType.MATCH) and f.pattern_type != b.pattern_type:
        return False
    if not _name_matches(f, b):
        return False
    if f.principal is not None and f.principal != b.principal:
        return False
    if f.host is not None and f.host != b.host:
        return False
    if f.operation != Operation.ANY and f.operation != b.operation:
        return False
    return f.permission == Permission.ANY or f.permission == b.permission


def binding_problem(b: AclBinding) -> str | None:
    """Why CreateAcls refuses a binding (INVALID_REQUEST), as Kafka's AclControlManager.validateNewAcl."""
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission in (Permission.UNKNOWN, Permission.ANY):
        return f"Invalid permissionType {b.permission.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if ":" not in b.principal:
        return (
            f"Could not parse principal from `{b.principal}` "
            "(no colon is present separating the principal type from the principal name)"
        )
    return None
