"""Which ACLs a DescribeAcls/DeleteAcls filter selects (Kafka's AclBindingFilter semantics)."""

from __future__ import annotations

import pytest

from epochlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from epochlog.security.acl_filters import ANY_ACL, AclFilter, binding_problem, matches, problem

pytestmark = pytest.mark.unit


def acl(name: str, pattern: PatternType = PatternType.LITERAL, **kw: object) -> AclBinding:
    fields: dict[str, object] = {
        "resource_type": ResourceType.TOPIC,
        "resource_name": name,
        "pattern_type": pattern,
        "principal": "User:alice",
        "host": "*",
        "operation": Operation.READ,
        "permission": Permission.ALLOW,
    }
    fields.update(kw)
    return AclBinding(**fields)  # type: ignore[arg-type]


LIT = acl("orders")
WILD = acl("*")
PRE = acl("ord", PatternType.PREFIXED)
OTHER_PRE = acl("x", PatternType.PREFIXED)
LONGER_PRE = acl("orders-eu", PatternType.PREFIXED)
ALL = [LIT, WILD, PRE, OTHER_PRE, LONGER_PRE]


def selected(f: AclFilter) -> list[AclBinding]:
    return [b for b in ALL if matches(f, b)]


def test_any_filter_matches_everything() -> None:
    assert selected(ANY_ACL) == ALL


def test_match_pattern_selects_what_applies_to_that_name() -> None:
    assert selected(AclFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)) == [LIT, WILD, PRE]


def test_any_pattern_with_a_name_is_an_exact_name_of_any_pattern_type() -> None:
    assert selected(AclFilter(ResourceType.ANY, "ord", PatternType.ANY)) == [PRE]
    assert selected(AclFilter(ResourceType.ANY, "orders", PatternType.ANY)) == [LIT]


def test_literal_and_prefixed_filters_are_exact() -> None:
    assert selected(AclFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)) == [LIT]
    assert selected(AclFilter(ResourceType.TOPIC, "orders", PatternType.PREFIXED)) == []
    assert selected(AclFilter(ResourceType.TOPIC, None, PatternType.PREFIXED)) == [PRE, OTHER_PRE, LONGER_PRE]


def test_entry_fields() -> None:
    bob_write = acl("orders", principal="User:bob", operation=Operation.WRITE, permission=Permission.DENY, host="h")
    assert matches(AclFilter(principal="User:bob"), bob_write)
    assert not matches(AclFilter(principal="User:alice"), bob_write)
    assert matches(AclFilter(host="h", operation=Operation.WRITE, permission=Permission.DENY), bob_write)
    assert not matches(AclFilter(host="*"), bob_write)
    assert not matches(AclFilter(operation=Operation.READ), bob_write)
    assert not matches(AclFilter(permission=Permission.ALLOW), bob_write)
    assert not matches(AclFilter(ResourceType.GROUP), bob_write)


def test_unknown_fields_make_a_filter_invalid() -> None:
    assert problem(ANY_ACL) is None
    assert problem(AclFilter(ResourceType.UNKNOWN))
    assert problem(AclFilter(operation=Operation.UNKNOWN))
    assert problem(AclFilter(permission=Permission.UNKNOWN))
    assert problem(AclFilter(pattern_type=PatternType.UNKNOWN))


def test_binding_problem() -> None:
    assert binding_problem(LIT) is None and binding_problem(PRE) is None
    assert binding_problem(acl("orders", PatternType.MATCH))
    assert binding_problem(acl("orders", principal="alice"))
    assert binding_problem(acl("orders", principal=":alice")) is None  # Kafka only looks for the colon
