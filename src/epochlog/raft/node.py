"""One member of the metadata quorum, free of I/O: KIP-595 with KIP-996 pre-vote and KIP-630 snapshots.

Events come in with ``now`` (``tick``, ``receive``, ``propose``, ``resign``, ``snapshot_taken``);
each returns a Ready the driver carries out in order (quorum state, log flush, messages, high
watermark). The log is reached through ``RaftLog``, as the partition core reaches its log. Sending and
answering messages is messaging.py's; where a follower's log parts from the leader's, divergence.py's.

Roles: unattached, prospective (pre-vote, same epoch, nothing persisted), candidate (epoch + 1,
votes for itself), leader, follower, resigned. An observer (a broker, or any node not among the
voters) is only ever unattached or a follower and never takes part in an election. The rules:
- a vote is granted at most once per epoch, and only to a log at least as up to date as ours
  ((last epoch, end offset) compared in that order); the grant is on disk before it is sent;
- a pre-vote changes no state; a leader never grants one, nor a follower that heard from its leader
  this epoch, so a rejoining voter cannot unseat a healthy leader;
- the high watermark is the offset a majority of voters hold, and only once that covers the
  leader's own first record (its LeaderChange), so no entry of an older epoch is committed by count;
- a leader that has not heard from a majority for 1.5 fetch timeouts resigns (check-quorum);
- a node restarted from a state that says it led resigns that epoch rather than lead it twice;
- the voters are those of the newest Voters record in the log, committed or not (KIP-853: voter_changes.py
  follows them, membership.py decides a change); a static quorum's never change.
"""

from __future__ import annotations

import random
from typing import Any

from epochlog.codes import Err
from epochlog.raft import messages, tracing
from epochlog.raft.config import QuorumConfig
from epochlog.raft.divergence import restart_point, truncation_offset
from epochlog.raft.leader_state import LeaderState
from epochlog.raft.log import RaftLog
from epochlog.raft.membership import Membership
from epochlog.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChange,
    Message,
    QuorumStateData,
    Ready,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from epochlog.raft.roles import Role
from epochlog.raft.voter_changes import VoterChanges
from epochlog.raft.voters import VoterSet
from epochlog.trace import events as trace


