"""DescribeQuorum (KIP-595) and DescribeCluster as a controller answers them.

The quorum's leader knows every replica's position and last fetch; any other controller answers with
what it knows (the leader and epoch), as Kafka's does with NOT_LEADER_OR_FOLLOWER for the details.
`epochlog metadata-quorum describe` (cli/metadata_quorum_cmd.py) prints this with Kafka's field names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms as _now_ms
from epochlog.protocol.errors import Err
from epochlog.raft.roles import Role
from epochlog.server.quorum.voter_wire import dir_uuid

if TYPE_CHECKING:
    from epochlog.server.cluster.controller_server import ControllerServer

METADATA_TOPIC = "__cluster_metadata"


def describe_quorum(server: ControllerServer, req: Any, version: int) -> dict[str, Any]:
    assert server.quorum is not None
    node = server.quorum.node
    qlog = server.quorum.log
    now = _now_ms()
    topics_out: list[dict[str, Any]] = []
    for t in req.topics:
        partitions_out: list[dict[str, Any]] = []
        for p in t.partitions:
            if t.topic_name != METADATA_TOPIC or int(p.partition_index) != 0:
                partitions_out.append(_error_row(int(p.partition_index), Err.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if node.role is not Role.LEADER or node.leader is None:
                # Only a follower knows a live leader; a resigned leader's epoch has none left to name.
                row = _error_row(0, Err.NOT_LEADER_OR_FOLLOWER)
                row.update(leader_id=node.leader_id if node.role is Role.FOLLOWER else -1, leader_epoch=node.epoch)
                partitions_out.append(row)
                continue
            lead = node.leader
            # KIP-853: a voter's directory id, from the voter set in force (none in a static quorum). A leader that
            # removed itself leads on until the removal commits, but is no longer among the voters.
            dirs = {v.node_id: v.directory_id for v in node.membership.voters.voters}
            own = [_replica(node.node_id, qlog.log_end_offset, now, now, dirs.get(node.node_id, ""))]
            voters = (own if node.is_voter else []) + [
                _replica(v, pr.end_offset, pr.last_fetch_ms, pr.last_caught_up_ms, dirs.get(v, ""))
                for v, pr in sorted(lead.voter_progress.items())
            ]
            # A combined node's broker follows the log as an observer under the voter's own id; Kafka's
            # combined node shares one raft client, so it lists the node once, as a voter.
            observers = [
                _replica(b, pr.end_offset, pr.last_fetch_ms, pr.last_caught_up_ms)
                for b, pr in sorted(lead.observer_progress.items())
                if b not in server.quorum.voters
            ]
            partitions_out.append(
                {
                    "partition_index": 0,
                    "error_code": Err.NONE,
                    "error_message": None,
                    "leader_id": node.node_id,
                    "leader_epoch": node.epoch,
                    "high_watermark": node.high_watermark,
                    "current_voters": voters,
                    "observers": observers,
                }
            )
        topics_out.append({"topic_name": t.topic_name, "partitions": partitions_out})
    out: dict[str, Any] = {"error_code": Err.NONE, "topics": topics_out}
    if version >= 2:
        out["error_message"] = None
        out["nodes"] = [
            {"node_id": v, "listeners": [{"name": "CONTROLLER", "host": h, "port": port}]}
            for v, (h, port) in sorted(server.quorum.voters.items())
        ]
    return out


def describe_cluster(server: ControllerServer, version: int) -> dict[str, Any]:
    """DescribeCluster with endpoint type 2 (controllers), as a controller answers `--bootstrap-controller`."""
    assert server.quorum is not None
    controllers: list[dict[str, Any]] = []
    for v, (h, port) in sorted(server.quorum.voters.items()):
        row: dict[str, Any] = {"broker_id": v, "host": h, "port": port, "rack": None}
        if version >= 2:
            row["is_fenced"] = False
        controllers.append(row)
    leader = server.quorum.node.leader_id
    return {
        "throttle_time": 0,
        "error_code": Err.NONE,
        "error_message": None,
        "endpoint_type": 2,
        "cluster_id": server.cluster_id,
        "controller_id": leader if leader >= 0 else -1,
        "brokers": controllers,
        "cluster_authorized_operations": -2147483648,
    }


def _replica(node: int, leo: int, last_fetch_ms: int, last_caught_up_ms: int, directory: str = "") -> dict[str, Any]:
    return {
        "replica_id": node,
        "replica_directory_id": dir_uuid(directory),
        "log_end_offset": leo,
        "last_fetch_timestamp": last_fetch_ms,
        "last_caught_up_timestamp": last_caught_up_ms,
    }


def _error_row(index: int, code: Err) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "error_message": None,
        "leader_id": -1,
        "leader_epoch": -1,
        "high_watermark": -1,
        "current_voters": [],
        "observers": [],
    }
