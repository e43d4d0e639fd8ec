"""StandardAuthorizer: Kafka's rules, each with a case that fails if the rule is broken."""

from __future__ import annotations

import itertools

import pytest

from epochlog.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from epochlog.security.authorizer import StandardAuthorizer

pytestmark = pytest.mark.unit

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
_ids = itertools.count()


def acl(
    op: Operation,
    name: str = "orders",
    perm: Permission = ALLOW,
    pattern: PatternType = LIT,
    rtype: ResourceType = T,
    principal: str = ALICE,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls: AclBinding, super_users: set[str] | None = None, everyone: bool = False) -> StandardAuthorizer:
    az = StandardAuthorizer(super_users or set(), everyone)
    az.set_acls({f"id-{next(_ids)}": a for a in acls})
    return az


def may(az: StandardAuthorizer, op: Operation, name: str = "orders", rtype: ResourceType = T, **kw: str) -> bool:
    return az.authorize(kw.get("principal", ALICE), kw.get("host", HOST), op, rtype, name)


def test_no_acls_denies_unless_allow_everyone() -> None:
    assert not may(authorizer(), Operation.READ)
    assert may(authorizer(everyone=True), Operation.READ)


def test_super_user_passes_everything_even_a_deny() -> None:
    az = authorizer(acl(Operation.ALL, perm=DENY), super_users={ALICE})
    assert may(az, Operation.WRITE) and may(az, Operation.ALTER, "kafka-cluster", C)
    assert not may(az, Operation.WRITE, principal=BOB)  # only the listed principal


def test_literal_name_must_be_equal() -> None:
    az = authorizer(acl(Operation.READ, "orders"))
    assert may(az, Operation.READ, "orders")
    assert not may(az, Operation.READ, "orders2")
    assert not may(az, Operation.READ, "order")


def test_literal_wildcard_name_matches_every_name() -> None:
    az = authorizer(acl(Operation.READ, "*"))
    assert may(az, Operation.READ, "anything") and may(az, Operation.READ, "orders")


def test_prefixed_matches_names_starting_with_it_only() -> None:
    az = authorizer(acl(Operation.READ, "ord", pattern=PRE))
    assert may(az, Operation.READ, "orders") and may(az, Operation.READ, "ord")
    assert not may(az, Operation.READ, "or")
    assert not may(az, Operation.READ, "xorders")


def test_prefixed_star_is_not_a_wildcard() -> None:
    # "*" is only special for LITERAL patterns: PREFIXED "*" means names starting with "*".
    az = authorizer(acl(Operation.READ, "*", pattern=PRE))
    assert not may(az, Operation.READ, "orders")
    assert may(az, Operation.READ, "*x")


def test_literal_is_not_a_prefix() -> None:
    az = authorizer(acl(Operation.READ, "ord", pattern=LIT))
    assert not may(az, Operation.READ, "orders")


def test_resource_type_must_match() -> None:
    az = authorizer(acl(Operation.READ, "orders", rtype=G))
    assert not may(az, Operation.READ, "orders", T)
    assert may(az, Operation.READ, "orders", G)


def test_principal_equal_or_wildcard() -> None:
    az = authorizer(acl(Operation.READ, principal=ALICE))
    assert may(az, Operation.READ) and not may(az, Operation.READ, principal=BOB)
    az = authorizer(acl(Operation.READ, principal="User:*"))
    assert may(az, Operation.READ, principal=BOB)


def test_host_equal_or_wildcard() -> None:
    az = authorizer(acl(Operation.READ, host=HOST))
    assert may(az, Operation.READ, host=HOST)
    assert not may(az, Operation.READ, host=OTHER_HOST)
    az = authorizer(acl(Operation.READ, host="*"))
    assert may(az, Operation.READ, host=OTHER_HOST)


def test_deny_wins_over_allow() -> None:
    az = authorizer(acl(Operation.READ), acl(Operation.READ, perm=DENY))
    assert not may(az, Operation.READ)


