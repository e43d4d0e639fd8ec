"""Kafka's StandardAuthorizer semantics over the ACLs of the metadata log.

The rules (StandardAuthorizerData / AclEntry in Kafka): super users pass; an ACL applies to a resource when
its type matches and its pattern is LITERAL with the same name or "*", or PREFIXED with a prefix of the name;
to a request when its principal is the caller's or "User:*" and its host the caller's or "*". A matching DENY
wins over any ALLOW. An ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of ALTER_CONFIGS
also DESCRIBE_CONFIGS, ALL allows (or denies) everything; a DENY denies only its own operation (or all with
ALL). allow.everyone.if.no.acl.found allows only when no ACL at all applies to the resource.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from epochlog.security.acl import WILDCARD, AclBinding, Operation, PatternType, Permission, ResourceType

# authorizer.class.name values that turn authorization on (Kafka's, accepted as written).
AUTHORIZER_CLASS_NAMES = {
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
}

WILDCARD_PRINCIPAL = "User:*"

# The operations an ALLOW of each operation also allows (DENY implies nothing but itself).
_ALLOW_IMPLIES: dict[Operation, frozenset[Operation]] = {
    Operation.READ: frozenset({Operation.READ, Operation.DESCRIBE}),
    Operation.WRITE: frozenset({Operation.WRITE, Operation.DESCRIBE}),
    Operation.DELETE: frozenset({Operation.DELETE, Operation.DESCRIBE}),
    Operation.ALTER: frozenset({Operation.ALTER, Operation.DESCRIBE}),
    Operation.ALTER_CONFIGS: frozenset({Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS}),
}

# Memoised answers are dropped wholesale past this many: a bound on memory, not an eviction policy.
_CACHE_MAX = 65536


def _allow_covers(acl_op: Operation, op: Operation) -> bool:
    if acl_op == Operation.ALL or acl_op == op:
        return True
    implied = _ALLOW_IMPLIES.get(acl_op)
    return implied is not None and op in implied


def _covers(acl: AclBinding, op: Operation) -> bool:
    if acl.permission == Permission.ALLOW:
        return _allow_covers(acl.operation, op)
    return acl.operation == Operation.ALL or acl.operation == op


def _applies(acl: AclBinding, principal: str, host: str, op: Operation) -> bool:
    """The binding speaks of this principal (or User:*), this host (or *) and this operation."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    return _covers(acl, op)


@dataclass
class _TypeIndex:
    """The ACLs of one resource type: literal ones by name, prefixed ones by prefix, and the prefix lengths
    present, so a name's prefixed ACLs are found with one dict lookup per distinct length."""

    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefix_lengths: list[int] = field(default_factory=list)

    def matching(self, name: str) -> Iterator[AclBinding]:
        """Every ACL whose pattern covers the resource ``name``, whoever it is for."""
        got = self.literal.get(name)
        if got:
            yield from got
        if name != WILDCARD:
            got = self.literal.get(WILDCARD)
            if got:
                yield from got
        n = len(name)
        for length in self.prefix_lengths:
            if length > n:
                break
            got = self.prefixed.get(name[:length])
            if got:
                yield from got

    def every(self) -> Iterator[AclBinding]:
        for acls in self.literal.values():
            yield from acls
        for acls in self.prefixed.values():
            yield from acls


def _index(acls: Mapping[str, AclBinding]) -> dict[ResourceType, _TypeIndex]:
    out: dict[ResourceType, _TypeIndex] = {}
    for acl in acls.values():
        idx = out.setdefault(acl.resource_type, _TypeIndex())
        if acl.pattern_type == PatternType.LITERAL:
            idx.literal.setdefault(acl.resource_name, []).append(acl)
        elif acl.pattern_type == PatternType.PREFIXED:
            idx.prefixed.setdefault(acl.resource_name, []).append(acl)
        # Other pattern types are never stored (CreateAcls refuses them); one would match nothing.
    for idx in out.values():
        idx.prefix_lengths = sorted({len(p) for p in idx.prefixed})
    return out


class StandardAuthorizer:
    def __init__(self, super_users: set[str], allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = set(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[str, AclBinding] = {}
        self._by_type: dict[ResourceType, _TypeIndex] = {}
        # Every request asks the same few questions again (a consumer's fetch, per topic, many times a
        # second): answers are kept until the ACLs change.
        self._cache: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        self._any_cache: dict[tuple[str, str, Operation, ResourceType], bool] = {}

    def set_acls(self, acls: Mapping[str, AclBinding]) -> None:
        """Every ACL the metadata log holds now, by id (called after each change)."""
        self._acls = dict(acls)
        self._by_type = _index(self._acls)
        self._cache = {}
        self._any_cache = {}

    def acls(self) -> dict[str, AclBinding]:
        return dict(self._acls)

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        key = (principal, host, op, rtype, name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        result = self._decide(principal, host, op, rtype, name)
        if len(self._cache) >= _CACHE_MAX:
            self._cache = {}
        self._cache[key] = result
        return result

    def _decide(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        idx = self._by_type.get(rtype)
        if idx is None:
            return self.allow_everyone_if_no_acl_found
        any_acl = False
        allowed = False
        for acl in idx.matching(name):
            any_acl = True
            if not _applies(acl, principal, host, op):
                continue
            if acl.permission == Permission.DENY:
                return False
            if acl.permission == Permission.ALLOW:
                allowed = True
        if allowed:
            return True
        return not any_acl and self.allow_everyone_if_no_acl_found

    def authorize_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether some resource of this type may be acted on (KIP-679: idempotent write when the
        principal may write any topic). Kafka's authorizeByResourceType: a super user, or an allowed
        resource named nowhere (allow.everyone.if.no.acl.found), passes; otherwise some ALLOW pattern for
        the caller must survive the caller's DENY patterns: a DENY on LITERAL "*" or PREFIXED "" blocks
        all, a DENY on a literal name only that same literal, a DENY prefix any pattern it is a prefix of."""
        key = (principal, host, op, rtype)
        hit = self._any_cache.get(key)
        if hit is None:
            hit = self._decide_any(principal, host, op, rtype)
            if len(self._any_cache) >= _CACHE_MAX:
                self._any_cache = {}
            self._any_cache[key] = hit
        return hit

    def _decide_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        # Kafka asks authorize() about a made-up name first: super users, and allow.everyone when no ACL
        # covers such a name, pass whatever DENY ACLs exist.
        if self._decide(principal, host, op, rtype, "hardcode"):
            return True
        idx = self._by_type.get(rtype)
        if idx is None:
            return False
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow_literal: list[str] = []
        allow_prefix: list[str] = []
        for acl in idx.every():
            if not _applies(acl, principal, host, op):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission == Permission.DENY:
                if (literal and acl.resource_name == WILDCARD) or (not literal and acl.resource_name == ""):
                    return False
                (deny_literal if literal else deny_prefix).add(acl.resource_name)
            elif acl.permission == Permission.ALLOW:
                (allow_literal if literal else allow_prefix).append(acl.resource_name)
        # Checked after every DENY is known, so a wildcard DENY wins whatever order the ACLs come in.
        if WILDCARD in allow_literal or "" in allow_prefix:
            return True
        for name in allow_literal:
            if name not in deny_literal and not _dominated(name, deny_prefix):
                return True
        return any(not _dominated(name, deny_prefix) for name in allow_prefix)


def _dominated(name: str, deny_prefixes: set[str]) -> bool:
    """Whether a DENY prefix covers every resource the pattern ``name`` could name."""
    return any(name.startswith(p) for p in deny_prefixes)
