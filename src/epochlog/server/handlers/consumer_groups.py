"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): KIP-848 groups, translated to the group
coordinator's consumer-group driver (server/groups/consumer_groups.py).

The core speaks in topic names; the wire in topic ids. Ids the metadata does not know are dropped from what a
member says it owns (the topic is gone, so is the partition), and topics without an id (deleted meanwhile)
are left out of the answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from epochlog.groups.consumer.messages import HeartbeatRequest
from epochlog.groups.consumer.model import Assignment
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

CONSUMER_MEMBER = 1  # ConsumerGroupDescribe v1's MemberType: a member speaking the consumer protocol


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _owned(broker: Broker, topics: Any) -> Assignment | None:
    if topics is None:
        return None
    owned: set[tuple[str, int]] = set()
    for t in topics:
        name = broker.topic_name_for_id(t.topic_id)
        if name is not None:
            owned.update((name, int(p)) for p in t.partitions)
    return frozenset(owned)


def by_topic(broker: Broker, tps: Iterable[tuple[str, int]], names: bool) -> list[dict[str, Any]]:
    """Partitions as a heartbeat or describe answer lists them: by topic id (and name), topics gone left out."""
    grouped: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        grouped.setdefault(t, []).append(p)
    rows = []
    for t, parts in grouped.items():
        info = broker.image.topics.get(t)
        if info is None:
            continue
        row: dict[str, Any] = {"topic_id": info.uuid, "partitions": parts}
        if names:
            row["topic_name"] = t
        rows.append(row)
    return rows


def refused_heartbeat(code: int, message: str | None, member_id: str) -> dict[str, Any]:
    """A consumer or share group heartbeat's answer to a request refused before the group saw it."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "member_id": member_id or None,
        "member_epoch": 0,
        "heartbeat_interval": 0,
        "assignment": None,
    }


async def _heartbeat(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    hb = HeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=int(req.member_epoch),
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=_ms(req.rebalance_timeout),
        subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor,
        owned=_owned(broker, req.topic_partitions),
        client_id=header.client_id or "",
        client_host=authz.client_host(header),
    )
    r = await broker.groups.consumer_heartbeat(hb)
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": by_topic(broker, r.assignment, names=False)}
    return {
        "throttle_time": 0,
        "error_code": r.error_code,
        "error_message": r.error_message,
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "heartbeat_interval": r.heartbeat_interval_ms,
        "assignment": assignment,
    }


def handle_consumer_group_heartbeat(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return refused_heartbeat(Err.GROUP_AUTHORIZATION_FAILED, None, req.member_id)
    if req.subscribed_topic_names:
        denied = authz.denied_topics(broker, header, Operation.DESCRIBE, req.subscribed_topic_names)
        if denied:
            message = f"not authorized to describe {', '.join(sorted(denied))}"
            return refused_heartbeat(Err.TOPIC_AUTHORIZATION_FAILED, message, req.member_id)
    return _heartbeat(broker, header, req)


def _member(broker: Broker, m: Any) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "instance_id": m.instance_id,
        "rack_id": m.rack_id,
        "member_epoch": m.member_epoch,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": {"topic_partitions": by_topic(broker, m.assignment, names=True)},
        "target_assignment": {"topic_partitions": by_topic(broker, m.target_assignment, names=True)},
        "member_type": CONSUMER_MEMBER,
    }


def _described(broker: Broker, header: RequestHeader, group_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "group_id": group_id,
        "error_message": None,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
    }
    if not authz.group_allowed(broker, header, Operation.DESCRIBE, group_id):
        return row | {"error_code": Err.GROUP_AUTHORIZATION_FAILED}
    code, message, d = broker.groups.consumer_describe(group_id)
    if d is None:
        return row | {"error_code": code, "error_message": message}
    return row | {
        "error_code": Err.NONE,
        "group_state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor_name": d.assignor,
        "members": [_member(broker, m) for m in d.members],
    }


def handle_consumer_group_describe(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    return {"throttle_time": 0, "groups": [_described(broker, header, g) for g in req.group_ids]}
