"""Admin helpers over confluent-kafka's AdminClient: partition discovery and offset lookups with epochs.

ListOffsets (v4+) returns the leader epoch with each offset; keeping it lets a reader validate that offset
later with OffsetsForLeaderEpoch (KIP-320), which confluent-kafka's position APIs do not make easy.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as CKTopicPartition

# confluent_kafka.admin re-exports these without __all__ or `as` aliases, so its stubs do not export them.
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from epochlog.client.epochs import Position, TopicPartition

EARLIEST = -2
LATEST = -1
# Singletons in confluent_kafka, whose class methods returning them are unannotated.
EARLIEST_SPEC: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
LATEST_SPEC: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]


class TopicGoneError(Exception):
    """A topic or partition that was asked for does not exist (any more)."""


def admin_client(conf: Mapping[str, Any]) -> AdminClient:
    return AdminClient(dict(conf))


def _isolation(conf: Mapping[str, Any]) -> IsolationLevel:
    # Spark's connector reads uncommitted data unless kafka.isolation.level says otherwise; librdkafka's
    # own default is read_committed, so the choice is made explicit here.
    level = str(conf.get("isolation.level", "read_uncommitted")).lower()
    return IsolationLevel.READ_COMMITTED if level == "read_committed" else IsolationLevel.READ_UNCOMMITTED


def topic_partitions(admin: AdminClient, timeout: float = 10.0) -> dict[str, list[int]]:
    """Every non-internal topic with its partition ids, from one metadata request."""
    md = admin.list_topics(timeout=timeout)
    out: dict[str, list[int]] = {}
    for name, t in md.topics.items():
        if t.error is not None or name.startswith("__"):
            continue
        out[name] = sorted(t.partitions)
    return out


def resolve_partitions(
    admin: AdminClient,
    *,
    assign: Mapping[str, list[int]] | None = None,
    subscribe: list[str] | None = None,
    pattern: str | None = None,
    timeout: float = 10.0,
) -> list[TopicPartition]:
    """The topic-partitions a reader covers now. Subscriptions follow topics and partitions as they come and
    go; assign is fixed (as in Spark, an assigned partition that vanishes is reported later as lost)."""
    if assign is not None:
        return sorted((t, p) for t, ps in assign.items() for p in ps)
    existing = topic_partitions(admin, timeout)
    if subscribe is not None:
        names = [t for t in subscribe if t in existing]
    elif pattern is not None:
        rx = re.compile(pattern)
        names = [t for t in existing if rx.fullmatch(t)]
    else:
        raise ValueError("one of assign, subscribe or pattern is needed")
    return sorted((t, p) for t in names for p in existing[t])


def list_offsets(
    admin: AdminClient,
    specs: Mapping[TopicPartition, int],
    conf: Mapping[str, Any] | None = None,
    *,
    timestamps: bool = False,
    timeout: float = 10.0,
    retries: int = 3,
) -> dict[TopicPartition, Position]:
    """Resolve EARLIEST (-2), LATEST (-1) or, with timestamps=True, a timestamp in ms per partition.

    A timestamp with no record at or after it resolves to offset -1 (the caller decides what that means).
    Partitions that do not exist raise TopicGoneError.
    """
    if not specs:
        return {}
    req: dict[CKTopicPartition, OffsetSpec] = {}
    for (t, p), v in specs.items():
        if timestamps:
            spec = OffsetSpec.for_timestamp(v)
        elif v == EARLIEST:
            spec = EARLIEST_SPEC
        elif v == LATEST:
            spec = LATEST_SPEC
        else:
            raise ValueError(f"offset spec {v} for {t}-{p} is neither earliest (-2) nor latest (-1)")
        req[CKTopicPartition(t, p)] = spec
    last: Exception | None = None
    for attempt in range(retries + 1):
        try:
            futures = admin.list_offsets(req, isolation_level=_isolation(conf or {}), request_timeout=timeout)
            out: dict[TopicPartition, Position] = {}
            invalid: list[str] = []
            for ctp, fut in futures.items():
                r = fut.result()
                # Right after a leader dies librdkafka can answer offset -1001 (OFFSET_INVALID) with no error;
                # that is no answer, not an offset. (-1 is a real answer for a timestamp with no match.)
                if r.offset < (-1 if timestamps else 0):
                    invalid.append(f"{ctp.topic}-{ctp.partition}: {r.offset}")
                epoch = r.leader_epoch if r.leader_epoch is not None else -1
                out[(ctp.topic, ctp.partition)] = Position(r.offset, epoch if r.offset >= 0 else -1)
            if not invalid:
                return out
            last = RuntimeError(f"no valid offset for {', '.join(invalid)}")
        except KafkaException as e:
            last = e
            err = e.args[0] if e.args else None
            code = getattr(err, "code", lambda: None)()
            # Unknown partitions do not heal by waiting; anything else (leader moving) may.
            name = str(getattr(err, "name", lambda: "")())
            if code is not None and ("UNKNOWN_PARTITION" in name or "UNKNOWN_TOPIC" in name):
                raise TopicGoneError(str(e)) from e
        if attempt < retries:
            time.sleep(0.5)
            # A leader moved (FENCED_LEADER_EPOCH, NOT_LEADER, no answer): list_offsets itself does not always
            # refresh the client's metadata, and retrying with a stale leader epoch fails the same way.
            for topic in {t for t, _ in specs}:
                try:
                    admin.list_topics(topic, timeout=timeout)
                except KafkaException:
                    pass
    raise TopicGoneError(f"cannot list offsets: {last}")


def create_topic(
    admin: AdminClient,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> bool:
    """Create a topic; False when it already exists."""
    fut = admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=dict(config or {}))], request_timeout=timeout
    )[name]
    try:
        fut.result()
        return True
    except KafkaException as e:
        if "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e):
            return False
        raise


def delete_topics(admin: AdminClient, names: Iterable[str], timeout: float = 30.0) -> None:
    futs = admin.delete_topics(list(names), request_timeout=timeout)
    for f in futs.values():
        f.result()


def wait_for_partitions(admin: AdminClient, name: str, count: int, timeout: float = 10.0) -> None:
    """Metadata is eventually consistent across brokers; wait until a new topic is visible."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=timeout)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) >= count:
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {name} did not show {count} partitions within {timeout}s")
