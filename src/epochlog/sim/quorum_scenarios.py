"""Named quorum scenarios and seeded random runs, each returning a QuorumWorld to inspect.

A scenario's ``facts`` say what it set out to show (who led when, how long a failover took); the
world's checker holds any invariant violation.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.raft.node import Role
from epochlog.sim.quorum_world import SIM_CONFIG, NetFaults, QuorumWorld


@dataclass
class QuorumRun:
    world: QuorumWorld
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def violations(self) -> list[Any]:
        return self.world.checker.violations


def _load(w: QuorumWorld, start: int, end: int, every: int = 20) -> None:
    for t in range(start, end, every):
        w.at(t, lambda: w.propose(1))


def _wait_leader(w: QuorumWorld, deadline: int, exclude: int | None = None) -> int | None:
    """Run until a leader other than ``exclude`` is ready; returns the time it became so."""
    while w.now < deadline:
        w.run_until(w.now + 5)
        lead = w.leader()
        if lead is not None and lead.node_id != exclude:
            return w.now
    return None


def controller_crash(seed: int = 1, **kw: Any) -> QuorumRun:
    """The active controller dies under load: a new one is elected and nothing committed is lost."""
    w = QuorumWorld(seed, **kw)
    run = QuorumRun(w)
    _load(w, 0, 3000)
    _wait_leader(w, 1000)
    w.run_until(1000)
    old = w.leader()
    assert old is not None
    w.crash(old.node_id)
    run.facts["crashed"] = old.node_id
    run.facts["committed_before"] = len(w.checker.values)
    at = _wait_leader(w, 3000, exclude=old.node_id)
    run.facts["failover_ms"] = None if at is None else at - 1000
    w.at(2000, lambda: w.restart(old.node_id))
    w.run_until(3000)
    w.settle(4000)
    run.facts["committed_after"] = len(w.checker.values)
    return run


def zombie_controller(seed: int = 1, **kw: Any) -> QuorumRun:
    """The active controller is cut off from the other voters while an observer (a broker) still
    reaches it: it must resign within the check-quorum timeout and commit nothing meanwhile."""
    w = QuorumWorld(seed, observers=1, **kw)
    run = QuorumRun(w)
    _load(w, 0, 3000)
    _wait_leader(w, 1000)
    w.run_until(1000)
    zombie = w.leader()
    assert zombie is not None
    for v in w.voters:
        if v != zombie.node_id:
            w.cut.add(frozenset((zombie.node_id, v)))
    hw_at_cut = zombie.core.high_watermark
    run.facts["zombie"] = zombie.node_id
    resigned_at: list[int] = []
    committed_while_cut: list[int] = []

    def watch() -> None:
        if zombie.alive and zombie.core.high_watermark > hw_at_cut and not resigned_at:
            committed_while_cut.append(zombie.core.high_watermark)
        if not resigned_at and zombie.core.role is not Role.LEADER:
            resigned_at.append(w.now)

    w.run_until(2500, on_event=watch)
    run.facts["resigned_after_ms"] = resigned_at[0] - 1000 if resigned_at else None
    run.facts["committed_while_cut"] = committed_while_cut
    others = [n for n in w.leaders() if n.node_id != zombie.node_id]
    run.facts["new_leader"] = others[0].node_id if others else None
    run.facts["observer_follows"] = w.nodes[len(w.voters)].core.leader_id
    w.settle(4000)
    return run


def split_vote(seed: int = 1, **kw: Any) -> QuorumRun:
    """Four voters, two candidates at once, each reaching half: the epoch passes with no leader
    and a later one elects exactly one."""
    w = QuorumWorld(seed, voters=4, **kw)
    run = QuorumRun(w)
    # Voters 0 and 1 time out together; 2 hears only 0 and 3 only 1 while the votes are out.
    for n, node in w.nodes.items():
        node.core.election_deadline = 50 if n in (0, 1) else 10_000
    w.cut |= {frozenset((0, 3)), frozenset((1, 2)), frozenset((0, 1)), frozenset((2, 3))}
    w.run_until(120)
    run.facts["candidates"] = sorted(n for n, s in w.nodes.items() if s.core.role is Role.CANDIDATE)
    run.facts["split_epoch"] = max(s.core.epoch for s in w.nodes.values())
    run.facts["leader_in_split_epoch"] = w.checker.epoch_leader.get(run.facts["split_epoch"])
    w.heal()
    _load(w, 200, 2000)
    w.run_until(2000)
    lead = w.leader()
    run.facts["leader"] = None if lead is None else (lead.node_id, lead.core.epoch)
    w.settle(3000)
    return run


def vote_before_state_write(seed: int = 1, skip_vote_persist: bool = False, **kw: Any) -> QuorumRun:
    """A voter grants a vote and crashes: if the grant left before the quorum state was on disk, the
    restarted voter could grant the same epoch to a second candidate (the checker must say so)."""
    w = QuorumWorld(seed, voters=3, skip_vote_persist=skip_vote_persist, **kw)
    run = QuorumRun(w)
    # Node 0 asks first; node 2 grants, then crashes before anything else. Node 1 asks in the same
    # epoch once node 2 is back.
    for n, node in w.nodes.items():
        node.core.election_deadline = {0: 30, 1: 10_000, 2: 10_000}[n]
    w.cut |= {frozenset((0, 1))}
    granted: list[int] = []

    def crash_after_grant() -> None:
        if not granted and 2 in w.checker.votes.values() or any(k[0] == 2 for k in w.checker.votes):
            if not granted:
                granted.append(w.now)
                w.crash(2)
                w.cut.add(frozenset((0, 2)))

    w.run_until(100, on_event=crash_after_grant)
    w.restart(2)
    epoch = max(s.core.epoch for s in w.nodes.values())
    # Node 1 stands in that same epoch (it learned it from nobody: force its state to match node 0's).
    n1 = w.nodes[1].core
    n1.epoch = epoch - 1
    n1.election_deadline = w.now
    w.run_until(600)
    w.heal()
    w.run_until(1500)
    run.facts["votes"] = dict(w.checker.votes)
    w.settle(2500)
    return run


def snapshot_catch_up(seed: int = 1, **kw: Any) -> QuorumRun:
    """A voter is down while the others write and snapshot far past it: it comes back, is sent the
    leader's snapshot (FetchSnapshot), and then the log after it."""
    w = QuorumWorld(seed, snapshot_every=25, **kw)
    run = QuorumRun(w)
    _load(w, 0, 2500, every=5)
    _wait_leader(w, 500)
    w.run_until(500)
    lead = w.leader()
    assert lead is not None
    behind = next(v for v in w.voters if v != lead.node_id)
    w.crash(behind)
    w.run_until(1800)
    run.facts["leader_log_start"] = w.nodes[lead.node_id].log.log_start_offset
    run.facts["behind_log_end"] = w.nodes[behind].log.log_end_offset
    w.restart(behind)
    w.run_until(2600)
    run.facts["installed"] = w.nodes[behind].log.base_snapshot is not None
    w.settle(3500)
    run.facts["behind_applied"] = len(w.nodes[behind].applied)
    return run