def test_deny_wins_across_patterns() -> None:
    # An ALLOW on the literal name loses to a DENY on a covering prefix, and to a wildcard DENY for everyone.
    az = authorizer(acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "ord", DENY, PRE))
    assert not may(az, Operation.WRITE, "orders")
    az = authorizer(acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "*", DENY, principal="User:*"))
    assert not may(az, Operation.WRITE, "orders")


def test_deny_for_another_principal_or_host_does_not_apply() -> None:
    az = authorizer(acl(Operation.READ), acl(Operation.READ, perm=DENY, principal=BOB))
    assert may(az, Operation.READ)
    az = authorizer(acl(Operation.READ), acl(Operation.READ, perm=DENY, host=OTHER_HOST))
    assert may(az, Operation.READ, host=HOST) and not may(az, Operation.READ, host=OTHER_HOST)


@pytest.mark.parametrize("op", [Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER])
def test_allow_implies_describe(op: Operation) -> None:
    az = authorizer(acl(op))
    assert may(az, Operation.DESCRIBE)
    assert may(az, op)


@pytest.mark.parametrize("op", [Operation.CREATE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS])
def test_other_allows_do_not_imply_describe(op: Operation) -> None:
    assert not may(authorizer(acl(op)), Operation.DESCRIBE)


def test_alter_configs_implies_describe_configs_only() -> None:
    az = authorizer(acl(Operation.ALTER_CONFIGS))
    assert may(az, Operation.DESCRIBE_CONFIGS)
    assert not may(az, Operation.ALTER)
    assert not may(authorizer(acl(Operation.DESCRIBE_CONFIGS)), Operation.ALTER_CONFIGS)


def test_implication_is_one_way() -> None:
    az = authorizer(acl(Operation.DESCRIBE))
    assert not may(az, Operation.READ) and not may(az, Operation.WRITE)
    assert not may(authorizer(acl(Operation.READ)), Operation.WRITE)


def test_deny_implies_nothing() -> None:
    # DENY READ does not deny DESCRIBE: an ALLOW DESCRIBE still holds.
    az = authorizer(acl(Operation.DESCRIBE), acl(Operation.READ, perm=DENY))
    assert may(az, Operation.DESCRIBE)
    assert not may(az, Operation.READ)
    # And DENY READ blocks the DESCRIBE an ALLOW READ implies? No: only READ is denied, so DESCRIBE
    # (implied by the ALLOW READ) stays allowed.
    az = authorizer(acl(Operation.READ), acl(Operation.READ, perm=DENY))
    assert may(az, Operation.DESCRIBE)


def test_all_covers_every_operation_for_allow_and_deny() -> None:
    ops = [o for o in Operation if o not in (Operation.UNKNOWN, Operation.ANY, Operation.ALL)]
    az = authorizer(acl(Operation.ALL))
    assert all(may(az, o) for o in ops)
    az = authorizer(acl(Operation.READ), acl(Operation.WRITE), acl(Operation.ALL, perm=DENY))
    assert not any(may(az, o) for o in ops)


def test_allow_everyone_only_when_no_acl_matches_the_resource() -> None:
    # An ACL on the resource for someone else (and another operation) still counts as "an ACL": denied.
    az = authorizer(acl(Operation.WRITE, principal=BOB), everyone=True)
    assert not may(az, Operation.READ, "orders")
    # A resource no ACL covers is open to all.
    assert may(az, Operation.READ, "payments")
    # A prefixed or wildcard ACL covers the resource too.
    az = authorizer(acl(Operation.WRITE, "pay", pattern=PRE, principal=BOB), everyone=True)
    assert not may(az, Operation.READ, "payments")
    az = authorizer(acl(Operation.WRITE, "*", principal=BOB), everyone=True)
    assert not may(az, Operation.READ, "payments")
    # ACLs on another resource type do not count.
    az = authorizer(acl(Operation.READ, "payments", rtype=G, principal=BOB), everyone=True)
    assert may(az, Operation.READ, "payments", T)


