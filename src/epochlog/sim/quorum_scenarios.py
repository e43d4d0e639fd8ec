"""Named quorum scenarios and seeded random runs, each returning a QuorumWorld to inspect.

A scenario's ``facts`` say what it set out to show (who led when, how long a failover took); the
world's checker holds any invariant violation.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epochlog.raft.messages import FetchResponse, Message, VoteRequest
from epochlog.raft.roles import Role
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
    w.snap("under load, before the crash")
    w.crash(old.node_id)
    run.facts["crashed"] = old.node_id
    run.facts["committed_before"] = len(w.checker.values)
    at = _wait_leader(w, 3000, exclude=old.node_id)
    run.facts["failover_ms"] = None if at is None else at - 1000
    w.snap(f"a new leader, {run.facts['failover_ms']} ms after the crash")
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
    w.snap("the cut-off leader resigned; the majority elected another; the observer follows it")
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
    # Voters 0 and 1 time out together; while the votes are out 2 hears only 0, and 3 only 1.
    for n, node in w.nodes.items():
        node.core.election_deadline = 50 if n in (0, 1) else 10_000
    w.cut |= {frozenset((0, 3)), frozenset((1, 2))}
    candidates: set[int] = set()

    def watch() -> None:
        candidates.update(n for n, x in w.nodes.items() if x.core.role is Role.CANDIDATE and x.core.epoch == 1)

    w.run_until(150, on_event=watch)
    run.facts["candidates"] = sorted(candidates)
    run.facts["leader_in_epoch_1"] = w.checker.epoch_leader.get(1)
    w.heal()
    _load(w, 200, 2000)
    w.run_until(2000)
    lead = w.leader()
    run.facts["leader"] = None if lead is None else (lead.node_id, lead.core.epoch)
    w.settle(3000)
    return run


def vote_before_state_write(seed: int = 1, skip_vote_persist: bool = False, **kw: Any) -> QuorumRun:
    """Two candidates in one epoch; the voter that grants the first crashes at once and restarts
    before the second candidate's request arrives. Its vote was on disk before the grant left, so it
    refuses the second; with ``skip_vote_persist`` (the bug) the checker must catch a second vote."""
    w = QuorumWorld(seed, voters=3, skip_vote_persist=skip_vote_persist, **kw)
    run = QuorumRun(w)
    for n, node in w.nodes.items():
        node.core.election_deadline = 30 if n in (0, 1) else 10_000
    w.cut.add(frozenset((0, 1)))

    def slow_second_vote(src: int, dst: int, msg: Message) -> int | None:
        # Node 1's vote request, and everything node 0 says to node 2 once it wins, arrive late.
        late_vote = src == 1 and dst == 2 and isinstance(msg, VoteRequest) and not msg.pre_vote
        late_news = src == 0 and dst == 2 and not isinstance(msg, VoteRequest)
        return 30 if late_vote else 80 if late_news else 0

    w.shape = slow_second_vote
    crashed: list[int] = []

    def crash_after_grant() -> None:
        if not crashed and any(voter == 2 for voter, _ in w.checker.votes):
            crashed.append(w.now)
            w.crash(2)
            w.restart(2)

    w.run_until(200, on_event=crash_after_grant)
    w.shape = None
    run.facts["crashed_at"] = crashed[0] if crashed else None
    run.facts["votes"] = {f"{voter}@{epoch}": c for (voter, epoch), c in w.checker.votes.items()}
    w.heal()
    w.run_until(1000)
    w.settle(2000)
    return run


def _run_until_true(w: QuorumWorld, cond: Callable[[], bool], deadline: int) -> bool:
    while w.now < deadline:
        if cond():
            return True
        w.run_until(w.now + 1)
    return cond()


def figure_8(seed: int = 1, node_factory: Any = None, **kw: Any) -> QuorumRun:
    """The Raft paper's figure 8 in five voters. X is written in epoch 1 on two nodes only; a leader
    of epoch 2 writes just its LeaderChange and dies; the first leader returns in a later epoch and
    copies X to a majority, but its own LeaderChange reaches no one before it dies; the epoch 2 node
    then wins and overwrites X. The high watermark must never have covered X."""
    extra = {"node_factory": node_factory} if node_factory is not None else {}
    w = QuorumWorld(seed, voters=5, fetch_max_records=1, **extra, **kw)
    run = QuorumRun(w)
    nodes = w.nodes

    def only(first: int) -> None:
        for n, node in nodes.items():
            node.core.election_deadline = w.now + (5 if n == first else 10_000)
            node.core.fetch_deadline = w.now + (5 if n == first else 10_000)
            node.core.fetched_this_epoch = False

    only(0)
    assert _run_until_true(w, lambda: w.leader() is not None, 500)
    w.partition((0, 1), (2, 3, 4))
    w.propose(1)  # X, at offset 1 (offset 0 is epoch 1's LeaderChange)
    x_offset = 1
    assert _run_until_true(w, lambda: nodes[1].log.log_end_offset > x_offset, 600)
    w.snap("X (v0) written in epoch 1 on nodes 0 and 1 only; the network splits {0,1} | {2,3,4}")
    only(2)

    def crash_new_leader() -> None:
        if nodes[2].alive and nodes[2].core.role is Role.LEADER:
            w.crash(2)  # its LeaderChange is on its own disk only

    w.run_until(w.now + 100, on_event=crash_new_leader)
    run.facts["epoch_2_leader_crashed"] = not nodes[2].alive
    w.snap("node 2 won epoch 2, wrote its LeaderChange (LC:2) and died")
    _run_until_true(w, lambda: nodes[0].core.role is not Role.LEADER, w.now + 1000)  # check-quorum
    w.heal()
    only(0)

    def hide_leader_change(src: int, dst: int, msg: Message) -> int | None:
        if src == 0 and isinstance(msg, FetchResponse) and msg.read_from > x_offset:
            return None  # epoch 3's own first record never arrives anywhere
        return 0

    w.shape = hide_leader_change

    def x_on_majority() -> bool:
        held = [n for n in (0, 1, 3, 4) if (e := nodes[n].log.entry(x_offset)) is not None and e.value == "v0"]
        run.facts["x_holders"] = held
        return nodes[0].core.role is Role.LEADER and nodes[0].core.epoch >= 3 and len(held) >= 3

    run.facts["x_on_majority"] = _run_until_true(w, x_on_majority, w.now + 1000)
    w.run_until(w.now + 30)  # the followers fetch past X: a leader that counts copies would commit it now
    run.facts["hw_of_epoch_3_leader"] = nodes[0].core.high_watermark
    w.snap(f"node 0 leads epoch {nodes[0].core.epoch} and copied X to a majority; its own LC:0 reached no one")
    w.crash(0)
    w.shape = None
    w.restart(2)
    only(2)
    _run_until_true(w, lambda: w.leader() is not None, w.now + 1000)
    lead = w.leader()
    run.facts["final_leader"] = None if lead is None else (lead.node_id, lead.core.epoch)
    w.snap("node 0 died; node 2, whose last epoch (2) is later than X's (1), won and replaced X")
    entry = nodes[2].log.entry(x_offset)
    run.facts["x_survived"] = entry is not None and entry.value == "v0"
    w.settle(w.now + 1500)
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
    "figure-8": figure_8,
    "snapshot-catch-up": snapshot_catch_up,
    "disk-loss": disk_loss,
}


def random_run(
    seed: int, duration_ms: int = 3000, world: Callable[..., QuorumWorld] = QuorumWorld, **kw: Any
) -> QuorumRun:
    """Crashes (also part way through a Ready), pauses, partitions, message loss, duplication and
    reordering, and snapshots, all drawn from ``seed``; then the network heals and all must agree."""
    r = random.Random(seed)
    faults = NetFaults(
        drop=r.choice([0.0, 0.01, 0.05]),
        duplicate=r.choice([0.0, 0.02, 0.05]),
        max_delay_ms=r.choice([3, 10, 40]),
    )
    voters = r.choice([3, 3, 5])
    w = world(seed, voters=voters, observers=r.choice([0, 1]), faults=faults,
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
