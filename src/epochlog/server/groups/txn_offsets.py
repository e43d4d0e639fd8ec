"""Offsets committed inside a transaction (TxnOffsetCommit): held per producer until the transaction's
marker reaches the group's ``__consumer_offsets`` partition, then made visible (COMMIT) or dropped
(ABORT). The same rule replays the log at load: a transactional batch's offsets wait for the marker
that follows it."""

from __future__ import annotations

from collections import defaultdict

from epochlog.groups.model import OffsetValue

TopicPartition = tuple[str, int]


class PendingTxnOffsets:
    def __init__(self) -> None:
        # producer id -> group -> partition -> offset
        self.by_producer: dict[int, dict[str, dict[TopicPartition, OffsetValue]]] = defaultdict(dict)

    def add(self, producer_id: int, group_id: str, tp: TopicPartition, value: OffsetValue) -> None:
        self.by_producer[producer_id].setdefault(group_id, {})[tp] = value

    def take(self, producer_id: int, in_partition: set[str]) -> dict[str, dict[TopicPartition, OffsetValue]]:
        """Remove and return the producer's offsets of the groups named (those of one partition)."""
        groups = self.by_producer.get(producer_id, {})
        out = {g: groups.pop(g) for g in list(groups) if g in in_partition}
        if not groups:
            self.by_producer.pop(producer_id, None)
        return out

    def pending_for(self, group_id: str, tp: TopicPartition) -> bool:
        """An offset of this partition waits for a transaction (OffsetFetch's require_stable)."""
        return any(tp in groups.get(group_id, {}) for groups in self.by_producer.values())

    def groups(self) -> set[str]:
        return {g for groups in self.by_producer.values() for g in groups}

    def drop_groups(self, group_ids: set[str]) -> None:
        for pid in list(self.by_producer):
            groups = self.by_producer[pid]
            for g in group_ids & set(groups):
                del groups[g]
            if not groups:
                del self.by_producer[pid]
