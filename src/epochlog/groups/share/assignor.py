"""The share groups' ``simple`` assignor: every subscribed partition to at least one member, spread evenly.

A share group's members may share a partition (the partition's leader hands out records, not the assignor),
so the simple assignor does not need one owner per partition; it needs every partition read and the members'
loads even. Per topic, over the members subscribed to it (sorted, so every coordinator computes the same):
with no more members than partitions, partition i goes to member i mod m; with more members than partitions,
member j gets partition j mod p, so each partition has m/p members, give or take one. (Kafka's first
SimpleAssignor gave every member every partition; Kafka 4.1's spreads them, as this one does.)
"""

from __future__ import annotations

from collections.abc import Mapping

from epochlog.groups.share.model import Assignment, TopicPartition


def simple_assign(subscriptions: Mapping[str, frozenset[str]], topics: Mapping[str, int]) -> dict[str, Assignment]:
    out: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic in sorted({t for subs in subscriptions.values() for t in subs if topics.get(t, 0) > 0}):
        members = sorted(m for m, subs in subscriptions.items() if topic in subs)
        count = topics[topic]
        if len(members) <= count:
            for p in range(count):
                out[members[p % len(members)]].add((topic, p))
        else:
            for j, m in enumerate(members):
                out[m].add((topic, j % count))
    return {m: frozenset(tps) for m, tps in out.items()}