def test_set_acls_replaces_and_drops_memoised_answers() -> None:
    az = authorizer(acl(Operation.READ))
    assert may(az, Operation.READ)
    az.set_acls({})
    assert not may(az, Operation.READ)
    az.set_acls({"a": acl(Operation.READ)})
    assert may(az, Operation.READ)


def test_many_prefixes_of_different_lengths() -> None:
    acls = [acl(Operation.READ, "t" * n, pattern=PRE, principal=f"User:u{n}") for n in range(1, 40)]
    az = authorizer(*acls)
    assert may(az, Operation.READ, "t" * 10, principal="User:u10")
    assert may(az, Operation.READ, "t" * 39, principal="User:u5")
    assert not may(az, Operation.READ, "t" * 5, principal="User:u6")


# -- authorize_any (KIP-679) ----------------------------------------------------------------------------


def may_any(az: StandardAuthorizer, op: Operation = Operation.WRITE, principal: str = ALICE, host: str = HOST) -> bool:
    return az.authorize_any(principal, host, op, T)


def test_any_needs_some_allow() -> None:
    assert not may_any(authorizer())
    assert may_any(authorizer(acl(Operation.WRITE, "orders")))
    assert may_any(authorizer(acl(Operation.WRITE, "ord", pattern=PRE)))
    assert may_any(authorizer(acl(Operation.ALL, "orders")))
    assert not may_any(authorizer(acl(Operation.READ, "orders")))  # another operation
    assert not may_any(authorizer(acl(Operation.WRITE, "orders", principal=BOB)))
    assert not may_any(authorizer(acl(Operation.WRITE, "orders", host=OTHER_HOST)))
    assert may_any(authorizer(acl(Operation.WRITE, "orders", principal="User:*")))
    assert not may_any(authorizer(acl(Operation.WRITE, "orders", rtype=G)))


def test_any_wildcard_denies_block_everything() -> None:
    assert not may_any(authorizer(acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "*", DENY)))
    assert not may_any(authorizer(acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "", DENY, PRE)))
    # Even when the ALLOW is itself a wildcard (the DENY is seen first whatever the order).
    assert not may_any(authorizer(acl(Operation.WRITE, "*"), acl(Operation.WRITE, "*", DENY)))


def test_any_deny_on_one_literal_does_not_block_another() -> None:
    az = authorizer(
        acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "payments"), acl(Operation.WRITE, "orders", DENY)
    )
    assert may_any(az)
    # ...but it blocks the same literal.
    assert not may_any(authorizer(acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "orders", DENY)))


def test_any_deny_prefix_dominates_patterns_it_covers() -> None:
    assert not may_any(authorizer(acl(Operation.WRITE, "orders"), acl(Operation.WRITE, "ord", DENY, PRE)))
    assert not may_any(authorizer(acl(Operation.WRITE, "orders", pattern=PRE), acl(Operation.WRITE, "ord", DENY, PRE)))
    # A longer DENY prefix does not cover every name a shorter ALLOW prefix gives.
    assert may_any(authorizer(acl(Operation.WRITE, "ord", pattern=PRE), acl(Operation.WRITE, "orders", DENY, PRE)))
    # A DENY on a literal does not dominate a prefixed ALLOW.
    assert may_any(authorizer(acl(Operation.WRITE, "ord", pattern=PRE), acl(Operation.WRITE, "ord", DENY)))


def test_any_super_user_and_allow_everyone() -> None:
    assert may_any(authorizer(acl(Operation.WRITE, "*", DENY), super_users={ALICE}))
    assert may_any(authorizer(everyone=True))
    # allow.everyone does not help when an ACL covers every name (the wildcard DENY for someone else here).
    assert not may_any(authorizer(acl(Operation.WRITE, "*", DENY, principal=BOB), everyone=True))


def test_any_deny_for_another_operation_does_not_block() -> None:
    assert may_any(authorizer(acl(Operation.WRITE, "orders"), acl(Operation.READ, "*", DENY)))
    assert not may_any(authorizer(acl(Operation.WRITE, "orders"), acl(Operation.ALL, "*", DENY)))
