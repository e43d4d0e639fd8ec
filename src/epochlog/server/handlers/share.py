"""ShareFetch (78) and ShareAcknowledge (79) at the partitions' leader (KIP-932), over server/share/.

ShareFetch: the share session first (sessions.py: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH are
top-level errors), then the acknowledgements it carries, all applied once and each partition's result in
``acknowledge_error_code``; then, unless the request closes the session (epoch -1, which releases what the
member still holds here), records are acquired from every partition of the session. With nothing acquired
the request waits up to ``max_wait`` for an append or released records and looks again. ShareAcknowledge is
the acknowledgements alone. Acknowledgements on the session-opening request are INVALID_REQUEST, as Kafka has
them; so are acknowledge type 4 (renew, v2), which is not served, and an empty group or member id.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from epochlog.groups.share.messages import AckBatch
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.share.sessions import CLOSE_EPOCH, OPEN_EPOCH, TopicIdPartition

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

_Row = dict[str, Any]


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _leader(broker: Broker, topic: str | None, p: int) -> dict[str, int]:
    st = broker.image.states.get((topic, p)) if topic else None
    if st is None:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": st.leader, "leader_epoch": st.leader_epoch}


def _acks(batches: Iterable[Any]) -> list[AckBatch]:
    return [
        AckBatch(int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types)) for b in batches
    ]


class _Request:
    """What both APIs share: the topics resolved, the authorization, the per-partition rows."""

    def __init__(self, broker: Broker, header: RequestHeader, req: Any) -> None:
        self.broker = broker
        self.header = header
        self.req = req
        self.group = req.group_id or ""
        self.member = req.member_id or ""
        self.rows: dict[TopicIdPartition, _Row] = {}
        self._readable: dict[uuid.UUID, str | None] = {}

    def topic(self, topic_id: uuid.UUID) -> tuple[int, str | None]:
        """The topic's name if the client may read it, or why not."""
        if topic_id not in self._readable:
            name = self.broker.topic_name_for_id(topic_id)
            if name is not None and not authz.topic_allowed(self.broker, self.header, Operation.READ, name):
                self._readable[topic_id] = None
                return Err.TOPIC_AUTHORIZATION_FAILED, None
            self._readable[topic_id] = name
        name = self._readable[topic_id]
        if name is None:
            known = self.broker.topic_name_for_id(topic_id) is not None
            return (Err.TOPIC_AUTHORIZATION_FAILED if known else Err.UNKNOWN_TOPIC_ID), None
        return Err.NONE, name

    def row(self, tp: TopicIdPartition) -> _Row:
        r = self.rows.get(tp)
        if r is None:
            _code, name = self.topic(tp[0])
            r = self.rows[tp] = {
                "partition_index": tp[1],
                "error_code": Err.NONE,
                "error_message": None,
                "acknowledge_error_code": Err.NONE,
                "acknowledge_error_message": None,
                "current_leader": _leader(self.broker, name, tp[1]),
                "records": None,
                "acquired_records": [],
            }
        return r

    async def acknowledge(self, topics: Iterable[Any], key: str) -> None:
        for t in topics:
            code, name = self.topic(t.topic_id)
            for p in t.partitions:
                batches = getattr(p, "acknowledgement_batches", ())
                if not batches:
                    continue
                row = self.row((t.topic_id, int(p.partition_index)))
                if name is None:
                    row[key] = code
                    continue
                row[key] = await self.broker.shares.acknowledge(self.group, name, int(p.partition_index), self.member,
                                                                _acks(batches))  # fmt: skip

    def topics_out(self, fields: tuple[str, ...]) -> list[dict[str, Any]]:
        grouped: dict[uuid.UUID, list[_Row]] = {}
        for (tid, _p), row in self.rows.items():
            grouped.setdefault(tid, []).append({k: row[k] for k in fields})
        return [{"topic_id": tid, "partitions": parts} for tid, parts in grouped.items()]


def _top_level(code: int, message: str | None, fetch: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"throttle_time": 0, "error_code": code, "error_message": message, "responses": []}
    out["node_endpoints"] = []
    if fetch:
        out["acquisition_lock_timeout"] = 0
    return out


def _bad_acks(topics: Iterable[Any]) -> bool:
    return any(
        int(t) == 4 or not b.acknowledge_types
        for topic in topics
        for p in topic.partitions
        for b in getattr(p, "acknowledgement_batches", ())
        for t in (b.acknowledge_types or (4,))
    )


def _has_acks(topics: Iterable[Any]) -> bool:
    return any(getattr(p, "acknowledgement_batches", ()) for t in topics for p in t.partitions)


