"""Markers and the last stable offset in the simulator: the LSO rule on simulated logs, random fault
schedules with a transactional producer, a marker lost with its leader, and proof the checker can fail."""

from __future__ import annotations

import pytest

import epochlog.sim.transactions as txn
from epochlog.sim.disk_log import Entry
from epochlog.sim.scenarios import random_schedule
from epochlog.sim.world import World
from tests.sweep import seeds

pytestmark = pytest.mark.sim


def entries(*values: str) -> list[Entry]:
    return [Entry(0, v) for v in values]


def test_the_lso_is_the_first_undecided_transaction_or_one_whose_marker_is_not_below_the_hw() -> None:
    log = entries("p0", "x0.0", "p1", "x0.1", "C0", "p2")
    assert txn.first_unstable_offset(log, high_watermark=6) is None
    assert txn.first_unstable_offset(log, high_watermark=4) == 1  # the marker at 4 is not below the HW
    assert txn.first_unstable_offset(log[:4], high_watermark=4) == 1  # no marker yet
    assert txn.first_unstable_offset(entries("x0.0", "A0", "x0.0"), 3) is None  # a duplicate after the marker


def test_read_committed_filters_aborted_records_and_markers() -> None:
    log = entries("p0", "x0.0", "x1.0", "p1", "A0", "C1", "p2")
    assert txn.read_committed(log, 7) == ["p0", "x1.0", "p1", "p2"]
    assert txn.read_committed(log, 1) == ["p0"]


def test_random_schedules_with_transactions_keep_read_committed_consistent() -> None:
    bad = [
        s for s in range(seeds(150)) if (w := random_schedule(s, transactions=True)).violations or w.trace_violations
    ]
    assert not bad, f"seeds with violations: {bad[:10]}"


def test_a_commit_marker_lost_with_its_leader_is_written_again_and_the_lso_waits_for_it() -> None:
    w = World(brokers=2, transactions=True)
    w.run_for(10)
    w.leader_append(1, "x0.0")
    w.follower_fetch(2)
    w.follower_fetch(2)  # x0.0 committed on both
    w.leader_append(1, "p1")
    w.follower_fetch(2)
    w.follower_fetch(2)
    assert w.brokers[1].replica.last_stable_offset() == 0  # p1 waits behind the open transaction
    w.leader_append(1, "C0")  # the marker reaches the leader only
    assert w.brokers[1].replica.last_stable_offset() == 0  # its marker is not below the HW yet
    w.crash(1)
    w.elect(2)
    w.run_for(50)
    lead = w.brokers[2]
    assert [e.value for e in lead.log.entries] == ["x0.0", "p1"]
    assert lead.replica.last_stable_offset() == 0
    w.leader_append(2, "C0")  # the coordinator resends it to the new leader
    w.restart(1)
    w.run_for(100)
    w.follower_fetch(1)
    w.follower_fetch(1)
    assert lead.replica.last_stable_offset() == 3
    assert txn.read_committed(lead.log.entries, 3) == ["x0.0", "p1"]
    assert not w.violations, w.violations


def test_the_checker_catches_a_partition_that_ignores_open_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the LSO at the high watermark, a reader sees records written after an undecided transaction
    and later finds the transaction's committed records before them."""
    monkeypatch.setattr(txn, "first_unstable_offset", lambda entries, hw: None)
    found = [{v.invariant for v in random_schedule(s, transactions=True).violations} for s in range(20)]
    assert any("read-committed" in f for f in found)
