"""The share coordinator's records (``__share_group_state``), how they combine, and the coordinator's fencing.

A share-partition's durable state is its start offset (SPSO), its state epoch and state batches: offset ranges
with a delivery state (AVAILABLE, ACKNOWLEDGED, ARCHIVED: the ids of Kafka's RecordState) and a delivery count.
Offsets at or past the start offset that no batch covers were never delivered. The records are named after
Kafka's: a ShareSnapshot holds the whole state, a ShareUpdate what one write changed; the coordinator writes a
snapshot first and then after every ``share.coordinator.snapshot.update.records.per.snapshot`` updates, so a
compacted topic keeps the latest snapshot and the updates since.

Combining batches: a later batch wins for every offset it covers, batches below the start offset go, and
neighbours with the same state and count merge. (Kafka's PersisterStateBatchCombiner reaches the same result
for the writes a leader makes, which never overlap with older state except to replace it.)

``ShareStateStore`` is the coordinator shard, sans-IO: a write from a leader with an older leader epoch than
one seen is FENCED_LEADER_EPOCH, one with an older state epoch FENCED_STATE_EPOCH; a read records the reader's
leader epoch, so a new leader's first read fences its predecessor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from epochlog.codes import Err
from epochlog.groups.share.model import SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT

SharePartitionKey = tuple[str, str, int]  # group id, topic, partition


@dataclass(frozen=True, order=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareSnapshot:
    group_id: str
    topic: str
    partition: int
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]

    @property
    def key(self) -> SharePartitionKey:
        return self.group_id, self.topic, self.partition


@dataclass(frozen=True)
class ShareUpdate:
    group_id: str
    topic: str
    partition: int
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    state_batches: tuple[StateBatch, ...]

    @property
    def key(self) -> SharePartitionKey:
        return self.group_id, self.topic, self.partition


Record = ShareSnapshot | ShareUpdate


@dataclass(frozen=True)
class PartitionState:
    """What ReadShareGroupState answers: the share-partition as the records leave it."""

    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1  # -1: never initialized
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0
    updates_since_snapshot: int = 0


def _cut(batches: Iterable[StateBatch], first: int, last: int) -> list[StateBatch]:
    out: list[StateBatch] = []
    for b in batches:
        if b.last_offset < first or b.first_offset > last:
            out.append(b)
            continue
        if b.first_offset < first:
            out.append(replace(b, last_offset=first - 1))
        if b.last_offset > last:
            out.append(replace(b, first_offset=last + 1))
    return out


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    out = list(so_far)
    for b in new:
        out = _cut(out, b.first_offset, b.last_offset)
        out.append(b)
    pruned: list[StateBatch] = []
    for b in sorted(out):
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = replace(b, first_offset=start_offset)
        prev = pruned[-1] if pruned else None
        if (
            prev is not None
            and prev.last_offset + 1 == b.first_offset
            and (prev.delivery_state, prev.delivery_count) == (b.delivery_state, b.delivery_count)
        ):
            pruned[-1] = replace(prev, last_offset=b.last_offset)
        else:
            pruned.append(b)
    return tuple(pruned)


def apply(states: dict[SharePartitionKey, PartitionState], r: Record) -> None:
    if isinstance(r, ShareSnapshot):
        states[r.key] = PartitionState(
            r.state_epoch,
            r.leader_epoch,
            r.start_offset,
            combine((), r.state_batches, r.start_offset),
            r.snapshot_epoch,
        )
        return
    cur = states.get(r.key, PartitionState())
    start = cur.start_offset if r.start_offset == -1 else r.start_offset
    states[r.key] = PartitionState(
        cur.state_epoch,
        max(cur.leader_epoch, r.leader_epoch),
        start,
        combine(cur.batches, r.state_batches, start),
        cur.snapshot_epoch,
        cur.updates_since_snapshot + 1,
    )


def replay(records: Iterable[Record]) -> dict[SharePartitionKey, PartitionState]:
    """Every share-partition's state as the records leave it: what a share coordinator taking over has."""
    states: dict[SharePartitionKey, PartitionState] = {}
    for r in records:
        apply(states, r)
    return states


@dataclass
class ShareStateStore:
    """One share coordinator's share-partition states (a shard of ``__share_group_state``)."""

    states: dict[SharePartitionKey, PartitionState] = field(default_factory=dict)
    # The newest leader epoch a reader announced; not in the records (Kafka keeps it in memory too).
    read_epochs: dict[SharePartitionKey, int] = field(default_factory=dict)
    updates_per_snapshot: int = SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> ShareStateStore:
        return cls(replay(records))

    def _leader_epoch(self, key: SharePartitionKey) -> int:
        cur = self.states.get(key)
        return max(self.read_epochs.get(key, -1), cur.leader_epoch if cur is not None else -1)

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> tuple[int, list[Record]]:
        """InitializeShareGroupState: a fresh state (start offset, no batches) under a new state epoch."""
        cur = self.states.get(key)
        if cur is not None and state_epoch <= cur.state_epoch:
            return Err.FENCED_STATE_EPOCH, []
        snap = ShareSnapshot(*key, cur.snapshot_epoch + 1 if cur else 0, state_epoch, -1, start_offset, ())
        apply(self.states, snap)
        return Err.NONE, [snap]

    def read(self, key: SharePartitionKey, leader_epoch: int) -> tuple[int, PartitionState | None]:
        if leader_epoch < self._leader_epoch(key):
            return Err.FENCED_LEADER_EPOCH, None
        self.read_epochs[key] = leader_epoch
        return Err.NONE, self.states.get(key)

    def delete(self, key: SharePartitionKey) -> bool:
        """DeleteShareGroupState: the state is gone (its records are to be tombstoned); False if there was none."""
        self.read_epochs.pop(key, None)
        return self.states.pop(key, None) is not None

    def write(
        self,
        key: SharePartitionKey,
        leader_epoch: int,
        state_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> tuple[int, list[Record]]:
        """WriteShareGroupState: the records to append (and already applied here), or why not."""
        if leader_epoch < self._leader_epoch(key):
            return Err.FENCED_LEADER_EPOCH, []
        cur = self.states.get(key)
        if cur is not None and state_epoch < cur.state_epoch:
            return Err.FENCED_STATE_EPOCH, []
        rec: Record
        if cur is None or cur.updates_since_snapshot >= self.updates_per_snapshot:
            start = start_offset if start_offset != -1 or cur is None else cur.start_offset
            merged = combine(cur.batches if cur else (), batches, start)
            epoch = cur.snapshot_epoch + 1 if cur else 0
            rec = ShareSnapshot(*key, epoch, max(state_epoch, 0), leader_epoch, start, merged)
        else:
            rec = ShareUpdate(*key, cur.snapshot_epoch, leader_epoch, start_offset, tuple(batches))
        apply(self.states, rec)
        return Err.NONE, [rec]
