"""A follower's Fetch, served without the general Fetch path's decoding and dicts.

Replica fetches are the leader's hot path under RF=3: one per follower per round trip, each carrying a
batch or two. The request is read by protocol/replica_fetch_request.py (our own followers' fixed shape;
None for anything else, which handlers/fetch.py then serves as before), each partition is decided by the
same core call as on the general path (PartitionReplica.handle_fetch: leadership, KIP-320 fencing,
divergence, the follower's position, the HW and the ISR), and the answer is packed from tuples.

A long poll registers on the partitions in the same synchronous step as its empty look (nothing can be
appended in between) and awaits its future directly, with a timer for max_wait: an append wakes it one
event-loop turn later, with no wait_for in the way.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.errors import Err
from epochlog.protocol.fetch_response_writer import ReplicaRow, encode_replica_fetch_response
from epochlog.protocol.replica_fetch_request import ReplicaFetch, ReplicaPartition, parse_replica_fetch
from epochlog.replication.types import FetchRequest
from epochlog.server import authz
from epochlog.server.responses import Waiting
from epochlog.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from epochlog.protocol.codec import RequestHeader
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition


def serve(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    """The answer (or a Waiting) to a follower's Fetch of our followers' shape; None for any other request,
    and while authorization is on (the general path asks for CLUSTER_ACTION)."""
    req = parse_replica_fetch(frame, header.size, header.api_version)
    if req is None or authz.enabled(broker):
        return None
    header.quota_exempt = True
    topics, total, errors = _look(broker, req)
    if total >= req.min_bytes or errors or req.max_wait_ms <= 0 or not req.topics:
        return encode_replica_fetch_response(header.correlation_id, header.throttle_ms, topics)
    # Registered in the same step as the empty look: an append after it finds the waiter.
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    parts = _register(broker, req, fut)
    deadline = time.monotonic() + req.max_wait_ms / 1000
    return Waiting(_long_poll(broker, header, req, fut, parts, deadline))


async def _long_poll(
    broker: Broker,
    header: RequestHeader,
    req: ReplicaFetch,
    fut: asyncio.Future[None],
    parts: list[Partition],
    deadline: float,
) -> list[Any]:
    loop = asyncio.get_running_loop()
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining > 0:
                timer = loop.call_later(remaining, _expire, fut)
                try:
                    await fut
                finally:
                    timer.cancel()
            _unregister(fut, parts)
            fut = loop.create_future()
            parts = _register(broker, req, fut)
            topics, total, errors = _look(broker, req)
            if total >= req.min_bytes or errors or time.monotonic() >= deadline:
                return encode_replica_fetch_response(header.correlation_id, header.throttle_ms, topics)
    finally:
        _unregister(fut, parts)


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _register(broker: Broker, req: ReplicaFetch, fut: asyncio.Future[None]) -> list[Partition]:
    parts = []
    for name, rows in req.topics:
        for row in rows:
            part = broker.partition(name, row[0])
            if part is not None:
                part.waiters.append(fut)
                parts.append(part)
    return parts


def _unregister(fut: asyncio.Future[None], parts: list[Partition]) -> None:
    for part in parts:
        if fut in part.waiters:
            part.waiters.remove(fut)


def _look(broker: Broker, req: ReplicaFetch) -> tuple[list[tuple[str, list[ReplicaRow]]], int, bool]:
    # The broker's cap whatever the follower asks (replica.fetch.response.max.bytes); the first batch
    # still goes whole.
    budget = min(req.max_bytes, broker.config.replica_fetch_response_max_bytes)
    total = 0
    errors = False
    now = now_ms()
    topics = []
    for name, asked in req.topics:
        rows = []
        for p in asked:
            row, n = _read(broker, name, req.replica_id, p, budget - total, total == 0, now)
            if row[1] or row[5] is not None:
                errors = True
            total += n
            rows.append(row)
        topics.append((name, rows))
    return topics, total, errors


def _read(
    broker: Broker, name: str, replica_id: int, p: ReplicaPartition, budget: int, first: bool, now: int
) -> tuple[ReplicaRow, int]:
    """One partition, as handlers/fetch.py's _read_partition answers a follower."""
    index, current_epoch, fetch_offset, last_epoch, log_start, part_max = p
    part = broker.partition(name, index)
    if part is None:
        code = Err.NOT_LEADER_OR_FOLLOWER if (name, index) in broker.image.states else Err.UNKNOWN_TOPIC_OR_PARTITION
        return (index, code, -1, -1, -1, None, None), 0
    if part.offline:  # its log directory failed
        return (index, Err.KAFKA_STORAGE_ERROR, -1, -1, -1, None, None), 0
    r = part.replica
    req = FetchRequest(replica_id, fetch_offset, last_epoch, current_epoch, log_start)
    decision, proposal = r.handle_fetch(req, now)
    part.sync()  # the follower's position can move the HW and release acks=all writes
    if proposal is not None:
        broker.submit_alter(part, proposal)
    hw, start = decision.high_watermark, decision.log_start_offset
    lso = decision.last_stable_offset if decision.last_stable_offset >= 0 else -1
    if decision.error:
        return (index, decision.error, hw, lso, start, None, None), 0
    div = decision.diverging
    if div is not None:
        return (index, 0, hw, lso, start, (div.epoch, div.end_offset), None), 0
    limit = min(part_max, budget)
    log = part.log
    end = log.log_end_offset if decision.read_to is None else min(decision.read_to, log.log_end_offset)
    if decision.read_from >= end or (limit <= 0 and not first):
        return (index, 0, hw, lso, start, None, None), 0
    throttle = None
    if replica_id not in r.isr:
        # leader.replication.throttled.*: a follower out of the ISR reading a throttled replica gets no
        # records while this broker's throttled sending is above its rate (Kafka's shouldLeaderThrottle).
        info = broker.image.topics.get(name)
        throttle = broker.replication_throttles.leader
        if info is None or not throttle.applies(info.configs, index):
            throttle = None
        elif throttle.exceeded(now_ms()):
            return (index, 0, hw, lso, start, None, None), 0
    try:
        chunks = log.read(decision.read_from, max(limit, 1), max_offset=decision.read_to, min_one_batch=first).chunks
    except KafkaStorageError:  # a read error took the directory offline
        return (index, Err.KAFKA_STORAGE_ERROR, hw, lso, start, None, None), 0
    size = sum(len(c) for c in chunks)
    if size and throttle is not None:
        throttle.record(size, now_ms())
    return (index, 0, hw, lso, start, None, chunks if size else None), size
