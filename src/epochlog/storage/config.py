"""Per-log configuration: the topic configs a partition's log runs with, read through config_defs' table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.config_defs import TOPIC_CONFIGS, topic_setting, typed, validate_value


class ConfigError(ValueError):
    """A log configuration value that cannot be used; the message names the property."""


# LogConfig attribute -> the topic config it holds. Names, types, defaults and bounds are config_defs'.
_FIELDS: dict[str, str] = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "flush_interval_messages": "flush.messages",
    "flush_interval_ms": "flush.ms",
    "index_interval_bytes": "index.interval.bytes",
    "segment_index_bytes": "segment.index.bytes",
    "max_message_bytes": "max.message.bytes",
    "message_timestamp_type": "message.timestamp.type",
    "cleanup_policy": "cleanup.policy",
    "timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "delete_retention_ms": "delete.retention.ms",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
}


def _int(name: str) -> int:
    return int(TOPIC_CONFIGS[name].default)


@dataclass
class LogConfig:
    segment_bytes: int = _int("segment.bytes")
    segment_ms: int = _int("segment.ms")
    retention_ms: int = _int("retention.ms")
    retention_bytes: int = _int("retention.bytes")
    flush_interval_messages: int = _int("flush.messages")
    flush_interval_ms: int = _int("flush.ms")
    index_interval_bytes: int = _int("index.interval.bytes")
    segment_index_bytes: int = _int("segment.index.bytes")
    max_message_bytes: int = _int("max.message.bytes")
    message_timestamp_type: str = TOPIC_CONFIGS["message.timestamp.type"].default
    cleanup_policy: str = TOPIC_CONFIGS["cleanup.policy"].default
    # How far a CreateTime timestamp may lie before / after the broker's clock (KIP-1030 made the future
    # bound one hour).
    timestamp_before_max_ms: int = _int("message.timestamp.before.max.ms")
    timestamp_after_max_ms: int = _int("message.timestamp.after.max.ms")
    # Compaction (cleanup.policy=compact): how long tombstones outlive the cleaning that first saw them,
    # how old a record must be before it may be cleaned, how long a dirty record may wait at most, and
    # the share of dirty bytes that makes a log worth cleaning.
    delete_retention_ms: int = _int("delete.retention.ms")
    min_compaction_lag_ms: int = _int("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _int("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = float(TOPIC_CONFIGS["min.cleanable.dirty.ratio"].default)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The age at which the active segment rolls: a compacted log rolls by max.compaction.lag.ms too,
        since the active segment is never cleaned (Kafka's LogConfig.maxSegmentMs)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """Broker names (log.segment.bytes, log.retention.hours) and topic names (segment.bytes); topic
        names win. Each value is checked as the controller checks it (config_defs.validate_value)."""
        c = cls()
        for attr, topic_name in _FIELDS.items():
            d = TOPIC_CONFIGS[topic_name]
            found = topic_setting(d, props)
            if found is None:
                continue
            name, value = found
            problem = validate_value(d, value, name)
            if problem:
                raise ConfigError(problem)
            setattr(c, attr, typed(d, value))
        return c
