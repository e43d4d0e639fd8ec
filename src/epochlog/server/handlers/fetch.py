"""Fetch: read committed batches, long-poll for min_bytes/max_wait, KIP-320 fencing and divergence."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.protocol.fetch_response_writer import encode_fetch_response
from epochlog.replication import read_replica
from epochlog.replication.fetch_sessions import Context, SessionError
from epochlog.replication.types import FetchRequest
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.authz import session_of
from epochlog.server.handlers import replica_fetch
from epochlog.server.handlers.fetch_session_view import cut_to_session, open_context
from epochlog.server.handlers.leader_hints import add_hint
from epochlog.server.quota_enforcement import FETCH
from epochlog.server.responses import Waiting
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.log_results import FileRead

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition


def _replica_id(req: Any, version: int) -> int:
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return int(state.replica_id) if state is not None else -1
    return int(getattr(req, "replica_id", -1))


def _attach(out: dict[str, Any], chunks: list[Any], spliced: list[list[Any]]) -> int:
    """Name the chunks the records are (their index in ``spliced``): the encoder sends them as they are."""
    size = sum(len(c) for c in chunks)
    if size:
        out["records"] = len(spliced)
        spliced.append(chunks)
    return size


BIG_READ = 4 << 20


@dataclass
class _Deferred:
    """A consumer's large read: planned on the event loop, its file read done in a worker thread."""

    row: dict[str, Any]
    part: Partition
    topic: str | None
    planned: FileRead
    offset: int
    limit: int
    read_to: int | None
    first: bool
    client: str


async def _read_deferred(broker: Broker, deferred: list[_Deferred], spliced: list[list[Any]]) -> None:
    for d in deferred:
        try:
            data = await asyncio.to_thread(d.planned.run)
            chunks = d.planned.finish(data).chunks
        except OSError:
            # Read it again here, through the log's own error handling: a real I/O error takes the
            # directory offline there (never from a worker thread) and answers KAFKA_STORAGE_ERROR.
            try:
                chunks = d.part.log.read(d.offset, max(d.limit, 1), d.read_to, d.first).chunks
            except KafkaStorageError:
                d.row["error_code"] = Err.KAFKA_STORAGE_ERROR
                chunks = []
        size = sum(len(c) for c in chunks)
        if size:
            spliced[d.row["records"]] = chunks
            broker.metrics.bytes_out_of(d.topic).inc(size)
            broker.metrics.client_fetched(d.client, d.topic, size)
        else:
            d.row["records"] = b""