class RaftNode(VoterChanges):
    def __init__(
        self,
        node_id: int,
        voters: tuple[int, ...] | VoterSet,  # ids: a static quorum; a VoterSet: a dynamic one's bootstrap
        log: RaftLog,
        state: QuorumStateData | None,
        now_ms: int,
        rng: random.Random,
        cluster_id: str = "",
        config: QuorumConfig | None = None,
        tracer: trace.Tracer = trace.NO_TRACE,
        bootstrap: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        self.tracer = tracer  # its state transitions, for the trace checker (trace/check.py)
        self._traced_hw = -1
        self.node_id = node_id
        self.log = log
        self.membership = Membership(voters)
        self.membership.load(log)
        self.voters = self.membership.voters.ids
        self.voter_set_changes = self.membership.dynamic
        self.rng = rng
        self.cluster_id = cluster_id
        self.config = config or QuorumConfig()
        self.high_watermark = -1  # unknown until a leader tells us (or we are the leader and commit)
        self.leader: LeaderState | None = None
        self.grants: set[int] = set()
        self.rejects: set[int] = set()
        self.election_deadline = 0
        self.fetch_deadline = 0  # a follower with no successful fetch by then starts an election
        self.fetched_this_epoch = False
        self.snapshot_fetch: tuple[SnapshotId, int] | None = None  # (snapshot, next position)
        self.bootstrap_index = 0  # an observer that knows no leader asks the voters in turn
        self.bootstrap = bootstrap  # or, knowing no voters, these (controller.quorum.bootstrap.servers)

        st = state or QuorumStateData()
        self.epoch, self.leader_id, self.voted_id = st.leader_epoch, st.leader_id, st.voted_id
        self.role = Role.UNATTACHED
        self.tracer.emit(trace.RaftState(self.epoch, self.leader_id, self.voted_id, "restarted"))
        if log.latest_epoch() > self.epoch:
            # The log saw a later epoch than the state file (only possible if that file was lost):
            # start from the log's epoch with no vote, so no epoch we may have voted in is reused.
            self._to_unattached(log.latest_epoch(), now_ms)
        elif self.leader_id == node_id:
            # It led this epoch before the restart: never lead it twice. Tell the others, so that
            # they need not wait out a fetch timeout to elect a successor.
            self.role = Role.RESIGNED
            self._reset_election_timer(now_ms)
            self._send_end_quorum_epoch(tuple(v for v in self.voters if v != node_id))
        elif self.leader_id >= 0:
            self._to_follower(self.epoch, self.leader_id, now_ms, persist=False)
        else:
            self._reset_election_timer(now_ms)
            if not self.is_voter:
                self._send_fetch(now_ms)

    # -- queries ------------------------------------------------------------------------------
    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_leader_ready(self) -> bool:
        """Leader, with its own first record committed: it may act on the state it has replayed."""
        return (
            self.role is Role.LEADER
            and self.leader is not None
            and self.high_watermark > self.leader.epoch_start_offset
        )

    def describe(self) -> dict[str, Any]:
        return {"node": self.node_id, "role": self.role.value, "epoch": self.epoch, "leader": self.leader_id}

    # -- driver entry points ----------------------------------------------------------------
    def take_ready(self) -> Ready:
        ready, self._ready = self._ready, Ready()
        self._traced_hw = tracing.commit(
            self.tracer, self.log, self.epoch, self.role.value, self._traced_hw, ready.high_watermark
        )
        return ready

    def tick(self, now_ms: int) -> Ready:
        if self.role is Role.LEADER:
            self._tick_leader(now_ms)
        elif self.role is Role.FOLLOWER:
            if now_ms >= self.fetch_deadline:
                self._fetch_timed_out(now_ms)
            else:
                self._tick_fetcher(now_ms)
        elif self.role is Role.RESIGNED and not self.is_voter:
            if now_ms >= self.election_deadline:  # it removed itself: from now on it follows as an observer
                self._to_unattached(self.epoch, now_ms)
        elif not self.is_voter:
            self._tick_fetcher(now_ms)
        elif now_ms >= self.election_deadline:
            if self.role is Role.PROSPECTIVE:
                self._lost_pre_vote(now_ms)
            else:
                self._to_prospective(now_ms)
        elif self.role in (Role.PROSPECTIVE, Role.CANDIDATE):
            self._resend_votes(now_ms)
        return self.take_ready()

    def propose(self, records: list[Any], now_ms: int) -> tuple[int, Ready]:
        """Append ``records`` as the leader; returns the last offset (-1: not the leader)."""
        if self.role is not Role.LEADER or not records:
            return -1, self.take_ready()
        _, last = self.log.append_as_leader(records, self.epoch, now_ms)
        self._ready.flush = True
        self._maybe_advance_hw(now_ms)
        self._answer_parked(now_ms, everyone=True)
        return last, self.take_ready()

    def resign(self, now_ms: int) -> Ready:
        """Graceful shutdown of a leader: ask the others to elect a successor at once."""
        if self.role is Role.LEADER:
            self._to_resigned(now_ms)
        return self.take_ready()

    def snapshot_taken(self, snapshot: SnapshotId) -> Ready:
        """The state machine wrote a snapshot of committed state: the log below it may go."""
        if snapshot.end_offset <= self.high_watermark and snapshot.end_offset > self.log.log_start_offset:
            self.log.trim_to_snapshot(snapshot)
        return self.take_ready()

    def receive(self, message: Message, now_ms: int) -> Ready:
        getattr(self, _HANDLERS[type(message)])(message, now_ms)
        return self.take_ready()

    def request_failed(self, to: int, request_id: int, now_ms: int) -> Ready:
        """The driver could not deliver a request (connection refused or closed)."""
        if self._answered(to, request_id):
            self._back_off(now_ms)
            if self.role is Role.UNATTACHED and not self.is_voter:
                self.bootstrap_index += 1
        return self.take_ready()

    # -- transitions --------------------------------------------------------------------------
    def _persist(self) -> None:
        self._ready.quorum_state = QuorumStateData(self.epoch, self.leader_id, self.voted_id)
        self.tracer.emit(trace.RaftState(self.epoch, self.leader_id, self.voted_id, self.role.value))

    def _changed_role(self, role: Role) -> None:
        self.role = role
        self._ready.role_changed = True

    def _reset_election_timer(self, now_ms: int, backoff_ms: int | None = None) -> None:
        if self.voters == (self.node_id,):
            self.election_deadline = now_ms  # a quorum of one has no one to split a vote with
            return
        t = self.config.election_timeout_ms
        self.election_deadline = now_ms + (backoff_ms if backoff_ms is not None else t + self.rng.randrange(t))

    def _leave_leadership(self) -> None:
        if self.leader is not None:
            self.leader = None
            self._voter_change_ended(None)
        self.grants, self.rejects = set(), set()
        self.inflight.clear()
        self.snapshot_fetch = None

    def _enter_epoch(self, epoch: int, leader_id: int, role: Role) -> None:
        """Unattached or following in ``epoch``: a vote cast in another epoch does not carry over."""
        self._leave_leadership()
        if epoch != self.epoch:
            self.voted_id = NO_LEADER
        self.epoch, self.leader_id = epoch, leader_id
        self.fetched_this_epoch = False
        self._changed_role(role)

    def _to_unattached(self, epoch: int, now_ms: int) -> None:
        self._enter_epoch(epoch, NO_LEADER, Role.UNATTACHED)
        self._persist()
        self._reset_election_timer(now_ms)
        if not self.is_voter:
            self._send_fetch(now_ms)

    def _to_follower(self, epoch: int, leader_id: int, now_ms: int, persist: bool = True) -> None:
        self._enter_epoch(epoch, leader_id, Role.FOLLOWER)
        if persist:
            self._persist()
        self.fetch_deadline = now_ms + self.config.fetch_timeout_ms
        self._send_fetch(now_ms)

    def _to_prospective(self, now_ms: int) -> None:
        """Ask for pre-votes at the current epoch; nothing changes on disk or anywhere else."""
        self._leave_leadership()
        self._changed_role(Role.PROSPECTIVE)
        self._solicit_votes(now_ms)

    def _lost_pre_vote(self, now_ms: int) -> None:
        """No majority would vote for us: wait a full election timeout before trying again."""
        self._leave_leadership()
        known = self.leader_id >= 0 and self.leader_id != self.node_id
        self._changed_role(Role.FOLLOWER if known else Role.UNATTACHED)
        if self.role is Role.FOLLOWER:
            self.fetch_deadline = now_ms + self.config.fetch_timeout_ms
            self._send_fetch(now_ms)
        self._reset_election_timer(now_ms)

    def _to_candidate(self, now_ms: int) -> None:
        self._leave_leadership()
        self.epoch += 1
        self.leader_id, self.voted_id = NO_LEADER, self.node_id
        self._changed_role(Role.CANDIDATE)
        self._persist()
        self._solicit_votes(now_ms)

    def _solicit_votes(self, now_ms: int) -> None:
        """Vote for ourselves and ask the other voters (a pre-vote as a prospective, a vote as a candidate)."""
        self.grants, self.rejects = {self.node_id}, set()
        self._reset_election_timer(now_ms)
        if len(self.grants) >= self.majority:
            self._won_votes(now_ms)
            return
        self._send_votes(now_ms)

    def _won_votes(self, now_ms: int) -> None:
        if self.role is Role.PROSPECTIVE:
            self._to_candidate(now_ms)
        else:
            self._to_leader(now_ms)

    def _to_leader(self, now_ms: int) -> None:
        granting = tuple(sorted(self.grants))
        self._leave_leadership()
        self.leader_id = self.node_id
        self._changed_role(Role.LEADER)
        self._persist()
        start = self.log.log_end_offset
        self.leader = LeaderState(self.node_id, self.voters, start, now_ms)
        first = [LeaderChange(self.node_id, self.voters, granting), *self._start_of_epoch_voters()]
        _, last = self.log.append_as_leader(first, self.epoch, now_ms)
        if len(first) > 1:
            self.membership.history.add(last, self.membership.voters)
        self._ready.flush = True
        for v in self.leader.unacked_begin:
            self._send(v, self._request(BeginQuorumEpochRequest, self.node_id))
        self._maybe_advance_hw(now_ms)

    def _to_resigned(self, now_ms: int) -> None:
        assert self.leader is not None
        successors = self.leader.successors()
        self._answer_parked(now_ms, everyone=True)
        self._leave_leadership()
        self._changed_role(Role.RESIGNED)
        self._send_end_quorum_epoch(successors)
        self._reset_election_timer(now_ms)

    def _send_end_quorum_epoch(self, successors: tuple[int, ...]) -> None:
        for v in successors:
            self._send(v, self._request(EndQuorumEpochRequest, self.node_id, successors))

    def _observe(self, epoch: int, leader_id: int, now_ms: int) -> bool:
        """Learn of an epoch or its leader from any message; returns False if the message is stale."""
        if epoch < self.epoch:
            return False
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._to_follower(epoch, leader_id, now_ms)
            else:
                self._to_unattached(epoch, now_ms)
        elif (
            leader_id >= 0
            and leader_id != self.node_id
            and self.leader_id != leader_id
            and self.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE)
        ):
            self._to_follower(epoch, leader_id, now_ms)
        return True

    # -- outbound -----------------------------------------------------------------------------
    def _send_votes(self, now_ms: int) -> None:
        self._send_votes_to([v for v in self.voters if v != self.node_id], now_ms)

    def _resend_votes(self, now_ms: int) -> None:
        if expired := self._expire_inflight(now_ms, 0):
            self._send_votes_to(expired, now_ms)

    def _send_votes_to(self, voters: list[int], now_ms: int) -> None:
        pre = self.role is Role.PROSPECTIVE
        for v in voters:
            if v not in self.grants and v not in self.rejects:
                req = self._request(VoteRequest, self.log.latest_epoch(), self.log.log_end_offset, pre)
                self._send_tracked(v, req, now_ms)

    def _fetch_target(self) -> int:
        if self.leader_id >= 0:
            return self.leader_id
        targets = self.voters or self.bootstrap
        return targets[self.bootstrap_index % len(targets)] if targets else self.node_id

    def _send_fetch(self, now_ms: int) -> None:
        if self.inflight or (self.is_voter and self.role is not Role.FOLLOWER):
            return
        target = self._fetch_target()
        if target == self.node_id:
            return
        if self.snapshot_fetch is not None:
            req = self._request(FetchSnapshotRequest, *self.snapshot_fetch)
        else:
            wait_ms = self.config.fetch_max_wait_ms if self.leader_id >= 0 else 0
            end, last_epoch = self.log.log_end_offset, self.log.latest_epoch()
            req = self._request(FetchRequest, end, last_epoch, wait_ms, observer=not self.is_voter)
        self._send_tracked(target, req, now_ms)

    def _tick_fetcher(self, now_ms: int) -> None:
        expired = self._expire_inflight(now_ms, self.config.fetch_max_wait_ms)
        if self.leader_id < 0:
            self.bootstrap_index += len(expired)
        if not self.inflight and now_ms >= self.retry_at:
            self._send_fetch(now_ms)

    def _fetch_timed_out(self, now_ms: int) -> None:
        self.fetched_this_epoch = False  # the leader is silent: a pre-vote may now be granted
        if self.is_voter:
            self._to_prospective(now_ms)
        else:
            self._to_unattached(self.epoch, now_ms)  # an observer looks for the leader again

    # -- leader ---------------------------------------------------------------------------------
    def _tick_leader(self, now_ms: int) -> None:
        assert self.leader is not None
        if self._removed_leader_resigns(now_ms):
            return
        if not self.leader.heard_from_majority(now_ms, self.config.check_quorum_timeout_ms):
            self._to_resigned(now_ms)  # check-quorum: we may be the minority side of a partition
            return
        if self.leader.unacked_begin and now_ms - self.leader.begin_resend_ms >= self.config.fetch_timeout_ms // 2:
            self.leader.begin_resend_ms = now_ms
            for v in sorted(self.leader.unacked_begin):
                self._send(v, self._request(BeginQuorumEpochRequest, self.node_id))
        self._answer_parked(now_ms, everyone=False)

    def _maybe_advance_hw(self, now_ms: int) -> None:
        assert self.leader is not None
        candidate = self.leader.majority_offset(self.log.log_end_offset)
        if candidate > self.leader.epoch_start_offset and self._raise_hw(candidate):
            self._answer_parked(now_ms, everyone=True)
            self._voter_change_ended(self.high_watermark)

    def _raise_hw(self, hw: int) -> bool:
        """The high watermark only moves forward; returns whether it moved."""
        if hw <= self.high_watermark:
            return False
        self.high_watermark = hw
        self._ready.high_watermark = hw
        return True

    def _answer_parked(self, now_ms: int, everyone: bool) -> None:
        if self.leader is None or not self.leader.parked:
            return
        for req in self.leader.take_parked(now_ms, everyone):
            self._answer_fetch(req)

    def _answer_fetch(self, req: FetchRequest) -> None:
        assert self.leader is not None
        self.leader.progress(req.sender, req.observer).hw_sent = self.high_watermark
        read_from = req.fetch_offset if req.fetch_offset < self.log.log_end_offset else -1
        self._lead_fetch(req, read_from=read_from)

    def _lead_fetch(self, req: FetchRequest, **fields: Any) -> None:
        """The leader's answer to a Fetch it accepted: where the log stands, and what ``fields`` add."""
        hw, start = self.high_watermark, self.log.log_start_offset
        self._answer_as_leader(req, FetchResponse, high_watermark=hw, log_start_offset=start, **fields)

    def _heard_from_leader(self, now_ms: int) -> None:
        self.fetched_this_epoch = True
        self.fetch_deadline = now_ms + self.config.fetch_timeout_ms

    # -- handlers -------------------------------------------------------------------------------
    def _on_vote(self, req: VoteRequest, now_ms: int) -> None:
        error = self._request_error(req, voters_only=True)
        if error != Err.NONE:
            self._respond(req, VoteResponse, error, False, req.pre_vote)
            return
        if req.epoch > self.epoch:
            self._to_unattached(req.epoch, now_ms)
        up_to_date = (req.last_epoch, req.last_offset) >= (self.log.latest_epoch(), self.log.log_end_offset)
        if req.pre_vote:
            granted = up_to_date and not (
                self.role is Role.LEADER or (self.role is Role.FOLLOWER and self.fetched_this_epoch)
            )
        else:
            granted = (
                up_to_date
                and self.leader_id == NO_LEADER
                and self.voted_id in (NO_LEADER, req.sender)
                and self.role not in (Role.LEADER, Role.RESIGNED, Role.CANDIDATE)
            )
            if granted:
                self.tracer.emit(trace.RaftVote(req.epoch, req.sender))
            if granted and self.voted_id != req.sender:
                self.voted_id = req.sender
                self._persist()  # on disk before the grant leaves (Ready orders it first)
            if granted:
                self._reset_election_timer(now_ms)
        self._respond(req, VoteResponse, Err.NONE, granted, req.pre_vote)

    def _on_vote_response(self, resp: VoteResponse, now_ms: int) -> None:
        if not self._observe(resp.epoch, resp.leader_id, now_ms):
            return
        if not self._answered(resp.sender, resp.request_id):
            return  # an answer to an earlier round
        expected = Role.PROSPECTIVE if resp.pre_vote else Role.CANDIDATE
        if self.role is not expected or resp.epoch != self.epoch or resp.error != Err.NONE:
            return
        (self.grants if resp.granted else self.rejects).add(resp.sender)
        if len(self.grants) >= self.majority:
            self._won_votes(now_ms)
        elif len(self.rejects) >= len(self.voters) - self.majority + 1 and resp.pre_vote:
            self._lost_pre_vote(now_ms)

    def _on_begin(self, req: BeginQuorumEpochRequest, now_ms: int) -> None:
        error = self._request_error(req, voters_only=True)
        if error == Err.NONE:
            self._observe(req.epoch, req.leader_id, now_ms)
        self._respond(req, BeginQuorumEpochResponse, error)

    def _on_begin_response(self, resp: BeginQuorumEpochResponse, now_ms: int) -> None:
        if not self._observe(resp.epoch, resp.leader_id, now_ms):
            return
        if self.leader is not None and resp.error == Err.NONE and resp.epoch == self.epoch:
            self.leader.unacked_begin.discard(resp.sender)

    def _on_end(self, req: EndQuorumEpochRequest, now_ms: int) -> None:
        error = self._request_error(req, voters_only=True)
        if error == Err.NONE and self._observe(req.epoch, req.leader_id, now_ms):
            if self.role is Role.FOLLOWER and self.leader_id == req.leader_id and self.is_voter:
                # The leader is going: stop trusting it, and let the best placed successor try first.
                self.fetched_this_epoch = False
                pos = req.preferred_successors.index(self.node_id) if self.node_id in req.preferred_successors else -1
                n = len(req.preferred_successors)
                backoff = 0 if pos <= 0 else (self.config.election_backoff_max_ms >> max(0, n - 1)) << (pos - 1)
                self.fetch_deadline = min(self.fetch_deadline, now_ms + backoff)
        self._respond(req, EndQuorumEpochResponse, error)

    def _on_end_response(self, resp: EndQuorumEpochResponse, now_ms: int) -> None:
        self._observe(resp.epoch, resp.leader_id, now_ms)

    def _on_fetch(self, req: FetchRequest, now_ms: int) -> None:
        error = self._fetch_error(req)
        if error == Err.NONE and (req.fetch_offset < 0 or req.last_fetched_epoch > self.epoch):
            error = Err.INVALID_REQUEST
        if error != Err.NONE:
            self._respond(req, FetchResponse, error)
            return
        assert self.leader is not None
        restart = restart_point(self.log, req)
        if restart is not None:
            self._lead_fetch(req, diverging=restart.diverging, snapshot_id=restart.snapshot)
            return
        self.leader.record_fetch(req.sender, req.fetch_offset, self.log.log_end_offset, now_ms, req.observer)
        before = self.high_watermark
        if req.sender in self.voters and not req.observer:
            self._maybe_advance_hw(now_ms)
        progress = self.leader.progress(req.sender, req.observer)
        nothing_new = req.fetch_offset >= self.log.log_end_offset and progress.hw_sent >= self.high_watermark
        if nothing_new and before == self.high_watermark and req.max_wait_ms > 0:
            self.leader.park(req, now_ms + req.max_wait_ms)
            return
        self._answer_fetch(req)

    def _on_fetch_response(self, resp: FetchResponse, now_ms: int) -> None:
        if not self._answered(resp.sender, resp.request_id):
            self._observe(resp.epoch, resp.leader_id, now_ms)
            return
        if resp.error != Err.NONE:
            known = (self.epoch, self.leader_id)
            if not self._observe(resp.epoch, resp.leader_id, now_ms) or (self.epoch, self.leader_id) == known:
                self._back_off(now_ms)
                if self.leader_id < 0 or resp.sender != self.leader_id:
                    self.bootstrap_index += 1
            return
        if not self._observe(resp.epoch, resp.leader_id, now_ms) or resp.epoch != self.epoch:
            return
        if self.role is not Role.FOLLOWER or resp.sender != self.leader_id:
            return
        self._heard_from_leader(now_ms)
        if resp.diverging is not None:
            to = self._truncation_offset(resp.diverging)
            tracing.truncate(self.tracer, self.log, self.epoch, to)
            self.log.truncate_to(to)
            self._ready.flush = True  # the truncation is durable before anything fetched after it
            if self.membership.truncated(to):
                self._voters_changed(now_ms)
        elif resp.snapshot_id is not None:
            self.snapshot_fetch = (resp.snapshot_id, 0)
        else:
            if resp.records is not None:
                start = self.log.log_end_offset
                self.log.append_as_follower(resp.records)
                self._ready.flush = True
                if self.membership.appended(self.log, start):
                    self._voters_changed(now_ms)
            self._raise_hw(min(resp.high_watermark, self.log.log_end_offset))
        self._send_fetch(now_ms)

    def _truncation_offset(self, diverging: DivergingEpoch) -> int:
        # A method, so that the simulator's tests can break it and see the checker catch the divergence.
        return truncation_offset(self.log, diverging)


_HANDLERS: dict[type, str] = {
    VoteRequest: "_on_vote",
    VoteResponse: "_on_vote_response",
    BeginQuorumEpochRequest: "_on_begin",
    BeginQuorumEpochResponse: "_on_begin_response",
    EndQuorumEpochRequest: "_on_end",
    EndQuorumEpochResponse: "_on_end_response",
    FetchRequest: "_on_fetch",
    FetchResponse: "_on_fetch_response",
    FetchSnapshotRequest: "_on_fetch_snapshot",
    FetchSnapshotResponse: "_on_fetch_snapshot_response",
    messages.AddVoterRequest: "_on_voter_change",
    messages.RemoveVoterRequest: "_on_voter_change",
    messages.UpdateVoterRequest: "_on_voter_change",
}
