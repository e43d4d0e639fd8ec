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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from epochlog.controller.controller import Controller
from epochlog.controller.records import MetadataRecord

NEVER = 1 << 62
# How long a new active controller waits for a broker it has not heard from before fencing it.
ACTIVATION_GRACE_MS = 3000

RecordReader = Callable[[int, int], Iterable[MetadataRecord]]


class NotActive(Exception):
    """A decision was made by a controller that is not the active one."""


class QuorumController:
    def __init__(self, session_timeout_ms: int = 9000, grace_ms: int = ACTIVATION_GRACE_MS) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.grace_ms = grace_ms
        self.core = Controller(session_timeout_ms)
        self.persisted = 0  # core.records[:persisted] are proposed to the quorum
        self.proposed_last = -1  # offset of the last record this controller proposed
        self.applied = 0  # the committed records below this offset are in ``core``
        self.own_from = NEVER  # records from here on are this controller's own (already in ``core``)
        self.active = False

    def rebuild(self, records: list[MetadataRecord], committed_end: int, now_ms: int) -> None:
        """The state from the committed records alone (``committed_end``: the offset after the last)."""
        self.core = Controller.replay(records, self.session_timeout_ms, now_ms)
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
        return stale

    def can_activate(self, leader_ready: bool) -> bool:
        return leader_ready and self.applied >= self.own_from

    def maybe_activate(self, leader_ready: bool, now_ms: int) -> bool:
        """True if this controller just became the active one."""
        if self.active or not self.can_activate(leader_ready):
            return False
        self.active = True
        self.core.activate(now_ms, self.grace_ms)
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
        self.persisted = len(self.core.records)
        self.core.drain_changes()

    def all_committed(self) -> bool:
        """Everything this controller proposed is committed (a snapshot may be taken of ``core``)."""
        return self.proposed_last < self.applied