def _read_partition(
    broker: Broker,
    name: str | None,
    p: Any,
    budget: int,
    first: bool,
    spliced: list[list[Any]],
    replica_id: int = -1,
    deferred: list[_Deferred] | None = None,
    read_committed: bool = False,
    client: _Client | None = None,
) -> tuple[dict[str, Any], int]:
    """One partition of a Fetch. The core decides for followers and consumers alike (leadership, KIP-320
    fencing, divergence, range, how far to read); this reads the bytes it allows."""
    out = _empty_row(p.partition)
    part = broker.partition(name, p.partition) if name else None
    if part is None:
        exists = (name, p.partition) in broker.image.states
        out["error_code"] = Err.NOT_LEADER_OR_FOLLOWER if exists else Err.UNKNOWN_TOPIC_OR_PARTITION
        return out, 0
    if part.offline:  # its log directory failed
        out["error_code"] = Err.KAFKA_STORAGE_ERROR
        return out, 0
    req = FetchRequest(
        replica_id,
        p.fetch_offset,
        getattr(p, "last_fetched_epoch", -1),
        getattr(p, "current_leader_epoch", -1),
        getattr(p, "log_start_offset", -1) if replica_id >= 0 else -1,
        read_committed and replica_id < 0,
        from_any_replica=client is not None and client.rack is not None,
    )
    decision, proposal = part.replica.handle_fetch(req, now_ms())
    if replica_id >= 0:
        part.sync()  # a follower's position can move the HW and release acks=all writes
        if proposal is not None:
            broker.submit_alter(part, proposal)
    out["high_watermark"] = decision.high_watermark
    out["last_stable_offset"] = decision.last_stable_offset if decision.last_stable_offset >= 0 else -1
    out["log_start_offset"] = decision.log_start_offset
    out["error_code"] = decision.error
    if decision.error:
        return out, 0
    if decision.diverging is not None:
        out["diverging_epoch"] = {"epoch": decision.diverging.epoch, "end_offset": decision.diverging.end_offset}
        return out, 0
    if client is not None and client.rack and part.is_leader and broker.config.replica_selector_class:
        preferred = _preferred_replica(broker, part, p.fetch_offset, client.rack)
        if preferred != read_replica.NO_PREFERRED:
            out["preferred_read_replica"] = preferred  # and no records: the consumer goes there (KIP-392)
            return out, 0
    limit = min(p.partition_max_bytes, budget)
    end = part.log.log_end_offset if decision.read_to is None else min(decision.read_to, part.log.log_end_offset)
    read_committed = req.read_committed and decision.read_to is not None
    if decision.read_from >= end or (limit <= 0 and not first):
        # Nothing to read, so nothing to drop: a caught-up read_committed consumer's long poll wakes here
        # often, and Kafka answers it with an empty list too.
        if read_committed:
            out["aborted_transactions"] = []
        return out, 0
    if read_committed:
        # What the consumer must drop from what it reads (KIP-98): the aborted transactions overlapping it.
        out["aborted_transactions"] = [
            {"producer_id": a.producer_id, "first_offset": a.first_offset}
            for a in part.log.aborted_transactions(decision.read_from, decision.read_to)
        ]
    if replica_id < 0 and limit >= BIG_READ and deferred is not None and not (client and client.sendfile):
        # A consumer asking for megabytes: the file read happens in a worker thread (pread lets go of the
        # GIL), so one greedy fetch does not hold up every other client on this event loop.
        try:
            planned = part.log.plan_read(decision.read_from, max(limit, 1), decision.read_to, first)
        except KafkaStorageError:  # the directory is (or just went) offline
            out["error_code"] = Err.KAFKA_STORAGE_ERROR
            return out, 0
        if isinstance(planned, FileRead):
            out["records"] = len(spliced)
            spliced.append([])
            cid = client.client_id if client is not None else ""
            deferred.append(
                _Deferred(out, part, name, planned, decision.read_from, limit, decision.read_to, first, cid)
            )
            return out, limit
        size = _attach(out, planned.chunks, spliced)
        if size:
            _count_out(broker, name, client, size)
        return out, size
    throttle = None
    if replica_id >= 0 and replica_id not in part.replica.isr:
        # leader.replication.throttled.*: a follower out of the ISR reading a throttled replica gets no
        # records while this broker's throttled sending is above its rate (Kafka's shouldLeaderThrottle).
        info = broker.image.topics.get(part.topic)
        throttle = broker.replication_throttles.leader
        if info is None or not throttle.applies(info.configs, part.partition):
            throttle = None
        elif throttle.exceeded(now_ms()):
            return out, 0
    # A consumer on a plaintext connection gets a region of the segment file, sent with sendfile.
    read = part.log.read_region if client is not None and client.sendfile else part.log.read
    try:
        result = read(decision.read_from, max(limit, 1), max_offset=decision.read_to, min_one_batch=first)
    except KafkaStorageError:  # a read error took the directory offline
        out["error_code"] = Err.KAFKA_STORAGE_ERROR
        return out, 0
    size = _attach(out, result.chunks, spliced)
    if size and replica_id < 0:
        _count_out(broker, name, client, size)
    if size and throttle is not None:
        throttle.record(size, now_ms())
    return out, size


@dataclass(frozen=True)
class _Client:
    """A consumer's Fetch: its client id (per-client metrics) and, from v11, its rack (KIP-392; "" for none,
    None before v11, when only a leader answers it)."""

    client_id: str
    rack: str | None
    sendfile: bool = False  # records as file regions (storage/file_region.py): a plaintext connection


_SENDFILE_PROTOCOLS = frozenset(("PLAINTEXT", "SASL_PLAINTEXT"))


def _client(broker: Broker, header: RequestHeader, req: Any, replica_id: int) -> _Client | None:
    if replica_id >= 0:
        return None
    rack = getattr(req, "rack_id", None) if header.api_version >= 11 else None
    session = header.session  # None for the broker's own calls, which want bytes
    sendfile = session is not None and session.protocol in _SENDFILE_PROTOCOLS and broker.config.fetch_sendfile_enable
    return _Client(header.client_id or "", None if rack is None else str(rack), sendfile)


def _count_out(broker: Broker, topic: str | None, client: _Client | None, size: int) -> None:
    broker.metrics.bytes_out_of(topic).inc(size)
    broker.metrics.client_fetched(client.client_id if client else "", topic, size)


def _preferred_replica(broker: Broker, part: Partition, fetch_offset: int, rack: str) -> int:
    """KIP-392: the replica the leader sends a consumer on ``rack`` to (NO_PREFERRED: itself); only live
    brokers' replicas are candidates."""
    racks = {b.broker_id: b.rack for b in broker.image.live_brokers()}
    me, followers = part.replica.read_replicas(fetch_offset, now_ms())
    return read_replica.select(rack, me, followers, racks)


