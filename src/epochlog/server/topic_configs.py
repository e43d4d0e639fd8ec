"""Topic-level configs: names, the broker property each defaults to, and Kafka's defaults."""

from __future__ import annotations

from epochlog.server.config import BrokerConfig

# topic config -> (broker property that supplies the default, Kafka's default value)
TOPIC_CONFIGS: dict[str, tuple[str, str]] = {
    "cleanup.policy": ("log.cleanup.policy", "delete"),
    "compression.type": ("compression.type", "producer"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "86400000"),
    "flush.messages": ("log.flush.interval.messages", "9223372036854775807"),
    "flush.ms": ("log.flush.interval.ms", "9223372036854775807"),
    "max.message.bytes": ("message.max.bytes", "1048588"),
    "message.timestamp.type": ("log.message.timestamp.type", "CreateTime"),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms", "9223372036854775807"),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms", "3600000"),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", "9223372036854775807"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "0.5"),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", "0"),
    "min.insync.replicas": ("min.insync.replicas", "1"),
    "retention.bytes": ("log.retention.bytes", "-1"),
    "retention.ms": ("log.retention.ms", "604800000"),
    "segment.bytes": ("log.segment.bytes", "1073741824"),
    "segment.ms": ("log.roll.ms", "604800000"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false"),
}

# DescribeConfigs config_source values
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def effective_topic_configs(broker_config: BrokerConfig, overrides: dict[str, str]) -> list[tuple[str, str, int]]:
    """(name, value, source) for every known topic config, as DescribeConfigs reports them."""
    rows = []
    for name, (broker_key, default) in sorted(TOPIC_CONFIGS.items()):
        if name in overrides:
            rows.append((name, overrides[name], SOURCE_DYNAMIC_TOPIC))
        elif broker_key in broker_config.raw:
            rows.append((name, broker_config.raw[broker_key], SOURCE_STATIC_BROKER))
        else:
            rows.append((name, default, SOURCE_DEFAULT))
    for name, value in sorted(overrides.items()):
        if name not in TOPIC_CONFIGS:
            rows.append((name, value, SOURCE_DYNAMIC_TOPIC))
    return rows


def unknown_configs(configs: dict[str, str]) -> list[str]:
    return [k for k in configs if k not in TOPIC_CONFIGS]
