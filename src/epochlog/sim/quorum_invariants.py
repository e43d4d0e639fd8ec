"""The quorum's invariants, checked by the simulator after every event.

1. one-leader-per-epoch: no two nodes lead the same epoch.
2. vote-once: a voter never grants its vote to two candidates in one epoch, across crashes.
3. committed-safety: an entry below any node's high watermark is never lost or changed; every new
   leader holds all of them (leader completeness); state machines apply the same values in the same
   order (state-machine safety).
4. majority-hw: the leader's high watermark is durable on a majority of voters.
5. log-matching: two logs with an entry of the same epoch at the same offset agree on every entry
   up to it.
6. monotonic: a node's epoch never goes back (across restarts), nor its high watermark within a life.
7. converged (once, after the faults end): every live voter holds the leader's log and state.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from epochlog.raft.messages import Message, VoteResponse
from epochlog.raft.roles import Role
from epochlog.sim.invariants import Violation
from epochlog.sim.quorum_log import VOTERS

if TYPE_CHECKING:
    from epochlog.sim.quorum_world import QuorumWorld, SimNode

MATCH_SCAN = 64  # how far log-matching looks below the shorter log's end for a shared epoch
REMOVED_LEADER_GRACE_MS = 50  # a few ticks for a leader whose removal committed to resign


class QuorumChecker:
    def __init__(self, world: QuorumWorld) -> None:
        self.w = world
        self.violations: list[Violation] = []
        self.epoch_leader: dict[int, int] = {}
        self.votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> the candidate it granted
        self.committed: dict[int, bytes] = {}  # offset -> chain hash, for offsets some node committed
        self.committed_top = -1
        self.max_epoch: dict[int, int] = {}
        self.hw_seen: dict[int, int] = {}
        self.values: list[str] = []  # the longest sequence any state machine applied
        self.wiped_nodes: set[int] = set()
        self.leader_terms: list[tuple[int, int, int]] = []  # (epoch, node, time it became leader)
        # (leader, epoch) -> (its high watermark, the voters it counted when that last moved)
        self.hw_voters: dict[tuple[int, int], tuple[int, tuple[int, ...] | None]] = {}
        self.removed_since: dict[tuple[int, int], int] = {}  # (leader, epoch) -> when its removal committed

    def _fail(self, invariant: str, detail: str) -> None:
        v = Violation(invariant, self.w.now, detail)
        if v not in self.violations:
            self.violations.append(v)
            self.w.note(f"VIOLATION {invariant}: {detail}")

    # -- hooks from the world ----------------------------------------------------------------
    def sent(self, src: int, dst: int, msg: Message) -> None:
        if isinstance(msg, VoteResponse) and msg.granted and not msg.pre_vote:
            key = (src, msg.epoch)
            before = self.votes.setdefault(key, dst)
            if before != dst and src not in self.wiped_nodes:
                self._fail("vote-once", f"node {src} voted for {before} and for {dst} in epoch {msg.epoch}")

    def restarted(self, node: SimNode) -> None:
        self.hw_seen.pop(node.node_id, None)

    def wiped(self, n: int) -> None:
        self.wiped_nodes.add(n)
        self.max_epoch.pop(n, None)

    def applied(self, node: SimNode) -> None:
        vals = node.applied
        for i in range(len(vals)):
            if i < len(self.values):
                if self.values[i] != vals[i]:
                    self._fail(
                        "committed-safety",
                        f"node {node.node_id} applied {vals[i]!r} at {i} where another applied {self.values[i]!r}",
                    )
                    return
            else:
                self.values.append(vals[i])

    # -- after every event -----------------------------------------------------------------------
    def check(self) -> None:
        for node in self.w.nodes.values():
            if not node.alive:
                continue
            core = node.core
            n = node.node_id
            if core.epoch < self.max_epoch.get(n, -1):
                self._fail("monotonic", f"node {n} went from epoch {self.max_epoch[n]} back to {core.epoch}")
            self.max_epoch[n] = max(core.epoch, self.max_epoch.get(n, -1))
            if core.high_watermark < self.hw_seen.get(n, -1):
                self._fail("monotonic", f"node {n}'s high watermark went back to {core.high_watermark}")
            self.hw_seen[n] = max(core.high_watermark, self.hw_seen.get(n, -1))
            if core.role is Role.LEADER:
                first = self.epoch_leader.setdefault(core.epoch, n)
                if first != n:
                    self._fail("one-leader-per-epoch", f"nodes {first} and {n} both lead epoch {core.epoch}")
                elif not any(e == core.epoch and m == n for e, m, _ in self.leader_terms):
                    self.leader_terms.append((core.epoch, n, self.w.now))
                    self._check_complete(node)
                self._check_majority(node)
                self._check_voter_changes(node)
            self._check_committed(node)
        self._check_matching()

    def _check_committed(self, node: SimNode) -> None:
        log = node.log
        top = min(node.core.high_watermark, log.log_end_offset) - 1
        if top < log.log_start_offset - 1 or top < 0:
            return
        for o in range(max(log.log_start_offset - 1, self.committed_top + 1, 0), top + 1):
            c = log.chain_at(o)
            if c is not None:
                self.committed.setdefault(o, c)
        self.committed_top = max(self.committed_top, top)
        mine = log.chain_at(top)
        if top in self.committed and mine != self.committed[top]:
            self._fail("committed-safety", f"node {node.node_id} committed a different entry at offset {top}")

    def _check_complete(self, node: SimNode) -> None:
        """A new leader must hold every committed entry (Raft's leader completeness)."""
        log = node.log
        if self.committed_top < 0:
            return
        if log.log_end_offset <= self.committed_top:
            self._fail(
                "committed-safety",
                f"node {node.node_id} leads epoch {node.core.epoch} without committed offset {self.committed_top}",
            )
            return
        o = self.committed_top
        if o >= log.log_start_offset - 1 and o in self.committed and log.chain_at(o) != self.committed[o]:
            self._fail("committed-safety", f"node {node.node_id} leads with a different entry at offset {o}")

    def _durably_holds(self, node: SimNode, offset: int, chain: bytes | None) -> bool:
        log = node.log
        if offset < log.log_start_offset:
            return True  # inside its snapshot, which holds only committed state
        if offset - log.log_start_offset >= log.flushed:
            return False
        return log.chain_at(offset) == chain

    def _check_majority(self, leader: SimNode) -> None:
        hw = leader.core.high_watermark
        if hw <= 0:
            return
        # Over the voters it counted when the high watermark last moved: a later voter set need not hold it on
        # a majority (a removed voter held it), which is safe, as any majority of the next set meets the old one.
        # A high watermark the leader brought from before its epoch was committed by the leaders before it.
        key = (leader.node_id, leader.core.epoch)
        last_hw, voters = self.hw_voters.setdefault(key, (hw, None))
        if hw != last_hw:
            voters = leader.core.voters
            self.hw_voters[key] = (hw, voters)
        if voters is None:
            return
        chain = leader.log.chain_at(hw - 1)
        holders = sum(1 for v in voters if self._durably_holds(self.w.nodes[v], hw - 1, chain))
        if holders < len(voters) // 2 + 1:
            self._fail(
                "majority-hw",
                f"leader {leader.node_id} has high watermark {hw} but only {holders} voters hold offset {hw - 1}",
            )

    def _check_voter_changes(self, leader: SimNode) -> None:
        """KIP-853: at most one uncommitted Voters record in a leader's log, each set one voter from the one before
        it; a leader whose own removal committed stops leading within a few ticks."""
        core, log = leader.core, leader.log
        # Committed is what any node committed: a leader back from a restart learns its high watermark anew.
        first = max(core.high_watermark, self.committed_top + 1, log.log_start_offset)
        uncommitted = [o for o, e in log.read(first, log.log_end_offset - first) if e.value.startswith(VOTERS)]
        if len(uncommitted) > 1:
            self._fail("one-voter-change", f"leader {leader.node_id} has uncommitted voter changes at {uncommitted}")
        history = core.membership.history.entries
        for (_, a), (o, b) in itertools.pairwise(history):
            if not a.one_change_from(b):
                self._fail("one-voter-change", f"the voter set at {o} is more than one voter from the one before")
        key = (leader.node_id, core.epoch)
        if core.is_voter or core.high_watermark <= core.membership.history.latest_offset():
            self.removed_since.pop(key, None)
            return
        since = self.removed_since.setdefault(key, self.w.now)
        if self.w.now - since > REMOVED_LEADER_GRACE_MS:
            self._fail("removed-leader-steps-down", f"node {leader.node_id} still leads {core.epoch}, removed")

    def _check_matching(self) -> None:
        nodes = list(self.w.nodes.values())
        for i, a in enumerate(nodes):
            for b in nodes[i + 1 :]:
                lo = max(a.log.log_start_offset, b.log.log_start_offset)
                top = min(a.log.log_end_offset, b.log.log_end_offset) - 1
                for o in range(top, max(lo, top - MATCH_SCAN) - 1, -1):
                    ea, eb = a.log.entry(o), b.log.entry(o)
                    if ea is not None and eb is not None and ea.epoch == eb.epoch:
                        if ea.chain != eb.chain:
                            self._fail(
                                "log-matching",
                                f"nodes {a.node_id} and {b.node_id} hold different logs up to offset {o} "
                                f"(epoch {ea.epoch})",
                            )
                        break

    # -- once, at the end -----------------------------------------------------------------------
    def check_converged(self) -> None:
        lead = self.w.leader()
        if lead is None:
            self._fail("converged", "no leader after the network healed")
            return
        end = lead.log.log_end_offset
        for v in lead.core.voters:
            node = self.w.nodes[v]
            if node.log.log_end_offset != end or node.log.chain_at(end - 1) != lead.log.chain_at(end - 1):
                self._fail("converged", f"node {v} ends at {node.log.log_end_offset}, the leader at {end}")
            elif node.core.high_watermark != lead.core.high_watermark:
                self._fail("converged", f"node {v} has high watermark {node.core.high_watermark}")
