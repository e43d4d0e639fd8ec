"""Kafka's StandardAuthorizer semantics over the ACLs of the metadata log (placeholder: allows all)."""

from __future__ import annotations

from collections.abc import Mapping

from epochlog.security.acl import AclBinding, Operation, ResourceType

# authorizer.class.name values that turn authorization on (Kafka's, accepted as written).
AUTHORIZER_CLASS_NAMES = {
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
}


class StandardAuthorizer:
    def __init__(self, super_users: set[str], allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = set(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[str, AclBinding] = {}

    def set_acls(self, acls: Mapping[str, AclBinding]) -> None:
        """Every ACL the metadata log holds now, by id (called after each change)."""
        self._acls = dict(acls)

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        return True

    def authorize_any(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether some resource of this type may be acted on (KIP-679: idempotent write when the
        principal may write any topic)."""
        return True
