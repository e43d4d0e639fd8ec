"""Option parsing and validation with the names and meanings of Spark's Kafka connector.

Spark's option keys are case-insensitive; `kafka.`-prefixed keys go to the client with the prefix removed.
Errors are raised when the DataFrame is defined (load()/start()), as in the connector, so a bad option
never reaches a running query.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TopicPartition = tuple[str, int]

EARLIEST = -2
LATEST = -1

# Keys the connector refuses because it must control them itself (same list as Spark's, mapped to
# librdkafka where the name differs).
_UNSUPPORTED_SOURCE = {
    "auto.offset.reset": "startingOffsets",
    "key.deserializer": "DataFrame operations to explicitly deserialize the keys",
    "value.deserializer": "DataFrame operations to explicitly deserialize the values",
    "enable.auto.commit": "the checkpoint (offsets are not committed to Kafka)",
    "interceptor.classes": "nothing: interceptors are not supported",
}
_UNSUPPORTED_SINK = {
    "key.serializer": "DataFrame operations to explicitly serialize the keys into string or binary",
    "value.serializer": "DataFrame operations to explicitly serialize the values into string or binary",
}

DEFAULT_MAX_TRIGGER_DELAY = "15m"
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark uses spark.network.timeout, 120 s by default
DEFAULT_COMMIT_TOPIC = "__epochlog_spark_sink"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "epochlog-spark"


class OptionError(ValueError):
    """An option is missing, unknown in its value, or conflicts with another one."""


@dataclass(frozen=True)
class OffsetLimit:
    """Where a read starts or ends, before it is resolved against the cluster.

    kind: "earliest", "latest", "offsets" (per partition, -2/-1 allowed), "timestamp" (one for every
    partition) or "timestamps" (per partition).
    """

    kind: str
    offsets: dict[TopicPartition, int] | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    kafka: dict[str, str]
    assign: dict[str, list[int]] | None
    subscribe: list[str] | None
    pattern: str | None
    starting: OffsetLimit
    ending: OffsetLimit
    timestamp_strategy: str
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    include_headers: bool
    poll_timeout_ms: int
    fetch_retries: int
    fetch_retry_interval_ms: int
    group_id_prefix: str
    validate_epochs: bool = True
    reader: str = "auto"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    kafka: dict[str, str]
    topic: str | None
    commit_topic: str
    commit_topic_replication_factor: int
    extra: dict[str, Any] = field(default_factory=dict)
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def kafka_params(opts: Mapping[str, str]) -> dict[str, str]:
    return {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    v = opts.get(key.lower())
    if v is None:
        return default
    if v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise OptionError(f"Invalid value '{v}' for option '{key}', must be true or false")


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    v = opts.get(key.lower())
    if v is None:
        return None
    try:
        n = int(v.strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise OptionError(f"Invalid value '{v}' for option '{key}', must be a positive integer")
    return n


_TIME_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def time_string_ms(value: str, key: str) -> int:
    """Spark's time strings: '15m', '10s', '500ms', '2h', '1d'; a bare number is milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    if not m or (m.group(2) and m.group(2).lower() not in _TIME_UNITS):
        raise OptionError(f"Invalid value '{value}' for option '{key}', expected a time such as 15m, 10s, 500ms")
    return int(m.group(1)) * _TIME_UNITS.get(m.group(2).lower() or "ms", 1)


def _json_object(value: str, key: str) -> dict[str, Any]:
    try:
        obj = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f'Expected e.g. {{"topicA":{{"0":23,"1":-1}}}} for \'{key}\', got {value}') from e
    if not isinstance(obj, dict):
        raise OptionError(f"Expected a JSON object for '{key}', got {value}")
    return obj


def parse_partition_map(value: str, key: str) -> dict[TopicPartition, int]:
    """{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}} -> {("topicA", 0): 23, ...}"""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(value, key).items():
        if not isinstance(parts, dict):
            raise OptionError(f"Expected a partition -> value object for topic {topic} in '{key}', got {value}")
        for p, v in parts.items():
            try:
                out[(str(topic), int(p))] = int(v)
            except (TypeError, ValueError) as e:
                raise OptionError(f"Invalid partition {p!r} or value {v!r} for topic {topic} in '{key}'") from e
    return out


def _assign(value: str) -> dict[str, list[int]]:
    try:
        obj = json.loads(value)
        ok = (
            isinstance(obj, dict)
            and obj
            and all(isinstance(ps, list) and all(isinstance(p, int) for p in ps) for ps in obj.values())
        )
    except json.JSONDecodeError:
        ok = False
    if not ok:
        raise OptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{value}'; "
            'expected JSON such as {"topicA":[0,1],"topicB":[2,4]}'
        )
    return {str(t): sorted(set(ps)) for t, ps in obj.items()}


