"""ApiVersions, Metadata and DescribeCluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.api_versions import advertised
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.security.acl import Operation
from epochlog.server import authz
from epochlog.server.authz import session_of
from epochlog.server.handlers.leader_hints import disowned
from epochlog.server.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from epochlog.server.topics import validate_topic_name

if TYPE_CHECKING:
    from epochlog.controller.image import TopicInfo
    from epochlog.server.broker_api import BrokerApi as Broker


def handle_api_versions(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    # The body (client software name/version) is informational; a malformed one must not
    # stop the negotiation, so it is not decoded at all.
    return {
        "error_code": Err.NONE,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised()],
        "throttle_time": 0,
    }


def _broker_row(node: int, host: str, port: int, rack: str | None) -> dict[str, Any]:
    return {"node_id": node, "broker_id": node, "host": host, "port": port, "rack": rack, "is_fenced": False}


def _broker_rows(broker: Broker, header: RequestHeader) -> list[dict[str, Any]]:
    # Each broker as reached through the listener this request came in on (Kafka's per-listener Metadata).
    listener = session_of(header).listener
    return [_broker_row(b.broker_id, *b.address_for(listener), b.rack) for b in broker.image.live_brokers()]


def _controller_id(broker: Broker) -> int:
    live = broker.image.live_brokers()
    return live[0].broker_id if live else -1


def _topic_row(broker: Broker, name: str) -> dict[str, Any]:
    image = broker.image
    info = image.topics[name]
    live = {b.broker_id for b in image.live_brokers()}
    now = now_ms()
    parts = []
    for p, st in sorted(info.partitions.items()):
        leader = -1 if disowned(broker, name, p, st.leader, now) else st.leader
        parts.append(
            {
                "error_code": Err.NONE if leader >= 0 else Err.LEADER_NOT_AVAILABLE,
                "partition_index": p,
                "leader_id": leader,
                "leader_epoch": st.leader_epoch,
                "replica_nodes": list(st.replicas),
                "isr_nodes": sorted(st.isr),
                # A fenced broker's replicas, and those on a broker's failed log directory (KIP-858).
                "offline_replicas": [
                    r for r in st.replicas if r not in live or (name, p) in image.offline_replicas.get(r, ())
                ],
            }
        )
    return topic_entry(name, info, parts)


def topic_entry(name: str, info: TopicInfo, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One topic of a Metadata answer; DescribeTopicPartitions answers the same fields."""
    return {
        "error_code": Err.NONE,
        "name": name,
        "topic_id": info.uuid,
        "is_internal": name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC),
        "partitions": parts,
        "topic_authorized_operations": -2147483648,
    }


def handle_metadata(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    req = decode_body(frame, header)
    version = header.api_version
    topics_out = []
    if req.topics is None or (version == 0 and not req.topics):
        # null (v1+) or empty (v0) means every topic
        names = sorted(broker.image.topics)
        if authz.enabled(broker):
            # Topics the principal may not describe are left out, not refused: it learns nothing of them.
            hidden = authz.denied_topics(broker, header, Operation.DESCRIBE, names)
            names = [n for n in names if n not in hidden]
        topics_out = [_topic_row(broker, n) for n in names]
    else:
        allow_auto = getattr(req, "allow_auto_topic_creation", True)
        checking = authz.enabled(broker)
        may_create_any: bool | None = None
        for t in req.topics:
            name = t.name
            by_id = name is None
            if name is None:
                # by id (v10+); a null name with a null id names nothing either
                topic_id = getattr(t, "topic_id", None)
                name = broker.topic_name_for_id(topic_id) if topic_id is not None else None
                if name is None:
                    topics_out.append(
                        {"error_code": Err.UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id, "partitions": []}
                    )
                    continue
            if checking and not authz.topic_allowed(broker, header, Operation.DESCRIBE, name):
                # Whether or not it exists; asked by id, not even its name.
                topics_out.append(
                    {
                        "error_code": Err.TOPIC_AUTHORIZATION_FAILED,
                        "name": None if by_id else name,
                        "topic_id": getattr(t, "topic_id", None) if by_id else None,
                        "partitions": [],
                    }
                )
                continue
            if name not in broker.image.topics:
                reason = validate_topic_name(name)
                if reason:
                    topics_out.append({"error_code": Err.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []})
                    continue
                if allow_auto and broker.config.auto_create_topics_enable:
                    if checking:
                        if may_create_any is None:
                            may_create_any = authz.cluster_allowed(broker, header, Operation.CREATE)
                        if not may_create_any and not authz.topic_allowed(broker, header, Operation.CREATE, name):
                            topics_out.append(
                                {"error_code": Err.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []}
                            )
                            continue
                    broker.maybe_auto_create(name)
                    # Kafka's answer while the controller creates it: retry shortly.
                    topics_out.append({"error_code": Err.LEADER_NOT_AVAILABLE, "name": name, "partitions": []})
                else:
                    topics_out.append({"error_code": Err.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []})
                continue
            topics_out.append(_topic_row(broker, name))
    return {
        "throttle_time": 0,
        "brokers": _broker_rows(broker, header),
        "cluster_id": broker.cluster_id,
        "controller_id": _controller_id(broker),
        "topics": topics_out,
        "cluster_authorized_operations": -2147483648,
        "error_code": Err.NONE,
    }


def handle_describe_cluster(broker: Broker, header: RequestHeader, frame: memoryview) -> dict[str, Any]:
    decode_body(frame, header)
    return {
        "throttle_time": 0,
        "error_code": Err.NONE,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": broker.cluster_id,
        "controller_id": _controller_id(broker),
        "brokers": _broker_rows(broker, header),
        "cluster_authorized_operations": -2147483648,
    }
