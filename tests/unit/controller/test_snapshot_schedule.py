"""When the controller writes a metadata snapshot: controller/snapshot_schedule.py, asked through
QuorumController.snapshot_due after each commit."""

from __future__ import annotations

import pytest

from epochlog.controller.quorum_controller import QuorumController
from epochlog.controller.records import BrokerRegistration, MetadataRecord
from epochlog.controller.snapshot_schedule import RECORD_BYTES_ESTIMATE, SnapshotSchedule
from tests.unit.controller.active_helpers import active, cluster_log

pytestmark = pytest.mark.unit


def _reader(log: list[MetadataRecord]):  # type: ignore[no-untyped-def]
    return lambda start, end: log[start:end]


def test_a_standby_snapshots_once_enough_committed_records_went_by() -> None:
    log = cluster_log()
    extra = [BrokerRegistration(9, e) for e in range(1, 11)]
    full = log + extra
    qc = QuorumController(snapshot_bytes=RECORD_BYTES_ESTIMATE * (len(log) + 5))
    qc.on_commit(len(log), _reader(full))
    assert qc.snapshot_due(0) is None  # len(log) records: five short
    qc.on_commit(len(log) + 4, _reader(full))
    assert qc.snapshot_due(0) is None
    qc.on_commit(len(log) + 5, _reader(full))
    assert qc.snapshot_due(0) == len(log) + 5  # at the applied end
    qc.snapshot_taken()
    assert qc.snapshot_due(0) is None  # the count starts over
    qc.on_commit(len(full), _reader(full))
    assert qc.snapshot_due(0) is None


def test_the_active_controller_counts_what_it_proposes_and_waits_for_it_to_commit() -> None:
    qc = active(snapshot_bytes=RECORD_BYTES_ESTIMATE * 2)
    start = qc.applied
    for b in (4, 5):
        qc.core.register_broker(b, 10_000)
    new = qc.take_proposals()
    assert len(new) == 2
    qc.proposed(start + 1)  # at offsets start, start + 1
    assert qc.snapshot_due(0) is None  # enough bytes, but its own records are not committed yet
    qc.on_commit(start + 2, _reader([]))  # its own records are not re-applied, yet now committed
    assert qc.snapshot_due(0) == start + 2


def test_no_snapshot_at_or_below_the_log_start() -> None:
    s = SnapshotSchedule(max_bytes=1)
    s.went_by(1)
    assert s.due(applied=50, all_committed=True, log_start_offset=50) is None  # it would free nothing
    assert s.due(applied=51, all_committed=True, log_start_offset=50) == 51
    assert s.due(applied=51, all_committed=False, log_start_offset=50) is None
