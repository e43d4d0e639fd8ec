"""KIP-853's AddRaftVoter (80) and RemoveRaftVoter (81) on the wire, to and from raft/messages.py.

A directory id is a Uuid on the wire and Kafka's text form (URL-safe base64, unpadded) in the core, the
quorum's records and the tools' output.
"""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.add_raft_voter.v0 import request as add_v0
from kio.schema.remove_raft_voter.v0 import request as remove_v0
from kio.schema.update_raft_voter.v0 import request as update_v0
from kio.static.primitive import i16, i32, i32Timedelta, u16

from epochlog.protocol.errors import Err
from epochlog.raft import messages as m
from epochlog.raft.voters import NO_DIRECTORY, Endpoint, Voter

ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER = 80, 81, 82


def dir_text(value: uuid.UUID | None) -> str:
    if value is None or value.int == 0:
        return NO_DIRECTORY
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def dir_uuid(text: str) -> uuid.UUID | None:
    if not text:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def request_from_kio(
    api_key: int, req: Any, request_id: int
) -> m.AddVoterRequest | m.RemoveVoterRequest | m.UpdateVoterRequest:
    cluster = req.cluster_id or ""
    directory = dir_text(req.voter_directory_id)
    if api_key in (ADD_RAFT_VOTER, UPDATE_RAFT_VOTER):
        endpoints = tuple(Endpoint(str(li.name), str(li.host), int(li.port)) for li in req.listeners)
        voter = Voter(int(req.voter_id), directory, endpoints)
        if api_key == UPDATE_RAFT_VOTER:
            return m.UpdateVoterRequest(cluster, int(req.voter_id), request_id, -1, voter)
        return m.AddVoterRequest(cluster, -1, request_id, -1, voter)
    return m.RemoveVoterRequest(cluster, -1, request_id, -1, int(req.voter_id), directory)


def response_body(
    error: int, message: str = "", api_key: int = ADD_RAFT_VOTER, leader: tuple[int, int, str, int] = (-1, -1, "", 0)
) -> dict[str, Any]:
    if api_key == UPDATE_RAFT_VOTER:  # no message; the leader as the voter should reach it
        leader_id, epoch, host, port = leader
        where = {"leader_id": leader_id, "leader_epoch": epoch, "host": host, "port": port}
        return {"throttle_time": 0, "error_code": error, "current_leader": where}
    return {"throttle_time": 0, "error_code": error, "error_message": message or None}


def add_request(cluster_id: str, voter: Voter, timeout_ms: int = 30_000) -> Any:
    """An operator's AddRaftVoter (epochlog metadata-quorum add-controller)."""
    return add_v0.AddRaftVoterRequest(
        cluster_id=cluster_id or None,
        timeout=i32Timedelta.parse(timedelta(milliseconds=timeout_ms)),
        voter_id=i32(voter.node_id),
        voter_directory_id=dir_uuid(voter.directory_id),
        listeners=tuple(add_v0.Listener(name=e.listener, host=e.host, port=u16(e.port)) for e in voter.endpoints),
    )


def remove_request(cluster_id: str, voter_id: int, directory_id: str) -> Any:
    return remove_v0.RemoveRaftVoterRequest(
        cluster_id=cluster_id or None, voter_id=i32(voter_id), voter_directory_id=dir_uuid(directory_id)
    )


def update_request(cluster_id: str, epoch: int, voter: Voter) -> Any:
    """A voter's UpdateRaftVoter: its endpoints as they are now, and the kraft.version range it supports (0-1)."""
    return update_v0.UpdateRaftVoterRequest(
        cluster_id=cluster_id or None,
        current_leader_epoch=i32(epoch),
        voter_id=i32(voter.node_id),
        voter_directory_id=dir_uuid(voter.directory_id),
        listeners=tuple(update_v0.Listener(name=e.listener, host=e.host, port=u16(e.port)) for e in voter.endpoints),
        k_raft_version_feature=update_v0.KRaftVersionFeature(
            min_supported_version=i16(0), max_supported_version=i16(1)
        ),
    )


def timed_out(api_key: int) -> dict[str, Any]:
    return response_body(Err.REQUEST_TIMED_OUT, "the voter change did not commit in time", api_key)
