"""ListOffsets and OffsetForLeaderEpoch (KIP-101 / KIP-320 answers from the epoch cache)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


def _list_one(broker: Broker, name: str, p: Any, read_committed: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition_index": p.partition_index,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
        "old_style_offsets": [],
    }
    part = broker.partition(name, p.partition_index)
    if part is None:
        out["error_code"] = Err.UNKNOWN_TOPIC_OR_PARTITION
        return out
    code = part.check_epoch(getattr(p, "current_leader_epoch", -1))
    if code:
        out["error_code"] = code
        return out
    plog = part.log
    cache = plog.epoch_cache
    # read_committed (isolation_level 1) sees up to the last stable offset, as its fetches do.
    hw = plog.last_stable_offset if read_committed else plog.high_watermark
    ts = p.timestamp
    out["error_code"] = Err.NONE
    if ts in (EARLIEST, EARLIEST_LOCAL):
        out["offset"] = plog.log_start_offset
        out["leader_epoch"] = cache.epoch_for_offset(plog.log_start_offset)
    elif ts == LATEST:
        out["offset"] = hw
        out["leader_epoch"] = part.leader_epoch
    elif ts == MAX_TIMESTAMP:
        found = plog.max_timestamp_and_offset()
        if found is not None and found[1] < hw:
            out["timestamp"], out["offset"] = found[0], found[1]
            out["leader_epoch"] = cache.epoch_for_offset(found[1])
    elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        pass  # no tiered storage: nothing is uploaded
    elif ts >= 0:
        found = plog.offset_for_timestamp(ts)
        if found is not None and found[0] < hw:
            out["offset"], out["timestamp"], out["leader_epoch"] = found[0], found[1], found[2]
    else:
        out["error_code"] = Err.INVALID_REQUEST
    return out


def handle_list_offsets(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    committed = getattr(req, "isolation_level", 0) == 1
    denied = authz.denied_topics(broker, header, Operation.DESCRIBE, (t.name for t in req.topics))
    topics = []
    for t in req.topics:
        if t.name in denied:
            topics.append({"name": t.name, "partitions": [_unauthorized(p.partition_index) for p in t.partitions]})
            continue
        topics.append(
            {"name": t.name, "partitions": [_list_one_guarded(broker, t.name, p, committed) for p in t.partitions]}
        )
    return {"throttle_time": 0, "topics": topics}


def _unauthorized(index: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
        "old_style_offsets": [],
        "error_code": Err.TOPIC_AUTHORIZATION_FAILED,
    }


def _list_one_guarded(broker: Broker, name: str, p: Any, read_committed: bool) -> dict[str, Any]:
    """A timestamp lookup reads the log: an I/O error there takes its directory offline and answers
    KAFKA_STORAGE_ERROR for this partition alone."""
    try:
        return _list_one(broker, name, p, read_committed)
    except KafkaStorageError:
        return {
            "partition_index": p.partition_index,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
            "old_style_offsets": [],
            "error_code": Err.KAFKA_STORAGE_ERROR,
        }


def handle_offset_for_leader_epoch(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    denied: set[str] = set()
    # KIP-320: followers ask with CLUSTER_ACTION; consumers checking for truncation need DESCRIBE on the topic.
    if authz.enabled(broker) and not authz.cluster_allowed(broker, header, Operation.CLUSTER_ACTION):
        denied = authz.denied_topics(broker, header, Operation.DESCRIBE, (t.topic for t in req.topics))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            row: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            part = broker.partition(t.topic, p.partition)
            if t.topic in denied:
                row["error_code"] = Err.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                row["error_code"] = Err.UNKNOWN_TOPIC_OR_PARTITION
            elif part.offline:
                row["error_code"] = Err.KAFKA_STORAGE_ERROR
            else:
                # The core answers: only the leader, fenced by the asker's epoch (KIP-320), then the end of
                # the asked epoch from the leader-epoch cache (KIP-101).
                code, epoch, end = part.replica.offset_for_leader_epoch(
                    getattr(p, "current_leader_epoch", -1), p.leader_epoch
                )
                row.update(error_code=Err(code), leader_epoch=epoch, end_offset=end)
            parts.append(row)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