async def _share_fetch(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    r = _Request(broker, header, req)
    epoch = int(req.share_session_epoch)
    if not r.group or not r.member:
        return _top_level(Err.INVALID_REQUEST, "GroupId and MemberId must be set", True)
    if _bad_acks(req.topics) or (epoch == OPEN_EPOCH and _has_acks(req.topics)):
        return _top_level(Err.INVALID_REQUEST, "invalid acknowledgements", True)
    if not authz.group_allowed(broker, header, Operation.READ, r.group):
        return _top_level(Err.GROUP_AUTHORIZATION_FAILED, None, True)
    shares = broker.shares
    key = (r.group, r.member)
    code, session = shares.sessions.begin(key, epoch, fetch=True)
    if session is None:
        return _top_level(code, None, True)
    await r.acknowledge(req.topics, "acknowledge_error_code")
    if epoch == CLOSE_EPOCH:
        shares.sessions.close(key)
        _release(broker, r, session.partitions)
    else:
        added = [(t.topic_id, int(p.partition_index)) for t in req.topics for p in t.partitions]
        forgotten = [(t.topic_id, int(p)) for t in req.forgotten_topics_data for p in t.partitions]
        shares.sessions.update(session, added, forgotten)
        _release(broker, r, forgotten)
        await _fetch(broker, r, list(session.partitions))
    out = _top_level(Err.NONE, None, True)
    out["acquisition_lock_timeout"] = shares.config.record_lock_duration_ms
    fields = ("partition_index", "error_code", "error_message", "acknowledge_error_code",
              "acknowledge_error_message", "current_leader", "records", "acquired_records")  # fmt: skip
    out["responses"] = r.topics_out(fields)
    return out


def _release(broker: Broker, r: _Request, tps: Iterable[TopicIdPartition]) -> None:
    keys = []
    for tid, p in tps:
        _code, name = r.topic(tid)
        if name is not None:
            keys.append((r.group, name, p))
    broker.shares.release(r.group, r.member, keys)


async def _fetch(broker: Broker, r: _Request, tps: list[TopicIdPartition]) -> None:
    req = r.req
    deadline = time.monotonic() + _ms(req.max_wait) / 1000
    budget = int(req.max_bytes) if int(req.max_bytes) > 0 else 2**31 - 1
    while True:
        got = False
        parts = []
        for tid, p in tps:
            code, name = r.topic(tid)
            if name is None:
                r.row((tid, p))["error_code"] = code
                continue
            part = broker.partition(name, p)
            if part is not None:
                parts.append(part)
            code, fetched = await broker.shares.acquire(r.group, name, p, r.member, int(req.max_records), budget)
            if code:
                r.row((tid, p))["error_code"] = code
                continue
            if fetched is None or not fetched.acquired:
                continue
            got = True
            row = r.row((tid, p))
            row["records"] = fetched.records
            row["acquired_records"] = [
                {"first_offset": a.first_offset, "last_offset": a.last_offset, "delivery_count": a.delivery_count}
                for a in fetched.acquired
            ]
            budget = max(budget - len(fetched.records), 0)
        remaining = deadline - time.monotonic()
        if got or remaining <= 0 or any(row["error_code"] for row in r.rows.values()):
            return
        await broker.shares.wait(parts, remaining)


def handle_share_fetch(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _share_fetch(broker, header, decode_body(frame, header))


async def _share_acknowledge(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    r = _Request(broker, header, req)
    epoch = int(req.share_session_epoch)
    if not r.group or not r.member:
        return _top_level(Err.INVALID_REQUEST, "GroupId and MemberId must be set", False)
    if _bad_acks(req.topics):
        return _top_level(Err.INVALID_REQUEST, "invalid acknowledgements", False)
    if not authz.group_allowed(broker, header, Operation.READ, r.group):
        return _top_level(Err.GROUP_AUTHORIZATION_FAILED, None, False)
    key = (r.group, r.member)
    code, session = broker.shares.sessions.begin(key, epoch, fetch=False)
    if session is None:
        return _top_level(code, None, False)
    await r.acknowledge(req.topics, "error_code")
    if epoch == CLOSE_EPOCH:
        broker.shares.sessions.close(key)
        _release(broker, r, session.partitions)
    out = _top_level(Err.NONE, None, False)
    out["responses"] = r.topics_out(("partition_index", "error_code", "error_message", "current_leader"))
    return out


def handle_share_acknowledge(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _share_acknowledge(broker, header, decode_body(frame, header))
