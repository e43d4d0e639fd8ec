"""Per-log configuration with Kafka's names and defaults (broker-level and topic-level)."""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A log configuration value that cannot be used; the message names the property."""


# field -> (topic-level name, broker-level names)
_NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "segment_bytes": ("segment.bytes", ("log.segment.bytes",)),
    "segment_ms": ("segment.ms", ("log.roll.ms", "log.roll.hours")),
    "retention_ms": ("retention.ms", ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    "retention_bytes": ("retention.bytes", ("log.retention.bytes",)),
    "flush_interval_messages": ("flush.messages", ("log.flush.interval.messages",)),
    "flush_interval_ms": ("flush.ms", ("log.flush.interval.ms",)),
    "index_interval_bytes": ("index.interval.bytes", ("log.index.interval.bytes",)),
    "segment_index_bytes": ("segment.index.bytes", ("log.index.size.max.bytes",)),
    "max_message_bytes": ("max.message.bytes", ("message.max.bytes",)),
    "timestamp_before_max_ms": ("message.timestamp.before.max.ms", ("log.message.timestamp.before.max.ms",)),
    "timestamp_after_max_ms": ("message.timestamp.after.max.ms", ("log.message.timestamp.after.max.ms",)),
    "delete_retention_ms": ("delete.retention.ms", ("log.cleaner.delete.retention.ms",)),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", ("log.cleaner.min.compaction.lag.ms",)),
    "max_compaction_lag_ms": ("max.compaction.lag.ms", ("log.cleaner.max.compaction.lag.ms",)),
}
_UNIT = {"log.roll.hours": 3_600_000, "log.retention.minutes": 60_000, "log.retention.hours": 3_600_000}


@dataclass
class LogConfig:
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10_485_760
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    # How far a CreateTime timestamp may lie before / after the broker's clock (Kafka's defaults; KIP-1030
    # made the future bound one hour).
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = 3_600_000
    # Compaction (cleanup.policy=compact): how long tombstones outlive the cleaning that first saw them,
    # how old a record must be before it may be cleaned, how long a dirty record may wait at most, and
    # the share of dirty bytes that makes a log worth cleaning (Kafka's names and defaults).
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

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
    def from_properties(cls, props: dict[str, str]) -> LogConfig:
        """Broker names (log.segment.bytes) and topic names (segment.bytes); topic names win."""
        c = cls()
        for fname, (topic_name, broker_names) in _NAMES.items():
            # Kafka's precedence: ms over minutes over hours at the broker level.
            raw_name = next((n for n in (topic_name, *broker_names) if props.get(n, "") != ""), None)
            if raw_name is None:
                continue
            raw = props[raw_name]
            try:
                value = int(raw) * _UNIT.get(raw_name, 1)
            except ValueError:
                raise ConfigError(f"{raw_name}={raw!r} is not an integer") from None
            setattr(c, fname, value)
        ts = props.get("message.timestamp.type") or props.get("log.message.timestamp.type")
        if ts:
            if ts not in ("CreateTime", "LogAppendTime"):
                raise ConfigError(f"message.timestamp.type={ts!r} must be CreateTime or LogAppendTime")
            c.message_timestamp_type = ts
        policy = props.get("cleanup.policy") or props.get("log.cleanup.policy")
        if policy:
            for p in policy.split(","):
                if p.strip() not in ("delete", "compact"):
                    raise ConfigError(f"cleanup.policy={policy!r}: each entry must be delete or compact")
            c.cleanup_policy = policy
        ratio_name = next(
            (n for n in ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio") if props.get(n, "") != ""),
            None,
        )
        if ratio_name is not None:
            try:
                c.min_cleanable_dirty_ratio = float(props[ratio_name])
            except ValueError:
                raise ConfigError(f"{ratio_name}={props[ratio_name]!r} is not a number") from None
            if not 0.0 <= c.min_cleanable_dirty_ratio <= 1.0:
                raise ConfigError(f"{ratio_name}={props[ratio_name]} must be between 0 and 1")
        for name, value in (
            ("delete.retention.ms", c.delete_retention_ms),
            ("min.compaction.lag.ms", c.min_compaction_lag_ms),
        ):
            if value < 0:
                raise ConfigError(f"{name}={value} must not be negative")
        if c.max_compaction_lag_ms < 1:
            raise ConfigError(f"max.compaction.lag.ms={c.max_compaction_lag_ms} must be at least 1")
        if c.segment_bytes < 14:
            raise ConfigError(f"segment.bytes={c.segment_bytes} is below the minimum 14")
        if c.segment_ms < 1:
            raise ConfigError(f"segment.ms={c.segment_ms} must be at least 1")
        if c.index_interval_bytes < 0:
            raise ConfigError(f"index.interval.bytes={c.index_interval_bytes} must not be negative")
        if c.flush_interval_messages < 1:
            raise ConfigError(f"flush.messages={c.flush_interval_messages} must be at least 1")
        for name, value in (
            ("message.timestamp.before.max.ms", c.timestamp_before_max_ms),
            ("message.timestamp.after.max.ms", c.timestamp_after_max_ms),
        ):
            if value < 0:
                raise ConfigError(f"{name}={value} must not be negative")
        if c.max_message_bytes < 0:
            raise ConfigError(f"max.message.bytes={c.max_message_bytes} must not be negative")
        return c
