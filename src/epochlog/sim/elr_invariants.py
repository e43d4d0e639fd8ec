"""KIP-966's invariants, checked after every event when the simulated cluster finalized it.

A record is committed once a leader the controller names exposed it below its high watermark (a
consumer may have read it) or acknowledged it to an acks=all producer.

7. elected-without-committed: a leader chosen by a clean election (no UncleanElection record for it)
   holds every committed record, as its log stands when the controller chooses it.
8. elr-missing-committed: every live eligible leader replica holds every committed record.
9. unclean-replica-eligible: a broker back from an unclean shutdown is in no ELR until it has rejoined
   the ISR (it may have lost unflushed records).

A record every replica may have lost in hard crashes (the checker's ``lost_everywhere``) is excused,
as the committed invariant excuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochlog.controller.records import UncleanElection
from epochlog.replication.types import Role

if TYPE_CHECKING:
    from epochlog.sim.invariants import InvariantChecker
    from epochlog.sim.world import World


class ElrChecker:
    def __init__(self, checker: InvariantChecker) -> None:
        self.checker = checker
        self.committed: dict[int, str] = {}  # offset -> value
        self.elected: set[tuple[int, int]] = set()  # (leader, leader epoch) already judged
        self.unclean_elected: set[int] = set()  # leaders named by UncleanElection records
        self.scanned = 0  # controller records looked at
        self.epochs: dict[int, int] = {}  # broker -> registration epoch last seen
        self.unclean_since_restart: set[int] = set()

    @property
    def w(self) -> World:
        return self.checker.w

    def check(self) -> None:
        w = self.w
        st = w.state()
        records = w.controller.records
        for record in records[self.scanned :]:
            if isinstance(record, UncleanElection):
                self.unclean_elected.add(record.leader)
        self.scanned = len(records)
        self._note_committed(st.leader, st.leader_epoch)
        for bid, info in w.controller.brokers.items():
            if self.epochs.get(bid) != info.epoch:
                self.epochs[bid] = info.epoch
                if not info.clean_shutdown:
                    self.unclean_since_restart.add(bid)
        self.unclean_since_restart -= st.isr
        if st.leader >= 0 and (st.leader, st.leader_epoch) not in self.elected:
            self.elected.add((st.leader, st.leader_epoch))
            if st.leader not in self.unclean_elected:
                self._holds("elected-without-committed", st.leader, f"leader {st.leader} (epoch {st.leader_epoch})")
            self.unclean_elected.discard(st.leader)
        for r in st.elr:
            if w.brokers[r].alive:
                self._holds("elr-missing-committed", r, f"eligible leader replica {r}")
            if r in self.unclean_since_restart:
                self.checker._fail(
                    "unclean-replica-eligible", f"broker {r} is eligible to lead after an unclean shutdown"
                )

    def _note_committed(self, leader: int, epoch: int) -> None:
        w = self.w
        self.committed.update(w.acked)
        b = w.brokers.get(leader)
        if b is None or not b.alive or b.replica.role is not Role.LEADER or b.replica.leader_epoch != epoch:
            return
        entries = b.log.entries
        for offset in range(min(b.replica.high_watermark, len(entries))):
            self.committed.setdefault(offset, entries[offset].value)

    def _holds(self, invariant: str, bid: int, who: str) -> None:
        entries = self.w.brokers[bid].log.entries
        for offset, value in sorted(self.committed.items()):
            if offset < len(entries) and entries[offset].value == value:
                continue
            have = entries[offset].value if offset < len(entries) else "nothing"
            detail = f"{who} has {have} at offset {offset}, where {value} was committed"
            self.checker._fail(invariant, detail, permitted=self.checker.lost_everywhere(value))
            return
