"""Markers and the last stable offset in the simulator: the LSO rule on simulated logs, random fault
schedules with a transactional producer, a marker lost with its leader, KIP-890 part 1's verification at
the leader, and proof the checkers can fail."""

from __future__ import annotations

import pytest

import epochlog.sim.transactions as txn
import epochlog.sim.world as world_module
from epochlog.sim.disk_log import Entry
from epochlog.sim.scenarios import random_schedule
from epochlog.sim.world import PRODUCER, World
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


def _write(w: World, value: str) -> None:
    """The producer's write reaching leader 1, and whatever round trips it starts, run out."""
    w.send(PRODUCER, 1, ("produce", value), reliable=True)
    w.run_for(50)


def _values(w: World, bid: int) -> list[str]:
    return [e.value for e in w.brokers[bid].log.entries]


def _open_transaction(w: World, t: int) -> None:
    producer = w.txn_producer
    assert producer is not None
    producer.current, producer.marker = t, None


def test_a_record_of_a_decided_transaction_arriving_late_is_refused() -> None:
    """KIP-890 part 1: the record would open a transaction after its own marker, one nothing closes."""
    w = World(brokers=2, transactions=True)
    w.run_for(10)
    _open_transaction(w, 0)
    _write(w, "x0.0")  # opens the transaction: the coordinator vouches
    _write(w, "x0.1")  # joins it: no question asked
    assert _values(w, 1) == ["x0.0", "x0.1"]
    w.txn_producer.marker = "C0"  # type: ignore[union-attr]
    _write(w, "C0")
    _write(w, "x0.1")  # a network duplicate, late
    assert _values(w, 1) == ["x0.0", "x0.1", "C0"]
    assert any("refuses x0.1: TRANSACTION_ABORTABLE" in h for h in w.history)
    assert not w.violations, w.violations


def test_a_marker_landing_while_the_coordinator_is_asked_voids_its_answer() -> None:
    w = World(brokers=2, transactions=True)
    w.run_for(10)
    _open_transaction(w, 0)
    w._on_message(1, PRODUCER, ("produce", "x0.0"))  # held: the question is on its way
    w.leader_append(1, "A0")  # the transaction ends before the answer (ongoing when asked) comes back
    w.run_for(50)
    assert _values(w, 1) == ["A0"]
    assert any("refuses x0.0: TRANSACTION_ABORTABLE" in h for h in w.history)
    assert not w.violations, w.violations


def test_the_checker_catches_a_leader_that_skips_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_module, "needs_verification", lambda *_args: False)
    w = World(brokers=2, transactions=True)
    w.run_for(10)
    _open_transaction(w, 0)
    _write(w, "x0.0")
    w.txn_producer.marker = "C0"  # type: ignore[union-attr]
    _write(w, "C0")
    _write(w, "x0.0")
    assert {v.invariant for v in w.violations} == {"hanging-transaction"}
