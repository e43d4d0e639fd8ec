"""KIP-853 in the quorum simulator: voters added and removed while the quorum runs, and a deliberate bug per
membership rule that the checker must catch."""

from __future__ import annotations

import os

import pytest

from epochlog.codes import Err
from epochlog.raft.node import RaftNode
from epochlog.sim.quorum_membership import (
    MEMBERSHIP_SCENARIOS,
    grow_quorum,
    random_membership_run,
    remove_leader,
    replace_voter,
    two_changes_at_once,
)
from tests.sweep import seeds

SEEDS = seeds(100, "EPOCHLOG_SIM_SEEDS")
CHUNK = 25


def _explain(run: object) -> str:
    return "\n".join(run.world.log_lines[-30:])  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(MEMBERSHIP_SCENARIOS))
def test_membership_scenario_keeps_every_invariant(name: str) -> None:
    run = MEMBERSHIP_SCENARIOS[name]()
    assert not run.violations, _explain(run)
    assert not run.world.trace_violations, run.world.trace.report()


@pytest.mark.parametrize("chunk", range(0, SEEDS, CHUNK))
def test_random_membership_seeds(chunk: int) -> None:
    base = int(os.environ.get("EPOCHLOG_SIM_SEED_BASE", "0"))
    for seed in range(base + chunk, base + min(chunk + CHUNK, SEEDS)):
        run = random_membership_run(seed)
        assert not run.violations, f"seed {seed}: {run.violations[:3]}\n{_explain(run)}"
        assert not run.world.trace_violations, f"seed {seed}: {run.world.trace.report()}"
        assert run.facts["committed"] > 0, f"seed {seed}: nothing was ever committed"


# -- what the scenarios show ------------------------------------------------------------------------


def test_a_quorum_grows_from_one_to_three_and_survives_its_first_leader() -> None:
    run = grow_quorum()
    assert run.facts["add_1"] == Err.NONE and run.facts["add_2"] == Err.NONE
    assert run.facts["voters"] == (0, 1, 2)
    assert run.facts["new_leader_at"] is not None  # two of the three elect a leader without the first


def test_a_controller_host_is_replaced() -> None:
    run = replace_voter()
    assert run.facts["add"] == Err.NONE and run.facts["remove"] == Err.NONE
    assert 3 in run.facts["voters"] and len(run.facts["voters"]) == 3


def test_a_removed_leader_steps_down_and_follows() -> None:
    run = remove_leader()
    gone = run.facts["removed"]
    assert run.facts["remove"] == Err.NONE and run.facts["stepped_down"]
    assert gone not in run.facts["voters"] and run.facts["new_leader"] not in (None, gone)
    assert run.facts["removed_follows"] == run.facts["new_leader"]  # now an observer of the new leader


def test_a_second_change_waits_for_the_first() -> None:
    run = two_changes_at_once()
    assert run.facts["answers"][1] == Err.REQUEST_TIMED_OUT, run.facts


# -- each membership rule can fail --------------------------------------------------------------------------


class TwoAtOnce(RaftNode):
    """Starts a voter change while another is uncommitted."""

    def _voter_change_error(self, now_ms: int) -> tuple[int, str]:
        error, text = super()._voter_change_error(now_ms)
        return (Err.NONE, "") if "not committed yet" in text else (error, text)


class StaysAfterRemoval(RaftNode):
    """Goes on leading after its own removal committed."""

    def _removed_leader_resigns(self, now_ms: int) -> bool:
        return False


def test_two_uncommitted_changes_are_caught_and_lose_committed_entries() -> None:
    run = two_changes_at_once(node_factory=TwoAtOnce)
    assert run.facts["answers"][1] != Err.REQUEST_TIMED_OUT
    # Three of five commit while two of the old three elect another leader: the partition heals into a loss.
    assert {"one-voter-change", "committed-safety"} <= {v.invariant for v in run.violations}


def test_a_removed_leader_that_stays_is_caught() -> None:
    run = remove_leader(node_factory=StaysAfterRemoval)
    assert "removed-leader-steps-down" in {v.invariant for v in run.violations}