def _register(broker: Broker, keys: list[tuple[str, int]]) -> tuple[asyncio.Future[None], list[Any]]:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    parts = [part for part in (broker.partition(t, p) for t, p in keys) if part is not None]
    for part in parts:
        part.waiters.append(fut)
    return fut, parts


def _unregister(fut: asyncio.Future[None], parts: list[Any]) -> None:
    for part in parts:
        if fut in part.waiters:
            part.waiters.remove(fut)


def _names(broker: Broker, req: Any, version: int) -> list[str | None]:
    if version >= 13:
        return [broker.topic_name_for_id(t.topic_id) if t.topic_id is not None else None for t in req.topics]
    return [t.topic for t in req.topics]


class _Everything:
    """Every topic: a follower without CLUSTER_ACTION may read none."""

    def __contains__(self, name: object) -> bool:
        return True


_ALL = _Everything()
_NONE: frozenset[str] = frozenset()


def _denied(broker: Broker, header: RequestHeader, req: Any, version: int) -> Any:
    """The topics this fetch may not read: for a follower all of them unless it may CLUSTER_ACTION, for a
    consumer those it may not READ (asked once per topic, whatever the partitions)."""
    if not authz.enabled(broker):
        return _NONE
    if _replica_id(req, version) >= 0:
        return _NONE if authz.cluster_allowed(broker, header, Operation.CLUSTER_ACTION) else _ALL
    return authz.denied_topics(broker, header, Operation.READ, _names(broker, req, version))


def _empty_row(partition: int) -> dict[str, Any]:
    """A partition's answer before anything is known of it (and all a refused caller gets)."""
    return {
        "partition_index": partition,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }


def _unauthorized_row(p: Any) -> dict[str, Any]:
    return {**_empty_row(p.partition), "error_code": Err.TOPIC_AUTHORIZATION_FAILED}


def _fetch_once(
    broker: Broker,
    req: Any,
    version: int,
    deferred: list[_Deferred] | None = None,
    denied: Any = _NONE,
    client: _Client | None = None,
    header: RequestHeader | None = None,
) -> tuple[list[dict[str, Any]], int, bool, list[list[Any]]]:
    replica_id = _replica_id(req, version)
    spliced: list[list[Any]] = []
    total = 0
    errors = False
    # The broker's cap whatever the client asks (Kafka: fetch.max.bytes for consumers,
    # replica.fetch.response.max.bytes for followers); the first batch still goes whole (min_one_batch).
    cap = broker.config.fetch_max_bytes if replica_id < 0 else broker.config.replica_fetch_response_max_bytes
    budget = min(req.max_bytes, cap) if version >= 3 else cap
    if replica_id < 0 and header is not None:
        quota_cap = broker.client_quotas.fetch_cap(header)
        if quota_cap is not None:
            budget = min(budget, quota_cap)
    topics_out = []
    for t in req.topics:
        name = getattr(t, "topic", None)
        topic_id = getattr(t, "topic_id", None)
        if version >= 13:
            name = broker.topic_name_for_id(topic_id) if topic_id is not None else None
        parts_out = []
        if denied and name is not None and name in denied:
            # Nothing about the topic (not even whether it exists); like Kafka, it does not end a long poll.
            rows = [_unauthorized_row(p) for p in t.partitions]
            topics_out.append({"topic": name, "topic_id": topic_id, "partitions": rows})
            continue
        for p in t.partitions:
            if version >= 13 and name is None:
                parts_out.append(
                    {
                        "partition_index": p.partition,
                        "error_code": Err.UNKNOWN_TOPIC_ID,
                        "high_watermark": -1,
                        "records": b"",
                        "aborted_transactions": None,
                    }
                )
                errors = True
                continue
            row, n = _read_partition(
                broker,
                name,
                p,
                budget - total,
                first=total == 0,
                spliced=spliced,
                replica_id=replica_id,
                deferred=deferred,
                read_committed=getattr(req, "isolation_level", 0) == 1,
                client=client,
            )
            # A preferred read replica is answered at once, as Kafka does: the consumer has somewhere to go.
            if row["error_code"] or "diverging_epoch" in row or row["preferred_read_replica"] >= 0:
                errors = True
            total += n
            parts_out.append(row)
        topics_out.append({"topic": name, "topic_id": topic_id, "partitions": parts_out})
    return topics_out, total, errors, spliced


