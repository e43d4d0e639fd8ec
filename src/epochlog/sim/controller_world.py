"""Controllers on the simulated quorum: each voter runs the controller core through the same
QuorumController the controller server uses, and whichever is active makes decisions (brokers come
and go, leaders are elected) that travel through the quorum as metadata records.

On top of the quorum's own invariants (quorum_invariants.py) the checker follows the committed
records as a broker does, and checks:

8. one-partition-leader-per-epoch: no two brokers are made leader of one partition at the same
   partition leader epoch, and a partition's leader epoch never goes back in log order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from epochlog.controller.quorum_controller import QuorumController
from epochlog.controller.records import MetadataRecord, PartitionChange, from_json, to_json
from epochlog.raft.messages import Ready
from epochlog.raft.roles import Role
from epochlog.sim.quorum_invariants import QuorumChecker
from epochlog.sim.quorum_world import QuorumWorld, SimNode

TOPIC = "t"
PARTITIONS = 2
BROKERS = (1, 2, 3, 4)
SESSION_MS = 1 << 40  # brokers are fenced by the workload's decisions here, not by a clock

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
        super().__init__(seed, **kw)
        self.checker = ControllerChecker(self)
        for n in self.voters:
            self.controllers[n] = self.controller_factory()

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

    def _apply(self, node: SimNode, hw: int) -> None:
        super()._apply(node, hw)
        qc = self.controllers.get(node.node_id)
        if qc is not None:
            applied = node.applied
            qc.on_commit(len(applied), lambda start, end: _records(applied[start:end]))

    def _rebuild(self, node: SimNode, qc: QuorumController) -> None:
        qc.rebuild(_records(node.applied), len(node.applied), self.now)

    def crash(self, n: int, at_step: int | None = None) -> None:
        super().crash(n, at_step)
        if not self.nodes[n].alive and n in self.controllers:
            self.controllers[n] = self.controller_factory()  # its memory is gone with it
            self.leading.pop(n, None)

    # -- the workload: every active controller decides, a deposed one included --------------------
    def propose(self, count: int = 1) -> bool:
        proposed = False
        for node in self.leaders():
            qc = self.controllers.get(node.node_id)
            if qc is None or node.paused or not qc.active:
                continue
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
        kind = self.rng.choice(["elect", "elect", "fence", "register"])
        if kind == "elect":
            c.elect_leader(TOPIC, p, b if b in c.topics[TOPIC].partitions[p].isr else None)
        elif kind == "fence" and sum(c.alive(x) for x in BROKERS) > 2:
            c.fence(b)
        elif kind == "register":
            c.register_broker(b, self.now, clean_shutdown=self.rng.random() < 0.7, host="127.0.0.1", port=9000 + b)
