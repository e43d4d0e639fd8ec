"""The controller core on top of the metadata quorum: what to apply, when to become active, what to
propose, and when to forget what never committed. Sans-IO: the controller server and the simulator
feed it commits and leadership changes and carry out what it says.

Why each rule is here:
- Committed records are applied in log order, except the active controller's own: those went into
  ``core`` when it decided them, so applying them again at commit would apply them twice.
- A new quorum leader becomes the active controller only once everything before its own first record
  (its LeaderChange) is committed and applied. Deciding earlier would decide from a state that lacks
  records a previous controller appended and the quorum still commits: two PartitionChange records for
  one partition at one leader epoch with different leaders (the simulator's controller scenarios break
  this rule on purpose and see exactly that).
- A controller that loses leadership with decisions not yet committed reverts to the committed state
  (as Kafka's controller reverts to its last committed snapshot): those decisions may never commit.

The timed and liveness decisions of the active controller are asked here too, each rule in its own
module: auto leader rebalance (leader_balance.py), when to snapshot (snapshot_schedule.py), and fencing a
broker whose connection closed or whose listener refuses (broker_liveness.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from epochlog.controller.broker_liveness import BrokerSessions, ProbeTarget, fence_on_close, probe_targets
from epochlog.controller.controller import Controller
from epochlog.controller.leader_balance import BalancePolicy, LeaderBalancer
from epochlog.controller.records import MetadataRecord
from epochlog.controller.snapshot_schedule import DEFAULT_MAX_BYTES, SnapshotSchedule

NEVER = 1 << 62
# How long a new active controller waits for a broker it has not heard from before fencing it.
ACTIVATION_GRACE_MS = 3000

RecordReader = Callable[[int, int], Iterable[MetadataRecord]]


class NotActive(Exception):
    """A decision was made by a controller that is not the active one."""


class QuorumController:
    def __init__(
        self,
        session_timeout_ms: int = 9000,
        grace_ms: int = ACTIVATION_GRACE_MS,
        balance: BalancePolicy | None = None,
        snapshot_bytes: int = DEFAULT_MAX_BYTES,
        min_isr: int = 1,
        elr_version: int = 1,
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.min_isr = min_isr
        self.elr_version = elr_version
        self.grace_ms = grace_ms
        self.balancer = LeaderBalancer(balance)
        self.snapshots = SnapshotSchedule(snapshot_bytes)
        self.sessions = BrokerSessions()
        self.core = Controller(session_timeout_ms, min_isr, elr_version)
        self.persisted = 0  # core.records[:persisted] are proposed to the quorum
        self.proposed_last = -1  # offset of the last record this controller proposed
        self.applied = 0  # the committed records below this offset are in ``core``
        self.own_from = NEVER  # records from here on are this controller's own (already in ``core``)
        self.active = False

    def rebuild(self, records: list[MetadataRecord], committed_end: int, now_ms: int) -> None:
        """The state from the committed records alone (``committed_end``: the offset after the last)."""
        self.core = Controller.replay(records, self.session_timeout_ms, now_ms, self.min_isr, self.elr_version)
        self.persisted = len(self.core.records)
        self.applied = committed_end
        self.own_from = NEVER
        self.active = False

    def on_commit(self, hw: int, read: RecordReader) -> int:
        """The quorum's high watermark moved to ``hw``; ``read(start, end)`` gives the committed records
        in [start, end). Returns how many records were applied."""
        if hw <= self.applied:
            return 0
        applied = 0
        upto = min(hw, self.own_from)
        if upto > self.applied:
            for record in read(self.applied, upto):
                self.core.apply(record)
                applied += 1
            # Applying bypasses the decision log; nothing applied here is ours to propose.
            self.core.records = self.core.records[: self.persisted]
        self.applied = hw
        self.snapshots.went_by(applied)
        return applied

    def became_leader(self, epoch_start_offset: int) -> None:
        """This node leads the quorum; its own records start at ``epoch_start_offset``."""
        self.own_from = epoch_start_offset

    def lost_leadership(self) -> bool:
        """This node no longer leads. True if its state holds decisions that may never commit, so the
        caller must ``rebuild`` from the committed log."""
        stale = self.active or self.persisted < len(self.core.records) or self.proposed_last >= self.applied
        self.active = False
        self.own_from = NEVER
        self.sessions.forget()
        self.balancer.deactivated()
        return stale

    def can_activate(self, leader_ready: bool) -> bool:
        return leader_ready and self.applied >= self.own_from

    def maybe_activate(self, leader_ready: bool, now_ms: int) -> bool:
        """True if this controller just became the active one."""
        if self.active or not self.can_activate(leader_ready):
            return False
        self.active = True
        self.core.activate(now_ms, self.grace_ms)
        self.core.init_features()  # a new cluster's first active controller finalizes KIP-966
        self.balancer.activated(now_ms)
        return True

    def take_proposals(self) -> list[MetadataRecord]:
        """The decisions not yet proposed; the caller proposes them and reports the last offset to
        ``proposed``. Only the active controller may have any."""
        new = self.core.records[self.persisted :]
        if new and not self.active:
            raise NotActive("this controller is not the active controller")
        return new

    def proposed(self, last_offset: int) -> None:
        self.proposed_last = last_offset
        self.snapshots.went_by(len(self.core.records) - self.persisted)
        self.persisted = len(self.core.records)
        self.core.drain_changes()

    def all_committed(self) -> bool:
        """Everything this controller proposed is committed (a snapshot may be taken of ``core``)."""
        return self.proposed_last < self.applied

    # -- the active controller's timer and the brokers' liveness --------------------------------------
    def tick(self, now_ms: int) -> list[tuple[str, int]]:
        """The active controller's timer: fence brokers whose session expired, then rebalance leaders if
        due. Returns the partitions the rebalance moved; the decisions are ``take_proposals``' to propose."""
        if not self.active:
            return []
        self.core.tick(now_ms)
        return self.balancer.maybe_balance(self.core, now_ms)

    def session_opened(self, conn: Hashable, broker: int) -> None:
        """``broker`` registered or heartbeat on connection ``conn``. Only the active controller's sessions
        count: a connection a standby knew says nothing of whether the broker reaches the active one."""
        if self.active:
            self.sessions.opened(conn, broker)

    def connection_lost(self, conn: Hashable) -> int | None:
        """Connection ``conn`` closed: the broker fenced for it (its process is gone), or None."""
        broker = self.sessions.closed(conn)
        if broker is None or not self.active or not fence_on_close(self.core, broker):
            return None
        return broker

    def probe_targets(self, colocated_broker: int | None = None) -> list[ProbeTarget]:
        """Right after activation: the brokers to knock on once (broker_liveness.probe_targets)."""
        return probe_targets(self.core, colocated_broker) if self.active else []

    def probe_refused(self, broker: int) -> bool:
        """``broker``'s listener refused the knock: True if it was fenced for it."""
        return self.active and self.core.broker_unreachable(broker)

    def snapshot_due(self, log_start_offset: int) -> int | None:
        """The offset to write a metadata snapshot at now (snapshot_schedule.py), or None."""
        return self.snapshots.due(self.applied, self.all_committed(), log_start_offset)

    def snapshot_taken(self) -> None:
        self.snapshots.taken()
