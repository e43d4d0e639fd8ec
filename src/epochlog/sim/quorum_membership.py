"""KIP-853 in the quorum simulator: voters added and removed while the quorum runs, under load, crashes and
partitions; the checker's one-voter-change and removed-leader-steps-down invariants join the others.

Each scenario runs a dynamic quorum (voters formatted with --initial-controllers; the other nodes formatted with
--no-initial-controllers, observers until added).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from epochlog.codes import Err
from epochlog.raft.roles import Role
from epochlog.sim.quorum_scenarios import QuorumRun, _load, _run_until_true, _wait_leader
from epochlog.sim.quorum_world import SIM_CONFIG, NetFaults, QuorumWorld


def _change(w: QuorumWorld, change: Callable[[], int], deadline: int) -> int:
    """Ask until a leader accepts and commits the change (an operator's retries); returns the answer's error."""
    while w.now < deadline:
        _wait_leader(w, deadline)
        rid = change()
        if rid < 0:
            continue
        _run_until_true(w, lambda rid=rid: w.answer(rid) is not None, min(deadline, w.now + 1000))  # type: ignore[misc]
        answer = w.answer(rid)
        if answer is not None and answer.error == Err.NONE:
            return Err.NONE
        w.run_until(w.now + 50)
    return Err.REQUEST_TIMED_OUT


def grow_quorum(seed: int = 1, **kw: Any) -> QuorumRun:
    """One controller, then three: two controllers join under load and are added one at a time; the leader then
    crashes and the three elect one of themselves."""
    w = QuorumWorld(seed, voters=1, observers=2, dynamic=True, **kw)
    run = QuorumRun(w)
    _load(w, 0, 3000)
    _wait_leader(w, 500)
    w.run_until(300)
    run.facts["add_1"] = _change(w, lambda: w.add_voter(1), 1500)
    run.facts["add_2"] = _change(w, lambda: w.add_voter(2), 2500)
    run.facts["voters"] = w.current_voters()
    w.snap("grown to three voters")
    lead = w.leader()
    assert lead is not None
    w.crash(lead.node_id)
    run.facts["new_leader_at"] = _wait_leader(w, 3500, exclude=lead.node_id)
    w.settle(4500)
    run.facts["committed"] = len(w.checker.values)
    return run


def replace_voter(seed: int = 1, **kw: Any) -> QuorumRun:
    """A controller host is replaced under load: the new one is added, then the old one (a follower) removed,
    with one voter cut off from the others meanwhile."""
    w = QuorumWorld(seed, voters=3, observers=1, dynamic=True, **kw)
    run = QuorumRun(w)
    _load(w, 0, 3500)
    _wait_leader(w, 500)
    w.run_until(300)
    lead = w.leader()
    assert lead is not None
    old = next(v for v in w.voters if v != lead.node_id)
    bystander = next(v for v in w.voters if v not in (lead.node_id, old))
    w.isolate(bystander)
    run.facts["add"] = _change(w, lambda: w.add_voter(3), 2000)
    run.facts["remove"] = _change(w, lambda: w.remove_voter(old), 3000)
    w.heal()
    run.facts["voters"] = w.current_voters()
    w.snap(f"node 3 replaced node {old}")
    w.settle(5000)
    run.facts["committed"] = len(w.checker.values)
    return run


def remove_leader(seed: int = 1, **kw: Any) -> QuorumRun:
    """The active controller is removed: it leads until the removal commits, then resigns, and the other two
    elect a leader among themselves; the removed one follows as an observer."""
    w = QuorumWorld(seed, voters=3, dynamic=True, **kw)
    run = QuorumRun(w)
    _load(w, 0, 3000)
    _wait_leader(w, 500)
    w.run_until(300)
    lead = w.leader()
    assert lead is not None
    gone = lead.node_id
    run.facts["removed"] = gone
    run.facts["remove"] = _change(w, lambda: w.remove_voter(gone), 1500)
    stepped_down = _run_until_true(w, lambda: lead.core.role is not Role.LEADER, w.now + 200)
    run.facts["stepped_down"] = stepped_down
    run.facts["new_leader_at"] = _wait_leader(w, 3000, exclude=gone)
    new = w.leader()
    run.facts["new_leader"] = None if new is None else new.node_id
    run.facts["voters"] = w.current_voters()
    w.run_until(3000)
    run.facts["removed_follows"] = w.nodes[gone].core.leader_id
    w.settle(4000)
    run.facts["committed"] = len(w.checker.values)
    return run


def two_changes_at_once(seed: int = 1, **kw: Any) -> QuorumRun:
    """The leader with two observers is cut off from the other two voters and asked to add both observers. By
    the rules the second add waits for the first, which cannot commit. A core that allowed both (the
    node_factory of the test that breaks the rule) would commit with 3 of the 5 while the other two, still
    on 3 voters, elect a leader of their own: the checker must see committed entries lost."""
    w = QuorumWorld(seed, voters=3, observers=2, dynamic=True, **kw)
    run = QuorumRun(w)
    _load(w, 0, 2500)
    _wait_leader(w, 500)
    w.run_until(400)
    lead = w.leader()
    assert lead is not None
    others = tuple(v for v in w.voters if v != lead.node_id)
    w.partition((lead.node_id, 3, 4), others)
    w.run_until(w.now + 2 * SIM_CONFIG.fetch_max_wait_ms)  # the observers fetch from the leader on their side
    first, second = w.add_voter(3), w.add_voter(4)
    w.run_until(w.now + 100)
    run.facts["answers"] = [None if (a := w.answer(r)) is None else a.error for r in (first, second)]
    w.run_until(1500)
    w.heal()
    w.run_until(2500)
    w.settle(3500)
    return run


MEMBERSHIP_SCENARIOS: dict[str, Callable[..., QuorumRun]] = {
    "grow-quorum": grow_quorum,
    "replace-voter": replace_voter,
    "remove-leader": remove_leader,
    "two-changes-at-once": two_changes_at_once,
}


def random_membership_run(seed: int, duration_ms: int = 3000, **kw: Any) -> QuorumRun:
    """Voter changes drawn from ``seed`` (add a spare controller, remove a voter, the leader included) among
    crashes, partitions and message loss; then the network heals and all must agree."""
    r = random.Random(seed)
    faults = NetFaults(drop=r.choice([0.0, 0.02]), duplicate=r.choice([0.0, 0.02]), max_delay_ms=r.choice([3, 20]))
    w = QuorumWorld(seed, voters=3, observers=2, faults=faults, dynamic=True, **kw)
    run = QuorumRun(w)
    _load(w, 0, duration_ms, every=20)
    t = 300
    while (t := t + r.randint(100, 400)) < duration_ms - 200:
        n = r.randrange(len(w.nodes))
        kind = r.choice(["add", "remove", "remove", "crash", "isolate", "heal", "restart"])

        def act(kind: str = kind, n: int = n) -> None:
            voters = w.current_voters()
            if kind == "add" and n not in voters:
                w.add_voter(n)
            elif kind == "remove" and n in voters and len(voters) > 2:
                w.remove_voter(n)
            elif kind == "crash" and sum(w.nodes[v].alive for v in voters) > len(voters) // 2 + 1:
                w.crash(n)
            elif kind == "isolate":
                w.isolate(n)
            elif kind == "heal":
                w.heal()
            elif kind == "restart":
                for m in w.nodes:
                    w.restart(m)

        w.at(t, act)
    w.run_until(duration_ms)
    w.faults = NetFaults()
    w.settle(duration_ms + 2000)
    run.facts["committed"] = len(w.checker.values)
    run.facts["voters"] = w.current_voters()
    return run
