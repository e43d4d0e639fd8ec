"""KIP-966 in the simulator: its scenarios hold every invariant, random schedules with min ISR 2 do too,
and each rule dropped on purpose makes the invariant it protects fire."""

from __future__ import annotations

import pytest

from epochlog.replication.types import TruncationMode
from epochlog.sim.elr_scenarios import (
    ELR_SCENARIOS,
    elr_random,
    hw_below_min_isr,
    last_replica_standing,
    unclean_elr_member,
)
from tests.sweep import seeds

pytestmark = pytest.mark.sim

EPOCH = TruncationMode.LEADER_EPOCH


@pytest.mark.parametrize("name", sorted(ELR_SCENARIOS))
def test_elr_scenarios_hold_every_invariant(name: str) -> None:
    w = ELR_SCENARIOS[name](EPOCH)
    assert not w.violations, "\n".join(w.history[-40:])
    assert not w.trace_violations, w.trace.report()
    assert not w.checker.permitted


def test_last_replica_standing_waits_for_the_eligible_replica() -> None:
    w = last_replica_standing()
    text = "\n".join(w.history)
    assert "broker 1 crashes hard, losing" in text and "losing 0 unflushed" not in text
    # While only 1 (back without its unflushed records) was up, nobody led; 2 was elected from the ELR.
    assert "t=  1500ms controller: leader=-1" in text
    assert "t=  1900ms controller: leader=2 epoch=3 isr=[2]" in text
    assert w.state().leader == 2 and w.state().elr == ()


def test_keeping_an_unclean_replica_eligible_elects_one_that_lost_committed_records() -> None:
    w = last_replica_standing(keep_unclean=True)
    assert {"elected-without-committed", "committed"} <= {v.invariant for v in w.violations}


def test_an_unclean_elr_member_must_leave_the_elr() -> None:
    w = unclean_elr_member(keep_unclean=True)
    assert {"unclean-replica-eligible", "elr-missing-committed"} <= {v.invariant for v in w.violations}


def test_without_kip966_the_last_replica_standing_loses_committed_records() -> None:
    w = last_replica_standing(elr=False)
    assert {v.invariant for v in w.violations} == {"committed"}


def test_the_hw_moving_below_min_isr_breaks_the_elr() -> None:
    w = hw_below_min_isr(hw_rule=False)
    assert "elected-without-committed" in {v.invariant for v in w.violations}


@pytest.mark.parametrize("seed", range(seeds(40)))
def test_random_schedules_with_elr_hold(seed: int) -> None:
    w = elr_random(seed)
    assert not w.violations, "\n".join(w.history[-60:])
    assert not w.trace_violations, w.trace.report()