def disk_loss(seed: int = 1, **kw: Any) -> QuorumRun:
    """One voter loses its whole disk and rejoins with nothing: it catches up from the others."""
    w = QuorumWorld(seed, snapshot_every=40, **kw)
    run = QuorumRun(w)
    _load(w, 0, 2500)
    _wait_leader(w, 800)
    w.run_until(800)
    lead = w.leader()
    assert lead is not None
    victim = next(v for v in w.voters if v != lead.node_id)
    w.crash(victim)
    w.wipe(victim)
    w.run_until(1200)
    w.restart(victim)
    w.run_until(2500)
    w.settle(3500)
    run.facts["victim"] = victim
    run.facts["victim_applied"] = len(w.nodes[victim].applied)
    return run


SCENARIOS: dict[str, Callable[..., QuorumRun]] = {
    "controller-crash": controller_crash,
    "zombie-controller": zombie_controller,
    "split-vote": split_vote,
    "crash-before-vote-write": vote_before_state_write,
    "snapshot-catch-up": snapshot_catch_up,
    "disk-loss": disk_loss,
}


def random_run(seed: int, duration_ms: int = 3000, **kw: Any) -> QuorumRun:
    """Crashes (also part way through a Ready), pauses, partitions, message loss, duplication and
    reordering, and snapshots, all drawn from ``seed``; then the network heals and all must agree."""
    r = random.Random(seed)
    faults = NetFaults(
        drop=r.choice([0.0, 0.01, 0.05]),
        duplicate=r.choice([0.0, 0.02, 0.05]),
        max_delay_ms=r.choice([3, 10, 40]),
    )
    voters = r.choice([3, 3, 5])
    w = QuorumWorld(seed, voters=voters, observers=r.choice([0, 1]), faults=faults,
                    snapshot_every=r.choice([0, 20, 50]), **kw)
    run = QuorumRun(w)
    _load(w, 0, duration_ms, every=r.choice([5, 20]))
    t = 300
    while True:
        t += r.randint(50, 400)
        if t >= duration_ms - 200:
            break
        n = r.randrange(len(w.nodes))
        kind = r.choice(["crash", "crash-mid", "pause", "isolate", "split", "heal", "restart"])

        def act(kind: str = kind, n: int = n) -> None:
            if kind == "crash":
                w.crash(n)
            elif kind == "crash-mid":
                w.crash(n, at_step=r.randint(0, 3))
            elif kind == "pause":
                w.nodes[n].paused = True
                w.at(w.now + r.randint(50, 3 * SIM_CONFIG.fetch_timeout_ms), lambda: _unpause(w, n))
            elif kind == "isolate":
                w.isolate(n)
            elif kind == "split":
                nodes = list(w.nodes)
                r.shuffle(nodes)
                k = r.randint(1, len(nodes) - 1)
                w.partition(tuple(nodes[:k]), tuple(nodes[k:]))
            elif kind == "heal":
                w.heal()
            else:
                for m in w.nodes:
                    if not w.nodes[m].alive:
                        w.restart(m)

        w.at(t, act)
    w.run_until(duration_ms)
    w.faults = NetFaults()
    w.settle(duration_ms + 2000)
    run.facts["committed"] = len(w.checker.values)
    return run


def _unpause(w: QuorumWorld, n: int) -> None:
    w.nodes[n].paused = False
