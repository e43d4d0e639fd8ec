"""The quorum's messages as the core speaks them (KIP-595, KIP-996, KIP-630).

The asyncio driver maps them to and from kio's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot; the simulator delivers them as they are. Every request carries the sender and a
request id; its response carries the same id, so a late, duplicated or reordered answer is
recognised and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epochlog.raft.voters import Voter, VoterSet

NO_LEADER = -1
NO_EPOCH = -1


@dataclass(frozen=True, order=True)
class SnapshotId:
    """A snapshot holds every committed record below ``end_offset``; ``epoch`` is the last one's epoch."""

    end_offset: int
    epoch: int


@dataclass(frozen=True)
class LeaderChange:
    """The first record a leader writes in its epoch (Kafka's LeaderChangeMessage control record).

    The high watermark may only pass the start of an epoch once this record is on a majority, which
    is what keeps an old epoch's entries from being committed by counting replicas (Raft's figure 8).
    """

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True)
class KRaftVersionRecord:
    """Control record 5: the kraft.version in force from here on (1: the voter set is in the log)."""

    kraft_version: int = 1


@dataclass(frozen=True)
class VotersRecord:
    """Control record 6: the voter set in force from this record's offset on (appended, not committed)."""

    voters: VoterSet


@dataclass(frozen=True)
class VoteRequest:
    cluster_id: str
    sender: int
    request_id: int
    epoch: int  # a vote: the candidate's epoch; a pre-vote: the sender's current epoch
    last_epoch: int
    last_offset: int  # the end offset of the sender's log
    pre_vote: bool = False


@dataclass(frozen=True)
class VoteResponse:
    sender: int
    request_id: int
    error: int
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    sender: int
    request_id: int
    epoch: int
    leader_id: int


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    sender: int
    request_id: int
    error: int
    epoch: int
    leader_id: int


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    cluster_id: str
    sender: int
    request_id: int
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]  # best log first


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    sender: int
    request_id: int
    error: int
    epoch: int
    leader_id: int


@dataclass(frozen=True)
class FetchRequest:
    cluster_id: str
    sender: int  # Kafka's replica_state.replica_id: a voter's or an observer's node id
    request_id: int
    epoch: int  # current_leader_epoch
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 500
    # A broker following the log: never counted toward the high watermark or check-quorum, even when
    # it shares its node id with a voter (a combined node's broker).
    observer: bool = False


@dataclass(frozen=True)
class DivergingEpoch:
    epoch: int
    end_offset: int


@dataclass(frozen=True)
class FetchResponse:
    sender: int
    request_id: int
    error: int
    epoch: int
    leader_id: int
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging: DivergingEpoch | None = None
    snapshot_id: SnapshotId | None = None
    # The leader's decision is where to read; the driver reads (a follower's records are opaque to
    # the core). ``read_from`` = -1: no records. The driver fills ``records`` before sending.
    read_from: int = -1
    records: Any = None


@dataclass(frozen=True)
class FetchSnapshotRequest:
    cluster_id: str
    sender: int
    request_id: int
    epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 1 << 20


@dataclass(frozen=True)
class FetchSnapshotResponse:
    sender: int
    request_id: int
    error: int
    epoch: int
    leader_id: int
    snapshot_id: SnapshotId | None = None
    size: int = 0
    position: int = 0
    chunk: bytes = b""


@dataclass(frozen=True)
class AddVoterRequest:
    """AddRaftVoter (80), from an operator's tool: add ``voter``, answered once its Voters record commits."""

    cluster_id: str
    sender: int
    request_id: int
    epoch: int  # unused: an admin request is not of an epoch
    voter: Voter


@dataclass(frozen=True)
class RemoveVoterRequest:
    """RemoveRaftVoter (81): remove the voter (id, directory id), answered once its Voters record commits."""

    cluster_id: str
    sender: int
    request_id: int
    epoch: int
    voter_id: int
    directory_id: str


@dataclass(frozen=True)
class UpdateVoterRequest:
    """UpdateRaftVoter (82), from a voter whose endpoints changed: answered as soon as its Voters record is appended."""

    cluster_id: str
    sender: int
    request_id: int
    epoch: int
    voter: Voter


@dataclass(frozen=True)
class VoterChangeResponse:
    """The answer to AddRaftVoter or RemoveRaftVoter (both carry an error code and message only)."""

    sender: int
    request_id: int
    error: int
    epoch: int
    leader_id: int
    message: str = ""


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
    | AddVoterRequest
    | RemoveVoterRequest
    | UpdateVoterRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
    | VoterChangeResponse
)
Message = Request | Response


@dataclass(frozen=True)
class Outbound:
    to: int
    message: Message


@dataclass
class QuorumStateData:
    """What must be on disk before the node acts on it: the epoch, its leader and its vote."""

    leader_epoch: int = 0
    leader_id: int = NO_LEADER
    voted_id: int = NO_LEADER


@dataclass
class Ready:
    """What the driver does after an event, in this order: write the quorum state and fsync it;
    flush the log; send the messages; then tell the state machine the new high watermark (or the
    snapshot it must load). A crash part way through loses the later steps, never reorders them."""

    quorum_state: QuorumStateData | None = None
    flush: bool = False
    messages: list[Outbound] = field(default_factory=list)
    high_watermark: int | None = None
    load_snapshot: SnapshotId | None = None
    role_changed: bool = False

    def empty(self) -> bool:
        return (
            self.quorum_state is None
            and not self.flush
            and not self.messages
            and self.high_watermark is None
            and self.load_snapshot is None
            and not self.role_changed
        )
