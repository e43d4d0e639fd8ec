"""The quorum's messages on the wire: raft/messages.py to and from kio's Vote (v2), BeginQuorumEpoch (v1),
EndQuorumEpoch (v1), Fetch (v12) and FetchSnapshot (v1) of ``__cluster_metadata-0``.

Requests go out as kio objects (PeerConnection encodes them); answers to requests we serve are dicts
that the connection builds into kio responses, as every handler's are.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.begin_quorum_epoch.v1 import request as begin_req
from kio.schema.end_quorum_epoch.v1 import request as end_req
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch_snapshot.v1 import request as snap_req
from kio.schema.types import BrokerId, TopicName
from kio.schema.vote.v2 import request as vote_req
from kio.static.primitive import i32, i32Timedelta, i64

from epochlog.protocol.errors import Err
from epochlog.raft import messages as m

TOPIC = "__cluster_metadata"
NO_DIR = None


def _one(parts: Any) -> Any:
    """The single partition of ``__cluster_metadata`` a quorum request or response is about."""
    for t in parts:
        for p in t.partitions:
            return p
    raise ValueError("no __cluster_metadata partition in the message")


# -- requests we send ---------------------------------------------------------------------------
def to_kio(msg: m.Request) -> Any:
    cluster = msg.cluster_id or None
    if isinstance(msg, m.VoteRequest):
        part = vote_req.PartitionData(
            partition_index=i32(0),
            replica_epoch=i32(msg.epoch),
            replica_id=BrokerId(msg.sender),
            replica_directory_id=NO_DIR,
            voter_directory_id=NO_DIR,
            last_offset_epoch=i32(msg.last_epoch),
            last_offset=i64(msg.last_offset),
            pre_vote=msg.pre_vote,
        )
        return vote_req.VoteRequest(
            cluster_id=cluster,
            voter_id=BrokerId(-1),
            topics=(vote_req.TopicData(topic_name=TopicName(TOPIC), partitions=(part,)),),
        )
    if isinstance(msg, m.BeginQuorumEpochRequest):
        bpart = begin_req.PartitionData(
            partition_index=i32(0),
            voter_directory_id=NO_DIR,
            leader_id=BrokerId(msg.leader_id),
            leader_epoch=i32(msg.epoch),
        )
        return begin_req.BeginQuorumEpochRequest(
            cluster_id=cluster,
            voter_id=BrokerId(-1),
            topics=(begin_req.TopicData(topic_name=TopicName(TOPIC), partitions=(bpart,)),),
            leader_endpoints=(),
        )
    if isinstance(msg, m.EndQuorumEpochRequest):
        epart = end_req.PartitionData(
            partition_index=i32(0),
            leader_id=BrokerId(msg.leader_id),
            leader_epoch=i32(msg.epoch),
            preferred_candidates=tuple(
                end_req.ReplicaInfo(candidate_id=BrokerId(c), candidate_directory_id=NO_DIR)
                for c in msg.preferred_successors
            ),
        )
        return end_req.EndQuorumEpochRequest(
            cluster_id=cluster,
            topics=(end_req.TopicData(topic_name=TopicName(TOPIC), partitions=(epart,)),),
            leader_endpoints=(),
        )
    if isinstance(msg, m.FetchRequest):
        return fetch_request(
            msg.cluster_id, msg.sender, msg.epoch, msg.fetch_offset, msg.last_fetched_epoch, msg.max_wait_ms
        )
    if not isinstance(msg, m.FetchSnapshotRequest):
        raise TypeError(f"{type(msg).__name__} is an operator's request, never sent between controllers")
    spart = snap_req.PartitionSnapshot(
        partition=i32(0),
        current_leader_epoch=i32(msg.epoch),
        snapshot_id=snap_req.SnapshotId(end_offset=i64(msg.snapshot_id.end_offset), epoch=i32(msg.snapshot_id.epoch)),
        position=i64(msg.position),
        replica_directory_id=NO_DIR,
    )
    return snap_req.FetchSnapshotRequest(
        cluster_id=cluster,
        replica_id=BrokerId(msg.sender),
        max_bytes=i32(msg.max_bytes),
        topics=(snap_req.TopicSnapshot(name=TopicName(TOPIC), partitions=(spart,)),),
    )


def fetch_request(
    cluster_id: str, replica_id: int, epoch: int, fetch_offset: int, last_fetched_epoch: int, max_wait_ms: int
) -> Any:
    part = fetch_req.FetchPartition(
        partition=i32(0),
        current_leader_epoch=i32(epoch),
        fetch_offset=i64(fetch_offset),
        last_fetched_epoch=i32(last_fetched_epoch),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(8 << 20),
    )
    return fetch_req.FetchRequest(
        cluster_id=cluster_id or None,
        replica_id=BrokerId(replica_id),
        max_wait=i32Timedelta.parse(timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(1),
        max_bytes=i32(8 << 20),
        topics=(fetch_req.FetchTopic(topic=TopicName(TOPIC), partitions=(part,)),),
        forgotten_topics_data=(),
    )


# -- their answers ------------------------------------------------------------------------------------
def response_from_kio(sent: m.Request, to: int, resp: Any) -> m.Response:
    """The core's view of the answer ``to`` gave to ``sent``."""
    top = int(getattr(resp, "error_code", 0))
    if isinstance(sent, m.FetchRequest):
        t = resp.responses[0] if resp.responses else None
        if t is None or not t.partitions:
            return m.FetchResponse(to, sent.request_id, top or Err.UNKNOWN_SERVER_ERROR, -1, -1)
        p = t.partitions[0]
        lead = p.current_leader
        div = p.diverging_epoch
        snap = p.snapshot_id
        return m.FetchResponse(
            to,
            sent.request_id,
            int(p.error_code) or top,
            int(lead.leader_epoch),
            int(lead.leader_id),
            high_watermark=int(p.high_watermark),
            log_start_offset=int(p.log_start_offset),
            diverging=m.DivergingEpoch(int(div.epoch), int(div.end_offset)) if int(div.epoch) >= 0 else None,
            snapshot_id=m.SnapshotId(int(snap.end_offset), int(snap.epoch)) if int(snap.end_offset) >= 0 else None,
            records=p.records or None,
        )
    p = _one(resp.topics) if resp.topics else None
    if p is None:
        code = top or Err.UNKNOWN_SERVER_ERROR
        if isinstance(sent, m.VoteRequest):
            return m.VoteResponse(to, sent.request_id, code, -1, -1, False, sent.pre_vote)
        if isinstance(sent, m.FetchSnapshotRequest):
            return m.FetchSnapshotResponse(to, sent.request_id, code, -1, -1)
        cls = m.BeginQuorumEpochResponse if isinstance(sent, m.BeginQuorumEpochRequest) else m.EndQuorumEpochResponse
        return cls(to, sent.request_id, code, -1, -1)
    if isinstance(sent, m.VoteRequest):
        return m.VoteResponse(
            to,
            sent.request_id,
            int(p.error_code) or top,
            int(p.leader_epoch),
            int(p.leader_id),
            bool(p.vote_granted),
            sent.pre_vote,
        )
    if isinstance(sent, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(
            to, sent.request_id, int(p.error_code) or top, int(p.leader_epoch), int(p.leader_id)
        )
    if isinstance(sent, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(
            to, sent.request_id, int(p.error_code) or top, int(p.leader_epoch), int(p.leader_id)
        )
    return m.FetchSnapshotResponse(
        to,
        sent.request_id,
        int(p.error_code) or top,
        int(p.current_leader.leader_epoch),
        int(p.current_leader.leader_id),
        m.SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
        int(p.size),
        int(p.position),
        bytes(p.unaligned_records or b""),
    )


# -- requests we serve ----------------------------------------------------------------------------
def request_from_kio(api_key: int, req: Any, request_id: int, observer: bool = False) -> m.Request:
    cluster = req.cluster_id or ""
    if api_key == 52:
        p = _one(req.topics)
        return m.VoteRequest(
            cluster,
            int(p.replica_id),
            request_id,
            int(p.replica_epoch),
            int(p.last_offset_epoch),
            int(p.last_offset),
            bool(getattr(p, "pre_vote", False)),
        )
    if api_key == 53:
        p = _one(req.topics)
        return m.BeginQuorumEpochRequest(cluster, int(p.leader_id), request_id, int(p.leader_epoch), int(p.leader_id))
    if api_key == 54:
        p = _one(req.topics)
        return m.EndQuorumEpochRequest(
            cluster,
            int(p.leader_id),
            request_id,
            int(p.leader_epoch),
            int(p.leader_id),
            tuple(int(c.candidate_id) for c in p.preferred_candidates),
        )
    if api_key == 1:
        p = _one(req.topics)
        return m.FetchRequest(
            cluster,
            int(req.replica_id),
            request_id,
            int(p.current_leader_epoch),
            int(p.fetch_offset),
            int(p.last_fetched_epoch),
            int(req.max_wait.total_seconds() * 1000),
        )
    p = _one(req.topics)
    return m.FetchSnapshotRequest(
        cluster,
        int(req.replica_id),
        request_id,
        int(p.current_leader_epoch),
        m.SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
        int(p.position),
        max(1, min(int(req.max_bytes), 8 << 20)),
    )


def response_body(msg: m.Response, records: bytes = b"") -> dict[str, Any]:
    leader = {"leader_id": msg.leader_id, "leader_epoch": msg.epoch}
    if isinstance(msg, m.FetchResponse):
        row = {
            "partition_index": 0,
            "error_code": msg.error,
            "high_watermark": msg.high_watermark,
            "last_stable_offset": msg.high_watermark,
            "log_start_offset": msg.log_start_offset,
            "diverging_epoch": {
                "epoch": msg.diverging.epoch if msg.diverging else -1,
                "end_offset": msg.diverging.end_offset if msg.diverging else -1,
            },
            "current_leader": leader,
            "snapshot_id": {
                "end_offset": msg.snapshot_id.end_offset if msg.snapshot_id else -1,
                "epoch": msg.snapshot_id.epoch if msg.snapshot_id else -1,
            },
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": records,
        }
        return {
            "throttle_time": 0,
            "error_code": Err.NONE,
            "session_id": 0,
            "responses": [{"topic": TOPIC, "partitions": [row]}],
        }
    if isinstance(msg, m.FetchSnapshotResponse):
        snap = msg.snapshot_id or m.SnapshotId(-1, -1)
        row = {
            "index": 0,
            "error_code": msg.error,
            "snapshot_id": {"end_offset": snap.end_offset, "epoch": snap.epoch},
            "current_leader": leader,
            "size": msg.size,
            "position": msg.position,
            "unaligned_records": msg.chunk,
        }
        return {
            "throttle_time": 0,
            "error_code": Err.NONE,
            "topics": [{"name": TOPIC, "partitions": [row]}],
            "node_endpoints": [],
        }
    row = {"partition_index": 0, "error_code": msg.error, **leader}
    if isinstance(msg, m.VoteResponse):
        row["vote_granted"] = msg.granted
    return {"error_code": Err.NONE, "topics": [{"topic_name": TOPIC, "partitions": [row]}], "node_endpoints": []}
