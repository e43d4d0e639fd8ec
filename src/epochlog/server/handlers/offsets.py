"""ListOffsets and OffsetForLeaderEpoch (KIP-101 / KIP-320 answers from the epoch cache)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

log = logging.getLogger("epochlog.offsets")

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


def _list_one(broker: Broker, name: str, p: Any) -> dict[str, Any]:
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
    hw = plog.high_watermark
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
        out["lookup"] = (plog, ts, hw)  # decoded off the event loop by handle_list_offsets
    else:
        out["error_code"] = Err.INVALID_REQUEST
    return out


def handle_list_offsets(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    topics = []
    for t in req.topics:
        topics.append({"name": t.name, "partitions": [_list_one(broker, t.name, p) for p in t.partitions]})
    answer = {"throttle_time": 0, "topics": topics}
    lookups = [row for t in topics for row in t["partitions"] if "lookup" in row]
    if not lookups:
        return answer
    return _by_timestamp(answer, lookups)


async def _by_timestamp(answer: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Timestamp lookups decode (and may decompress) batches: a worker thread does it, so a large or
    slow one does not stall other clients. What it reads was validated (and its decompressed size
    bounded) when it was produced."""
    for row in rows:
        plog, ts, hw = row.pop("lookup")
        try:
            found = await asyncio.to_thread(plog.offset_for_timestamp, ts)
        except Exception:
            log.exception("ListOffsets by timestamp %d on %s-%d failed", ts, plog.topic, plog.partition)
            row["error_code"] = Err.UNKNOWN_SERVER_ERROR
            continue
        if found is not None and found[0] < hw:
            row["offset"], row["timestamp"], row["leader_epoch"] = found[0], found[1], found[2]
    return answer


def handle_offset_for_leader_epoch(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            row: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            part = broker.partition(t.topic, p.partition)
            if part is None:
                row["error_code"] = Err.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = part.check_epoch(getattr(p, "current_leader_epoch", -1))
                if code:
                    row["error_code"] = code
                else:
                    epoch, end = part.log.epoch_cache.end_offset_for(p.leader_epoch, part.log.log_end_offset)
                    row.update(error_code=Err.NONE, leader_epoch=epoch, end_offset=end)
            parts.append(row)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
