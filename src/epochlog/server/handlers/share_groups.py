"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): KIP-932 share groups, translated to the group
coordinator's share-group driver (server/groups/share_groups.py). Topics go by id on the wire; ids and names
the metadata does not know (deleted meanwhile) are left out of the answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.groups.share.messages import ShareHeartbeatRequest
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.handlers.consumer_groups import by_topic, refused_heartbeat

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


async def _heartbeat(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    hb = ShareHeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=int(req.member_epoch),
        rack_id=req.rack_id,
        subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
        client_id=header.client_id or "",
        client_host=authz.client_host(header),
    )
    r = await broker.groups.share_heartbeat(hb)
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


def handle_share_group_heartbeat(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return refused_heartbeat(Err.GROUP_AUTHORIZATION_FAILED, None, req.member_id)
    if req.subscribed_topic_names:
        denied = authz.denied_topics(broker, header, Operation.DESCRIBE, req.subscribed_topic_names)
        if denied:
            message = f"not authorized to describe {', '.join(sorted(denied))}"
            return refused_heartbeat(Err.TOPIC_AUTHORIZATION_FAILED, message, req.member_id)
    return _heartbeat(broker, header, req)


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
    code, message, d = broker.groups.share_describe(group_id)
    if d is None:
        return row | {"error_code": code, "error_message": message}
    members = [
        {
            "member_id": m.member_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "assignment": {"topic_partitions": by_topic(broker, m.assignment, names=True)},
        }
        for m in d.members
    ]
    return row | {
        "error_code": Err.NONE,
        "group_state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor_name": d.assignor,
        "members": members,
    }


def handle_share_group_describe(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    return {"throttle_time": 0, "groups": [_described(broker, header, g) for g in req.group_ids]}
