"""The quorum simulator: RaftNodes on simulated disks and a seeded network, one event at a time.

It drives the same raft/ core the controllers run. Each node's Ready is carried out in the order the
core demands (quorum state, flush, messages, then the state machine), and a crash may land between
any two of those steps. The network drops, duplicates, delays (so reorders) and partitions messages;
a crash loses whatever was not flushed. The invariant checker runs after every event.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.raft.config import QuorumConfig
from epochlog.raft.messages import (
    AddVoterRequest,
    FetchResponse,
    Message,
    QuorumStateData,
    Ready,
    RemoveVoterRequest,
    VoterChangeResponse,
    VoteResponse,
)
from epochlog.raft.node import RaftNode
from epochlog.raft.roles import Role
from epochlog.raft.voters import Endpoint, Voter, VoterSet
from epochlog.sim.quorum_invariants import QuorumChecker
from epochlog.sim.quorum_log import SimQuorumLog
from epochlog.trace import events as trace
from epochlog.trace.check import TraceChecker, TraceViolation
from epochlog.trace.sink import CallbackTracer, ReadyTracer

# Timeouts scaled down tenfold from Kafka's defaults: the same ratios, ten times the events per second.
SIM_CONFIG = QuorumConfig(
    election_timeout_ms=100,
    fetch_timeout_ms=200,
    election_backoff_max_ms=100,
    request_timeout_ms=200,
    retry_backoff_ms=5,
    fetch_max_wait_ms=50,
)
TICK_MS = 10


def sim_voter(n: int) -> Voter:
    return Voter(n, f"dir-{n}", (Endpoint("CONTROLLER", "sim", 9000 + n),))


FETCH_MAX_RECORDS = 20


@dataclass
class NetFaults:
    drop: float = 0.0
    duplicate: float = 0.0
    min_delay_ms: int = 1
    max_delay_ms: int = 4


@dataclass
class SimNode:
    node_id: int
    log: SimQuorumLog
    core: RaftNode
    disk_state: QuorumStateData | None = None  # the quorum-state file
    alive: bool = True
    paused: bool = False
    applied: list[str] = field(default_factory=list)  # the state machine: committed values in order
    crash_points: int = -1  # Ready steps a pending crash still lets through (-1: no crash pending)


NodeFactory = Callable[..., RaftNode]


class QuorumWorld:
    def __init__(
        self,
        seed: int = 0,
        voters: int = 3,
        observers: int = 0,
        faults: NetFaults | None = None,
        snapshot_every: int = 0,
        node_factory: NodeFactory = RaftNode,
        skip_vote_persist: bool = False,
        fetch_max_records: int = FETCH_MAX_RECORDS,
        dynamic: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.now = 0
        self.faults = faults or NetFaults()
        self.voters = tuple(range(voters))  # the initial voters (a dynamic quorum's change: current_voters())
        # KIP-853: a dynamic quorum is formatted with its voters (--initial-controllers); the other nodes are
        # controllers formatted with --no-initial-controllers, observers until added.
        self.dynamic = dynamic
        self.admin_answers: list[VoterChangeResponse] = []
        self._admin_ids = 0
        self.snapshot_every = snapshot_every
        self.node_factory = node_factory
        self.skip_vote_persist = skip_vote_persist  # a deliberate bug, for the test that must catch it
        self.fetch_max_records = fetch_max_records
        # A scenario's hand on the network: extra delay for a message, or None to drop it.
        self.shape: Callable[[int, int, Message], int | None] | None = None
        self.queue: list[tuple[int, int, str, Any]] = []
        self._seq = 0
        self.cut: set[frozenset[int]] = set()  # links that carry nothing
        self.nodes: dict[int, SimNode] = {}
        self.proposed: list[str] = []
        self.events = 0
        self.log_lines: list[str] = []
        self.pictures: list[str] = []
        self.checker = QuorumChecker(self)
        self.trace = TraceChecker()  # the invariants real controllers' traces are checked against
        for n in [*self.voters, *range(voters, voters + observers)]:
            log = SimQuorumLog()
            self.nodes[n] = SimNode(n, log, self._make_core(n, log, None))
        for n in self.nodes:
            self._schedule(TICK_MS, "tick", n)

    # -- plumbing ----------------------------------------------------------------------------
    def _make_core(self, n: int, log: SimQuorumLog, state: QuorumStateData | None) -> RaftNode:
        rng = random.Random(self.rng.random())
        feed = CallbackTracer(self.trace.feed, n, trace.CONTROLLER, lambda: self.now)
        feed.emit(trace.Start())
        tracer = ReadyTracer(feed)
        if not self.dynamic:
            return self.node_factory(n, self.voters, log, state, self.now, rng, "sim", SIM_CONFIG, tracer=tracer)
        formatted = VoterSet.of(*map(sim_voter, self.voters)) if n in self.voters else VoterSet()
        return self.node_factory(
            n, formatted, log, state, self.now, rng, "sim", SIM_CONFIG, tracer=tracer, bootstrap=self.voters
        )

    def current_voters(self) -> tuple[int, ...]:
        """The voters as the newest leader has them (its log's newest voter set), else the initial ones."""
        lead = max(self.leaders(), key=lambda s: s.core.epoch, default=None)
        return lead.core.voters if lead is not None else self.voters

    def _schedule(self, delay: int, kind: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (self.now + delay, self._seq, kind, payload))

    def note(self, text: str) -> None:
        self.log_lines.append(f"{self.now:>6} ms  {text}")

    def snap(self, label: str, max_cols: int = 12) -> str:
        """A picture of every node's log now: role, epoch, HW, and the last entries as value/epoch."""
        lines = [f"-- {self.now} ms: {label}"]
        for n, node in sorted(self.nodes.items()):
            log = node.log
            first = max(log.log_start_offset, log.log_end_offset - max_cols)
            cells = " ".join(f"{e.value}/e{e.epoch}" for _, e in log.read(first, max_cols))
            state = f"{node.core.role.value} e{node.core.epoch}" if node.alive else "down"
            kind = "voter" if n in self.current_voters() else "observer"
            more = f"… {first} earlier … " if first else ""
            lines.append(f"  {kind} {n} [{state:>15}] hw={node.core.high_watermark:<4} | {more}{cells}")
        text = "\n".join(lines)
        self.pictures.append(text)
        return text

    def _carry_out(self, node: SimNode, ready: Ready) -> None:
        """The driver's half of the contract, with a pending crash able to cut it short."""
        tracer = node.core.tracer
        if ready.quorum_state is not None:
            if not self._step(node):
                if isinstance(tracer, ReadyTracer):
                    tracer.drop()
                return
            vote_granted = any(
                isinstance(o.message, VoteResponse) and o.message.granted and not o.message.pre_vote
                for o in ready.messages
            )
            voted = ready.quorum_state.voted_id
            if self.skip_vote_persist and vote_granted:
                voted = node.disk_state.voted_id if node.disk_state is not None else -1  # the vote never written
            node.disk_state = QuorumStateData(ready.quorum_state.leader_epoch, ready.quorum_state.leader_id, voted)
        if isinstance(tracer, ReadyTracer):
            tracer.release()
        if ready.flush:
            if not self._step(node):
                return
            node.log.flush()
        for out in ready.messages:
            if not self._step(node):
                return
            self._send(node.node_id, out.to, out.message)
        if ready.load_snapshot is not None:
            data = node.log.snapshots[ready.load_snapshot]
            node.applied = list(json.loads(data)["values"])
        if ready.high_watermark is not None:
            self._apply(node, ready.high_watermark)

    def _step(self, node: SimNode) -> bool:
        if node.crash_points < 0:
            return True
        if node.crash_points == 0:
            node.crash_points = -1
            self.crash(node.node_id)
            return False
        node.crash_points -= 1
        return True

    def _apply(self, node: SimNode, hw: int) -> None:
        while len(node.applied) < hw:
            e = node.log.entry(len(node.applied))
            if e is None:
                break
            node.applied.append(e.value)
        self.checker.applied(node)
        self._after_apply(node)

    def _after_apply(self, node: SimNode) -> None:
        """The state machine took the committed values: a snapshot every ``snapshot_every`` of them."""
        if self.snapshot_every and len(node.applied) - node.log.log_start_offset >= self.snapshot_every:
            self._snapshot(node, len(node.applied))

    def _snapshot(self, node: SimNode, end: int) -> bool:
        snap = node.log.take_snapshot(node.applied, end)
        if snap is None:
            return False
        self._carry_out(node, node.core.snapshot_taken(snap))
        return True

    def _send(self, src: int, dst: int, msg: Message) -> None:
        if isinstance(msg, VoterChangeResponse):
            self.admin_answers.append(msg)  # to the operator's tool, which is not a node
            self.note(f"node {src} answers voter change {msg.request_id}: error {msg.error} {msg.message}")
            return
        if isinstance(msg, FetchResponse) and msg.read_from >= 0:
            records = self.nodes[src].log.read(msg.read_from, self.fetch_max_records)
            msg = FetchResponse(**{**msg.__dict__, "records": records})
        self.checker.sent(src, dst, msg)
        extra = 0
        if self.shape is not None:
            shaped = self.shape(src, dst, msg)
            if shaped is None:
                return
            extra = shaped
        copies = 1
        if self.rng.random() < self.faults.drop:
            copies = 0
        elif self.rng.random() < self.faults.duplicate:
            copies = 2
        for _ in range(copies):
            delay = self.rng.randint(self.faults.min_delay_ms, self.faults.max_delay_ms) + extra
            self._schedule(delay, "msg", (src, dst, msg))

    # -- faults and workload -------------------------------------------------------------------
    def crash(self, n: int, at_step: int | None = None) -> None:
        """Crash ``n`` now, or (``at_step``) part way through its next Ready."""
        node = self.nodes[n]
        if at_step is not None:
            node.crash_points = at_step
            return
        if not node.alive:
            return
        node.alive = False
        lost = node.log.crash()
        node.applied = []
        self.note(f"node {n} crashes (lost {lost} unflushed entries)")

    def restart(self, n: int) -> None:
        node = self.nodes[n]
        if node.alive:
            return
        node.alive, node.paused, node.crash_points = True, False, -1
        node.core = self._make_core(n, node.log, node.disk_state)
        if node.log.base_snapshot is not None:
            node.applied = list(json.loads(node.log.snapshots[node.log.base_snapshot])["values"])
        self.checker.restarted(node)
        self.note(f"node {n} restarts as {node.core.role.value} in epoch {node.core.epoch}")
        self._carry_out(node, node.core.take_ready())
        self._schedule(TICK_MS, "tick", n)

    def wipe(self, n: int) -> None:
        """``n`` loses its whole disk (log, snapshots and quorum state) while down."""
        node = self.nodes[n]
        assert not node.alive
        node.log = SimQuorumLog()
        node.disk_state = None
        self.checker.wiped(n)
        self.trace.feed(trace.Stamped(n, trace.CONTROLLER, -1, self.now, trace.DiskLost()))
        self.note(f"node {n} loses its disk")

    def isolate(self, n: int) -> None:
        for m in self.nodes:
            if m != n:
                self.cut.add(frozenset((n, m)))
        self.note(f"node {n} is cut off from the others")

    def partition(self, *groups: tuple[int, ...]) -> None:
        side = {n: i for i, g in enumerate(groups) for n in g}
        for a in self.nodes:
            for b in self.nodes:
                if a < b and side.get(a, -1) != side.get(b, -2):
                    self.cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self.cut.clear()
        self.note("the network heals")

    @property
    def trace_violations(self) -> list[TraceViolation]:
        return self.trace.finish().violations

    def leaders(self) -> list[SimNode]:
        return [s for s in self.nodes.values() if s.alive and s.core.role is Role.LEADER]

    def leader(self) -> SimNode | None:
        ready = [s for s in self.leaders() if s.core.is_leader_ready()]
        return max(ready, key=lambda s: s.core.epoch) if ready else None

    def propose(self, count: int = 1) -> bool:
        lead = self.leader()
        if lead is None:
            return False
        values = [f"v{len(self.proposed) + i}" for i in range(count)]
        last, ready = lead.core.propose(values, self.now)
        if last >= 0:
            self.proposed += values
        self._carry_out(lead, ready)
        return last >= 0

    def add_voter(self, n: int) -> int:
        """AddRaftVoter for node ``n``, sent to the newest leader; returns the request id (-1: no leader)."""
        return self._voter_change(lambda rid: AddVoterRequest("sim", -1, rid, -1, sim_voter(n)))

    def remove_voter(self, n: int) -> int:
        return self._voter_change(lambda rid: RemoveVoterRequest("sim", -1, rid, -1, n, sim_voter(n).directory_id))

    def _voter_change(self, request: Callable[[int], Message]) -> int:
        lead = max(self.leaders(), key=lambda s: s.core.epoch, default=None)
        if lead is None:
            return -1
        self._admin_ids += 1
        req = request(1_000_000 + self._admin_ids)
        self.note(f"voter change {self._admin_ids} to leader {lead.node_id}: {req}")
        self._carry_out(lead, lead.core.receive(req, self.now))
        return 1_000_000 + self._admin_ids

    def answer(self, request_id: int) -> VoterChangeResponse | None:
        return next((a for a in self.admin_answers if a.request_id == request_id), None)

    # -- running -------------------------------------------------------------------------------
    def run_until(self, t: int, on_event: Callable[[], None] | None = None) -> None:
        while self.queue and self.queue[0][0] <= t:
            at, _, kind, payload = heapq.heappop(self.queue)
            self.now = at
            if kind == "tick":
                node = self.nodes[payload]
                if not node.alive:
                    continue
                if not node.paused:
                    self._carry_out(node, node.core.tick(self.now))
                self._schedule(TICK_MS, "tick", payload)
            elif kind == "msg":
                src, dst, msg = payload
                node = self.nodes[dst]
                if not node.alive or node.paused or frozenset((src, dst)) in self.cut:
                    continue
                self._carry_out(node, node.core.receive(msg, self.now))
            elif kind == "call":
                payload()
            self.events += 1
            self.checker.check()
            if on_event is not None:
                on_event()
        self.now = max(self.now, t)

    def at(self, t: int, action: Callable[[], object]) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (t, self._seq, "call", action))

    def settle(self, until: int) -> None:
        """Heal everything, restart everyone, and run until the quorum agrees."""
        self.heal()
        for n in self.nodes:
            self.nodes[n].paused, self.nodes[n].crash_points = False, -1
            self.restart(n)
        self.run_until(until)
        self.checker.check_converged()
