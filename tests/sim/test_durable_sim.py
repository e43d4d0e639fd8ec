"""The durable mode (flush.messages=1) in the simulator: every broker loses power at once, again and again,
and no acknowledged record is lost; with the cores counting unsynced log ends, some are."""

from __future__ import annotations

import pytest

from epochlog.sim.scenarios import durable_power_loss

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("seed", range(6))
def test_power_loss_of_every_replica_loses_no_acknowledged_record(seed: int) -> None:
    w = durable_power_loss(seed)
    assert len(w.acked) > 100
    assert not w.violations, "\n".join(w.history[-40:])
    assert not w.checker.permitted  # nothing is excused in durable mode
    assert sum(1 for h in w.history if "losing" in h and "losing 0 " not in h) > 0  # unsynced data was lost


@pytest.mark.parametrize("seed", [1, 4])
def test_counting_the_unsynced_log_end_loses_acknowledged_records(seed: int) -> None:
    w = durable_power_loss(seed, count_unsynced=True)
    assert {v.invariant for v in w.violations} == {"committed"}, [v.detail for v in w.violations]
