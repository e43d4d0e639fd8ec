"""The metadata quorum in the simulator: named scenarios, random seeds, and a deliberate bug per invariant
that the checker must catch."""

from __future__ import annotations

import os
from typing import Any

import pytest

from epochlog.raft.node import RaftNode
from epochlog.sim.quorum_scenarios import SCENARIOS, controller_crash, figure_8, random_run, zombie_controller
from epochlog.sim.quorum_world import SIM_CONFIG, NetFaults, QuorumWorld
from tests.sweep import seeds

SEEDS = seeds(500, "EPOCHLOG_SIM_SEEDS")
SEED_BASE = int(os.environ.get("EPOCHLOG_SIM_SEED_BASE", "0"))
CHUNK = 50


def _explain(run: Any) -> str:
    return "\n".join(run.world.log_lines[-30:])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_keeps_every_invariant(name: str) -> None:
    run = SCENARIOS[name]()
    assert not run.violations, _explain(run)
    assert not run.world.trace_violations, run.world.trace.report()


@pytest.mark.parametrize("chunk", range(0, SEEDS, CHUNK))
def test_random_seeds(chunk: int) -> None:
    for seed in range(SEED_BASE + chunk, SEED_BASE + min(chunk + CHUNK, SEEDS)):
        run = random_run(seed)
        assert not run.violations, f"seed {seed}: {run.violations[:3]}\n{_explain(run)}"
        assert not run.world.trace_violations, f"seed {seed}: {run.world.trace.report()}"
        assert run.facts["committed"] > 0, f"seed {seed}: nothing was ever committed"


# -- what the scenarios show ------------------------------------------------------------------------


def test_failover_elects_a_new_leader_within_the_timeouts() -> None:
    run = controller_crash()
    failover = run.facts["failover_ms"]
    # Fetch timeout, then one pre-vote and one vote round; ties may add an election timeout.
    bound = SIM_CONFIG.fetch_timeout_ms + 2 * SIM_CONFIG.election_timeout_ms + 100
    assert failover is not None and failover <= bound, run.facts
    assert run.facts["committed_after"] > run.facts["committed_before"]


def test_zombie_controller_resigns_and_commits_nothing() -> None:
    run = zombie_controller()
    assert run.facts["committed_while_cut"] == []
    resigned = run.facts["resigned_after_ms"]
    assert resigned is not None and resigned <= SIM_CONFIG.check_quorum_timeout_ms + 20, run.facts
    assert run.facts["new_leader"] not in (None, run.facts["zombie"])
    assert run.facts["observer_follows"] == run.facts["new_leader"], "the broker must follow the new leader"


def test_split_vote_has_two_candidates_and_then_one_leader() -> None:
    run = SCENARIOS["split-vote"]()
    assert run.facts["candidates"] == [0, 1]
    assert run.facts["leader_in_epoch_1"] is None
    assert run.facts["leader"] is not None and run.facts["leader"][1] > 1


def test_figure_8_never_commits_an_old_epoch_entry_by_counting() -> None:
    run = figure_8()
    assert run.facts["x_on_majority"] and run.facts["epoch_2_leader_crashed"], run.facts
    assert run.facts["hw_of_epoch_3_leader"] <= 1  # X (offset 1) was on a majority, yet not committed
    assert not run.facts["x_survived"]  # and it was overwritten, legitimately


def test_snapshot_catch_up_installs_the_leaders_snapshot() -> None:
    run = SCENARIOS["snapshot-catch-up"]()
    assert run.facts["leader_log_start"] > run.facts["behind_log_end"], run.facts
    assert run.facts["installed"]


# -- each invariant can fail --------------------------------------------------------------------------