def _limit(opts: Mapping[str, str], offsets_key: str, ts_key: str, by_ts_key: str, default: OffsetLimit) -> OffsetLimit:
    # Same priority as the connector: one global timestamp, then per-partition timestamps, then offsets.
    if ts_key.lower() in opts:
        stamp = opts[ts_key.lower()]
        try:
            return OffsetLimit("timestamp", timestamp=int(stamp.strip()))
        except ValueError as e:
            raise OptionError(f"Invalid value '{stamp}' for option '{ts_key}', must be a timestamp in ms") from e
    if by_ts_key.lower() in opts:
        return OffsetLimit("timestamps", offsets=parse_partition_map(opts[by_ts_key.lower()], by_ts_key))
    v = opts.get(offsets_key.lower())
    if v is None:
        return default
    s = v.strip().lower()
    if s == "earliest":
        return OffsetLimit("earliest")
    if s == "latest":
        return OffsetLimit("latest")
    return OffsetLimit("offsets", offsets=parse_partition_map(v.strip(), offsets_key))


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    opts = _lower(options)
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")

    strategies = [k for k in ("assign", "subscribe", "subscribepattern") if k in opts]
    if not strategies:
        raise OptionError(
            "One of the following options must be specified for Kafka source: subscribe, subscribePattern, "
            "assign. See the docs for more details."
        )
    if len(strategies) > 1:
        raise OptionError(
            "Only one of the following options can be specified for Kafka source: subscribe, subscribePattern, "
            "assign. See the docs for more details."
        )
    assign = subscribe = pattern = None
    if "assign" in opts:
        assign = _assign(opts["assign"])
    elif "subscribe" in opts:
        subscribe = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not subscribe:
            raise OptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{opts['subscribe']}'"
            )
    else:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise OptionError(
                "Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
                f"'{opts['subscribepattern']}'"
            )
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"Invalid regular expression for option 'subscribePattern': {e}") from e

    kafka = kafka_params(opts)
    for k, instead in _UNSUPPORTED_SOURCE.items():
        if k in kafka:
            raise OptionError(f"Kafka option '{k}' is not supported as the source manages it; use {instead}.")

    default_start = OffsetLimit("latest") if streaming else OffsetLimit("earliest")
    starting = _limit(opts, "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp", default_start)
    if streaming:
        for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if k in opts:
                raise OptionError(f"ending offset not valid in streaming queries ({k} is set)")
        ending = OffsetLimit("latest")
    else:
        ending = _limit(opts, "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp", OffsetLimit("latest"))
        if starting.kind == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        if ending.kind == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        if starting.kind == "offsets":
            for (t, p), o in (starting.offsets or {}).items():
                if o == LATEST:
                    raise OptionError(f"startingOffsets for {t}-{p} can't be latest for batch queries on Kafka")
        if ending.kind == "offsets":
            for (t, p), o in (ending.offsets or {}).items():
                if o == EARLIEST:
                    raise OptionError(f"endingOffsets for {t}-{p} can't be earliest for batch queries on Kafka")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"Invalid value '{strategy}' for option 'startingOffsetsByTimestampStrategy', must be error or latest"
        )

    max_opt = _positive(opts, "maxOffsetsPerTrigger")
    min_opt = _positive(opts, "minOffsetsPerTrigger")
    if max_opt is not None and min_opt is not None and min_opt > max_opt:
        raise OptionError("minOffsetsPerTrigger cannot be greater than maxOffsetsPerTrigger")

    reader = opts.get("reader", "auto").strip().lower()
    if reader not in ("auto", "confluent"):
        raise OptionError(f"Invalid value '{reader}' for option 'reader', must be auto or confluent")

    return SourceOptions(
        bootstrap=bootstrap,
        kafka=kafka,
        assign=assign,
        subscribe=subscribe,
        pattern=pattern,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=max_opt,
        min_offsets_per_trigger=min_opt,
        max_trigger_delay_ms=time_string_ms(opts.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY), "maxTriggerDelay"),
        min_partitions=_positive(opts, "minPartitions"),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=_positive(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
        fetch_retries=_positive(opts, "fetchOffset.numRetries") or 3,
        fetch_retry_interval_ms=_positive(opts, "fetchOffset.retryIntervalMs") or 1000,
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
        validate_epochs=_bool(opts, "validateLeaderEpochs", True),
        reader=reader,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    kafka = kafka_params(opts)
    for k, instead in _UNSUPPORTED_SINK.items():
        if k in kafka:
            raise OptionError(f"Kafka option '{k}' is not supported as keys and values are bytes; use {instead}.")
    if "transactional.id" in kafka:
        raise OptionError(
            "Kafka option 'transactional.id' is not supported: the streaming sink derives one per query and "
            "Spark partition; use the option 'transactionalIdPrefix' to change its prefix."
        )
    rf = opts.get("committopicreplicationfactor", "-1")
    try:
        rf_n = int(rf)
    except ValueError as e:
        raise OptionError(f"Invalid value '{rf}' for option 'commitTopicReplicationFactor'") from e
    topic = opts.get("topic")
    return SinkOptions(
        bootstrap=bootstrap,
        kafka=kafka,
        topic=topic.strip() if topic and topic.strip() else None,
        commit_topic=opts.get("committopic", DEFAULT_COMMIT_TOPIC),
        commit_topic_replication_factor=rf_n,
        transactional_id_prefix=opts.get("transactionalidprefix", DEFAULT_TRANSACTIONAL_ID_PREFIX),
    )
