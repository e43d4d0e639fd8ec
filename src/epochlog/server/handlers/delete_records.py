"""DeleteRecords (KIP-107): move partitions' log start offsets forward, on their leaders.

The core decides (leadership, the offset against the HW, -1 meaning the HW) and moves the leader's log
start; the answer then waits, as Kafka's DelayedDeleteRecords does, until every replica on a live broker
reports a log start at least that far in its fetches, or the request's timeout passes
(REQUEST_TIMED_OUT, with the low watermark reached so far).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition

log = logging.getLogger("epochlog.delete_records")


def _delete_one(broker: Broker, name: str, index: int, offset: int) -> tuple[dict[str, Any], Partition | None, int]:
    """The partition's answer row, and (partition, required offset) when the answer must wait for replicas."""
    row: dict[str, Any] = {"partition_index": index, "low_watermark": -1, "error_code": Err.NONE}
    part = broker.partition(name, index)
    if part is None:
        exists = (name, index) in broker.image.states
        row["error_code"] = Err.NOT_LEADER_OR_FOLLOWER if exists else Err.UNKNOWN_TOPIC_OR_PARTITION
        return row, None, -1
    if part.offline:
        row["error_code"] = Err.KAFKA_STORAGE_ERROR
        return row, None, -1
    if not part.is_leader:
        row["error_code"] = Err.NOT_LEADER_OR_FOLLOWER
        return row, None, -1
    if "delete" not in part.log.config.cleanup_policy:
        # Kafka's rule: records of a compact-only topic are removed by the cleaner, never by request.
        row["error_code"] = Err.POLICY_VIOLATION
        return row, None, -1
    try:
        code, required = part.replica.delete_records(offset)
    except KafkaStorageError:  # the checkpoint or a segment deletion failed: the directory is offline now
        row["error_code"] = Err.KAFKA_STORAGE_ERROR
        return row, None, -1
    if code:
        log.info("DeleteRecords %s-%d at %d refused: %s", name, index, offset, Err(code).name)
        row["error_code"] = Err(code)
        return row, None, -1
    row["low_watermark"] = part.replica.low_watermark()
    if part.replica.delete_records_result(required) is None:
        return row, part, required
    return row, None, -1


async def _wait(
    topics: dict[str, dict[int, dict[str, Any]]], waits: list[tuple[dict[str, Any], Partition, int]], timeout_s: float
) -> dict[str, Any]:
    futures = [part.wait_log_start(required) for _row, part, required in waits]
    if timeout_s > 0:
        await asyncio.wait(futures, timeout=timeout_s)
    for (row, part, _required), fut in zip(waits, futures, strict=True):
        if fut.done():
            row["error_code"] = fut.result()
        else:
            fut.cancel()  # Partition.sync drops cancelled waiters
            row["error_code"] = Err.REQUEST_TIMED_OUT
        if part.is_leader:
            row["low_watermark"] = part.replica.low_watermark()
    return _response(topics)


def _response(topics: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [{"name": name, "partitions": list(rows.values())} for name, rows in topics.items()],
    }


def handle_delete_records(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    # Kafka keys the request by partition: one named twice is answered once, for the last offset given.
    wanted: dict[tuple[str, int], int] = {}
    for t in req.topics:
        for p in t.partitions:
            wanted[(t.name, int(p.partition_index))] = int(p.offset)
    topics: dict[str, dict[int, dict[str, Any]]] = {}
    waits: list[tuple[dict[str, Any], Partition, int]] = []
    denied = authz.denied_topics(broker, header, Operation.DELETE, (t.name for t in req.topics))
    for (name, index), offset in wanted.items():
        if name in denied:
            code = Err.TOPIC_AUTHORIZATION_FAILED
            topics.setdefault(name, {})[index] = {"partition_index": index, "low_watermark": -1, "error_code": code}
            continue
        row, part, required = _delete_one(broker, name, index, offset)
        topics.setdefault(name, {})[index] = row
        if part is not None:
            waits.append((row, part, required))
    if not waits:
        return _response(topics)
    return _wait(topics, waits, req.timeout.total_seconds())
