"""The nemesis: faults chosen at random (seeded), one at a time, each healed before the next, and a watcher
that records the leaders, their epochs and the active controller as they change.

Fault kinds: ``kill`` (kill -9, restarted after a while), ``pause`` (SIGSTOP, then SIGCONT), ``partition``
(every link between the node and the other nodes cut, in the proxies or by iptables in the nodes' network
namespaces; clients still reach it), ``powerloss``
(kill -9 and every write the node had not fsynced dropped, then restarted) and ``disk`` (every write and
fsync on the node's data directory fails with ENOSPC or EIO for a while; then healed, and the node restarted
if the failure stopped it or took its log directory offline); the last two need chaos/disks.py. Targeting:
``controller`` aims a fault at the active controller, ``leader`` at the broker leading most partitions; a
fault of its own, ``kip101``, is KIP-101's double failure around the busiest leader (see _follower_then_leader).
"""

from __future__ import annotations

import logging
import random
import signal
import threading
from collections import Counter

from epochlog.chaos.cluster import ChaosCluster
from epochlog.chaos.disks import NEMESES as DISK_NEMESES
from epochlog.chaos.disks import NodeDisks
from epochlog.chaos.history import Fault, History, Observation

log = logging.getLogger("epochlog.chaos.nemesis")

FAULT_KINDS = ("kill", "pause", "partition", "kip101", "powerloss", "disk")
TARGETING = ("controller", "leader")
ALL = (*FAULT_KINDS, *TARGETING)
DISK_ERRORS = ("enospc", "eio")


