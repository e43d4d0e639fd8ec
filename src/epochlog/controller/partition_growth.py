"""CreatePartitions' decision: may a topic grow to ``count`` partitions, and on which replicas?

Kafka's controller (ReplicationControlManager.createPartitions) is the model, its checks in its order and
its error codes and words: the count must be an increase; explicit assignments must number exactly the
partitions added, each a valid replica list (reassignment.replica_list_problem) as long as the topic's
replication factor, with at least one live replica to lead; without assignments the new partitions are
placed over the live brokers, rack-aware when they have racks (controller/placement.py). Pure: the topic,
the brokers, their racks and their liveness in, a plan or a refusal out.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.controller import placement, reassignment
from epochlog.replication.types import PartitionState


@dataclass(frozen=True)
class Refusal:
    error_code: int
    message: str


def place(
    first: int, end: int, rf: int, live: Sequence[int], racks: Mapping[int, str | None] | None = None
) -> list[PartitionState]:
    """Partitions first..end-1 spread over the live brokers (rack-aware when ``racks``, broker -> rack,
    names some), the first replica leading."""
    placed = placement.controller_place(first, end, rf, {b: (racks or {}).get(b) for b in live})
    return [PartitionState(r[0], 0, frozenset(r), r, 0) for r in placed]


def plan_growth(
    name: str,
    partitions: dict[int, PartitionState],
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    registered: Container[int],
    live: Sequence[int],
    alive: Callable[[int], bool],
    racks: Mapping[int, str | None] | None = None,
) -> list[PartitionState] | Refusal:
    """The states of the partitions to add (numbered from ``len(partitions)``), or why not."""
    have = len(partitions)
    if count == have:
        return Refusal(Err.INVALID_PARTITIONS, f"Topic already has {have} partition(s).")
    if count < have:
        return Refusal(
            Err.INVALID_PARTITIONS,
            f"The topic {name} currently has {have} partition(s); {count} would not be an increase.",
        )
    additional = count - have
    if assignments is not None and len(assignments) != additional:
        return Refusal(
            Err.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(assignments)} "
            "assignment(s) were specified.",
        )
    # A partition being reassigned lists its leaving replicas too: its target is the topic's factor.
    rf = len(reassignment.target_of(partitions[min(partitions)]))
    if assignments is None:
        if rf > len(live):
            return Refusal(
                Err.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                f"cannot be reached because only {len(live)} broker(s) are registered.",
            )
        return place(have, count, rf, live, racks)
    out = []
    for i, wanted in enumerate(assignments):
        replicas = tuple(int(b) for b in wanted)
        problem = reassignment.replica_list_problem(replicas, registered)
        if problem:
            return Refusal(Err.INVALID_REPLICA_ASSIGNMENT, problem)
        if len(replicas) != rf:
            return Refusal(
                Err.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but "
                f"this is not consistent with previous partitions, which have {rf} replica(s).",
            )
        isr = tuple(r for r in replicas if alive(r))
        if not isr:
            return Refusal(
                Err.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition {have + i} "
                "are fenced or in controlled shutdown.",
            )
        # The first live replica leads, as a topic created with assignments: the preferred leader when up.
        out.append(PartitionState(isr[0], 0, frozenset(isr), replicas, 0))
    return out
