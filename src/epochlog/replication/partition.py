"""One partition replica's replication state machine, free of I/O.

It is driven by events (becoming leader or follower, a produce, a fetch from a follower, a
fetch response from the leader, a timer) that carry ``now`` in milliseconds, and it answers
with decisions; the caller (server/ or sim/) does the waiting, sending and disk I/O.

Rules and where they come from:
- A new leader appends (epoch, log end offset) to its epoch cache and flushes it before taking
  writes (KIP-101, 000_fddc888a0a681d36.txt, step 3).
- Followers fetch with CurrentLeaderEpoch (fencing, KIP-320, 001_d002f2178fc0751d.txt) and
  LastFetchedEpoch; the leader answers a divergent follower with DivergingEpoch and the follower
  truncates and fetches again (002_787fe03f05351a44.txt, "reconciliation").
- HW = min log end offset over the ISR; a new leader whose HW lags answers consumer fetches between
  its HW and its log end with OFFSET_NOT_AVAILABLE (002, "temporarily decreased HW").
- A follower leaves the ISR after replica.lag.time.max.ms without catching up and rejoins only when
  caught up past the start of the leader's current epoch (002; KIP-320 for fenced replicas).
- Produce may carry the producer's leader epoch (KIP-359, 003_0c58b12ec142931e.txt).
- DeleteRecords (KIP-107): the leader moves its log start offset up to a requested offset at most its HW
  (-1: the HW); followers learn the leader's start from fetch responses and move theirs; the request is
  answered once every replica on a live broker reports (in its fetches) a start at least that far.
- TruncationMode.HIGH_WATERMARK restores the pre-KIP-101 rule (truncate to HW on becoming follower,
  no epoch-based divergence) so the simulator can show Scenario 1 and 2 losing data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from epochlog.codes import Err
from epochlog.offsets import last_stable_offset
from epochlog.replication import read_replica
from epochlog.replication.durability import Durability
from epochlog.replication.lease import NO_LEASE, BrokerLease
from epochlog.replication.log import ReplicaLog
from epochlog.replication.partition_trace import PartitionTracing
from epochlog.replication.read_replica import ReplicaView
from epochlog.replication.types import (
    UNDEFINED_EPOCH,
    AlterIsr,
    DivergingEpoch,
    FetchDecision,
    FetchOutcome,
    FetchRequest,
    FetchResponse,
    LeaderAppend,
    PartitionState,
    Role,
    TruncationMode,
)
from epochlog.trace import events as trace


@dataclass
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1
    log_start_offset: int = -1  # as its last fetch said; -1 until it fetches in this term


# An ISR change unanswered this long is sent again.
ALTER_RETRY_MS = 500


def check_epoch(request_epoch: int, my_epoch: int) -> int:
    """KIP-320: -1 skips the check; older is fenced, newer is unknown to us."""
    if request_epoch < 0 or request_epoch == my_epoch:
        return Err.NONE
    return Err.FENCED_LEADER_EPOCH if request_epoch < my_epoch else Err.UNKNOWN_LEADER_EPOCH


class PartitionReplica(PartitionTracing):
    def __init__(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        log: ReplicaLog,
        *,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
        truncation_mode: TruncationMode = TruncationMode.LEADER_EPOCH,
        high_watermark: int = 0,
        tracer: trace.Tracer = trace.NO_TRACE,
        hw_needs_min_isr: bool = False,
        follower_silence_ms: int = 1000,
    ) -> None:
        """``high_watermark``: where the durable checkpoint left it (capped at the log end): from then on
        this object is its only owner; storage, the checkpoints and every reader read it here."""
        self.broker_id = broker_id
        self.topic = topic
        self.partition = partition
        self.log = log
        self.min_isr = min_insync_replicas
        # KIP-966 (the cluster finalized eligible.leader.replicas.version): the HW moves only while the ISR
        # is at least min.insync.replicas, so every replica that leaves an ISR already below it (the ELR)
        # holds every committed record.
        self.hw_needs_min_isr = hw_needs_min_isr
        self.lag_max_ms = replica_lag_time_max_ms
        self.mode = truncation_mode
        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch = UNDEFINED_EPOCH
        self.partition_epoch = 0
        self.isr: frozenset[int] = frozenset()
        self.replicas: tuple[int, ...] = ()
        self.high_watermark = max(0, min(high_watermark, log.log_end_offset))
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: AlterIsr | None = None
        self.alter_sent_ms = 0  # when pending_isr was last sent to the controller
        # The epoch in which this replica last learned its HW from its leader (or set it as leader):
        # a HW carried over from an older term says nothing about the current leader's log.
        self.hw_epoch = UNDEFINED_EPOCH
        # Brokers the metadata shows fenced or shutting down: never proposed for the ISR (KIP-841). A
        # proposal the controller would refuse still holds the HW to the maximal ISR while in flight.
        self.ineligible: frozenset[int] = frozenset()
        # Its state transitions, for the trace checker (trace/check.py); a no-op unless the driver asks.
        self.tracer = tracer
        self._traced_leo = -1
        # What of its own log counts toward acknowledgements (replication/durability.py); the driver sets
        # sync_before_ack from the partition's flush policy and reports each sync (synced()).
        self.durability = Durability(durable_end_offset=log.log_start_offset)
        # The broker's lease (replication/lease.py), shared by its replicas: a leader whose lease expired
        # answers clients as a follower would.
        self.lease: BrokerLease = NO_LEASE
        # A follower's fetches arrive at least this often while it follows (a long poll is held at most
        # replica.fetch.wait.max.ms, 500 by default); longer silence means it stopped.
        self.follower_silence_ms = follower_silence_ms

    def __repr__(self) -> str:
        return (
            f"Replica(b{self.broker_id} {self.topic}-{self.partition} {self.role.value} e{self.leader_epoch} "
            f"leo={self.log.log_end_offset} hw={self.high_watermark} isr={sorted(self.isr)})"
        )

    # -- role changes ---------------------------------------------------------------------
    def apply_state(self, state: PartitionState, now_ms: int) -> None:
        """Take the controller's decision for this partition (LeaderAndIsr / metadata record)."""
        if state.leader_epoch < self.leader_epoch:
            return  # a stale update; epochs never go backwards here
        if state.leader_epoch == self.leader_epoch and state.partition_epoch < self.partition_epoch:
            return  # an older ISR of the same term
        if state.leader < 0:
            # Offline partition: nobody leads; keep the log as it is until a leader is chosen.
            self.role = Role.NONE
            self.leader_id = -1
            self.leader_epoch = state.leader_epoch
            self.isr, self.replicas, self.partition_epoch = state.isr, state.replicas, state.partition_epoch
            return
        if state.leader == self.broker_id:
            if self.role is not Role.LEADER or state.leader_epoch != self.leader_epoch:
                self.become_leader(state, now_ms)
            elif state.partition_epoch > self.partition_epoch:
                self.isr, self.partition_epoch = state.isr, state.partition_epoch
                self._take_replicas(state.replicas, now_ms)
                self.pending_isr = None
                self._trace_isr(proposed=False)
                self._maybe_advance_hw()  # a shrink can let the HW move at once
        elif self.broker_id in state.replicas:
            if (
                self.role is not Role.FOLLOWER
                or state.leader_epoch != self.leader_epoch
                or state.leader != self.leader_id
            ):
                self.become_follower(state)
            else:
                self.isr, self.partition_epoch = state.isr, state.partition_epoch
                self.replicas = state.replicas
        else:
            self.role = Role.NONE

    def _take_replicas(self, replicas: tuple[int, ...], now_ms: int) -> None:
        """The replica set changed within this term (a reassignment adds replicas without a new leader
        epoch): a joining replica is tracked from now on, so its fetches count and it can join the ISR."""
        self.replicas = replicas
        for r in replicas:
            if r != self.broker_id and r not in self.followers:
                self.followers[r] = FollowerState(last_fetch_ms=now_ms)
        for r in [r for r in self.followers if r not in replicas]:
            del self.followers[r]

    def _take_term(self, role: Role, state: PartitionState) -> None:
        self.role = role
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr = state.isr
        self.replicas = state.replicas
        self.partition_epoch = state.partition_epoch
        self.pending_isr = None
        self.followers = {}

    def become_leader(self, state: PartitionState, now_ms: int) -> None:
        self._take_term(Role.LEADER, state)
        # KIP-101 step 3: the new epoch begins at our log end, durably, before any write.
        self.log.assign_epoch(state.leader_epoch, self.log.log_end_offset)
        self.log.flush()
        self.durability.synced(self.log.log_end_offset, self.log.log_end_offset)
        self.followers = {
            r: FollowerState(last_caught_up_ms=now_ms if r in state.isr else 0, last_fetch_ms=now_ms)
            for r in state.replicas
            if r != self.broker_id
        }
        # The HW stays where this replica knew it; it catches up as followers fetch. When the ISR is this
        # replica alone its log end is already the ISR's minimum (Kafka's makeLeader also tries to move
        # the HW at once): without that, a restarted sole replica hid its log until the next write.
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.hw_epoch = state.leader_epoch
        self._trace_role(self.log.log_end_offset)
        self._maybe_advance_hw()

    def become_follower(self, state: PartitionState) -> None:
        self._take_term(Role.FOLLOWER, state)
        self._trace_role(-1)
        if self.mode is TruncationMode.HIGH_WATERMARK:
            # The pre-KIP-101 rule: drop everything above the local HW (KIP-101 Scenario 1).
            self._truncate(self.high_watermark, "high-watermark rule")

    # -- produce (leader) -----------------------------------------------------------------
    def serves_as_leader(self, now_ms: int) -> bool:
        """Leader, and either its broker's lease holds or every other ISR member still fetches from it (its
        writes still commit): only then does it take writes and answer them."""
        return self.role is Role.LEADER and (self.lease.holds(now_ms) or self.isr_following(now_ms))

    def isr_following(self, now_ms: int) -> bool:
        """Every ISR member but this leader fetched within follower_silence_ms. With none, true as well: no
        clean election can move the partition elsewhere, so stopping would only make it unavailable (Kafka
        keeps such a leader serving, and so does this)."""
        others = [self.followers.get(r) for r in self.isr if r != self.broker_id]
        return all(f is not None and now_ms - f.last_fetch_ms <= self.follower_silence_ms for f in others)

    def check_produce(self, acks: int, now_ms: int, producer_epoch: int = UNDEFINED_EPOCH) -> int:
        if not self.serves_as_leader(now_ms):
            return Err.NOT_LEADER_OR_FOLLOWER
        code = check_epoch(producer_epoch, self.leader_epoch)  # KIP-359
        if code:
            return code
        if acks == -1 and len(self.isr) < self.min_isr:
            return Err.NOT_ENOUGH_REPLICAS
        return Err.NONE

    def append(
        self, records: Any, now_ms: int, acks: int = -1, producer_epoch: int = UNDEFINED_EPOCH
    ) -> LeaderAppend:
        """The one way to write as leader (a produce, a coordinator's internal write, a transaction marker):
        check_produce's rules, then the append stamped with this term's epoch, then the HW (it moves at once
        when the ISR is this replica alone). A refusal writes nothing; a storage refusal (sequence, size,
        I/O) raises from the log, also having written nothing."""
        code = self.check_produce(acks, now_ms, producer_epoch)
        if code:
            return LeaderAppend(code)
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms)
        self._maybe_advance_hw()
        return LeaderAppend(
            Err.NONE,
            info.first_offset,
            info.last_offset,
            info.duplicate,
            info.record_count,
            info.log_append_time_ms,
            info.last_offset if acks == -1 or (acks == 1 and self.durability.enforced) else -1,
        )

    def synced(self, offset: int) -> None:
        """The driver made this log durable up to ``offset``: a leader's HW may move."""
        if self.durability.synced(offset, self.log.log_end_offset):
            self._maybe_advance_hw()

    def needs_sync(self) -> bool:
        return self.durability.needs_sync(self.log.log_end_offset)

    def is_committed(self, last_offset: int) -> bool:
        return self.high_watermark > last_offset

    # -- fetch (leader side) ----------------------------------------------------------------
    def handle_fetch(self, req: FetchRequest, now_ms: int) -> tuple[FetchDecision, AlterIsr | None]:
        if self.role is not Role.LEADER:
            if self.role is Role.FOLLOWER and req.replica_id < 0 and req.from_any_replica:
                code = check_epoch(req.current_leader_epoch, self.leader_epoch)
                leo, lso = self.log.log_end_offset, self.last_stable_offset()
                decision = read_replica.follower_read(
                    req.fetch_offset, code, self.high_watermark, self.log.log_start_offset, leo, lso, req.read_committed
                )
                return decision, None
            return FetchDecision(Err.NOT_LEADER_OR_FOLLOWER), None
        code = check_epoch(req.current_leader_epoch, self.leader_epoch)
        if code:
            return FetchDecision(code, self.high_watermark), None
        leo = self.log.log_end_offset
        if self.mode is TruncationMode.LEADER_EPOCH and req.last_fetched_epoch >= 0:
            epoch, end = self.log.end_offset_for(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or end < req.fetch_offset:
                return FetchDecision(
                    Err.NONE, self.high_watermark, self.log.log_start_offset, DivergingEpoch(epoch, end)
                ), None
        if req.fetch_offset > leo or req.fetch_offset < self.log.log_start_offset:
            return FetchDecision(Err.OFFSET_OUT_OF_RANGE, self.high_watermark, self.log.log_start_offset), None
        if req.replica_id < 0:
            if not self.serves_as_leader(now_ms):
                # Fenced or about to be: the consumer refreshes its metadata and finds the new leader.
                return FetchDecision(Err.NOT_LEADER_OR_FOLLOWER), None
            # A consumer reads only what the ISR holds. Between a new leader's lagging HW and its log end
            # the records exist but are not known committed yet: retry (OFFSET_NOT_AVAILABLE, seed 002).
            lso = self.last_stable_offset()
            if self.high_watermark < req.fetch_offset:
                return FetchDecision(
                    Err.OFFSET_NOT_AVAILABLE, self.high_watermark, self.log.log_start_offset, last_stable_offset=lso
                ), None
            # read_committed stops at the first undecided transaction (KIP-98).
            bound = lso if req.read_committed else self.high_watermark
            return FetchDecision(
                Err.NONE, self.high_watermark, self.log.log_start_offset, None, req.fetch_offset, bound, lso
            ), None
        proposal = None
        if req.replica_id >= 0 and req.replica_id in self.followers:
            if req.log_start_offset >= 0:
                self.followers[req.replica_id].log_start_offset = req.log_start_offset
            proposal = self._update_follower(req.replica_id, req.fetch_offset, now_ms)
        lso = self.last_stable_offset()
        return FetchDecision(
            Err.NONE, self.high_watermark, self.log.log_start_offset, None, req.fetch_offset, None, lso
        ), proposal

    def read_replicas(self, fetch_offset: int, now_ms: int) -> tuple[ReplicaView, list[ReplicaView]]:
        """KIP-392's candidates for a consumer at ``fetch_offset``: this leader, and the ISR followers whose
        log holds the offset (read_replica.select picks among them)."""
        states = {b: (f.log_start_offset, f.log_end_offset, f.last_caught_up_ms) for b, f in self.followers.items()}
        me = ReplicaView(self.broker_id, self.log.log_end_offset, 0)
        return me, read_replica.eligible(states, self.isr, fetch_offset, now_ms)

    def last_stable_offset(self) -> int:
        return last_stable_offset(self.log.first_unstable_offset(self.high_watermark), self.high_watermark)

    def _update_follower(self, replica: int, fetch_offset: int, now_ms: int) -> AlterIsr | None:
        f = self.followers[replica]
        leo = self.log.log_end_offset
        # Kafka's rule: caught up now if at our end, or caught up to where we were at its last fetch.
        if fetch_offset >= leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.leader_end_at_last_fetch >= 0:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.last_fetch_ms = now_ms
        f.leader_end_at_last_fetch = leo
        self._maybe_advance_hw()
        return self._maybe_expand_isr(replica, now_ms)

    def _maybe_expand_isr(self, replica: int, now_ms: int) -> AlterIsr | None:
        if replica in self.isr or replica in self.ineligible or self.pending_isr is not None:
            return None
        f = self.followers[replica]
        epoch_start = self.log.epoch_start_offset(self.leader_epoch)
        if f.log_end_offset >= self.high_watermark and f.log_end_offset >= max(epoch_start, 0):
            return self._propose(self.isr | {replica}, now_ms)
        return None

    def maybe_shrink_isr(self, now_ms: int) -> AlterIsr | None:
        if self.role is not Role.LEADER or self.pending_isr is not None:
            return None
        out = {
            r
            for r in self.isr
            if r != self.broker_id
            and r in self.followers
            and now_ms - self.followers[r].last_caught_up_ms > self.lag_max_ms
        }
        if not out:
            return None
        return self._propose(self.isr - out, now_ms)

    def _propose(self, new_isr: frozenset[int], now_ms: int) -> AlterIsr:
        self.pending_isr = AlterIsr(
            self.topic, self.partition, self.broker_id, self.leader_epoch, frozenset(new_isr), self.partition_epoch
        )
        self.alter_sent_ms = now_ms
        self._trace_isr(proposed=True)
        return self.pending_isr

    def isr_change_failed(self) -> None:
        self.pending_isr = None

    def next_isr_change(self, now_ms: int) -> AlterIsr | None:
        """What a leader sends the controller now (called on a timer): a shrink of the ISR, or the change
        in flight again once it has gone unanswered for ALTER_RETRY_MS (the request or its answer was
        lost; Kafka's AlterPartitionManager retries the same way, and a stale repeat is refused by its
        partition epoch)."""
        if self.role is not Role.LEADER:
            return None
        if self.pending_isr is not None:
            if now_ms - self.alter_sent_ms < ALTER_RETRY_MS:
                return None
            self.alter_sent_ms = now_ms
            return self.pending_isr
        return self.maybe_shrink_isr(now_ms)

    def on_isr_change_answer(
        self, proposal: AlterIsr, error: int, state: PartitionState | None, now_ms: int
    ) -> None:
        """The controller's answer to ``proposal`` (an error, or the partition's state after the change; no
        answer at all counts as an error). Only the answer to the change in flight counts. Accepted within
        this leader epoch: the new ISR and partition epoch apply at once (the metadata record will say the
        same). Refused, or accepted at a new leader epoch (the change completed a reassignment, and only
        the metadata carries the new replica set): the proposal is dropped and the metadata decides."""
        if self.pending_isr is not proposal:
            return
        if error or state is None or state.leader_epoch != proposal.leader_epoch:
            self.isr_change_failed()
            return
        self.apply_state(state, now_ms)

    def _maybe_advance_hw(self) -> None:
        if self.role is not Role.LEADER:
            return
        if self.hw_needs_min_isr and len(self.isr) < self.min_isr:
            return
        ends = [self.durability.countable_end(self.log.log_end_offset)]
        # While an ISR change is in flight, count the maximal ISR (current plus proposed): a follower
        # being added must already hold everything the HW covers (Kafka's KIP-497 rule).
        maximal = self.isr | self.pending_isr.new_isr if self.pending_isr is not None else self.isr
        for r in maximal:
            if r != self.broker_id:
                f = self.followers.get(r)
                ends.append(f.log_end_offset if f else -1)
        new_hw = min(ends)
        if self.tracer.enabled:
            self._trace_leader_progress(new_hw)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw

    # -- fetch (follower side) --------------------------------------------------------------
    def next_fetch(self) -> FetchRequest | None:
        if self.role is not Role.FOLLOWER or self.leader_id < 0:
            return None
        if self.durability.needs_sync(self.log.log_end_offset):
            return None  # its fetch offset tells the leader what it holds: sync first (durability.py)
        last_epoch = self.log.latest_epoch() if self.mode is TruncationMode.LEADER_EPOCH else UNDEFINED_EPOCH
        return FetchRequest(self.broker_id, self.log.log_end_offset, last_epoch, self.leader_epoch)

    def handle_fetch_response(self, resp: FetchResponse) -> FetchOutcome:
        """Apply the leader's answer; returns what happened."""
        if self.role is not Role.FOLLOWER:
            return FetchOutcome.STALE  # asked before this replica's role changed
        if (resp.asked_epoch is not None and resp.asked_epoch != self.leader_epoch) or (
            resp.asked_offset is not None and resp.asked_offset != self.log.log_end_offset
        ):
            return FetchOutcome.STALE  # applying it could append at the wrong place or truncate what a newer term kept
        if resp.error in (Err.FENCED_LEADER_EPOCH, Err.UNKNOWN_LEADER_EPOCH, Err.NOT_LEADER_OR_FOLLOWER):
            return FetchOutcome.FENCED  # wait for newer metadata
        if resp.error == Err.OFFSET_OUT_OF_RANGE:
            return self._out_of_range(resp.log_start_offset, resp.high_watermark)
        if resp.error:
            return FetchOutcome.ERROR
        if resp.diverging is not None:
            self._truncate_for(resp.diverging)
            return FetchOutcome.TRUNCATED
        if resp.batches is not None:
            self.log.append_as_follower(resp.batches)
        hw_before = self.high_watermark
        self.high_watermark = max(self.high_watermark, min(resp.high_watermark, self.log.log_end_offset))
        self.hw_epoch = self.leader_epoch
        if self.tracer.enabled:
            self._trace_follower_progress(hw_before)
        if resp.log_start_offset > self.log.log_start_offset:
            # The leader deleted records (DeleteRecords, or retention): follow its start. Our HW is at least
            # that far once this answer is applied (we fetched at or above it); the cap is for safety.
            self.log.advance_log_start(min(resp.log_start_offset, self.high_watermark), "the leader's log start")
        return FetchOutcome.APPENDED

    def _out_of_range(self, leader_start: int, leader_hw: int) -> FetchOutcome:
        if self.log.log_end_offset < leader_start:
            # Retention on the leader passed our end: start over at its log start. Everything below is
            # the leader's committed history, so the HW is that offset (Kafka's truncateFullyAndStartAt).
            if self.tracer.enabled:
                self.tracer.emit(
                    trace.LogRestart(
                        self.topic, self.partition, self.leader_epoch, self.log.log_end_offset, leader_start
                    )
                )
            self.log.truncate_fully_and_start_at(leader_start)
            self.durability.synced(leader_start, self.log.log_end_offset)  # empty; its start is durable
            self.high_watermark = max(self.high_watermark, self.log.log_end_offset)
            return FetchOutcome.RESTARTED
        # Ahead of the leader's end: only reachable without epochs (the legacy rule): its HW is all we know.
        self._truncate(min(leader_hw, self.log.log_end_offset), "ahead of the leader's log end")
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        return FetchOutcome.TRUNCATED

    def ack_result(self, last_offset: int, now_ms: int, acks: int = -1) -> int | None:
        """A produce whose last record is ``last_offset``: None while it must wait, else its answer
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below min.insync.replicas meanwhile).
        acks=1 waits only under a sync-before-ack policy, for this replica's own sync.
        Not leader, or its lease expired: NOT_LEADER_OR_FOLLOWER, as Kafka's DelayedProduce answers once
        leadership moved, even for a write that was committed: the retry finds it a duplicate."""
        if not self.serves_as_leader(now_ms):
            return Err.NOT_LEADER_OR_FOLLOWER
        if acks != -1:
            return None if self.durability.countable_end(self.log.log_end_offset) <= last_offset else Err.NONE
        if self.high_watermark <= last_offset:
            return None
        return Err.NONE if len(self.isr) >= self.min_isr else Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    # -- DeleteRecords (leader) ----------------------------------------------------------------
    def delete_records(self, offset: int) -> tuple[int, int]:
        """(error, the offset the log now must start at) for a DeleteRecords partition; -1 asks for the HW.
        Kafka's rules: only the leader; nothing at or above the HW can be deleted (a consumer may not have
        been able to read it yet), nor a negative offset other than -1 (OFFSET_OUT_OF_RANGE)."""
        if self.role is not Role.LEADER:
            return Err.NOT_LEADER_OR_FOLLOWER, -1
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            return Err.OFFSET_OUT_OF_RANGE, -1
        self.log.advance_log_start(target, "DeleteRecords")
        return Err.NONE, target

    def low_watermark(self) -> int:
        """The smallest log start offset among this leader and the replicas on live brokers (Kafka's
        lowWatermarkIfLeader); a replica that has not fetched in this term counts as -1."""
        low = self.log.log_start_offset
        for r, f in self.followers.items():
            if r not in self.ineligible:
                low = min(low, f.log_start_offset)
        return low

    def delete_records_result(self, required: int) -> int | None:
        """A DeleteRecords waiting for the replicas: None while some live replica still starts below
        ``required``, else its answer."""
        if self.role is not Role.LEADER:
            return Err.NOT_LEADER_OR_FOLLOWER
        return Err.NONE if self.low_watermark() >= required else None

    def _truncate_for(self, div: DivergingEpoch) -> None:
        if div.epoch == UNDEFINED_EPOCH:
            target = self.high_watermark  # the leader knows nothing older: fall back (KIP-101 4.3 note)
        else:
            my_epoch, my_end = self.log.end_offset_for(div.epoch)
            if my_epoch == UNDEFINED_EPOCH:
                target = div.end_offset  # nothing of ours at or below that epoch: the leader's word
            elif my_epoch != div.epoch:
                # We never had the leader's epoch: step back to the end of our own largest epoch below
                # it and ask again (Kafka's follower rule, KIP-279). The leader's end offset would keep
                # records we wrote in a later epoch of ours that the leader never had.
                target = my_end
            else:
                target = min(div.end_offset, my_end)
        target = min(target, self.log.log_end_offset)
        self._truncate(target, f"diverging epoch {div.epoch} ending at {div.end_offset}")
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    # -- OffsetsForLeaderEpoch ----------------------------------------------------------------
    def offset_for_leader_epoch(self, current_leader_epoch: int, requested_epoch: int) -> tuple[int, int, int]:
        """(error, epoch, end offset) as OffsetsForLeaderEpoch v2+ answers it."""
        if self.role is not Role.LEADER:
            return Err.NOT_LEADER_OR_FOLLOWER, UNDEFINED_EPOCH, -1
        code = check_epoch(current_leader_epoch, self.leader_epoch)
        if code:
            return code, UNDEFINED_EPOCH, -1
        epoch, end = self.log.end_offset_for(requested_epoch)
        return Err.NONE, epoch, end

    # -- the trace (trace/events.py) ---------------------------------------------------------------
    def _truncate(self, target: int, reason: str) -> None:
        leo = self.log.log_end_offset
        if self.tracer.enabled and target < leo:
            self.tracer.emit(
                trace.Truncate(
                    self.topic,
                    self.partition,
                    self.role.value,
                    self.leader_epoch,
                    leo,
                    target,
                    trace.epoch_at(self.log, target),
                    self.high_watermark,
                    reason,
                )
            )
        self.log.truncate_to(target)
        self.durability.truncated(self.log.log_end_offset)
