"""The controller's APIs: which requests it serves and in which versions, the dispatch of each to its
handler, and the handlers of the requests brokers send for themselves (registration, heartbeats, ISR changes,
directory assignments, producer id blocks). A request whose decision was proposed is answered once the
decision is committed; the admin requests brokers forward are decided in controller_admin."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.api_versions import kio_range as supported_range_any
from epochlog.protocol.codec import RequestHeader, decode_body
from epochlog.protocol.errors import Err
from epochlog.replication.types import AlterIsr
from epochlog.server.cluster import controller_admin
from epochlog.server.cluster.controller_admin import topic_by_id
from epochlog.server.cluster.not_controller import not_controller
from epochlog.server.cluster.quorum_describe import describe_cluster, describe_quorum
from epochlog.server.handlers.sasl import sasl_on_plain_listener
from epochlog.server.quorum.driver import NotLeader
from epochlog.server.responses import NO_RESPONSE, Waiting

if TYPE_CHECKING:
    from epochlog.server.cluster.controller_server import ControllerServer

log = logging.getLogger("epochlog.controller")

PRODUCER_ID_BLOCK = 1000
# APIs the controller serves, with the versions its peers (our brokers, admin forwarding) use.
CONTROLLER_APIS: dict[int, tuple[int, int]] = {
    1: (12, 12),  # Fetch of __cluster_metadata (voters and observers)
    52: (2, 2),  # Vote
    53: (1, 1),  # BeginQuorumEpoch
    54: (1, 1),  # EndQuorumEpoch
    59: (1, 1),  # FetchSnapshot
    18: (0, 3),  # ApiVersions
    56: (2, 3),  # AlterPartition
    62: (0, 4),  # BrokerRegistration
    63: (0, 1),  # BrokerHeartbeat
    67: (0, 0),  # AllocateProducerIds
    55: (0, 2),  # DescribeQuorum
    80: (0, 0),  # AddRaftVoter (KIP-853)
    81: (0, 0),  # RemoveRaftVoter
    82: (0, 0),  # UpdateRaftVoter
    60: (1, 2),  # DescribeCluster (endpoint type 2: the controllers)
    73: (0, 0),  # AssignReplicasToDirs
    17: (0, 1),  # SaslHandshake (answered by the connection on a SASL listener)
    36: (0, 2),  # SaslAuthenticate
}
# Requests only the active controller may decide; a standby answers them NOT_CONTROLLER.
ACTIVE_ONLY = {62, 63, 56, 19, 20, 33, 37, 43, 44, 45, 46, 67, 73, 30, 31, 49, 51}
QUORUM_APIS = {1, 52, 53, 54, 59}
COMMIT_TIMEOUT_S = 30.0
# Admin requests forwarded by brokers keep the client's version: accept all kio parses.
for _key in (19, 20, 33, 37, 43, 44, 45, 46, 30, 31, 49, 51):
    CONTROLLER_APIS[_key] = supported_range_any(_key)


def is_supported(api_key: int, version: int) -> bool:
    r = CONTROLLER_APIS.get(api_key)
    return r is not None and r[0] <= version <= r[1]


async def _answer_when_committed(
    server: ControllerServer, key: int, version: int, req: Any, resp: dict[str, Any]
) -> Any:
    assert server.quorum is not None
    try:
        await server.quorum.committed(server.proposed_last, COMMIT_TIMEOUT_S)
    except (NotLeader, TimeoutError):
        return not_controller(key, version, req)
    return resp


def broker_registration(server: ControllerServer, conn: Any, req: Any) -> dict[str, Any]:
    if server.config.cluster_id and req.cluster_id and req.cluster_id != server.config.cluster_id:
        log.warning(
            "refusing broker %d: it belongs to cluster %s, not %s",
            req.broker_id,
            req.cluster_id,
            server.config.cluster_id,
        )
        return {"throttle_time": 0, "error_code": Err.INCONSISTENT_CLUSTER_ID, "broker_epoch": -1}
    host, port = "127.0.0.1", 0
    if req.listeners:
        host, port = req.listeners[0].host, int(req.listeners[0].port)
    if not server.cluster_id and req.cluster_id:
        server.cluster_id = str(req.cluster_id)
    # KIP-966: the epoch in the broker's clean-shutdown marker (-1 without one); the core compares it with
    # the epoch on record to tell a clean shutdown from a crash or a power loss.
    previous = int(getattr(req, "previous_broker_epoch", -1))
    listeners = tuple((str(x.name), str(x.host), int(x.port)) for x in req.listeners or ())
    epoch = server.core.register_broker(
        int(req.broker_id),
        now_ms(),
        host=host,
        port=port,
        listeners=listeners,
        previous_epoch=previous,
        rack=str(req.rack) if req.rack else None,
    )
    clean = server.core.brokers[int(req.broker_id)].clean_shutdown
    server.qc.session_opened(conn, int(req.broker_id))
    server.offline_dirs.pop(int(req.broker_id), None)  # a restarted broker's directories start online
    server.dir_assignments.pop(int(req.broker_id), None)
    server.persist()
    log.info(
        "broker %d registered at %s:%d with epoch %d (clean shutdown: %s)", req.broker_id, host, port, epoch, clean
    )
    return {"throttle_time": 0, "error_code": Err.NONE, "broker_epoch": epoch}


def broker_heartbeat(server: ControllerServer, conn: Any, req: Any) -> dict[str, Any]:
    bid = int(req.broker_id)
    b = server.core.brokers.get(bid)
    if b is None or int(req.broker_epoch) != b.epoch:
        return {"throttle_time": 0, "error_code": Err.STALE_BROKER_EPOCH, "is_fenced": True, "should_shut_down": False}
    server.qc.session_opened(conn, bid)
    if req.want_shut_down:
        if not b.shutting_down:
            log.info("broker %d asked for controlled shutdown; moving its leaderships", bid)
            server.core.controlled_shutdown(bid)
            server.persist()
        return {"throttle_time": 0, "error_code": Err.NONE, "is_fenced": True, "should_shut_down": True}
    ok = server.core.heartbeat(bid, now_ms())
    offline = {d for d in getattr(req, "offline_log_dirs", ()) if d is not None}
    if offline != server.offline_dirs.get(bid, set()):
        server.offline_dirs[bid] = offline
        _replicas_offline(server, bid)
    return {
        "throttle_time": 0,
        "error_code": Err.NONE,
        "is_caught_up": True,
        "is_fenced": not ok,
        "should_shut_down": False,
    }


def assign_replicas_to_dirs(server: ControllerServer, req: Any) -> dict[str, Any]:
    """Which directory holds each replica of the broker (KIP-858). Our brokers send it for the
    replicas of a directory that failed; with the heartbeat's offline_log_dirs it tells the core
    which replicas are offline."""
    bid = int(req.broker_id)
    b = server.core.brokers.get(bid)
    if b is None or int(req.broker_epoch) != b.epoch:
        return {"throttle_time": 0, "error_code": Err.STALE_BROKER_EPOCH, "directories": []}
    dirs = server.dir_assignments.setdefault(bid, {})
    out = []
    for d in req.directories:
        placed = dirs.setdefault(d.id_, set()) if d.id_ is not None else set()
        topics = []
        for t in d.topics:
            name = topic_by_id(server, t.topic_id)
            rows = []
            for p in t.partitions:
                if name is not None:
                    placed.add((name, int(p.partition_index)))
                code = Err.NONE if name is not None else Err.UNKNOWN_TOPIC_ID
                rows.append({"partition_index": p.partition_index, "error_code": code})
            topics.append({"topic_id": t.topic_id, "partitions": rows})
        out.append({"id_": d.id_, "topics": topics})
    _replicas_offline(server, bid)
    return {"throttle_time": 0, "error_code": Err.NONE, "directories": out}


def _replicas_offline(server: ControllerServer, bid: int) -> None:
    dirs = server.dir_assignments.get(bid, {})
    hit = [tp for d in server.offline_dirs.get(bid, set()) for tp in sorted(dirs.get(d, ()))]
    if hit and server.core.replicas_offline(bid, hit):
        log.warning("broker %d: replicas on its failed log directory are offline: %s", bid, hit[:20])
        server.persist()


def alter_partition(server: ControllerServer, req: Any, version: int) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        name = topic_by_id(server, t.topic_id) if version >= 2 else getattr(t, "topic_name", None)
        parts = []
        for p in t.partitions:
            new_isr = frozenset(int(s.broker_id) for s in p.new_isr_with_epochs)
            if name is None:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": Err.UNKNOWN_TOPIC_ID,
                        "leader_id": -1,
                        "leader_epoch": -1,
                        "partition_epoch": -1,
                    }
                )
                continue
            code, st = server.core.alter_partition(
                AlterIsr(
                    name,
                    int(p.partition_index),
                    int(req.broker_id),
                    int(p.leader_epoch),
                    new_isr,
                    int(p.partition_epoch),
                )
            )
            row: dict[str, Any] = {"partition_index": p.partition_index, "error_code": code}
            if st is not None:
                row.update(
                    leader_id=st.leader,
                    leader_epoch=st.leader_epoch,
                    isr=sorted(st.isr),
                    partition_epoch=st.partition_epoch,
                )
            else:
                row.update(leader_id=-1, leader_epoch=-1, partition_epoch=-1)
            parts.append(row)
        topics.append({"topic_id": t.topic_id, "partitions": parts})
    server.persist()
    return {"throttle_time": 0, "error_code": Err.NONE, "topics": topics}


def _api_versions(server: ControllerServer, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "error_code": Err.NONE,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(CONTROLLER_APIS.items())
        ],
        "throttle_time": 0,
    }
    if version >= 3 and server.quorum is not None:
        # KIP-853: kraft.version, what kafka-features.sh and the admin client read from a controller. Level 1
        # is a quorum whose voter set lives in the log (formatted with --standalone or
        # --initial-controllers, changed by Add/RemoveRaftVoter); 0 is a static controller.quorum.voters.
        membership = server.quorum.node.membership
        out["supported_features"] = [{"name": "kraft.version", "min_version": 0, "max_version": 1}]
        level = membership.kraft_version
        out["finalized_features"] = [{"name": "kraft.version", "max_version_level": level, "min_version_level": level}]
        out["finalized_features_epoch"] = max(0, membership.history.latest_offset())
    return out


def dispatch(server: ControllerServer, conn: Any, header: RequestHeader, frame: memoryview) -> Any:
    key, version = header.api_key, header.api_version
    if not server.access.allows(server.core.image, header):
        server.access.refused(str(getattr(conn, "peer", "?")), str(getattr(header.session, "principal", "?")), key)
        conn.close()
        return NO_RESPONSE
    if key == 18:
        return _api_versions(server, version)
    if key in (17, 36):
        return sasl_on_plain_listener(header)
    req = decode_body(frame, header)
    if key in QUORUM_APIS:
        assert server.quorum is not None
        # Controllers dial each other as "controller-<id>-raft"; everyone else follows the log as an observer.
        observer = not (header.client_id or "").startswith("controller-")
        # Raft tolerates messages out of order, and a Vote must not wait behind a long-polling Fetch on the
        # same connection; the tasks still start in the order the frames came.
        return Waiting(server.quorum.handle(key, req, observer))
    if key in (80, 81, 82):
        assert server.quorum is not None
        return Waiting(server.quorum.change_voters(key, req))
    if key == 55:
        return describe_quorum(server, req, version)
    if key == 60:
        return describe_cluster(server, version)
    if key in ACTIVE_ONLY and not server.active:
        return not_controller(key, version, req)
    before = server.proposed_last
    try:
        resp = _decide(server, conn, key, version, req)
    except NotLeader:
        return not_controller(key, version, req)
    if server.proposed_last != before:
        # Decided and proposed above, in request order: only the answer waits for the commit.
        return Waiting(_answer_when_committed(server, key, version, req, resp))
    return resp


def _decide(server: ControllerServer, conn: Any, key: int, version: int, req: Any) -> dict[str, Any]:
    if key == 62:
        return broker_registration(server, conn, req)
    if key == 63:
        return broker_heartbeat(server, conn, req)
    if key == 56:
        return alter_partition(server, req, version)
    if key == 19:
        return controller_admin.create_topics(server, req)
    if key == 20:
        return controller_admin.delete_topics(server, req, version)
    if key == 37:
        return controller_admin.create_partitions(server, req)
    if key == 43:
        return controller_admin.elect_leaders(server, req, version)
    if key in (33, 44):
        return controller_admin.alter_configs(server, req, key == 44)
    if key == 45:
        return controller_admin.alter_reassignments(server, req)
    if key == 46:
        return controller_admin.list_reassignments(server, req)
    if key == 73:
        return assign_replicas_to_dirs(server, req)
    if key == 30:
        return controller_admin.create_acls(server, req)
    if key == 31:
        return controller_admin.delete_acls(server, req)
    if key == 51:
        return controller_admin.alter_scram(server, req)
    if key == 49:
        return controller_admin.alter_client_quotas(server, req)
    if key == 67:
        start = server.core.allocate_producer_ids(int(req.broker_id), PRODUCER_ID_BLOCK)
        server.persist()
        return {
            "throttle_time": 0,
            "error_code": Err.NONE,
            "producer_id_start": start,
            "producer_id_len": PRODUCER_ID_BLOCK,
        }
    raise ValueError(f"api {key} is not served by the controller")
