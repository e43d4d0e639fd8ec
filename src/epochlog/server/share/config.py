"""The broker's share-group settings, with Kafka's property names, defaults and bounds."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.config_error import ConfigError
from epochlog.groups.share.model import SharePartitionConfig


def _int(props: dict[str, str], key: str, default: int, lo: int, hi: int = 2**31 - 1) -> int:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{key}={value} is outside [{lo}, {hi}]")
    return value


@dataclass(frozen=True)
class ShareConfig:
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    max_share_sessions: int = 2_000  # group.share.max.share.sessions
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    state_topic_num_partitions: int = 50  # share.coordinator.state.topic.num.partitions
    state_topic_replication_factor: int = 3  # share.coordinator.state.topic.replication.factor
    state_topic_min_isr: int = 2  # share.coordinator.state.topic.min.isr
    state_topic_segment_bytes: int = 104_857_600  # share.coordinator.state.topic.segment.bytes
    write_timeout_ms: int = 5_000  # share.coordinator.write.timeout.ms

    @classmethod
    def from_properties(cls, p: dict[str, str]) -> ShareConfig:
        return cls(
            record_lock_duration_ms=_int(p, "group.share.record.lock.duration.ms", 30_000, 1_000, 3_600_000),
            delivery_count_limit=_int(p, "group.share.delivery.count.limit", 5, 2, 10),
            max_record_locks=_int(p, "group.share.partition.max.record.locks", 2_000, 100, 10_000),
            max_share_sessions=_int(p, "group.share.max.share.sessions", 2_000, 1),
            session_timeout_ms=_int(p, "group.share.session.timeout.ms", 45_000, 1),
            heartbeat_interval_ms=_int(p, "group.share.heartbeat.interval.ms", 5_000, 1),
            max_size=_int(p, "group.share.max.size", 200, 1, 1_000),
            state_topic_num_partitions=_int(p, "share.coordinator.state.topic.num.partitions", 50, 1),
            state_topic_replication_factor=_int(p, "share.coordinator.state.topic.replication.factor", 3, 1, 32767),
            state_topic_min_isr=_int(p, "share.coordinator.state.topic.min.isr", 2, 1, 32767),
            state_topic_segment_bytes=_int(p, "share.coordinator.state.topic.segment.bytes", 104_857_600, 1024),
            write_timeout_ms=_int(p, "share.coordinator.write.timeout.ms", 5_000, 1),
        )

    def partition_config(self) -> SharePartitionConfig:
        return SharePartitionConfig(self.record_lock_duration_ms, self.delivery_count_limit, self.max_record_locks)
