"""A leader whose replica set changes within its term (a reassignment adds a replica without a new leader
epoch) tracks the joining replica, proposes it for the ISR once caught up, and forgets removed ones."""

from __future__ import annotations

from pathlib import Path

from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchRequest, PartitionState
from tests.unit.replication.test_core_on_real_logs import batch, replica


def test_joining_replica_is_tracked_and_proposed_for_the_isr(tmp_path: Path) -> None:
    leader: PartitionReplica = replica(tmp_path, 1)
    leader.apply_state(PartitionState(1, 0, frozenset({1}), (1,), 0), 0)
    leader.append(batch(b"a"), 0)
    end = leader.log.log_end_offset
    # the controller starts moving {1} -> {1, 2}: same leader epoch, newer partition epoch
    leader.apply_state(PartitionState(1, 0, frozenset({1}), (1, 2), 1, adding=(2,)), 10)
    assert 2 in leader.followers
    _d, proposal = leader.handle_fetch(FetchRequest(2, 0, -1, 0), 20)
    assert proposal is None  # not caught up yet
    _d, proposal = leader.handle_fetch(FetchRequest(2, end, 0, 0), 30)
    assert proposal is not None and proposal.new_isr == frozenset({1, 2})


def test_removed_replica_is_forgotten(tmp_path: Path) -> None:
    leader: PartitionReplica = replica(tmp_path, 1)
    leader.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2, 3), 0), 0)
    leader.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 1), 10)
    assert set(leader.followers) == {2}
