"""Share-group facts with Kafka's names and numbers: record states, acknowledge types, configs."""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]
Assignment = frozenset[TopicPartition]
NO_PARTITIONS: Assignment = frozenset()

# A record's delivery state (Kafka's RecordState ids; the persisted state batches hold 0, 2 and 4 only:
# an acquisition lock does not outlive its leader).
AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}
TERMINAL = frozenset({ACKNOWLEDGED, ARCHIVED})

# AcknowledgeType ids of ShareFetch/ShareAcknowledge. GAP marks offsets the log does not have (compaction).
GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3
ACK_TYPES = frozenset({GAP, ACCEPT, RELEASE, REJECT})

# Member epochs with a meaning of their own in ShareGroupHeartbeat.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1

GROUP_EMPTY = "Empty"
GROUP_STABLE = "Stable"

AUTO_OFFSET_RESETS = ("earliest", "latest")

# The group config share.isolation.level (Kafka 4.1).
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


@dataclass(frozen=True)
class SharePartitionConfig:
    """The broker's ``group.share.*`` configs that bind one share-partition, and the group's own."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms (group: share.record.lock.duration.ms)
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks: records in flight per partition
    auto_offset_reset: str = "latest"  # the group config share.auto.offset.reset


@dataclass(frozen=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


# The share coordinator writes a full ShareSnapshot after this many ShareUpdates of a share-partition.
SNAPSHOT_UPDATE_RECORDS_PER_SNAPSHOT = 500  # share.coordinator.snapshot.update.records.per.snapshot
