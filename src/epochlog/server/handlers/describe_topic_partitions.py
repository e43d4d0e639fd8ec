"""DescribeTopicPartitions (API 75, KIP-966): the partitions of topics with their eligible leader replicas
and last known ELR, a page at a time.

Kafka's rules: topics in name order, from the cursor's topic (and, in it, the cursor's partition) on; at
most ResponsePartitionLimit partitions (capped by max.request.partition.size.limit, at least one) per
response, with NextCursor where the next page starts. Asked for every topic (an empty list), topics the
caller may not describe and topics gone meanwhile are left out; asked by name, each gets its error.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.handlers.metadata import topic_entry
from epochlog.server.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from epochlog.server.topics import validate_topic_name

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

# Kafka's max.request.partition.size.limit default.
MAX_PARTITIONS = 2000


def _problem(names: list[str], error: int) -> dict[str, Any]:
    topics = [_topic_error(n, error) for n in names]
    return {"throttle_time": 0, "topics": topics, "next_cursor": None}


def _topic_error(name: str, error: int) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": uuid.UUID(int=0),
        "is_internal": name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC),
        "partitions": [],
        "topic_authorized_operations": -2147483648,
    }


def handle_describe_topic_partitions(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    every = not req.topics
    cursor = req.cursor
    start_topic = str(cursor.topic_name) if cursor is not None else ""
    requested = sorted(broker.image.topics) if every else sorted({str(t.name) for t in req.topics})
    names = [n for n in requested if n >= start_topic]
    if cursor is not None and not every and start_topic not in names:
        return _problem(requested, Err.INVALID_REQUEST)  # the cursor's topic must be among those asked for
    if cursor is not None and int(cursor.partition_index) < 0:
        return _problem(requested, Err.INVALID_REQUEST)
    out: list[dict[str, Any]] = []
    if authz.enabled(broker):
        denied = authz.denied_topics(broker, header, Operation.DESCRIBE, names)
        if not every:
            out.extend(_topic_error(n, Err.TOPIC_AUTHORIZATION_FAILED) for n in names if n in denied)
        names = [n for n in names if n not in denied]
    remaining = max(1, min(MAX_PARTITIONS, int(req.response_partition_limit)))
    next_cursor = None
    image = broker.image
    live = {b.broker_id for b in image.live_brokers()}
    for name in names:
        info = image.topics.get(name)
        if info is None:
            if not every:
                bad = validate_topic_name(name)
                out.append(_topic_error(name, Err.INVALID_TOPIC_EXCEPTION if bad else Err.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        first = int(cursor.partition_index) if cursor is not None and name == start_topic else 0
        count = len(info.partitions)
        upper = min(count, first + remaining)
        parts = []
        for p in range(first, upper):
            st = info.partitions.get(p)
            if st is None:
                continue
            parts.append(
                {
                    "error_code": Err.NONE,
                    "partition_index": p,
                    "leader_id": st.leader if st.leader in live else -1,
                    "leader_epoch": st.leader_epoch,
                    "replica_nodes": list(st.replicas),
                    "isr_nodes": sorted(st.isr),
                    "eligible_leader_replicas": list(st.elr),
                    "last_known_elr": list(st.last_known_elr),
                    "offline_replicas": [
                        r for r in st.replicas if r not in live or (name, p) in image.offline_replicas.get(r, ())
                    ],
                }
            )
        out.append(topic_entry(name, info, parts))
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(parts)
    return {"throttle_time": 0, "topics": out, "next_cursor": next_cursor}
