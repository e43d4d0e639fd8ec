"""KIP-853 in RaftNode: following the voter set the log holds, and the leader's AddRaftVoter and RemoveRaftVoter.

membership.py decides whether a change may happen; this carries it out on the node: the Voters record appended
(in force at once), the answer once it commits, and a leader that removed itself resigning after that.
"""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.raft.leader_state import LeaderState
from epochlog.raft.membership import Membership
from epochlog.raft.messages import (
    AddVoterRequest,
    KRaftVersionRecord,
    RemoveVoterRequest,
    UpdateVoterRequest,
    VoterChangeResponse,
    VotersRecord,
)
from epochlog.raft.roles import Role
from epochlog.raft.snapshot_fetch import SnapshotTransfer


class VoterChanges(SnapshotTransfer):
    membership: Membership
    leader: LeaderState | None
    high_watermark: int

    # RaftNode's.
    def is_leader_ready(self) -> bool:
        raise NotImplementedError

    def _to_resigned(self, now_ms: int) -> None:
        raise NotImplementedError

    def _maybe_advance_hw(self, now_ms: int) -> None:
        raise NotImplementedError

    def _answer_parked(self, now_ms: int, everyone: bool) -> None:
        raise NotImplementedError

    def _start_of_epoch_voters(self) -> list[KRaftVersionRecord | VotersRecord]:
        """What a new leader writes after its LeaderChange: while the voter set still comes from the formatted
        storage (no Voters record in the log yet), the set itself, where nodes joining later read it."""
        if self.membership.dynamic and self.membership.history.latest_offset() < 0:
            return [KRaftVersionRecord(1), VotersRecord(self.membership.voters)]
        return []

    def _voter_change_ended(self, high_watermark: int | None) -> None:
        """Answer the change in flight: done once the high watermark passed it; not done if leadership went first."""
        if high_watermark is None:
            if (change := self.membership.abandon()) is not None:
                self._respond(change.request, VoterChangeResponse, Err.NOT_LEADER_OR_FOLLOWER, "leadership lost")
        elif (change := self.membership.committed(high_watermark)) is not None:
            self._respond(change.request, VoterChangeResponse, Err.NONE)

    def _removed_leader_resigns(self, now_ms: int) -> bool:
        """Once its own removal has committed, the remaining voters elect a leader among themselves (at the next
        tick, not inside the fetch that committed it). A method, so that the simulator's tests can break it and
        see the checker catch a removed leader that stays."""
        if self.is_voter or self.high_watermark <= self.membership.history.latest_offset():
            return False
        self._to_resigned(now_ms)
        return True

    def _voters_changed(self, now_ms: int) -> None:
        self.voters = self.membership.voters.ids
        if self.leader is not None:
            self.leader.set_voters(self.voters, now_ms)
            self._maybe_advance_hw(now_ms)  # a smaller majority may already hold more

    def _snapshot_installed(self, now_ms: int) -> None:
        if self.membership.load(self.log):
            self._voters_changed(now_ms)

    def _voter_change_error(self, now_ms: int) -> tuple[int, str]:
        """Whether a change may start now: a method, so that a test may break the one-at-a-time rule."""
        return self.membership.change_error(self.is_leader_ready(), self.high_watermark)

    def _on_voter_change(self, req: AddVoterRequest | RemoveVoterRequest | UpdateVoterRequest, now_ms: int) -> None:
        if self.role is not Role.LEADER or self.leader is None:
            self._respond(req, VoterChangeResponse, Err.NOT_LEADER_OR_FOLLOWER, "not the leader")
            return
        error, text = self._voter_change_error(now_ms)
        if error == Err.NONE:
            caught_up = isinstance(req, AddVoterRequest) and self.leader.caught_up(
                req.voter.node_id, self.high_watermark, now_ms, self.config.fetch_timeout_ms
            )
            error, text, voters = self.membership.proposal(req, caught_up)
        if error != Err.NONE or voters is None:
            self._respond(req, VoterChangeResponse, error, text)
            return
        offset = self.log.log_end_offset
        self.log.append_as_leader([self.membership.started(req, offset, voters)], self.epoch, now_ms)
        self._ready.flush = True
        self._voters_changed(now_ms)
        self._answer_parked(now_ms, everyone=True)
        if isinstance(req, UpdateVoterRequest):
            self._respond(req, VoterChangeResponse, Err.NONE)
