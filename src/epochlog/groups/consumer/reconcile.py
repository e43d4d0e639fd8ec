"""Moving one member from its current assignment towards its target (Kafka's CurrentAssignmentBuilder rules).

A member is in one of three states:

- STABLE: it has everything its epoch's target gives it (of what was free). When a newer target exists it
  is reconciled towards it at once.
- UNREVOKED_PARTITIONS: it was asked to give up ``pending_revocation`` and keeps its old epoch until a
  heartbeat's owned partitions no longer list any of them; only then does it move to the next epoch.
- UNRELEASED_PARTITIONS: it is at the target epoch but some partitions of its target are still owned by a
  member that has not yet released them; they are given to it on a later heartbeat, once free.

The one rule that keeps a partition from having two owners: a partition of the target is added to a
member's assignment only while no member owns it (``owner_epoch`` is -1). Revocation comes first and is
complete only when the member says so; assignment waits for release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from epochlog.groups.consumer.model import (
    NO_PARTITIONS,
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    TopicPartition,
)


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    state: str
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    current: CurrentAssignment,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owner_epoch: Callable[[TopicPartition], int],
) -> CurrentAssignment:
    """The member's next current assignment. ``owned`` is what its heartbeat says it owns (None: not said,
    so it is taken to still own everything); ``owner_epoch(tp)`` is -1 for a partition nobody owns.
    A partition the member itself is still revoking counts as owned, as in Kafka: it comes back to the
    member only after the revocation is acknowledged."""
    if current.state == STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current.member_epoch, current.assigned, target_epoch, target, owned, owner_epoch)
    if current.state == UNREVOKED_PARTITIONS:
        if _still_owns(owned, current.pending_revocation):
            return current
        # Revoked: the member may move on, one epoch at a time, towards the newest target.
        return _next(current.member_epoch + 1, current.assigned, target_epoch, target, owned, owner_epoch)
    return _next(current.member_epoch, current.assigned, target_epoch, target, owned, owner_epoch)


def _still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    return owned is None or bool(owned & revoking)


def _next(
    epoch: int,
    assigned: Assignment,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owner_epoch: Callable[[TopicPartition], int],
) -> CurrentAssignment:
    keep = assigned & target
    revoke = assigned - keep
    wanted = target - keep
    free = frozenset(tp for tp in wanted if owner_epoch(tp) == -1)
    unreleased = len(free) != len(wanted)
    if revoke and _still_owns(owned, revoke):
        # Nothing new until the member lets go: it stays at its epoch with what it keeps.
        return CurrentAssignment(epoch, UNREVOKED_PARTITIONS, keep, revoke)
    state = UNRELEASED_PARTITIONS if unreleased else STABLE
    return CurrentAssignment(target_epoch, state, keep | free, NO_PARTITIONS)