class Nemesis:
    def __init__(
        self,
        cluster: ChaosCluster,
        history: History,
        nemeses: list[str],
        topics: list[str],
        seed: int,
        until_s: float,
        interval_s: tuple[float, float] = (2.0, 5.0),
        duration_s: tuple[float, float] = (2.0, 7.0),
        disks: NodeDisks | None = None,
    ) -> None:
        self.cluster, self.history, self.topics, self.until_s = cluster, history, topics, until_s
        self.disks = disks  # None: the data directories are plain ones, and powerloss/disk cannot run
        usable = [k for k in FAULT_KINDS if k in nemeses and (disks is not None or k not in DISK_NEMESES)]
        self.kinds = usable or ["kill"]
        self.targeting = [t for t in TARGETING if t in nemeses]
        self.interval_s, self.duration_s = interval_s, duration_s
        self.rng = random.Random(seed)
        self.errors: list[str] = []
        self._log_size_at_fault = 0
        self._disk_error = DISK_ERRORS[0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-nemesis", daemon=True)

    def _brokers(self) -> list[str]:
        return [f"broker-{i}" for i in self.cluster.lc.broker_ids()]

    # -- choosing --------------------------------------------------------------------------------------
    def _busiest_leader(self) -> tuple[str, str] | None:
        leaders = Counter(leader for (leader, _e) in self.cluster.leaders(self.topics).values() if leader >= 0)
        if not leaders:
            return None
        node_id, count = leaders.most_common(1)[0]
        return f"broker-{node_id}", f"leader of {count} partition(s)"

    def _target(self) -> tuple[str, str]:
        aim = "any"
        if self.targeting and self.rng.random() < 2 / 3:
            aim = self.rng.choice(self.targeting)
        if aim == "controller":
            node = self.cluster.active_controller()
            if node is not None:
                return node.name, "active controller"
        elif aim == "leader":
            found = self._busiest_leader()
            if found is not None:
                return found
        return self.rng.choice(sorted(self.cluster.node_names())), "any node"

    # -- doing -----------------------------------------------------------------------------------------
    def _record(self, kind: str, target: str, why: str) -> Fault:
        fault = Fault(kind, target, self.history.now(), why)
        self.history.add_fault(fault)
        log.info("fault: %s %s (%s) at %.1f s", kind, target, why, fault.at_s)
        return fault

    def _begin(self, kind: str, target: str, fault: Fault | None = None) -> None:
        lc = self.cluster.lc
        if kind == "kill":
            lc.kill9(target)
        elif kind == "pause":
            lc.signal(target, signal.SIGSTOP)
        elif kind == "powerloss":
            assert self.disks is not None
            lc.kill9(target)
            # A write the kernel had handed to the file system before the kill may still be carried out:
            # let it land first, so that it is dropped like every other unsynced one.
            self._stop.wait(0.1)
            dropped = self.disks.powerloss(target)
            if fault is not None:
                fault.why += f"; dropped {dropped['dirty_bytes']:,} unsynced bytes in {dropped['files']} file(s)"
        elif kind == "disk":
            assert self.disks is not None and fault is not None
            self._log_size_at_fault = self._log_size(target)
            self.disks.fail(target, self._disk_error)
        else:
            self.cluster.isolate(lc.nodes[target].node_id)

    def _log_size(self, target: str) -> int:
        try:
            return self.cluster.lc.nodes[target].log.stat().st_size
        except OSError:
            return 0

    def _went_offline(self, target: str) -> bool:
        """The node's log says a log directory went offline (or the node gave up) since the fault began."""
        try:
            with open(self.cluster.lc.nodes[target].log, "rb") as f:
                f.seek(self._log_size_at_fault)
                text = f.read().decode(errors="replace")
        except OSError:
            return False
        return "is offline" in text

    def _end(self, kind: str, target: str, fault: Fault) -> None:
        lc = self.cluster.lc
        if kind in ("kill", "powerloss"):
            lc.start_node(target, timeout=60)
        elif kind == "pause":
            lc.signal(target, signal.SIGCONT)
        elif kind == "disk":
            assert self.disks is not None
            self.disks.heal(target)
            node = lc.nodes[target]
            if not node.alive:
                fault.why += "; it stopped itself"
            elif self._went_offline(target):
                fault.why += "; its log directory went offline: restarted"
                lc.kill9(target)
            lc.start_node(target, timeout=60)
        else:
            self.cluster.heal_links()
        fault.healed_s = self.history.now()

    def _one(self) -> None:
        kind = self.rng.choice(self.kinds)
        target, why = self._target()
        if kind == "kip101":
            found = self._busiest_leader()
            self._follower_then_leader(found[0] if found is not None else self.rng.choice(self._brokers()))
            return
        if kind == "disk":
            self._disk_error = self.rng.choice(DISK_ERRORS)
            why = f"{self._disk_error.upper()} on every write and fsync; {why}"
        fault = self._record(kind, target, why)
        self._begin(kind, target, fault)
        self._stop.wait(self.rng.uniform(*self.duration_s))
        self._end(kind, target, fault)

    def _cut_and_taker(self, leader: str, brokers: list[str]) -> tuple[str, str]:
        """The follower to cut and the one expected to take over: for a partition the leader leads, the
        controller elects the first live ISR member in replica order, so the cut one is the later of the two."""
        followers = [b for b in brokers if b != leader]
        replicas = self.cluster.replicas(self.topics[0])
        led = [
            replicas[p]
            for (_t, p), (node, _e) in sorted(self.cluster.leaders(self.topics[:1]).items())
            if f"broker-{node}" == leader and len(replicas.get(p, [])) >= 3
        ]
        if led and len(followers) >= 2:
            order = self.rng.choice(led)
            ranked = [f"broker-{i}" for i in order if f"broker-{i}" in followers]
            return ranked[-1], ranked[0]
        cut_one = self.rng.choice(followers)
        return cut_one, self.rng.choice([b for b in followers if b != cut_one] or followers)

    def _follower_then_leader(self, leader: str) -> None:
        """KIP-101's scenario on purpose (the ``kip101`` nemesis). One follower is cut from the other brokers
        and the leader is killed: the other follower takes over and the cut one, told to follow it, cannot
        fetch. Then the new leader is killed too, so the cut follower, still in the ISR, is the one left to
        lead. The leader-epoch rule keeps every committed record through this (the cut follower truncates
        nothing until the leader has told it where its epoch ends); the pre-KIP-101 rule truncates it to its
        high watermark on becoming a follower, and records above it are lost once it leads."""
        lc = self.cluster.lc
        brokers = self._brokers()
        cut_one, taker = self._cut_and_taker(leader, brokers)
        why = f"KIP-101 pattern around {leader}"
        cut = self._record("partition", cut_one, f"{why}: a follower, from the other brokers only")
        for b in brokers:
            if b != cut_one:
                self.cluster.links.cut(lc.nodes[cut_one].node_id, lc.nodes[b].node_id)
        first = self._record("kill", leader, f"{why}: the leader")
        self._begin("kill", leader)
        self._stop.wait(self.rng.uniform(1.5, 2.5))  # the other follower takes over
        second = self._record("kill", taker, f"{why}: the follower that took over")
        self._begin("kill", taker)
        self._stop.wait(self.rng.uniform(1.5, 3.0))  # the cut follower is the one left to lead
        self.cluster.heal_links()
        cut.healed_s = self.history.now()
        self._stop.wait(self.rng.uniform(*self.duration_s))
        lc.start_nodes([leader, taker], timeout=60)
        first.healed_s = second.healed_s = self.history.now()

    def _run(self) -> None:
        self._stop.wait(self.rng.uniform(*self.interval_s))
        while not self._stop.is_set() and self.history.now() < self.until_s:
            try:
                self._one()
            except Exception as e:  # the next fault must still come; the heal at the end restores everything
                log.warning("nemesis step failed: %r", e)
                self.errors.append(f"{self.history.now():.1f}s: {e!r}")
            self._stop.wait(self.rng.uniform(*self.interval_s))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop choosing faults; the fault in progress is healed by its own step or by heal_everything."""
        self._stop.set()
        self._thread.join(90)


class Watcher:
    """Leaders and epochs of the workload's partitions and the active controller, sampled until stopped."""

    def __init__(self, cluster: ChaosCluster, history: History, topics: list[str], every_s: float = 0.5) -> None:
        self.cluster, self.history, self.topics, self.every_s = cluster, history, topics, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-watcher", daemon=True)
        self._leaders: dict[int, tuple[int, int]] = {}
        self._controller = -2

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.history.now()
            for (_t, p), (leader, epoch) in sorted(self.cluster.leaders(self.topics).items()):
                if self._leaders.get(p) != (leader, epoch):
                    self._leaders[p] = (leader, epoch)
                    self.history.observe(Observation(now, "leader", p, leader, epoch))
            try:
                ctrl = self.cluster.lc.quorum_leader()
            except Exception:
                ctrl = -1
            if ctrl != self._controller:
                self._controller = ctrl
                self.history.observe(Observation(now, "controller", -1, ctrl, -1))
            self._stop.wait(self.every_s)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
