"""The classic consumer-group APIs, translated to the coordinator in server/groups/."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.authz import client_host, session_of

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
COORDINATOR_KEY_SHARE = 2  # KIP-932: "group:topicId:partition", asked by share-partition leaders

GROUP_DENIED = Err.GROUP_AUTHORIZATION_FAILED


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def handle_find_coordinator(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    key_type = getattr(req, "key_type", 0)
    keys = list(req.coordinator_keys) if header.api_version >= 4 else [req.key]
    rows = []
    for key in keys:
        row: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1}
        if key_type not in (COORDINATOR_KEY_GROUP, COORDINATOR_KEY_TRANSACTION, COORDINATOR_KEY_SHARE):
            row.update(error_code=Err.INVALID_REQUEST, error_message=f"unknown coordinator key type {key_type}")
        elif key_type == COORDINATOR_KEY_SHARE and not _share_key_valid(key):
            row.update(error_code=Err.INVALID_REQUEST, error_message="a share key is group:topicId:partition")
        elif key_type == COORDINATOR_KEY_SHARE and not authz.cluster_allowed(broker, header, Operation.CLUSTER_ACTION):
            row.update(error_code=Err.CLUSTER_AUTHORIZATION_FAILED)
        elif key_type == COORDINATOR_KEY_GROUP and not authz.group_allowed(broker, header, Operation.DESCRIBE, key):
            row.update(error_code=GROUP_DENIED)
        elif key_type == COORDINATOR_KEY_TRANSACTION and not authz.txn_allowed(broker, header, Operation.DESCRIBE, key):
            row.update(error_code=Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            # The leader of the key's __consumer_offsets (or __transaction_state) partition coordinates it.
            if key_type == COORDINATOR_KEY_GROUP:
                leader = broker.coordinator_for(key)
            elif key_type == COORDINATOR_KEY_SHARE:
                leader = broker.share_coordinator_for(key)
            else:
                leader = broker.txn_coordinator_for(key)
            ep = broker.image.brokers.get(leader) if leader >= 0 else None
            if ep is None:
                row.update(error_code=Err.COORDINATOR_NOT_AVAILABLE, error_message="no leader for its partition yet")
            else:
                host, port = ep.address_for(session_of(header).listener)
                row.update(node_id=ep.broker_id, host=host, port=port, error_code=Err.NONE)
        row.setdefault("error_message", None)
        rows.append(row)
    if header.api_version >= 4:
        return {"throttle_time": 0, "coordinators": rows}
    row = rows[0]
    return {
        "throttle_time": 0,
        "error_code": row["error_code"],
        "error_message": row["error_message"],
        "node_id": row["node_id"],
        "host": row["host"],
        "port": row["port"],
    }


def _share_key_valid(key: str) -> bool:
    group, _, rest = key.rpartition(":")  # the group id may itself hold colons
    group, _, topic_id = group.rpartition(":")
    try:
        uuid.UUID(topic_id)
        return bool(group) and int(rest) >= 0
    except ValueError:
        return False


async def _join(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    session_ms = _ms(req.session_timeout)
    rebalance_ms = _ms(getattr(req, "rebalance_timeout", session_ms))
    if header.api_version == 0:
        rebalance_ms = session_ms
    r = await broker.groups.join_group(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        client_id=header.client_id or "",
        client_host=client_host(header),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        require_known_member_id=header.api_version >= 4,
    )
    return {
        "throttle_time": 0,
        "error_code": r.error_code,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "leader": r.leader,
        "skip_assignment": False,
        "member_id": r.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in r.members],
    }


def handle_join_group(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return {
            "throttle_time": 0,
            "error_code": GROUP_DENIED,
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": None,
            "leader": "",
            "skip_assignment": False,
            "member_id": req.member_id,
            "members": [],
        }
    return _join(broker, header, req)


async def _sync(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    r = await broker.groups.sync_group(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in req.assignments},
    )
    return {
        "throttle_time": 0,
        "error_code": r.error_code,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignment": r.assignment,
    }


def handle_sync_group(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return {
            "throttle_time": 0,
            "error_code": GROUP_DENIED,
            "protocol_type": None,
            "protocol_name": None,
            "assignment": b"",
        }
    return _sync(broker, header, req)


def handle_heartbeat(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED}
    code = broker.groups.heartbeat(
        req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)
    )
    return {"throttle_time": 0, "error_code": code}


async def _leave(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    if header.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    code, per_member = await broker.groups.leave_group(req.group_id, members)
    rows = [
        {"member_id": m, "group_instance_id": i, "error_code": c}
        for (m, i), c in zip(members, per_member, strict=False)
    ]
    if header.api_version < 3 and per_member and not code:
        code = per_member[0]
    return {"throttle_time": 0, "error_code": code, "members": rows}


def handle_leave_group(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        return {"throttle_time": 0, "error_code": GROUP_DENIED, "members": []}
    return _leave(broker, header, req)


async def _commit(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    from epochlog.server.groups import OffsetCommit

    by_id = header.api_version >= 10
    commits = []
    names: list[tuple[Any, str | None]] = []
    for t in req.topics:
        name = broker.topic_name_for_id(t.topic_id) if by_id else t.name
        names.append((t, name))
    denied = authz.denied_topics(broker, header, Operation.READ, (n for _t, n in names))
    for t, name in names:
        if name is None or name in denied:
            continue
        for p in t.partitions:
            if (name, p.partition_index) not in broker.image.states:
                continue  # answered UNKNOWN_TOPIC_OR_PARTITION below, as Kafka's metadata cache check does
            commits.append(
                OffsetCommit(
                    name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
    generation = getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1))
    results = await broker.groups.commit_offsets(
        req.group_id, generation, req.member_id, getattr(req, "group_instance_id", None), commits
    )
    topics = []
    for t, name in names:
        parts = []
        for p in t.partitions:
            code: int
            if name is None:
                code = Err.UNKNOWN_TOPIC_ID
            elif name in denied:
                code = Err.TOPIC_AUTHORIZATION_FAILED
            elif (name, p.partition_index) not in broker.image.states:
                code = Err.UNKNOWN_TOPIC_OR_PARTITION
            else:
                code = results.get((name, p.partition_index), Err.NONE)
            parts.append({"partition_index": p.partition_index, "error_code": code})
        # Asked by id, an unauthorized topic's name is not told.
        shown = "" if name is None or (by_id and name in denied) else name
        topics.append({"name": shown, "topic_id": getattr(t, "topic_id", None), "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def handle_offset_commit(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.READ, req.group_id):
        # Kafka's answer: the group's error on every partition, nothing committed.
        topics = [
            {
                "name": t.name if header.api_version < 10 else "",
                "topic_id": getattr(t, "topic_id", None),
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": GROUP_DENIED} for p in t.partitions
                ],
            }
            for t in req.topics
        ]
        return {"throttle_time": 0, "topics": topics}
    return _commit(broker, header, req)


def _offset_row(index: int, code: Err) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": -1,
        "committed_leader_epoch": -1,
        "metadata": None,
        "error_code": code,
    }


def _group_refused(topics: Any, by_id: bool, version: int) -> list[dict[str, Any]]:
    """Kafka's answer to a group the principal may not describe: its error and no topics, except before v2
    (no group-level error code) where each asked partition carries it (what the client asked, nothing more)."""
    if topics is None or version >= 2:
        return []
    return [
        {
            "name": "" if by_id else t.name,
            "topic_id": getattr(t, "topic_id", None),
            "partitions": [_offset_row(p, GROUP_DENIED) for p in t.partition_indexes],
        }
        for t in topics
    ]


def _fetch_group(
    broker: Broker,
    header: RequestHeader,
    group_id: str,
    topics: Any,
    by_id: bool,
    require_stable: bool = False,
    member: tuple[str | None, int] | None = None,
) -> tuple[int, list[dict[str, Any]]]:
    if not authz.group_allowed(broker, header, Operation.DESCRIBE, group_id):
        return GROUP_DENIED, _group_refused(topics, by_id, header.api_version)
    if member is not None and (err := broker.groups.validate_consumer_fetch(group_id, *member)):
        return err, []  # a member of a KIP-848 group asks at a stale epoch (or is not one)
    wanted: list[tuple[str, int]] | None = None
    id_of: dict[str, Any] = {}
    refused: list[dict[str, Any]] = []
    checking = authz.enabled(broker)
    if topics is not None:
        wanted = []
        for t in topics:
            name = broker.topic_name_for_id(t.topic_id) if by_id else t.name
            if name is None:
                continue
            if checking and not authz.topic_allowed(broker, header, Operation.DESCRIBE, name):
                row = {"name": "" if by_id else name, "topic_id": getattr(t, "topic_id", None)}
                row["partitions"] = [_offset_row(p, Err.TOPIC_AUTHORIZATION_FAILED) for p in t.partition_indexes]
                refused.append(row)
                continue
            if by_id:
                id_of[name] = t.topic_id
            wanted.extend((name, p) for p in t.partition_indexes)
    code, rows = broker.groups.fetch_offsets(group_id, wanted)
    if checking and topics is None:
        # Every committed topic: those the principal may not describe are left out.
        hidden = authz.denied_topics(broker, header, Operation.DESCRIBE, {r.topic for r in rows})
        rows = [r for r in rows if r.topic not in hidden]
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault(r.topic, []).append(
            {
                "partition_index": r.partition,
                "committed_offset": r.offset,
                "committed_leader_epoch": r.leader_epoch,
                "metadata": r.metadata,
                "error_code": r.error_code,
            }
        )
        # KIP-447: a consumer that asks for stable offsets waits while a transaction holds one back.
        if require_stable and broker.groups.txn_offsets.pending_for(group_id, (r.topic, r.partition)):
            grouped[r.topic][-1].update(committed_offset=-1, error_code=Err.UNSTABLE_OFFSET_COMMIT)
    out = []
    for name, parts in grouped.items():
        info = broker.image.topics.get(name)
        topic_id = id_of.get(name) or (info.uuid if info else None)
        out.append({"name": name, "topic_id": topic_id, "partitions": parts})
    return code, out + refused


def handle_offset_fetch(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    if header.api_version >= 8:
        groups = []
        for g in req.groups:
            member = (g.member_id, int(g.member_epoch)) if header.api_version >= 9 else None
            code, topics = _fetch_group(
                broker, header, g.group_id, g.topics, header.api_version >= 10, req.require_stable, member
            )
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return {"throttle_time": 0, "groups": groups}
    code, topics = _fetch_group(broker, header, req.group_id, req.topics, False, getattr(req, "require_stable", False))
    return {"throttle_time": 0, "topics": topics, "error_code": code}


def handle_list_groups(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    states = list(getattr(req, "states_filter", ()) or ()) or None
    types = {t.lower() for t in getattr(req, "types_filter", ()) or ()}
    listed = [(g, pt, st, "classic") for g, pt, st in broker.groups.list_groups(states)]
    # KIP-848 groups: Kafka lists them with protocol type "consumer" and type "consumer".
    wanted = {s.lower() for s in states} if states else None
    listed += [
        (g, "consumer", st, "consumer")
        for g, st in broker.groups.list_consumer_groups()
        if wanted is None or st.lower() in wanted
    ]
    # KIP-932 share groups: protocol type "share", type "share".
    listed += [
        (g, "share", st, "share")
        for g, st in broker.groups.list_share_groups()
        if wanted is None or st.lower() in wanted
    ]
    if types:
        listed = [x for x in listed if x[3] in types]
    if not authz.cluster_allowed(broker, header, Operation.DESCRIBE):
        listed = [x for x in listed if authz.group_allowed(broker, header, Operation.DESCRIBE, x[0])]
    groups = [{"group_id": g, "protocol_type": pt, "group_state": st, "group_type": gt} for g, pt, st, gt in listed]
    return {"throttle_time": 0, "error_code": Err.NONE, "groups": groups}


def handle_describe_groups(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    wanted = list(req.groups)
    refused = {g for g in wanted if not authz.group_allowed(broker, header, Operation.DESCRIBE, g)}
    described = iter(broker.groups.describe_groups([g for g in wanted if g not in refused]))
    groups = [_group_denied_row(g) if g in refused else next(described) for g in wanted]
    if header.api_version >= 6:
        # KIP-1043: from v6 a group that does not exist is GROUP_ID_NOT_FOUND, not a "Dead" group.
        for g in groups:
            missing = g["error_code"] == Err.NONE and g["group_state"] == "Dead"
            g["error_code"] = Err.GROUP_ID_NOT_FOUND if missing else g["error_code"]
            g["error_message"] = f"group {g['group_id']!r} not found" if missing else None
    return {"throttle_time": 0, "groups": groups}


def _group_denied_row(group_id: str) -> dict[str, Any]:
    from epochlog.server.groups.coordinator import AUTHORIZED_OPERATIONS_OMITTED

    return {
        "error_code": GROUP_DENIED,
        "error_message": None,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


async def _delete(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    wanted = list(req.groups_names)
    refused = {g for g in wanted if not authz.group_allowed(broker, header, Operation.DELETE, g)}
    allowed = [g for g in wanted if g not in refused]
    results = await broker.groups.delete_groups(allowed) if allowed else []
    rows = [{"group_id": g, "error_code": c} for g, c in results]
    rows += [{"group_id": g, "error_code": GROUP_DENIED} for g in wanted if g in refused]
    return {"throttle_time": 0, "results": rows}


def handle_delete_groups(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    return _delete(broker, header, decode_body(frame, header))


async def _offset_delete(broker: Broker, header: RequestHeader, req: Any) -> dict[str, Any]:
    # As Kafka's KafkaApis: partitions the metadata does not know are answered here and never reach the
    # coordinator; the rest are its to decide.
    rows: dict[str, dict[int, int]] = {}
    asked: list[tuple[str, int]] = []
    denied = authz.denied_topics(broker, header, Operation.READ, (t.name for t in req.topics))
    for t in req.topics:
        for p in t.partitions:
            index = int(p.partition_index)
            if t.name in denied:
                rows.setdefault(t.name, {})[index] = Err.TOPIC_AUTHORIZATION_FAILED
            elif (t.name, index) in broker.image.states:
                asked.append((t.name, index))
            else:
                rows.setdefault(t.name, {})[index] = Err.UNKNOWN_TOPIC_OR_PARTITION
    # Asked even with nothing left to delete: the group's own errors (GROUP_ID_NOT_FOUND...) still apply.
    code, results = await broker.groups.delete_offsets(req.group_id, asked)
    for (name, index), c in results.items():
        rows.setdefault(name, {})[index] = c
    topics = [
        {"name": name, "partitions": [{"partition_index": i, "error_code": c} for i, c in parts.items()]}
        for name, parts in rows.items()
    ]
    return {"error_code": code, "throttle_time": 0, "topics": topics}


def handle_offset_delete(broker: Broker, header: RequestHeader, frame: memoryview) -> Any:
    req = decode_body(frame, header)
    if not authz.group_allowed(broker, header, Operation.DELETE, req.group_id):
        return {"error_code": GROUP_DENIED, "throttle_time": 0, "topics": []}
    return _offset_delete(broker, header, req)
