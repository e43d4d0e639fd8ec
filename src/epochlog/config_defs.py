"""Which configs exist, their types, defaults and bounds, and which broker configs may change at runtime.

The one table of config definitions. The controller validates CreateTopics and the *AlterConfigs against
it (Kafka's LogConfig and DynamicBrokerConfig rules), the brokers describe configs from it and build each
log's LogConfig (storage/config.py) through it, and `epochlog configs` checks values with it before
sending: a value one accepts, the others accept. Names, defaults and bounds are Kafka's. A topic config
falls back to its broker synonym (``retention.ms`` -> ``log.retention.ms``); that synonym is what a
per-broker or cluster-wide dynamic config sets.

A leaf module (it imports nothing from epochlog), so that storage/ and the controller can both use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# Resource types of the *Configs APIs.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32


class ConfigType(IntEnum):
    """DescribeConfigs' config_type values."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source values."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_GROUP_CONFIG = 8


@dataclass(frozen=True)
class ConfigDef:
    name: str  # the topic-level name
    type: ConfigType
    default: str
    broker_name: str  # the broker config that supplies the default, and that dynamic broker configs set
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""
    # Older broker spellings read from server.properties (in precedence order after broker_name) and the
    # factor that turns their unit into the topic config's.
    static_aliases: tuple[tuple[str, int], ...] = ()
    # Values allowed outside [minimum, maximum] (compression.gzip.level's -1, zlib's default level).
    also_allowed: tuple[int, ...] = ()


# The start of the documentation of a config that is accepted, stored and described but that epochlog's
# storage does not act on (no tiered storage, no recompression, no preallocation): a client that writes
# back what it described must not fail, and nobody must believe the setting does something here.
NOT_ACTED_ON = "Accepted for compatibility; epochlog does not act on it. "


