"""Controllers on the simulated quorum: each voter runs the controller core through the same
QuorumController the controller server uses, and whichever is active makes decisions (brokers come
and go, leaders are elected) that travel through the quorum as metadata records.

The active controller's timer, its brokers' liveness and its snapshots run here as the controller server
runs them: every workload step the active controller ticks (session fencing, auto leader rebalance), then
hears a heartbeat from every running broker on that broker's connection; a broker process that dies closes
its connection (fenced at once if it was a session of the active controller); a controller that becomes
active knocks on the brokers it cannot vouch for, and a dead one refuses; a voter snapshots when the
controller core says enough records went by.

On top of the quorum's own invariants (quorum_invariants.py) the checker follows the committed
records as a broker does, and checks:

8. one-partition-leader-per-epoch: no two brokers are made leader of one partition at the same
   partition leader epoch, and a partition's leader epoch never goes back in log order.
9. live-broker-fenced: no controller fences a running broker, which heartbeats whichever controller is
   active, for its liveness (a session that expired, a closed connection, a refused knock); in particular
   losing the active controller does not fence the brokers the new one hears from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from epochlog.controller.broker_liveness import ProbeTarget
from epochlog.controller.leader_balance import BalancePolicy, LeaderBalancer
from epochlog.controller.quorum_controller import QuorumController
from epochlog.controller.records import BrokerFenced, MetadataRecord, PartitionChange, from_json, to_json
from epochlog.controller.snapshot_schedule import RECORD_BYTES_ESTIMATE, SnapshotSchedule
from epochlog.raft.messages import Ready
from epochlog.raft.roles import Role
from epochlog.replication.types import AlterIsr
from epochlog.sim.quorum_invariants import QuorumChecker
from epochlog.sim.quorum_world import QuorumWorld, SimNode

TOPIC = "t"
PARTITIONS = 2
BROKERS = (1, 2, 3, 4)
SESSION_MS = 1 << 40  # a running broker never misses a heartbeat here; only the activation grace can expire
# Kafka checks balance every 300 s; the runs here last seconds, so a check every quarter second.
SIM_BALANCE = BalancePolicy(enabled=True, interval_ms=250, max_imbalance_percentage=10)

ControllerFactory = Callable[[], QuorumController]


def encode(record: MetadataRecord) -> str:
    kind, data = to_json(record)
    return json.dumps({"kind": kind, "data": data}, sort_keys=True)


def decode(value: str) -> MetadataRecord | None:
    """The record a committed value holds; None for the quorum's own LeaderChange entries."""
    if value.startswith("LC:"):
        return None
    doc = json.loads(value)
    return from_json(doc["kind"], doc["data"])


def _records(values: list[str]) -> list[MetadataRecord]:
    return [r for r in map(decode, values) if r is not None]


class ControllerChecker(QuorumChecker):
    def __init__(self, world: QuorumWorld) -> None:
        super().__init__(world)
        self.scanned = 0
        self.partition_leader: dict[tuple[str, int, int], int] = {}
        self.partition_epoch: dict[tuple[str, int], int] = {}

    def check(self) -> None:
        super().check()
        for value in self.values[self.scanned :]:
            record = decode(value)
            if isinstance(record, PartitionChange):
                self._partition_change(record)
        self.scanned = len(self.values)

    def live_broker_fenced(self, broker: int, why: str) -> None:
        self._fail("live-broker-fenced", f"broker {broker} is running, yet fenced for {why}")

    def _partition_change(self, r: PartitionChange) -> None:
        key = (r.topic, r.partition)
        last = self.partition_epoch.get(key, -1)
        if r.leader_epoch < last:
            self._fail(
                "one-partition-leader-per-epoch",
                f"{r.topic}-{r.partition}'s leader epoch went back from {last} to {r.leader_epoch}",
            )
        self.partition_epoch[key] = max(last, r.leader_epoch)
        if r.leader < 0:
            return
        first = self.partition_leader.setdefault((r.topic, r.partition, r.leader_epoch), r.leader)
        if first != r.leader:
            self._fail(
                "one-partition-leader-per-epoch",
                f"brokers {first} and {r.leader} both lead {r.topic}-{r.partition} in leader epoch {r.leader_epoch}",
            )


