"""The invariants, judged over a stream of traced events (the simulator's, or real processes' merged files).

Every event is checked against each invariant that applies to it, and ``checks`` counts those checks.
Partition invariants (per partition, a partition being topic, index and topic id):
- one-leader-per-epoch: at most one broker leads (or appends a marker in) an epoch, and every replica
  names the same leader for it;
- leader-hw-monotonic: a leader's HW never goes back within its term (one node, one life, one epoch);
- hw-within-log: a leader's HW is never past its own log end;
- follower-hw-committed: a follower's HW is never past the highest HW any leader advertised;
- truncate-below-committed: no replica drops a committed record. A record is committed once a leader's HW
  passed it and is known by (offset, epoch): a replica dropping a record of another epoch at that offset
  dropped a diverged one, which is the point of KIP-101. After an unclean election, or a crash that lost
  unflushed records (the simulator's), such a loss is permitted and reported apart, as sim/invariants does;
- epoch-monotonic: the leader epoch a replica takes never goes back, across restarts;
- isr-has-leader: an ISR a leader applies or proposes holds that leader.
Quorum invariants (one metadata quorum):
- raft-one-leader-per-epoch: no two leaders in one epoch, by any node's account;
- raft-vote-once: a voter never votes for two candidates in one epoch, across restarts;
- raft-epoch-monotonic: a node's epoch never goes back, across restarts (unless its disk was lost);
- raft-commit-monotonic: a node's high watermark never goes back within one life;
- raft-truncate-below-commit: no node drops a committed entry.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from epochlog.trace import events as ev

PartitionKey = tuple[str, int, str]
CONTEXT = 12  # events kept for the report of a violation


@dataclass(frozen=True)
class TraceViolation:
    invariant: str
    index: int  # position of the offending event in the stream
    detail: str
    context: tuple[str, ...] = ()  # the events before it, as text


@dataclass
class _Committed:
    """What leaders committed for one partition: the highest HW, and the epoch of every record below it
    as (start offset, epoch) runs."""

    top: int = 0
    starts: list[int] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)

    def add(self, hw: int, runs: tuple[tuple[int, int], ...]) -> None:
        if hw <= self.top:
            return
        for epoch, start in runs:
            start = max(start, self.top)
            if start >= hw:
                continue
            if self.epochs and self.epochs[-1] == epoch:
                continue
            if self.starts and self.starts[-1] >= start:
                # A run that starts where the last one did replaces it (it was empty below ``top``).
                self.starts[-1], self.epochs[-1] = start, epoch
                continue
            self.starts.append(start)
            self.epochs.append(epoch)
        self.top = hw

    def epoch_at(self, offset: int) -> int | None:
        if offset >= self.top:
            return None
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.epochs[i] if i >= 0 else None


def describe(st: ev.Stamped) -> str:
    fields = " ".join(f"{k}={v}" for k, v in vars(st.event).items() if v not in ("", ()))
    return f"#{st.seq} {st.src} {st.node} @{st.ms} {st.event.kind} {fields}"


class TraceChecker:
    def __init__(self) -> None:
        self.checks = 0
        self.events = 0
        self.violations: list[TraceViolation] = []
        self.permitted: list[TraceViolation] = []
        self._recent: deque[str] = deque(maxlen=CONTEXT)
        self._seen: set[tuple[str, str]] = set()
        self._life: dict[tuple[str, int], int] = {}  # (src, node) -> starts seen
        # partitions
        self._leaders: dict[tuple[PartitionKey, int], tuple[int, str]] = {}  # (p, epoch) -> (leader, said by)
        self._leader_hw: dict[tuple[int, int, PartitionKey], tuple[int, int]] = {}  # (node, life, p) -> (epoch, hw)
        self._replica_epoch: dict[tuple[int, PartitionKey], int] = {}
        self._committed: dict[PartitionKey, _Committed] = {}
        self._unclean: set[tuple[str, int]] = set()
        # Checks against what other nodes said, held until the clock passes their time: events of two files
        # stamped with the same millisecond may be merged in either order.
        self._deferred: list[tuple[int, ev.Stamped, PartitionKey, int]] = []
        self._crash_loss = False
        # the quorum
        self._raft_leaders: dict[int, tuple[int, int]] = {}  # epoch -> (leader, said by)
        self._votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> candidate
        self._raft_epoch: dict[int, int] = {}
        self._raft_hw: dict[tuple[int, int], int] = {}  # (node, life) -> hw
        self._raft_committed = _Committed()

    # -- feeding ----------------------------------------------------------------------------------------
    def feed_all(self, stream: Iterable[ev.Stamped]) -> TraceChecker:
        for st in stream:
            self.feed(st)
        return self

    def feed(self, st: ev.Stamped) -> None:
        if self._deferred and self._deferred[0][0] < st.ms:
            self._run_deferred(st.ms)
        self._recent.append(describe(st))
        handler = _HANDLERS.get(type(st.event))
        if handler is not None:
            handler(self, st, st.event)
        self.events += 1

    def finish(self) -> TraceChecker:
        """Run the checks still waiting for the clock to move on (at the end of a stream)."""
        self._run_deferred(None)
        return self

    def _run_deferred(self, before_ms: int | None) -> None:
        keep = []
        for item in self._deferred:
            if before_ms is not None and item[0] >= before_ms:
                keep.append(item)
                continue
            _ms, st, p, hw = item
            top = self._committed.setdefault(p, _Committed()).top
            self._check(
                hw <= top,
                "follower-hw-committed",
                f"follower {st.node} of {_name(p)} has HW {hw}, above any leader's ({top})",
            )
        self._deferred = keep

    def _check(self, ok: bool, invariant: str, detail: str, permitted: bool = False) -> None:
        self.checks += 1
        if ok:
            return
        if (invariant, detail) in self._seen:
            return
        self._seen.add((invariant, detail))
        v = TraceViolation(invariant, self.events, detail, tuple(self._recent))
        (self.permitted if permitted else self.violations).append(v)

    def _life_of(self, st: ev.Stamped) -> int:
        return self._life.get((st.src, st.node), 0)

    # -- any node ------------------------------------------------------------------------------------------
    def _on_start(self, st: ev.Stamped, e: ev.Start) -> None:
        self._life[(st.src, st.node)] = self._life_of(st) + 1

    def _on_disk_lost(self, st: ev.Stamped, e: ev.DiskLost) -> None:
        if st.src == ev.CONTROLLER:
            self._raft_epoch.pop(st.node, None)
            for vote in [k for k in self._votes if k[0] == st.node]:
                del self._votes[vote]
        else:
            for replica in [k for k in self._replica_epoch if k[0] == st.node]:
                del self._replica_epoch[replica]

    def _on_crash(self, st: ev.Stamped, e: ev.Crash) -> None:
        if e.lost > 0:
            self._crash_loss = True

    # -- partitions -------------------------------------------------------------------------------------------
    def _claim_leader(self, p: PartitionKey, epoch: int, leader: int, who: str) -> None:
        if epoch < 0 or leader < 0:
            return
        first = self._leaders.setdefault((p, epoch), (leader, who))
        self._check(
            first[0] == leader,
            "one-leader-per-epoch",
            f"{_name(p)} epoch {epoch}: {first[1]} says broker {first[0]} leads, {who} says broker {leader}",
        )

    def _on_role(self, st: ev.Stamped, e: ev.Role) -> None:
        p = (e.topic, e.partition, e.tid)
        who = f"broker {st.node}"
        if e.role == "leader":
            self._claim_leader(p, e.epoch, st.node, who)
        elif e.role == "follower":
            self._claim_leader(p, e.epoch, e.leader, who)
        if e.role in ("leader", "follower"):
            key = (st.node, p)
            before = self._replica_epoch.get(key, -1)
            self._check(
                e.epoch >= before,
                "epoch-monotonic",
                f"broker {st.node} took epoch {e.epoch} of {_name(p)} after epoch {before}",
            )
            self._replica_epoch[key] = max(before, e.epoch)
        if e.role == "leader":
            self._leader_hw[(st.node, self._life_of(st), p)] = (e.epoch, e.hw)

    def _on_hw(self, st: ev.Stamped, e: ev.Hw) -> None:
        p = (e.topic, e.partition, e.tid)
        committed = self._committed.setdefault(p, _Committed())
        if e.role != "leader":
            if e.hw > committed.top:
                self._deferred.append((st.ms, st, p, e.hw))
            else:
                self._check(True, "follower-hw-committed", "")
            return
        self._claim_leader(p, e.epoch, st.node, f"broker {st.node}")
        key = (st.node, self._life_of(st), p)
        epoch, hw = self._leader_hw.get(key, (e.epoch, -1))
        self._check(
            epoch != e.epoch or e.hw >= hw,
            "leader-hw-monotonic",
            f"leader {st.node} of {_name(p)} in epoch {e.epoch}: HW went from {hw} to {e.hw}",
        )
        self._leader_hw[key] = (e.epoch, max(e.hw, hw) if epoch == e.epoch else e.hw)
        self._check(
            e.hw <= e.leo,
            "hw-within-log",
            f"leader {st.node} of {_name(p)}: HW {e.hw} past its log end {e.leo}",
        )
        committed.add(e.hw, e.epochs)

    def _on_truncate(self, st: ev.Stamped, e: ev.Truncate) -> None:
        p = (e.topic, e.partition, e.tid)
        committed = self._committed.setdefault(p, _Committed())
        lost = e.to < e.from_leo and e.epoch_at >= 0 and committed.epoch_at(e.to) == e.epoch_at
        excuse = " after an unclean election" if p[:2] in self._unclean else ""
        if not excuse and self._crash_loss:
            excuse = " after a crash lost unflushed records"
        self._check(
            not lost,
            "truncate-below-committed",
            f"broker {st.node} truncated {_name(p)} from {e.from_leo} to {e.to} ({e.reason}), dropping the "
            f"committed record at offset {e.to} of epoch {e.epoch_at} (the leaders' HW was {committed.top}){excuse}",
            permitted=bool(excuse),
        )

    def _on_isr(self, st: ev.Stamped, e: ev.Isr) -> None:
        p = (e.topic, e.partition, e.tid)
        what = "proposed" if e.proposed else "applied"
        self._check(
            e.leader in e.isr,
            "isr-has-leader",
            f"leader {e.leader} of {_name(p)} {what} ISR {list(e.isr)} without itself (epoch {e.epoch})",
        )

    def _on_marker(self, st: ev.Stamped, e: ev.TxnMarker) -> None:
        self._claim_leader((e.topic, e.partition, e.tid), e.epoch, st.node, f"broker {st.node}'s marker")

    def _on_unclean(self, st: ev.Stamped, e: ev.Unclean) -> None:
        self._unclean.add((e.topic, e.partition))

    # -- the quorum --------------------------------------------------------------------------------------------
    def _raft_claim(self, epoch: int, leader: int, who: int) -> None:
        if epoch < 0 or leader < 0:
            return
        first = self._raft_leaders.setdefault(epoch, (leader, who))
        self._check(
            first[0] == leader,
            "raft-one-leader-per-epoch",
            f"epoch {epoch}: node {first[1]} says {first[0]} leads, node {who} says {leader}",
        )

    def _raft_epoch_seen(self, node: int, epoch: int) -> None:
        before = self._raft_epoch.get(node, -1)
        self._check(epoch >= before, "raft-epoch-monotonic", f"node {node} went from epoch {before} back to {epoch}")
        self._raft_epoch[node] = max(before, epoch)

    def _vote(self, voter: int, epoch: int, candidate: int) -> None:
        first = self._votes.setdefault((voter, epoch), candidate)
        self._check(
            first == candidate,
            "raft-vote-once",
            f"node {voter} voted for {first} and for {candidate} in epoch {epoch}",
        )

    def _on_raft_state(self, st: ev.Stamped, e: ev.RaftState) -> None:
        self._raft_epoch_seen(st.node, e.epoch)
        self._raft_claim(e.epoch, e.leader, st.node)
        if e.voted >= 0:
            self._vote(st.node, e.epoch, e.voted)

    def _on_raft_vote(self, st: ev.Stamped, e: ev.RaftVote) -> None:
        self._raft_epoch_seen(st.node, e.epoch)
        self._vote(st.node, e.epoch, e.candidate)

    def _on_raft_hw(self, st: ev.Stamped, e: ev.RaftHw) -> None:
        key = (st.node, self._life_of(st))
        before = self._raft_hw.get(key, -1)
        self._check(e.hw >= before, "raft-commit-monotonic", f"node {st.node}'s high watermark went {before}->{e.hw}")
        self._raft_hw[key] = max(before, e.hw)
        if e.role == "leader":
            self._raft_claim(e.epoch, st.node, st.node)
        # A follower's high watermark is its leader's word, up to its own log end, so it counts as well.
        self._raft_committed.add(e.hw, e.epochs)

    def _on_raft_truncate(self, st: ev.Stamped, e: ev.RaftTruncate) -> None:
        c = self._raft_committed
        lost = e.to < e.from_leo and e.epoch_at >= 0 and c.epoch_at(e.to) == e.epoch_at
        self._check(
            not lost,
            "raft-truncate-below-commit",
            f"node {st.node} truncated from {e.from_leo} to {e.to}, dropping the committed entry at {e.to} "
            f"of epoch {e.epoch_at} (the leaders' high watermark was {c.top})",
        )

    # -- results ---------------------------------------------------------------------------------------------
    def report(self, limit: int = 5) -> str:
        lines = [f"{len(self.violations)} trace invariant violation(s) in {self.events} events:"]
        for v in self.violations[:limit]:
            lines.append(f"  {v.invariant} at event {v.index}: {v.detail}")
            lines.extend(f"      {c}" for c in v.context)
        return "\n".join(lines)


def _name(p: PartitionKey) -> str:
    return f"{p[0]}-{p[1]}"


_Handler = Callable[[TraceChecker, ev.Stamped, Any], None]
_HANDLERS: dict[type[ev.Event], _Handler] = {
    ev.Start: TraceChecker._on_start,
    ev.DiskLost: TraceChecker._on_disk_lost,
    ev.Crash: TraceChecker._on_crash,
    ev.Role: TraceChecker._on_role,
    ev.Hw: TraceChecker._on_hw,
    ev.Truncate: TraceChecker._on_truncate,
    ev.Isr: TraceChecker._on_isr,
    ev.TxnMarker: TraceChecker._on_marker,
    ev.Unclean: TraceChecker._on_unclean,
    ev.RaftState: TraceChecker._on_raft_state,
    ev.RaftVote: TraceChecker._on_raft_vote,
    ev.RaftHw: TraceChecker._on_raft_hw,
    ev.RaftTruncate: TraceChecker._on_raft_truncate,
}


def check_stream(stream: Iterable[ev.Stamped]) -> TraceChecker:
    return TraceChecker().feed_all(stream).finish()
