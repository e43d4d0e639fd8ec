"""DescribeQuorum (KIP-595) and DescribeCluster as a controller answers them.

The metadata log has one voter today, the controller itself, so it leads every epoch and its log end is
the high watermark; the brokers are observers, with the offset and time of their last metadata fetch.
`epochlog metadata-quorum describe` (cli/metadata_quorum_cmd.py) prints this with Kafka's field names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.protocol.errors import Err

if TYPE_CHECKING:
    from epochlog.server.cluster.controller_server import ControllerServer

METADATA_TOPIC = "__cluster_metadata"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class ObserverState:
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


def record_fetch(observers: dict[int, ObserverState], replica_id: int, fetch_offset: int, log_end: int) -> None:
    """A broker fetched the metadata log from ``fetch_offset``: what it holds is everything below it."""
    if replica_id < 0:
        return
    now = _now_ms()
    prev = observers.get(replica_id)
    caught_up = now if fetch_offset >= log_end else (prev.last_caught_up_ms if prev else -1)
    observers[replica_id] = ObserverState(fetch_offset, now, caught_up)


def describe_quorum(server: ControllerServer, req: Any, version: int) -> dict[str, Any]:
    assert server.metadata is not None
    plog = server.metadata.log
    now = _now_ms()
    partitions_out: list[dict[str, Any]] = []
    topics_out: list[dict[str, Any]] = []
    for t in req.topics:
        for p in t.partitions:
            if t.topic_name != METADATA_TOPIC or int(p.partition_index) != 0:
                partitions_out.append(_error_row(int(p.partition_index), Err.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            leo = plog.log_end_offset
            voter = _replica(server.config.node_id, leo, now, now)
            observers = [
                _replica(b, o.log_end_offset, o.last_fetch_ms, o.last_caught_up_ms)
                for b, o in sorted(server.observers.items())
                if b != server.config.node_id
            ]
            partitions_out.append(
                {
                    "partition_index": 0,
                    "error_code": Err.NONE,
                    "error_message": None,
                    "leader_id": server.config.node_id,
                    "leader_epoch": max(plog.epoch_cache.latest_epoch(), 0),
                    "high_watermark": leo,
                    "current_voters": [voter],
                    "observers": observers,
                }
            )
        topics_out.append({"topic_name": t.topic_name, "partitions": partitions_out})
        partitions_out = []
    out: dict[str, Any] = {"error_code": Err.NONE, "topics": topics_out}
    if version >= 2:
        out["error_message"] = None
        out["nodes"] = [
            {
                "node_id": server.config.node_id,
                "listeners": [{"name": "CONTROLLER", "host": server.config.host, "port": server.bound_port()}],
            }
        ]
    return out


def describe_cluster(server: ControllerServer, version: int) -> dict[str, Any]:
    """DescribeCluster with endpoint type 2 (controllers), as a controller answers `--bootstrap-controller`."""
    me: dict[str, Any] = {
        "broker_id": server.config.node_id,
        "host": server.config.host,
        "port": server.bound_port(),
        "rack": None,
    }
    if version >= 2:
        me["is_fenced"] = False
    return {
        "throttle_time": 0,
        "error_code": Err.NONE,
        "error_message": None,
        "endpoint_type": 2,
        "cluster_id": server.cluster_id,
        "controller_id": server.config.node_id,
        "brokers": [me],
        "cluster_authorized_operations": -2147483648,
    }


def _replica(node: int, leo: int, last_fetch_ms: int, last_caught_up_ms: int) -> dict[str, Any]:
    return {
        "replica_id": node,
        "replica_directory_id": None,
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