class ControllerWorld(QuorumWorld):
    def __init__(self, seed: int = 0, controller_factory: ControllerFactory | None = None, **kw: Any) -> None:
        self.controller_factory = controller_factory or (lambda: QuorumController(SESSION_MS))
        self.controllers: dict[int, QuorumController] = {}
        self.leading: dict[int, int] = {}  # node -> the quorum epoch it was last seen leading
        self.decisions = 0
        self.activations = 0
        self.rebalanced = 0  # partitions the auto leader rebalance moved
        self.fenced_on_close = 0  # brokers fenced because their session connection closed
        self.fenced_on_refusal = 0  # brokers fenced because they refused a new active controller's knock
        self.controller_snapshots = 0  # snapshots the controller core asked for
        self.running: set[int] = set(BROKERS)  # broker processes up
        self.incarnation: dict[int, int] = dict.fromkeys(BROKERS, 0)  # a broker's connection: (id, incarnation)
        super().__init__(seed, **kw)
        self.checker: ControllerChecker = ControllerChecker(self)
        for n in self.voters:
            self.controllers[n] = self._new_controller()

    def _new_controller(self) -> QuorumController:
        qc = self.controller_factory()
        qc.balancer = LeaderBalancer(SIM_BALANCE)
        if self.snapshot_every:
            qc.snapshots = SnapshotSchedule(self.snapshot_every * RECORD_BYTES_ESTIMATE)
        return qc

    # -- the controller server's half, as controller_server.py carries it out ---------------------
    def _carry_out(self, node: SimNode, ready: Ready) -> None:
        loads = ready.load_snapshot is not None
        super()._carry_out(node, ready)
        qc = self.controllers.get(node.node_id)
        if qc is None or not node.alive:
            return
        if loads:
            self._rebuild(node, qc)
        core = node.core
        if core.role is Role.LEADER and core.leader is not None:
            if self.leading.get(node.node_id) != core.epoch:
                self.leading[node.node_id] = core.epoch
                qc.became_leader(core.leader.epoch_start_offset)
        elif self.leading.pop(node.node_id, None) is not None and qc.lost_leadership():
            self._rebuild(node, qc)
        if qc.maybe_activate(core.is_leader_ready(), self.now):
            self.activations += 1
            self.note(f"controller {node.node_id} is active in epoch {core.epoch}")
            targets = qc.probe_targets()
            if targets:
                self.at(self.now + self.rng.randint(1, 10), lambda: self._knocked(node.node_id, qc, targets))

    def _after_apply(self, node: SimNode) -> None:
        qc = self.controllers.get(node.node_id)
        if qc is None:
            super()._after_apply(node)  # an observer: the quorum's own rule
            return
        applied = node.applied
        qc.on_commit(len(applied), lambda start, end: _records(applied[start:end]))
        end = qc.snapshot_due(node.log.log_start_offset)
        if end is not None and self._snapshot(node, end):
            qc.snapshot_taken()
            self.controller_snapshots += 1

    def _rebuild(self, node: SimNode, qc: QuorumController) -> None:
        qc.rebuild(_records(node.applied), len(node.applied), self.now)

    def crash(self, n: int, at_step: int | None = None) -> None:
        super().crash(n, at_step)
        if not self.nodes[n].alive and n in self.controllers:
            self.controllers[n] = self._new_controller()  # its memory is gone with it
            self.leading.pop(n, None)

    # -- the workload: every active controller decides, a deposed one included --------------------
    def propose(self, count: int = 1) -> bool:
        proposed = False
        for node in self.leaders():
            qc = self.controllers.get(node.node_id)
            if qc is None or node.paused or not qc.active:
                continue
            self._liveness(qc)
            for _ in range(count):
                self._decide(qc)
            records = qc.take_proposals()
            if not records:
                continue
            last, ready = node.core.propose([encode(r) for r in records], self.now)
            if last < 0:
                continue
            qc.proposed(last)
            self.decisions += len(records)
            self._carry_out(node, ready)
            proposed = True
        return proposed

    def _decide(self, qc: QuorumController) -> None:
        c = qc.core
        if TOPIC not in c.topics:
            for b in BROKERS:
                if not c.alive(b):
                    c.register_broker(b, self.now, host="127.0.0.1", port=9000 + b)
            c.create_topic(TOPIC, PARTITIONS, 3)
            return
        b = self.rng.choice(BROKERS)
        p = self.rng.randrange(PARTITIONS)
        kind = self.rng.choice(["elect", "elect", "kill", "start", "catch-up", "catch-up"])
        st = c.topics[TOPIC].partitions[p]
        if kind == "elect":
            c.elect_leader(TOPIC, p, b if b in st.isr else None)
        elif kind == "catch-up" and b in st.replicas and b not in st.isr and st.leader >= 0:
            # The leader asks for a replica that caught up to join the ISR (AlterPartition).
            c.alter_partition(AlterIsr(TOPIC, p, st.leader, st.leader_epoch, st.isr | {b}, st.partition_epoch))
        elif kind == "kill" and b in self.running and len(self.running) > 2:
            self.kill_broker(b)
        elif kind == "start":
            self.kill_broker(b)  # a running one restarts: its old connection closes first
            self.start_broker(qc, b, clean=self.rng.random() < 0.7)

    # -- brokers: processes with one connection each to whichever controller they reach -----------
    def _conn(self, b: int) -> tuple[int, int]:
        return (b, self.incarnation[b])

    def _liveness(self, qc: QuorumController) -> None:
        """The active controller's timer fires, then every running broker's heartbeat arrives."""
        before = len(qc.core.records)
        self.rebalanced += len(qc.tick(self.now))
        self._check_fences(qc, before, "a session that expired")
        for b in sorted(self.running):
            info = qc.core.brokers.get(b)
            if info is None or not qc.core.heartbeat(b, self.now):
                # Unknown to this controller, or told it is fenced: it registers again.
                qc.core.register_broker(b, self.now, host="127.0.0.1", port=9000 + b)
            qc.session_opened(self._conn(b), b)

    def kill_broker(self, b: int) -> None:
        """Broker ``b``'s process dies: its connection closes under every controller still running."""
        if b not in self.running:
            return
        self.running.discard(b)
        for n, qc in self.controllers.items():
            if not self.nodes[n].alive or self.nodes[n].paused:
                continue
            before = len(qc.core.records)
            if qc.connection_lost(self._conn(b)) is not None:
                self.fenced_on_close += 1
            self._check_fences(qc, before, "a closed connection")

    def start_broker(self, qc: QuorumController, b: int, clean: bool) -> None:
        self.running.add(b)
        self.incarnation[b] += 1
        qc.core.register_broker(b, self.now, clean_shutdown=clean, host="127.0.0.1", port=9000 + b)
        qc.session_opened(self._conn(b), b)

    def _knocked(self, n: int, qc: QuorumController, targets: list[ProbeTarget]) -> None:
        """The answers to a new active controller's knocks: a broker process that is down refuses."""
        if self.controllers.get(n) is not qc or not self.nodes[n].alive:
            return  # the controller crashed meanwhile: the knocks died with it
        before = len(qc.core.records)
        for t in targets:
            if t.broker not in self.running and qc.probe_refused(t.broker):
                self.fenced_on_refusal += 1
        self._check_fences(qc, before, "a refused connection")

    def _check_fences(self, qc: QuorumController, before: int, why: str) -> None:
        for r in qc.core.records[before:]:
            if isinstance(r, BrokerFenced) and r.broker in self.running:
                self.checker.live_broker_fenced(r.broker, why)