class CountingLeader(RaftNode):
    """Commits whatever a majority holds, even before its own epoch's first record (figure 8's bug)."""

    def _maybe_advance_hw(self, now_ms: int) -> None:
        assert self.leader is not None
        candidate = self.leader.majority_offset(self.log.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self._ready.high_watermark = candidate
            self._answer_parked(now_ms, everyone=True)


class LoneLeader(RaftNode):
    """Commits what it alone holds."""

    def _maybe_advance_hw(self, now_ms: int) -> None:
        if self.log.log_end_offset > self.high_watermark:
            self.high_watermark = self.log.log_end_offset
            self._ready.high_watermark = self.high_watermark


class NoCheckQuorum(RaftNode):
    def _tick_leader(self, now_ms: int) -> None:
        assert self.leader is not None
        self._answer_parked(now_ms, everyone=False)


class DeafFollower(RaftNode):
    """Never truncates when the leader says the logs diverge."""

    def _truncation_offset(self, diverging: Any) -> int:
        return self.log.log_end_offset


class GreedyVoter(RaftNode):
    """Grants every vote that asks, whether or not it voted already this epoch."""

    def _on_vote(self, req: Any, now_ms: int) -> None:
        if req.epoch >= self.epoch and not req.pre_vote:
            self.voted_id = -1
            self.leader_id = -1 if self.role.value != "leader" else self.leader_id
        super()._on_vote(req, now_ms)


def test_the_vote_must_be_on_disk_before_it_is_sent() -> None:
    run = SCENARIOS["crash-before-vote-write"](skip_vote_persist=True)
    assert {v.invariant for v in run.violations} >= {"vote-once", "one-leader-per-epoch"}
    assert {v.invariant for v in run.world.trace_violations} == {"raft-vote-once", "raft-one-leader-per-epoch"}


def test_counting_replicas_across_epochs_is_caught() -> None:
    run = figure_8(node_factory=CountingLeader)
    assert run.facts["hw_of_epoch_3_leader"] == 2
    assert "committed-safety" in {v.invariant for v in run.violations}
    assert "raft-truncate-below-commit" in {v.invariant for v in run.world.trace_violations}


def test_a_high_watermark_without_a_majority_is_caught() -> None:
    w = QuorumWorld(3, node_factory=LoneLeader)
    w.run_until(500)
    lead = w.leaders()[0]
    w.isolate(lead.node_id)
    w.propose(3)
    w.run_until(600)
    assert "majority-hw" in {v.invariant for v in w.checker.violations}


def test_a_leader_without_check_quorum_stays_a_zombie() -> None:
    run = zombie_controller(node_factory=NoCheckQuorum)
    assert run.facts["resigned_after_ms"] is None or run.facts["resigned_after_ms"] > 1000


def _first_violation(factory: type[RaftNode], seeds: range) -> set[str]:
    for seed in seeds:
        run = random_run(seed, node_factory=factory)
        if run.violations:
            return {v.invariant for v in run.violations}
    return set()


def test_a_follower_that_ignores_divergence_is_caught() -> None:
    # It can never take the leader's entries after the point of divergence, so it never converges.
    found = _first_violation(DeafFollower, range(40))
    assert found & {"log-matching", "committed-safety", "converged"}, found


def test_a_voter_that_votes_twice_is_caught() -> None:
    run = SCENARIOS["crash-before-vote-write"](node_factory=GreedyVoter)
    assert {v.invariant for v in run.violations} >= {"vote-once", "one-leader-per-epoch"}
    assert "raft-vote-once" in {v.invariant for v in run.world.trace_violations}


def test_lost_quorum_state_is_caught_as_an_epoch_going_back() -> None:
    w = QuorumWorld(5, faults=NetFaults())
    w.run_until(400)
    victim = next(n for n in w.nodes.values() if n.core.epoch > 0)
    w.crash(victim.node_id)
    victim.disk_state = None  # the quorum-state file vanished, the log did not
    victim.log.cache.clear()  # and the log says nothing of epochs either
    w.restart(victim.node_id)
    w.run_until(410)
    assert "monotonic" in {v.invariant for v in w.checker.violations}
    assert "raft-epoch-monotonic" in {v.invariant for v in w.trace_violations}
