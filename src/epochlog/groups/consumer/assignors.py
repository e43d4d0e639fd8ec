"""The server-side assignors of ``group.consumer.assignors``: ``uniform`` (Kafka's default) and ``range``.

An assignor sees each member's subscribed topics and current target assignment, and the partition count
of every subscribed topic, and returns every member's new target. Both are deterministic: the same input
gives the same assignment, so a failed-over coordinator recomputes what its predecessor would have.

- ``uniform`` balances the number of partitions per member (within one, for members with the same
  subscription) and is sticky: a partition stays with its current owner unless that owner no longer
  subscribes to the topic or has more than its share. A fourth member joining three moves about a quarter
  of the partitions, all to the newcomer; nothing moves between the three.
- ``range`` gives each topic's partitions in contiguous ranges to the members subscribed to it, in the
  order of their instance id (or member id), the first ``partitions % members`` getting one more. Members
  with the same subscription get the same partition numbers of every topic, which is what co-partitioned
  joins want.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.groups.consumer.model import Assignment, TopicPartition


@dataclass(frozen=True)
class MemberSpec:
    topics: frozenset[str]
    current: Assignment  # the member's current target
    instance_id: str | None = None


def assign(name: str, members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    if name == "range":
        return range_assign(members, topics)
    if name == "uniform":
        return uniform_assign(members, topics)
    raise ValueError(f"unknown assignor {name!r}")


def _partitions(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> list[TopicPartition]:
    wanted = sorted({t for spec in members.values() for t in spec.topics if t in topics})
    return [(t, p) for t in wanted for p in range(topics[t])]


def uniform_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    order = sorted(members)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in order}
    taken: set[TopicPartition] = set()
    valid = set(_partitions(members, topics))
    # 1. Stickiness: every member keeps what it had and may still have.
    for m in order:
        for tp in sorted(members[m].current):
            if tp in valid and tp[0] in members[m].topics and tp not in taken:
                owned[m].add(tp)
                taken.add(tp)
    # 2. What is left goes, topic by topic (fewest subscribers first: they have the least choice), to the
    #    least loaded member that subscribes to it.
    subscribers = {t: [m for m in order if t in members[m].topics] for t in topics}
    rest = sorted(valid - taken, key=lambda tp: (len(subscribers[tp[0]]), tp))
    for tp in rest:
        to = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
        owned[to].add(tp)
    # 3. Balance: move one partition at a time from a member to one that has at least two fewer and may
    #    take it. Each move lowers the sum of squared loads, so this ends, and every move is one that
    #    balance demands: members already within one of each other never trade.
    while _move_one(order, owned, members):
        pass
    return {m: frozenset(owned[m]) for m in order}


def _move_one(order: list[str], owned: dict[str, set[TopicPartition]], members: Mapping[str, MemberSpec]) -> bool:
    by_load = sorted(order, key=lambda m: (-len(owned[m]), m))
    for giver in by_load:
        for taker in reversed(by_load):
            if len(owned[taker]) + 1 >= len(owned[giver]):
                break
            # Give up what the giver had most recently gained first: its oldest partitions stay.
            movable = sorted(
                (tp for tp in owned[giver] if tp[0] in members[taker].topics),
                key=lambda tp: (tp in members[giver].current, tp),
            )
            if movable:
                owned[giver].remove(movable[0])
                owned[taker].add(movable[0])
                return True
    return False


def range_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> dict[str, Assignment]:
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for topic in sorted({t for spec in members.values() for t in spec.topics if t in topics}):
        subs = sorted(
            (m for m in members if topic in members[m].topics), key=lambda m: (members[m].instance_id or m, m)
        )
        count = topics[topic]
        each, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = each + (1 if i < extra else 0)
            out[m].update((topic, p) for p in range(start, start + n))
            start += n
    return {m: frozenset(tps) for m, tps in out.items()}
