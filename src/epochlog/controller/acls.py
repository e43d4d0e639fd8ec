"""Deciding CreateAcls and DeleteAcls over the image's ACLs (Kafka's AclControlManager), free of I/O.

Each creation and each filter has its own outcome; a refused one changes nothing and the others go
ahead. A binding already stored is a success that writes nothing, so repeating a creation never
duplicates an ACL. A deletion lists every binding its filter matched, even one an earlier filter of
the same request already removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.controller.image import acl_record
from epochlog.controller.records import AclCreated, AclRemoved
from epochlog.security.acl import AclBinding
from epochlog.security.acl_filters import AclFilter, binding_problem, matches, problem

TOO_LARGE = "Unable to perform excessively large batch operation."


@dataclass(frozen=True)
class AclCreation:
    error_code: int = Err.NONE
    message: str | None = None


@dataclass(frozen=True)
class AclDeletion:
    error_code: int = Err.NONE
    message: str | None = None
    matched: tuple[AclBinding, ...] = ()


def plan_create(
    acls: Mapping[str, AclBinding], bindings: Sequence[AclBinding], new_id: Callable[[], str]
) -> tuple[list[AclCreation], list[AclCreated]]:
    outcomes: list[AclCreation] = []
    records: list[AclCreated] = []
    present = set(acls.values())
    for b in bindings:
        why = binding_problem(b)
        if why is not None:
            outcomes.append(AclCreation(Err.INVALID_REQUEST, why))
            continue
        outcomes.append(AclCreation())
        if b in present:
            continue
        present.add(b)
        records.append(acl_record(new_id(), b))
    return outcomes, records


def plan_delete(
    acls: Mapping[str, AclBinding], filters: Sequence[AclFilter]
) -> tuple[list[AclDeletion], list[AclRemoved]]:
    outcomes: list[AclDeletion] = []
    records: list[AclRemoved] = []
    removed: set[str] = set()
    for f in filters:
        why = problem(f)
        if why is not None:
            outcomes.append(AclDeletion(Err.INVALID_REQUEST, why))
            continue
        matched = []
        for acl_id, b in acls.items():
            if matches(f, b):
                matched.append(b)
                if acl_id not in removed:
                    removed.add(acl_id)
                    records.append(AclRemoved(acl_id))
        outcomes.append(AclDeletion(matched=tuple(matched)))
    return outcomes, records
