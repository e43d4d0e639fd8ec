"""The invariants the simulator checks after every event.

1. committed: no acknowledged (acks=all, below the HW) record is lost or changed on a serving leader,
   unless every replica crashed hard after it was committed (n failures: KIP-101 Scenario 2 accepts
   that loss; never under flush.messages=1, the durable mode) or an unclean election happened (the
   KIP-101 appendix: permitted, reported).
2. log-matching: replicas agree on every offset below both their high watermarks.
3. one-leader-per-epoch: at most one broker appends as leader in any epoch.
4. monotonic-leader: a leader's epoch and HW never go backwards.
5. isr-has-leader: the controller's ISR always contains the leader.
6. converged (checked once, after the faults end and the network heals): every live replica holds
   exactly the leader's log.
7. expired-lease-serves: a broker whose lease (replication/lease.py) has expired, leading a partition whose
   ISR followers stopped fetching from it, acknowledges no write and holds none waiting longer than a tick:
   its clients hear NOT_LEADER_OR_FOLLOWER and move on.
8. lease-outlives-session: no broker holds its lease past the controller's session deadline for it.
9. writes-resume: after a leader is cut off (``cut_off_at``), a write is acknowledged again within the
   session timeout plus the issue's 2 s, scaled as the session is (9 s in Kafka).
10-12. KIP-966's, when the cluster finalized it (sim/elr_invariants.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.controller.records import UncleanElection
from epochlog.replication.types import Role
from epochlog.sim.elr_invariants import ElrChecker

if TYPE_CHECKING:
    from epochlog.sim.world import World


# A broker ticks every 25 ms: a write may wait that long after the lease ends before it is answered.
LEASE_SLACK_MS = 30


@dataclass(frozen=True)
class Violation:
    invariant: str
    at_ms: int
    detail: str


class InvariantChecker:
    def __init__(self, world: World) -> None:
        self.w = world
        self.violations: list[Violation] = []
        self.permitted: list[Violation] = []
        self.appenders: dict[int, int] = {}  # epoch -> broker that appended as leader
        self.leader_marks: dict[int, tuple[int, int]] = {}  # broker -> (epoch, hw) while leader
        self.ack_time: dict[int, int] = {}
        self.ack_isr: dict[int, frozenset[int]] = {}
        self.append_time: dict[str, int] = {}
        self.hard_crashes: dict[int, list[int]] = {}
        self._seen: set[tuple[str, str]] = set()
        self.elr = ElrChecker(self)
        self.cut_off_at: int | None = None  # when a scenario cut the leader off (for writes-resume)
        self.last_ack_at = -1

    def _fail(self, invariant: str, detail: str, permitted: bool = False) -> None:
        key = (invariant, detail)
        if key in self._seen:
            return
        self._seen.add(key)
        v = Violation(invariant, self.w.now, detail)
        (self.permitted if permitted else self.violations).append(v)
        self.w.log_event(("PERMITTED " if permitted else "VIOLATION ") + f"{invariant}: {detail}")

    # -- hooks from the world -------------------------------------------------------------------
    def on_ack(self, offset: int, value: str, isr: frozenset[int], committed_at: int) -> None:
        """``isr`` and ``committed_at``: the leader's (maximal) ISR and clock when it committed the record."""
        self.ack_time[offset] = committed_at
        self.ack_isr[offset] = isr
        self.last_ack_at = self.w.now

    def on_leader_ack(self, bid: int) -> None:
        b = self.w.brokers[bid]
        if not b.lease.holds(self.w.now) and not b.replica.isr_following(self.w.now):
            self._fail("expired-lease-serves", f"broker {bid} acknowledges a write after its lease expired")

    def on_hard_crash(self, bid: int) -> None:
        self.hard_crashes.setdefault(bid, []).append(self.w.now)
        # Monotonic within one process's life: a restarted broker starts from its HW checkpoint, which
        # lags the HW it had in memory, and may hear an older state before the newest.
        self.leader_marks.pop(bid, None)

    def on_leader_append(self, bid: int, epoch: int, value: str = "") -> None:
        self.append_time.setdefault(value, self.w.now)
        other = self.appenders.setdefault(epoch, bid)
        if other != bid:
            self._fail("one-leader-per-epoch", f"brokers {other} and {bid} both appended as leader in epoch {epoch}")

    def on_role_change(self, bid: int) -> None:
        r = self.w.brokers[bid].replica
        if r.role is not Role.LEADER:
            self.leader_marks.pop(bid, None)

    # -- checks -------------------------------------------------------------------------------------
    def _excused(self, offset: int) -> bool:
        # Kafka keeps a committed record while one replica of the ISR that committed it keeps it; when
        # every one of them lost unflushed data in a hard crash, losing it is within the contract.
        # A follower counts towards the HW as soon as it has fetched a record, flushed or not, so the
        # loss window opens when the leader appended it. Under a sync-before-ack policy nothing excuses it:
        # a record counts toward the HW only once synced, so it survives losing every replica's power.
        if self.w.durable:
            return False
        appended_at = self.append_time.get(self.w.acked[offset], 0)
        isr = self.ack_isr.get(offset, self.w.state().replicas)
        return all(any(t >= appended_at for t in self.hard_crashes.get(b, [])) for b in isr)

    def lost_everywhere(self, value: str) -> bool:
        """Every replica crashed hard after ``value`` was appended: its loss is within the contract
        (the same excuse as ``_excused``, for a record the producer may never have heard acknowledged)."""
        acked_at = [o for o, v in self.w.acked.items() if v == value]
        if acked_at:
            return self._excused(acked_at[0])  # judged by the ISR that committed it
        appended_at = self.append_time.get(value, 0)
        return all(any(t >= appended_at for t in self.hard_crashes.get(b, [])) for b in self.w.state().replicas)

    def check_converged(self) -> None:
        """After the faults end and the network heals: every live replica holds exactly the leader's log.
        A liveness check, run once at the end: a follower that keeps truncating and never catches up
        breaks no safety invariant, only this one."""
        w = self.w
        st = w.state()
        lead = w.brokers.get(st.leader)
        if lead is None or not lead.alive:
            return
        want = [(e.epoch, e.value) for e in lead.log.entries]
        for bid in st.replicas:
            b = w.brokers[bid]
            if bid == st.leader or not b.alive or b.paused:
                continue
            have = [(e.epoch, e.value) for e in b.log.entries]
            if have != want:
                first = next(
                    (i for i, (x, y) in enumerate(zip(have, want, strict=False)) if x != y), min(len(have), len(want))
                )
                self._fail(
                    "converged",
                    f"broker {bid} ({len(have)} records) differs from leader {st.leader} ({len(want)}) at {first}",
                )

    def check_reassigned(self, target: list[int]) -> None:
        """At the end of a reassignment scenario with every broker back: the move completed (a liveness
        check, like check_converged)."""
        st = self.w.state()
        if st.adding or st.removing or list(st.replicas) != target:
            self._fail(
                "reassigned",
                f"replicas {list(st.replicas)} (adding {list(st.adding)}, removing {list(st.removing)}), "
                f"not {target}",
            )

    def check(self) -> None:
        w = self.w
        st = w.state()
        if st.leader >= 0 and st.leader not in st.isr:
            self._fail("isr-has-leader", f"leader {st.leader} is not in the ISR {sorted(st.isr)}")
        unclean = any(isinstance(r, UncleanElection) for r in w.controller.records)
        self._check_leases()
        for bid, b in w.brokers.items():
            r = b.replica
            if not b.alive or r.role is not Role.LEADER:
                continue
            mark = self.leader_marks.get(bid)
            if mark is not None:
                if r.leader_epoch < mark[0]:
                    self._fail("monotonic-leader", f"leader {bid} epoch went from {mark[0]} to {r.leader_epoch}")
                elif r.leader_epoch == mark[0] and r.high_watermark < mark[1]:
                    self._fail("monotonic-leader", f"leader {bid} HW went from {mark[1]} to {r.high_watermark}")
            self.leader_marks[bid] = (r.leader_epoch, r.high_watermark)
            # Only the leader the controller currently names serves; a zombie is judged by the others.
            if st.leader != bid or st.leader_epoch != r.leader_epoch:
                continue
            if w.read_committed is not None:
                w.read_committed.check(bid)
            entries = b.log.entries
            n = len(entries)
            for offset, value in w.acked.items():
                if offset < n and entries[offset][1] == value:
                    continue
                have = entries[offset].value if offset < len(entries) else "nothing"
                detail = f"acknowledged {value}@{offset} is {have} on leader {bid} (epoch {r.leader_epoch})"
                if unclean:
                    self._fail("committed", detail + " after an unclean election", permitted=True)
                elif self._excused(offset):
                    self._fail("committed", detail + " after every replica crashed", permitted=True)
                else:
                    self._fail("committed", detail)
        self._check_log_matching()
        if w.controller.image.elr_enabled:
            self.elr.check()

    def _check_leases(self) -> None:
        w = self.w
        for bid, b in w.brokers.items():
            if not b.alive or b.paused:
                continue
            stopped = not b.replica.isr_following(w.now - LEASE_SLACK_MS)
            if b.pending_acks and w.now > b.lease.expires_ms + LEASE_SLACK_MS and stopped:
                self._fail(
                    "expired-lease-serves",
                    f"broker {bid} keeps {len(b.pending_acks)} write(s) waiting though its lease ended at "
                    f"{b.lease.expires_ms} ms",
                )
            info = w.controller.brokers.get(bid)
            if info is not None and w.now > info.last_heartbeat_ms + w.session_ms and b.lease.holds(w.now):
                self._fail(
                    "lease-outlives-session",
                    f"broker {bid} holds its lease past the controller's session deadline "
                    f"({info.last_heartbeat_ms + w.session_ms} ms)",
                )
        if self.cut_off_at is not None and self.last_ack_at < self.cut_off_at:
            bound = w.session_ms + w.session_ms * 2000 // 9000
            if w.now > self.cut_off_at + bound:
                self._fail("writes-resume", f"no write acknowledged within {bound} ms of the leader's cut-off")

    def _check_log_matching(self) -> None:
        # Only HWs learned in the replica's current term count: a replica that just came back still
        # carries the HW of the lineage it had, which its first fetch reconciles.
        live = [b for b in self.w.brokers.values() if b.alive and b.replica.hw_epoch == b.replica.leader_epoch >= 0]
        for i, a in enumerate(live):
            for b in live[i + 1 :]:
                if a.replica.leader_epoch != b.replica.leader_epoch:
                    continue  # different terms: the stale one reconciles before its HW counts
                upto = min(
                    a.replica.high_watermark, b.replica.high_watermark, a.log.log_end_offset, b.log.log_end_offset
                )
                ea, eb = a.log.entries, b.log.entries
                if ea[:upto] == eb[:upto]:
                    continue
                for o in range(upto):
                    if ea[o] != eb[o]:
                        self._fail(
                            "log-matching",
                            f"brokers {a.broker_id} and {b.broker_id} differ at offset {o} below both HWs: "
                            f"{ea[o].value}/e{ea[o].epoch} vs {eb[o].value}/e{eb[o].epoch}",
                        )
                        break