_DEFS = (
    ConfigDef(
        "cleanup.policy", ConfigType.LIST, "delete", "log.cleanup.policy", choices=("compact", "delete"),
        doc="delete old segments, compact to the latest value per key, or both",
    ),
    ConfigDef(
        "compression.gzip.level", ConfigType.INT, "-1", "compression.gzip.level", minimum=1, maximum=9,
        also_allowed=(-1,), doc=NOT_ACTED_ON + "the gzip level a recompressing broker would use (-1: zlib's default)",
    ),
    ConfigDef(
        "compression.lz4.level", ConfigType.INT, "9", "compression.lz4.level", minimum=1, maximum=17,
        doc=NOT_ACTED_ON + "the lz4 level a recompressing broker would use",
    ),
    ConfigDef(
        "compression.type", ConfigType.STRING, "producer", "compression.type",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        doc=NOT_ACTED_ON + "batches are stored as the producer compressed them, whatever the value",
    ),
    ConfigDef(
        "compression.zstd.level", ConfigType.INT, "3", "compression.zstd.level", minimum=-131072, maximum=22,
        doc=NOT_ACTED_ON + "the zstd level a recompressing broker would use",
    ),
    ConfigDef(
        "delete.retention.ms", ConfigType.LONG, "86400000", "log.cleaner.delete.retention.ms", minimum=0,
        doc="how long a compacted topic keeps a tombstone after the cleaning that first kept it",
    ),
    ConfigDef(
        "file.delete.delay.ms", ConfigType.LONG, "60000", "log.segment.delete.delay.ms", minimum=0,
        doc=NOT_ACTED_ON + "segment files are deleted as soon as retention or compaction drops them",
    ),
    ConfigDef(
        "flush.messages", ConfigType.LONG, str(LONG_MAX), "log.flush.interval.messages", minimum=1,
        doc="fsync after this many messages",
    ),
    ConfigDef("flush.ms", ConfigType.LONG, str(LONG_MAX), "log.flush.interval.ms", minimum=0, doc="fsync this often"),
    ConfigDef(
        "index.interval.bytes", ConfigType.INT, "4096", "log.index.interval.bytes", minimum=0,
        doc="bytes between offset index entries",
    ),
    ConfigDef(
        "local.retention.bytes", ConfigType.LONG, "-2", "log.local.retention.bytes", minimum=-2,
        doc=NOT_ACTED_ON + "the local share of a tiered log (-2: retention.bytes); epochlog has no tiered storage",
    ),
    ConfigDef(
        "local.retention.ms", ConfigType.LONG, "-2", "log.local.retention.ms", minimum=-2,
        doc=NOT_ACTED_ON + "the local share of a tiered log (-2: retention.ms); epochlog has no tiered storage",
    ),
    ConfigDef(
        "max.message.bytes", ConfigType.INT, "1048588", "message.max.bytes", minimum=0,
        doc="the largest record batch accepted",
    ),
    ConfigDef(
        "max.compaction.lag.ms", ConfigType.LONG, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms", minimum=1,
        doc="the longest a record may stay uncompacted",
    ),
    ConfigDef(
        "message.timestamp.after.max.ms", ConfigType.LONG, "3600000", "log.message.timestamp.after.max.ms",
        minimum=0, doc="how far in the future a CreateTime timestamp may be",
    ),
    ConfigDef(
        "message.timestamp.before.max.ms", ConfigType.LONG, str(LONG_MAX), "log.message.timestamp.before.max.ms",
        minimum=0, doc="how far in the past a CreateTime timestamp may be",
    ),
    ConfigDef(
        "message.timestamp.type", ConfigType.STRING, "CreateTime", "log.message.timestamp.type",
        choices=("CreateTime", "LogAppendTime"), doc="whose timestamp records carry",
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio", minimum=0,
        maximum=1, doc="the share of a compacted log that must be uncleaned before the cleaner takes it",
    ),
    ConfigDef(
        "min.compaction.lag.ms", ConfigType.LONG, "0", "log.cleaner.min.compaction.lag.ms", minimum=0,
        doc="the shortest a record stays uncompacted",
    ),
    ConfigDef(
        "min.insync.replicas", ConfigType.INT, "1", "min.insync.replicas", minimum=1,
        doc="in-sync replicas an acks=all produce needs",
    ),
    ConfigDef(
        "preallocate", ConfigType.BOOLEAN, "false", "log.preallocate",
        doc=NOT_ACTED_ON + "segment files grow as they are written",
    ),
    ConfigDef(
        "retention.bytes", ConfigType.LONG, "-1", "log.retention.bytes",
        doc="delete old segments beyond this partition size; -1: no limit",
    ),
    ConfigDef(
        "retention.ms", ConfigType.LONG, "604800000", "log.retention.ms", minimum=-1,
        doc="delete segments older than this; -1: no limit",
        static_aliases=(("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    ),
    ConfigDef(
        "segment.bytes", ConfigType.INT, "1073741824", "log.segment.bytes", minimum=14,
        doc="roll a new segment at this size",
    ),
    ConfigDef(
        "segment.index.bytes", ConfigType.INT, "10485760", "log.index.size.max.bytes", minimum=4,
        doc=NOT_ACTED_ON + "offset indexes are not preallocated to a size",
    ),
    ConfigDef(
        "segment.jitter.ms", ConfigType.LONG, "0", "log.roll.jitter.ms", minimum=0,
        doc=NOT_ACTED_ON + "segments roll at segment.ms exactly",
        static_aliases=(("log.roll.jitter.hours", 3_600_000),),
    ),
    ConfigDef(
        "segment.ms", ConfigType.LONG, "604800000", "log.roll.ms", minimum=1,
        doc="roll a new segment after this long", static_aliases=(("log.roll.hours", 3_600_000),),
    ),
    ConfigDef(
        "unclean.leader.election.enable", ConfigType.BOOLEAN, "false", "unclean.leader.election.enable",
        doc="elect an out-of-sync replica when no in-sync one is left (may lose data)",
    ),
)

# Replication throttles (Kafka's QuotaConfigs), which reassign-partitions --throttle sets: a topic names the
# replicas whose replication is throttled ("*" or partition:broker pairs), on the leader's side (the
# brokers that send) and on the followers' (the brokers that fetch); each broker caps the bytes per second
# it sends or fetches for those replicas while they are out of the ISR. The topic configs have no broker
# synonym and the rates no topic counterpart.
THROTTLED_REPLICAS_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
# Tiered storage (KIP-405): epochlog has none. remote.storage.enable=true is refused as Kafka refuses it on
# a broker whose remote.log.storage.system.enable is false; the other two are accepted.
REMOTE_STORAGE_ENABLE = "remote.storage.enable"
REMOTE_STORAGE_DISABLED = (
    "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
)
_TOPIC_ONLY = (
    ConfigDef(
        "remote.log.copy.disable", ConfigType.BOOLEAN, "false", "",
        doc=NOT_ACTED_ON + "epochlog has no tiered storage",
    ),
    ConfigDef(
        "remote.log.delete.on.disable", ConfigType.BOOLEAN, "false", "",
        doc=NOT_ACTED_ON + "epochlog has no tiered storage",
    ),
    ConfigDef(
        REMOTE_STORAGE_ENABLE, ConfigType.BOOLEAN, "false", "",
        doc="tiered storage: only false, epochlog has none (true is refused, as by a Kafka broker without it)",
    ),
    ConfigDef(
        "leader.replication.throttled.replicas", ConfigType.LIST, "", "",
        doc="replicas (partition:broker, or *) whose replication the leader throttles",
    ),
    ConfigDef(
        "follower.replication.throttled.replicas", ConfigType.LIST, "", "",
        doc="replicas (partition:broker, or *) whose replication the follower throttles",
    ),
)
_BROKER_ONLY = (
    ConfigDef(
        "leader.replication.throttled.rate", ConfigType.LONG, str(LONG_MAX), "leader.replication.throttled.rate",
        minimum=0, doc="bytes/s a leader sends to throttled replicas out of the ISR",
    ),
    ConfigDef(
        "follower.replication.throttled.rate", ConfigType.LONG, str(LONG_MAX), "follower.replication.throttled.rate",
        minimum=0, doc="bytes/s a follower fetches for its throttled replicas out of the ISR",
    ),
)

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS + _TOPIC_ONLY}
# Broker configs that change without a restart, per broker or cluster-wide (Kafka's DynamicLogConfig:
# the primary broker synonym of each topic config; and the replication throttle rates).
DYNAMIC_BROKER_CONFIGS: dict[str, ConfigDef] = {d.broker_name: d for d in _DEFS + _BROKER_ONLY}
# Broker configs epochlog knows that only server.properties sets: altering them is INVALID_CONFIG.
STATIC_BROKER_CONFIGS = frozenset(
    {
        "advertised.listeners", "auto.create.topics.enable", "auto.leader.rebalance.enable",
        "broker.heartbeat.interval.ms", "broker.id", "broker.session.timeout.ms", "cluster.id",
        "connections.max.idle.ms", "controlled.shutdown.enable", "controller.listener.names",
        "controller.quorum.bootstrap.servers", "controller.quorum.voters", "default.replication.factor",
        "delete.topic.enable", "fetch.max.bytes", "group.consumer.assignors",
        "group.consumer.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.session.timeout.ms",
        "group.initial.rebalance.delay.ms",
        "group.max.session.timeout.ms", "group.min.session.timeout.ms", "leader.imbalance.check.interval.seconds",
        "leader.imbalance.per.broker.percentage", "listeners", "log.dir", "log.dir.failure.timeout.ms", "log.dirs",
        "log.retention.check.interval.ms", "log.retention.hours", "log.retention.minutes", "log.roll.hours",
        "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
        "max.incremental.fetch.session.cache.slots", "node.id",
        "num.partitions", "offsets.commit.timeout.ms", "offsets.retention.minutes", "offsets.topic.num.partitions",
        "offsets.topic.replication.factor", "process.roles", "producer.id.expiration.ms", "queued.max.request.bytes",
        "replica.fetch.backoff.ms", "replica.fetch.max.bytes", "replica.fetch.response.max.bytes",
        "replica.fetch.wait.max.ms", "replica.lag.time.max.ms", "request.timeout.ms", "socket.request.max.bytes",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", "transaction.max.timeout.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms", "transaction.state.log.min.isr",
        "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
        "transaction.state.log.segment.bytes", "transactional.id.expiration.ms",
    }
)


def broker_config_def(name: str) -> ConfigDef | None:
    return DYNAMIC_BROKER_CONFIGS.get(name)


def is_list(d: ConfigDef) -> bool:
    return d.type is ConfigType.LIST


def split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def validate_value(d: ConfigDef, value: str, as_name: str | None = None) -> str | None:
    """Why ``value`` is not a valid value of ``d`` (Kafka's message shape), or None if it is."""
    name = as_name or d.name
    bad = f"Invalid value {value} for configuration {name}"
    if d.type is ConfigType.BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            return f"{bad}: Expected value to be either true or false"
        if d.name == REMOTE_STORAGE_ENABLE and value.strip().lower() == "true":
            return REMOTE_STORAGE_DISABLED
        return None
    if d.type in (ConfigType.INT, ConfigType.LONG):
        try:
            n = int(value.strip())
        except ValueError:
            return f"{bad}: Not a number of type {d.type.name}"
        top = INT_MAX if d.type is ConfigType.INT else LONG_MAX
        if not -top - 1 <= n <= top:
            return f"{bad}: Not a number of type {d.type.name}"
        if n in d.also_allowed:
            return None
        problem = _range_problem(d, n, bad)
        if problem and d.also_allowed:
            allowed = " or ".join(str(v) for v in d.also_allowed)
            return f"{bad}: Value must be between {d.minimum} and {d.maximum} or equal to {allowed}"
        return problem
    if d.type is ConfigType.DOUBLE:
        try:
            x = float(value)
        except ValueError:
            return f"{bad}: Not a number of type DOUBLE"
        if x != x:  # NaN passes every comparison
            return f"{bad}: Not a number of type DOUBLE"
        return _range_problem(d, x, bad)
    if d.name in THROTTLED_REPLICAS_CONFIGS:
        return throttled_replicas_problem(value, bad)
    if d.type is ConfigType.LIST:
        return _list_problem(d, value, name, bad)
    if d.choices and value not in d.choices:
        return f"{bad}: String must be one of: {', '.join(d.choices)}"
    return None


def list_items(value: str) -> list[str]:
    """A list config's items as Kafka's ConfigDef parses them: blank is the empty list, otherwise every
    comma-separated item trimmed, empty items kept (for the validator to refuse)."""
    return [] if not value.strip() else [v.strip() for v in value.strip().split(",")]


def _list_problem(d: ConfigDef, value: str, name: str, bad: str) -> str | None:
    """Kafka 4.2's ValidList (KIP-1161): the empty list is a value (cleanup.policy empty: neither delete
    nor compact, the log is kept whole), no item may be empty or repeated, each one of the choices."""
    items = list_items(value)
    if len(set(items)) != len(items):
        return f"Configuration '{name}' values must not be duplicated."
    if any(not i for i in items):
        return f"Configuration '{name}' values must not be empty."
    if d.choices and any(i not in d.choices for i in items):
        return f"{bad}: String must be one of: {', '.join(d.choices)}"
    return None


def _range_problem(d: ConfigDef, x: float, bad: str) -> str | None:
    if d.minimum is not None and x < d.minimum:
        return f"{bad}: Value must be at least {d.minimum}"
    if d.maximum is not None and x > d.maximum:
        return f"{bad}: Value must be no more than {d.maximum}"
    return None


def typed(d: ConfigDef, value: str) -> int | float | bool | str:
    """A value that validate_value accepted, as the Python type of its config."""
    if d.type in (ConfigType.INT, ConfigType.LONG):
        return int(value.strip())
    if d.type is ConfigType.DOUBLE:
        return float(value)
    if d.type is ConfigType.BOOLEAN:
        return value.strip().lower() == "true"
    return value


def in_topic_unit(raw: str, factor: int) -> str:
    """An older broker spelling's value (log.retention.hours=2) in its topic config's unit. A negative count
    means no limit, as Kafka reads these (-1). Not a number: returned as it is, for validate_value to name."""
    if factor == 1:
        return raw
    try:
        n = int(raw.strip())
    except ValueError:
        return raw
    return str(-1 if n < 0 else n * factor)


def topic_setting(d: ConfigDef, props: Mapping[str, str]) -> tuple[str, str] | None:
    """The (name, value) that sets ``d`` in a set of properties that mixes topic and broker names: the
    topic name wins, then the broker synonym, then its older spellings (converted to the topic's unit);
    None when none is set."""
    if is_list(d) and d.name in props:
        return d.name, props[d.name]  # an empty list is a value (cleanup.policy emptied by SUBTRACT)
    for name, factor in ((d.name, 1), (d.broker_name, 1), *d.static_aliases):
        if name and props.get(name, "") != "":
            return name, in_topic_unit(props[name], factor)
    return None


def parse_throttled_replicas(value: str) -> frozenset[tuple[int, int]] | None:
    """A throttled-replicas value as (partition, broker) pairs; None means "*" (every replica). Entries
    that do not parse are left out (the controller refused them when they were set)."""
    items = split_list(value)
    if items == ["*"]:
        return None
    out = set()
    for item in items:
        p, sep, b = item.partition(":")
        if sep and p.strip().isdigit() and b.strip().isdigit():
            out.add((int(p), int(b)))
    return frozenset(out)


def throttled_replicas_problem(value: str, bad: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: empty, "*" alone, or partition:broker pairs."""
    items = split_list(value)
    if items == ["*"]:
        return None
    for item in items:
        p, sep, b = item.partition(":")
        if not (sep and p.strip().isdigit() and b.strip().isdigit()):
            return f"{bad}: must be the single value '*' or a list of [partitionId]:[brokerId]"
    return None


# -- group configs (resource type GROUP, KIP-848 / KIP-932): a group's own overrides of broker settings --------

SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

_GROUP_DEFS = (
    ConfigDef(
        SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, "latest", "",
        doc="where a share-partition the group has never consumed starts: earliest, latest, or "
        "by_duration:<ISO-8601 duration> (the first record at most that long ago)",
    ),
    ConfigDef(
        SHARE_SESSION_TIMEOUT, ConfigType.INT, "45000", "group.share.session.timeout.ms", minimum=1,
        doc="how long a share group member may go without a heartbeat before it is removed",
    ),
    ConfigDef(
        SHARE_HEARTBEAT_INTERVAL, ConfigType.INT, "5000", "group.share.heartbeat.interval.ms", minimum=1,
        doc="the heartbeat interval the group coordinator gives share group members",
    ),
    ConfigDef(
        SHARE_RECORD_LOCK_DURATION, ConfigType.INT, "30000", "group.share.record.lock.duration.ms", minimum=1000,
        doc="how long a share-partition keeps a delivered record acquired by its consumer (applied when a "
        "share-partition starts at its leader)",
    ),
    ConfigDef(
        SHARE_ISOLATION_LEVEL, ConfigType.STRING, "read_uncommitted", "",
        choices=("read_committed", "read_uncommitted"),
        doc="how the group reads records written transactionally: read_committed delivers only records of "
        "committed transactions (up to the last stable offset; records of aborted transactions are archived), "
        "read_uncommitted every record up to the high watermark",
    ),
)  # fmt: skip
GROUP_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _GROUP_DEFS}

# The broker settings that bound a group's (name, default): Kafka's GroupCoordinatorConfig and ShareGroupConfig.
GROUP_BOUNDS = {
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
}

_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE
)


def parse_iso_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS), or None."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or text.strip().upper().endswith("T") or not any(m.group(i) for i in (2, 3, 4, 5)):
        return None
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 3, 4, 5))
    frac = (m.group(6) or "").ljust(9, "0")[:9]
    ms = (
        ((days * 24 + hours) * 60 + minutes) * 60_000 + secs * 1000 + (int(frac) // 1_000_000) * (-1 if secs < 0 else 1)
    )
    return -ms if m.group(1) == "-" else ms


def share_auto_offset_reset(value: str) -> tuple[str, int]:
    """("earliest"|"latest", 0) or ("by_duration", milliseconds) of a valid share.auto.offset.reset."""
    v = value.strip().lower()
    if v.startswith("by_duration:"):
        return "by_duration", parse_iso_duration_ms(value.strip()[len("by_duration:") :]) or 0
    return v, 0


def _auto_offset_reset_problem(value: str) -> str | None:
    v = value.strip().lower()
    if v in ("earliest", "latest"):
        return None
    if v.startswith("by_duration:"):
        ms = parse_iso_duration_ms(value.strip()[len("by_duration:") :])
        if ms is not None and ms >= 0:
            return None
        return f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: by_duration must be a "  \
            "non-negative ISO-8601 duration (PnDTnHnMn.nS)"  # fmt: skip
    return (
        f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: the value must be either "
        "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
    )


def group_bounds(props: Mapping[str, str]) -> dict[str, int]:
    """GROUP_BOUNDS as a node's server.properties sets them (a value that is not a number keeps the default)."""
    out = dict(GROUP_BOUNDS)
    for name in GROUP_BOUNDS:
        raw = props.get(name, "").strip()
        if raw.lstrip("-").isdigit():
            out[name] = int(raw)
    return out


def group_default(name: str, bounds: Mapping[str, int]) -> str:
    """A group config's value when the group does not set it: the broker setting it overrides."""
    d = GROUP_CONFIGS[name]
    return str(bounds[d.broker_name]) if d.broker_name in bounds else d.default


def group_value_problem(name: str, value: str) -> str | None:
    """Why one group config value is refused on its own (the broker's bounds aside), or None."""
    d = GROUP_CONFIGS.get(name)
    if d is None:
        return f"Unknown group config name: {name}"
    return _auto_offset_reset_problem(value) if name == SHARE_AUTO_OFFSET_RESET else validate_value(d, value)


def group_configs_problem(configs: Mapping[str, str], bounds: Mapping[str, int] = GROUP_BOUNDS) -> str | None:
    """Why a group's whole set of configs is refused (Kafka's GroupConfig.validate, INVALID_CONFIG), or None."""
    for name, value in configs.items():
        problem = group_value_problem(name, value)
        if problem:
            return problem
    n = {
        k: int(configs.get(k, group_default(k, bounds)).strip())
        for k, d in GROUP_CONFIGS.items()
        if d.type is ConfigType.INT
    }
    for name, kind in (
        (SHARE_HEARTBEAT_INTERVAL, "heartbeat.interval"),
        (SHARE_SESSION_TIMEOUT, "session.timeout"),
        (SHARE_RECORD_LOCK_DURATION, "record.lock.duration"),
    ):
        lo, hi = f"group.share.min.{kind}.ms", f"group.share.max.{kind}.ms"
        if name not in configs:
            continue  # the broker's own setting: bounded (or not) by the broker's configuration, not here
        if n[name] < bounds[lo]:
            return f"{name} must be greater than or equal to {lo}"
        if n[name] > bounds[hi]:
            return f"{name} must be less than or equal to {hi}"
    if n[SHARE_SESSION_TIMEOUT] <= n[SHARE_HEARTBEAT_INTERVAL]:
        return f"{SHARE_SESSION_TIMEOUT} must be greater than {SHARE_HEARTBEAT_INTERVAL}"
    return None
