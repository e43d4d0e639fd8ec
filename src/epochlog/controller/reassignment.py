"""Partition reassignment (KIP-455) as replica-set arithmetic, free of I/O and of the controller's state.

A reassignment moves a partition from its original replicas to a target set in three steps:
1. start: the replica set becomes the target followed by the original replicas not in it (so the
   preferred replica is the target's first), ``adding`` = target - original, ``removing`` = original -
   target; the ISR is unchanged and the joining replicas fetch from the leader like any follower;
2. the leader adds each joining replica to the ISR once it has caught up (AlterPartition, as ever);
3. complete, once every target replica is in the ISR: replicas := target, the ISR keeps only target
   members, and the leaving replicas are dropped (the controller moves leadership first if the leader leaves).
Cancelling reverts to the original replicas: the joining ones leave, the ISR keeps only original members.
A new target for a partition that is already moving starts over from the original replicas, as Kafka's
controller does, so ``adding``/``removing`` always describe original -> target.

The controller core (controller.py) applies these results to the image and records them; every function
here only computes.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass

from epochlog.replication.types import PartitionState


@dataclass(frozen=True)
class ReplicaSet:
    """What a partition's replica set, ISR and reassignment become."""

    replicas: tuple[int, ...]
    isr: frozenset[int]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # The ISR had to be rebuilt from replicas that were not all in sync (a cancel whose ISR held only
    # joining replicas): whoever leads next was not elected cleanly.
    unclean: bool = False


def is_reassigning(st: PartitionState) -> bool:
    return bool(st.adding or st.removing)


def target_of(st: PartitionState) -> tuple[int, ...]:
    """The replicas the partition is moving to (its replicas when it is not moving)."""
    return tuple(r for r in st.replicas if r not in st.removing)


def original_of(st: PartitionState) -> ReplicaSet:
    """The partition as it was before its reassignment began (itself when none is in progress)."""
    adding = set(st.adding)
    replicas = tuple(r for r in st.replicas if r not in adding)
    isr = frozenset(r for r in st.isr if r not in adding)
    if not isr:
        # Only joining replicas were in sync: nothing of the original set is known to hold the log's end.
        return ReplicaSet(replicas, frozenset(replicas), unclean=True)
    return ReplicaSet(replicas, isr)


def start(st: PartitionState, target: Sequence[int]) -> ReplicaSet:
    """Move ``st`` (possibly mid-reassignment) toward ``target``, computed from its original replicas."""
    orig = original_of(st)
    target_t = tuple(target)
    adding = tuple(r for r in target_t if r not in orig.replicas)
    removing = tuple(r for r in orig.replicas if r not in target_t)
    if not adding and not removing:
        return ReplicaSet(target_t, orig.isr, unclean=orig.unclean)  # the same set, maybe reordered
    return ReplicaSet(target_t + removing, orig.isr, adding, removing, orig.unclean)


def completion(st: PartitionState) -> ReplicaSet | None:
    """The finished reassignment once every target replica is in the ISR; None while one is still catching up."""
    if not is_reassigning(st):
        return None
    target = target_of(st)
    if not all(r in st.isr for r in target):
        return None
    return ReplicaSet(target, frozenset(r for r in st.isr if r in target))


def replica_list_problem(replicas: Sequence[int], registered: Container[int]) -> str | None:
    """Why a manual replica list (CreateTopics assignments, a reassignment target) is refused with
    INVALID_REPLICA_ASSIGNMENT, as Kafka's controller words its checks; None if it is acceptable."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for r in replicas:
        if r in seen:
            return f"The manual partition assignment includes the broker {r} more than once."
        seen.add(r)
    for r in replicas:
        if r not in registered:
            return f"The manual partition assignment includes broker {r}, but no such broker is registered."
    return None
