"""What a broker does with its replicas when the cluster metadata changes, decided without doing it.

Given the partition states the broker last acted on, the states the metadata now holds, which partitions
changed, and which replicas the broker runs, ``partition_transitions`` lists per partition what the
broker must carry out: open a replica and lead or follow, take a new leader or ISR, stop a replica the
metadata moved away (and delete its log), or drop one whose topic was deleted. The broker's metadata
publisher carries the list out over real logs; the simulator can drive the same function.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from epochlog.replication.types import PartitionState

TopicPartition = tuple[str, int]


class Kind(enum.Enum):
    BECOME_LEADER = "become-leader"  # this broker leads at a new leader epoch (or leads for the first time)
    BECOME_FOLLOWER = "become-follower"  # a new leader or leader epoch, this broker follows
    LEADERLESS = "leaderless"  # no leader was elected: the replica keeps its log and serves nobody
    UPDATE = "update"  # the same leader and epoch: a new ISR, replica set or partition epoch
    REMOVE = "remove"  # the metadata no longer assigns a replica here: stop it and delete its log
    DELETE = "delete"  # the topic was deleted: stop the replica and delete its log


@dataclass(frozen=True)
class Transition:
    kind: Kind
    topic: str
    partition: int
    state: PartitionState | None  # the new state; None for DELETE
    create: bool = False  # no replica runs here yet: open (or create) its log before taking the state

    @property
    def key(self) -> TopicPartition:
        return self.topic, self.partition


def partition_transitions(
    node_id: int,
    before: Mapping[TopicPartition, PartitionState],
    after: Mapping[TopicPartition, PartitionState],
    changed: Iterable[TopicPartition],
    hosted: Collection[TopicPartition],
    deleted_topics: Collection[str] = (),
) -> list[Transition]:
    """The transitions of the ``changed`` partitions, in the order given (each once).

    ``before`` holds the states the broker last carried out, ``after`` the metadata's now (a partition
    missing from it belongs to a deleted topic); ``hosted`` the partitions a replica runs for here;
    ``deleted_topics`` the topics deleted since ``before`` (one may have been created again under its name:
    its partitions are new ones, with a new topic id, and the old replicas go first).
    Nothing is removed or deleted that neither ran here nor was assigned here: there is nothing to stop."""
    out: list[Transition] = []
    for key in dict.fromkeys(changed):
        topic, p = key
        old, new = before.get(key), after.get(key)
        here = key in hosted or (old is not None and node_id in old.replicas)
        if new is None or topic in deleted_topics:
            if here:
                out.append(Transition(Kind.DELETE, topic, p, None))
            if new is None:
                continue
            old, here = None, False
        if node_id not in new.replicas:
            if here:
                out.append(Transition(Kind.REMOVE, topic, p, new))
            continue
        create = not here or key not in hosted
        out.append(Transition(_role_change(node_id, old, new, create), topic, p, new, create))
    return out


def _role_change(node_id: int, old: PartitionState | None, new: PartitionState, create: bool) -> Kind:
    same_term = (
        not create
        and old is not None
        and node_id in old.replicas
        and old.leader == new.leader
        and old.leader_epoch == new.leader_epoch
    )
    if same_term:
        return Kind.UPDATE
    if new.leader < 0:
        return Kind.LEADERLESS
    return Kind.BECOME_LEADER if new.leader == node_id else Kind.BECOME_FOLLOWER