async def _fetch_with_wait(
    broker: Broker,
    header: RequestHeader,
    req: Any,
    version: int,
    deadline: float,
    denied: Any = _NONE,
    ctx: Context | None = None,
) -> list[Any]:
    keys: list[tuple[str, int]] = []
    for t in req.topics:
        name = t.topic if version < 13 else broker.topic_name_for_id(t.topic_id)
        if name and not (denied and name in denied):
            keys.extend((name, p.partition) for p in t.partitions)
    while True:
        # Register before looking: data appended between the handler's first look and this task starting
        # (or between two looks) would otherwise wake nobody, and the fetch would sleep its whole max_wait.
        fut, parts = _register(broker, keys)
        try:
            deferred: list[_Deferred] = []
            client = _client(broker, header, req, _replica_id(req, version))
            topics_out, total, errors, spliced = _fetch_once(broker, req, version, deferred, denied, client, header)
            remaining = deadline - time.monotonic()
            if total >= req.min_bytes or errors or remaining <= 0:
                await _read_deferred(broker, deferred, spliced)
                return _response(broker, header, topics_out, spliced, ctx)
            for d in deferred:
                d.planned.discard()  # not answering yet: the next look plans its reads again
            try:
                async with asyncio.timeout(remaining):  # the append or HW move wakes this task directly
                    await fut
            except TimeoutError:
                pass
        finally:
            _unregister(fut, parts)


def _response(
    broker: Broker,
    header: RequestHeader,
    topics_out: list[dict[str, Any]],
    spliced: list[list[Any]],
    ctx: Context | None = None,
) -> list[Any]:
    # KIP-227: an incremental answer carries only what changed; a full one may open a session.
    topics_out, error, session_id = cut_to_session(broker, ctx, topics_out, spliced)
    if not header.quota_exempt and broker.client_quotas.measuring(FETCH):
        # consumer_byte_rate: the bytes this answer carries. Kafka answers a throttled fetch empty; this
        # broker sends what it read (already cut to the quota's window) and mutes the connection instead.
        sent = sum(len(c) for chunks in spliced for c in chunks)
        sent += sum(
            len(r["records"]) for t in topics_out for r in t["partitions"] if isinstance(r.get("records"), bytes)
        )
        if sent:
            broker.client_quotas.record(FETCH, header, sent)
    nodes: dict[int, dict[str, Any]] = {}
    if header.api_version >= 16:  # KIP-951: CurrentLeader and NodeEndpoints, as Kafka fills them from v16
        for topic in topics_out:
            for row in topic["partitions"]:
                add_hint(broker, topic["topic"], row["partition_index"], row, nodes, session_of(header).listener)
    return encode_fetch_response(
        header.api_version,
        header.correlation_id,
        topics_out,
        spliced,
        error_code=error,
        node_endpoints=list(nodes.values()),
        session_id=session_id,
        throttle_time_ms=header.throttle_ms,
    )


async def _respond_after_reads(
    broker: Broker,
    header: RequestHeader,
    topics_out: list[dict[str, Any]],
    spliced: list[list[Any]],
    deferred: list[_Deferred],
    ctx: Context | None,
) -> list[Any]:
    await _read_deferred(broker, deferred, spliced)
    return _response(broker, header, topics_out, spliced, ctx)


def handle_fetch(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    # Our own followers' fetches, the hot path of replication, skip the general decoder (replica_fetch.py).
    answer = replica_fetch.serve(broker, header, frame)
    if answer is not None:
        return answer
    req = decode_body(frame, header)
    version = header.api_version
    if _replica_id(req, version) >= 0:
        header.quota_exempt = True
    ctx, req = open_context(broker, req, version, _replica_id(req, version))
    if isinstance(ctx, SessionError):
        return _response(broker, header, [], [], ctx)
    deferred: list[_Deferred] = []
    denied = _denied(broker, header, req, version)
    client = _client(broker, header, req, _replica_id(req, version))
    topics_out, total, errors, spliced = _fetch_once(broker, req, version, deferred, denied, client, header)
    max_wait_ms = req.max_wait.total_seconds() * 1000
    nothing_to_wait_for = denied is _ALL or (denied and all(n in denied for n in _names(broker, req, version)))
    if total >= req.min_bytes or errors or max_wait_ms <= 0 or not req.topics or nothing_to_wait_for:
        if deferred:
            return Waiting(_respond_after_reads(broker, header, topics_out, spliced, deferred, ctx))
        return _response(broker, header, topics_out, spliced, ctx)
    deadline = time.monotonic() + max_wait_ms / 1000
    # A Fetch changes nothing a later request could race with (a follower's position was taken above):
    # the requests behind a long poll need not wait for it.
    return Waiting(_fetch_with_wait(broker, header, req, version, deadline, denied, ctx))
