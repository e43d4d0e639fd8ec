"""The coordinator's settings, named after Kafka's broker properties, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GroupConfig:
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    offsets_retention_ms: int = 10080 * 60_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    # KIP-848 consumer groups (group.protocol=consumer), Kafka's names and defaults.
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default
    # KIP-932 share groups, Kafka's names and defaults.
    share_session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    share_heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    share_max_size: int = 200  # group.share.max.size
    # How often the background task looks for expired sessions and rebalance deadlines: the
    # resolution of every group timer (Kafka uses a timing wheel; 100 ms is plenty for timeouts
    # measured in seconds).
    tick_interval_ms: int = 100
