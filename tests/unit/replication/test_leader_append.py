"""The core's one leader-append operation, its HW ownership and its AlterPartition answer rule."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from epochlog.codes import Err
from epochlog.protocol.records import build_batch
from epochlog.replication.partition import ALTER_RETRY_MS, PartitionReplica
from epochlog.replication.types import FetchRequest, PartitionState
from epochlog.server.partition import Partition
from epochlog.sim.disk_log import SimLog
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog

pytestmark = pytest.mark.unit


def leader(isr: frozenset[int] = frozenset({1, 2}), min_isr: int = 1, epoch: int = 0) -> PartitionReplica:
    r = PartitionReplica(1, "t", 0, SimLog(), min_insync_replicas=min_isr, replica_lag_time_max_ms=100)
    r.apply_state(PartitionState(1, epoch, isr, (1, 2), 0), 0)
    return r


def test_append_answers_offsets_and_what_acks_all_waits_for() -> None:
    r = leader()
    a = r.append(["a", "b"], 0, acks=-1)
    assert (a.error, a.first_offset, a.last_offset, a.wait_offset, a.record_count) == (Err.NONE, 0, 1, 1, 2)
    one = r.append(["c"], 0, acks=1)
    assert one.error == Err.NONE and one.first_offset == 2 and one.wait_offset == -1  # acks=1 answers at once


def test_a_refused_append_writes_nothing() -> None:
    r = leader(isr=frozenset({1}), min_isr=2)
    refused = r.append(["x"], 0, acks=-1)
    assert refused.error == Err.NOT_ENOUGH_REPLICAS and r.log.log_end_offset == 0
    follower = PartitionReplica(2, "t", 0, SimLog())
    follower.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    assert follower.append(["x"], 0).error == Err.NOT_LEADER_OR_FOLLOWER
    assert follower.log.log_end_offset == 0


def test_a_sole_replica_commits_on_append() -> None:
    r = leader(isr=frozenset({1}))
    r.append(["a"], 0)
    assert r.high_watermark == 1


def test_the_core_owns_the_hw_the_log_only_reads_it(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), recover=False)
    core = PartitionReplica(1, "t", 0, PartitionReplicaLog(plog), high_watermark=plog.high_watermark)
    core.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    part = Partition("t", 0, uuid.uuid4(), plog, core)
    assert part.append(build_batch([(None, b"v")]), 0).error == Err.NONE
    assert plog.high_watermark == 0 and plog.last_stable_offset == 0
    core.handle_fetch(FetchRequest(2, 1, 0, 0), 1)
    assert plog.high_watermark == core.high_watermark == 1  # no copy to keep in step
    assert plog.last_stable_offset == core.last_stable_offset() == 1
    with pytest.raises(RuntimeError):
        plog.high_watermark = 0  # nobody else may move it


def test_the_checkpointed_hw_seeds_the_core_capped_at_the_log_end() -> None:
    log = SimLog()
    log.append_as_leader(["a", "b"], 0, 0)
    assert PartitionReplica(1, "t", 0, log, high_watermark=5).high_watermark == 2
    assert PartitionReplica(1, "t", 0, log, high_watermark=1).high_watermark == 1


def test_alter_answer_within_the_epoch_applies_at_once() -> None:
    r = leader()
    r.append(["a"], 0)
    proposal = r.next_isr_change(500)  # the follower lagged past replica.lag.time.max.ms
    assert proposal is not None and proposal.new_isr == frozenset({1})
    r.on_isr_change_answer(proposal, Err.NONE, PartitionState(1, 0, frozenset({1}), (1, 2), 1), 500)
    assert r.isr == frozenset({1}) and r.pending_isr is None and r.high_watermark == 1


def test_alter_answer_at_a_new_leader_epoch_waits_for_the_metadata() -> None:
    r = leader()
    proposal = r.next_isr_change(500)
    assert proposal is not None
    # The change completed a reassignment: the answer's epoch is newer and it lacks the new replica set.
    r.on_isr_change_answer(proposal, Err.NONE, PartitionState(1, 1, frozenset({1}), (1, 2), 1), 500)
    assert r.leader_epoch == 0 and r.isr == frozenset({1, 2}) and r.pending_isr is None


def test_a_refused_or_stale_answer_changes_nothing_but_the_change_in_flight() -> None:
    r = leader()
    proposal = r.next_isr_change(500)
    assert proposal is not None
    other = r.next_isr_change(500)
    assert other is None  # one change in flight at a time
    r.on_isr_change_answer(proposal, 7, None, 510)  # refused / no answer
    assert r.pending_isr is None and r.isr == frozenset({1, 2})
    again = r.next_isr_change(600)
    assert again is not None and again is not proposal
    r.on_isr_change_answer(proposal, Err.NONE, PartitionState(1, 0, frozenset({1}), (1, 2), 1), 610)  # stale
    assert r.pending_isr is again and r.isr == frozenset({1, 2})


def test_an_unanswered_change_is_sent_again_after_the_retry_interval() -> None:
    r = leader()
    proposal = r.next_isr_change(500)
    assert proposal is not None
    assert r.next_isr_change(500 + ALTER_RETRY_MS - 1) is None
    assert r.next_isr_change(500 + ALTER_RETRY_MS) is proposal
