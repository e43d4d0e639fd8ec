"""KIP-853's decisions about the voter set, for RaftNode: which set is in force, and whether a change may start.

The rules (Kafka's AddVoterHandler, RemoveVoterHandler and LeaderState):
- only a quorum whose voter set lives in the log (kraft.version 1) changes it; a static one answers
  UNSUPPORTED_VERSION;
- the leader must have committed an entry of its own epoch first (its LeaderChange), so that the voter set it
  reads is the one the previous leaders agreed on;
- one change at a time: while the newest Voters record is at or above the high watermark, or a change is in
  flight, another waits (REQUEST_TIMED_OUT; the operator retries);
- a voter is added only if it has been fetching and has caught up with the leader, or the high watermark
  could stall behind it;
- the answer leaves once the Voters record commits; a leader that removed itself leads until then, and
  then resigns.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.codes import Err
from epochlog.raft.log import RaftLog
from epochlog.raft.messages import AddVoterRequest, RemoveVoterRequest, UpdateVoterRequest, VotersRecord
from epochlog.raft.voters import VoterSet, VoterSetHistory

VoterChange = AddVoterRequest | RemoveVoterRequest | UpdateVoterRequest


@dataclass
class PendingChange:
    request: VoterChange
    offset: int  # of its Voters record: it is done when the high watermark passes it


class Membership:
    def __init__(self, voters: tuple[int, ...] | VoterSet) -> None:
        # A VoterSet (possibly empty: a controller formatted with --no-initial-controllers) is a dynamic quorum's
        # bootstrap; a tuple of ids is controller.quorum.voters.
        self.dynamic = isinstance(voters, VoterSet)
        self.bootstrap = voters if isinstance(voters, VoterSet) else VoterSet.of(*voters)
        self.history = VoterSetHistory(self.bootstrap)
        self.pending: PendingChange | None = None

    @property
    def kraft_version(self) -> int:
        return 1 if self.dynamic or self.history.entries else 0

    @property
    def voters(self) -> VoterSet:
        return self.history.latest()

    # -- following the log --------------------------------------------------------------------------
    def load(self, log: RaftLog) -> bool:
        """Read every voter set the log (and the snapshot it starts at) holds; returns whether the set changed."""
        before = self.voters
        self.history = VoterSetHistory(self.bootstrap)
        self.appended(log, -1)
        return self.voters != before

    def appended(self, log: RaftLog, start: int) -> bool:
        """Records from ``start`` on were appended; returns whether the voter set in force changed."""
        before = self.voters
        for offset, voters in log.voter_sets(start):
            self.history.add(offset, voters)
        return self.voters != before

    def truncated(self, offset: int) -> bool:
        return self.history.truncate_from(offset)

    # -- the leader's decisions ---------------------------------------------------------------------------
    def change_error(self, leader_ready: bool, high_watermark: int) -> tuple[int, str]:
        """Why no voter change may start now (Err.NONE: it may)."""
        if self.kraft_version == 0:
            return Err.UNSUPPORTED_VERSION, "kraft.version 0: the voters are static (controller.quorum.voters)"
        if not leader_ready:
            return Err.REQUEST_TIMED_OUT, "the leader has not yet committed an entry in its epoch"
        if self.pending is not None or self.history.latest_offset() >= high_watermark:
            return Err.REQUEST_TIMED_OUT, "another voter change is not committed yet"
        return Err.NONE, ""

    def proposal(self, req: VoterChange, caught_up: bool) -> tuple[int, str, VoterSet | None]:
        """The voter set ``req`` asks for, or why it may not be had."""
        current = self.voters
        if isinstance(req, AddVoterRequest):
            v = req.voter
            if current.get(v.node_id) is not None:
                return Err.DUPLICATE_VOTER, f"node {v.node_id} is already a voter", None
            if not v.endpoints:
                return Err.INVALID_REQUEST, "a voter needs at least one listener endpoint", None
            if not caught_up:
                return Err.REQUEST_TIMED_OUT, f"node {v.node_id} has not caught up with the leader's log", None
            return Err.NONE, "", current.with_voter(v)
        if isinstance(req, UpdateVoterRequest):  # new endpoints, the same voter: no majority changes
            v = req.voter
            known = current.get(v.node_id)
            if known is None or not known.same_key(v.node_id, v.directory_id):
                return Err.VOTER_NOT_FOUND, f"no voter {v.node_id} with directory {v.directory_id!r}", None
            if not v.endpoints:
                return Err.INVALID_REQUEST, "a voter needs at least one listener endpoint", None
            return Err.NONE, "", current.without(v.node_id).with_voter(v)
        voter = current.get(req.voter_id)
        if voter is None or not voter.same_key(req.voter_id, req.directory_id):
            return Err.VOTER_NOT_FOUND, f"no voter {req.voter_id} with directory {req.directory_id!r}", None
        if len(current.voters) == 1:
            return Err.INVALID_REQUEST, "the last voter cannot be removed", None
        return Err.NONE, "", current.without(req.voter_id)

    def started(self, req: VoterChange, offset: int, voters: VoterSet) -> VotersRecord:
        if not isinstance(req, UpdateVoterRequest):  # an update is answered at once (Kafka's UpdateVoterHandler)
            self.pending = PendingChange(req, offset)
        self.history.add(offset, voters)
        return VotersRecord(voters)

    def committed(self, high_watermark: int) -> PendingChange | None:
        """The change whose Voters record the high watermark has just passed, if any."""
        if self.pending is None or high_watermark <= self.pending.offset:
            return None
        done, self.pending = self.pending, None
        return done

    def abandon(self) -> PendingChange | None:
        """Leadership is gone: the change in flight will be answered as not done by us."""
        done, self.pending = self.pending, None
        return done
