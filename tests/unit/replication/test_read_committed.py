"""The core's answer to read_committed consumers on real logs: reads stop at the last stable offset, and a
follower that replicated the markers answers the same once it leads."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.protocol.control_records import ControlType, marker_batch
from epochlog.protocol.records import build_batch
from epochlog.replication.types import FetchRequest, Role
from tests.unit.replication.test_core_on_real_logs import fetch, replica, state

pytestmark = pytest.mark.unit

PID = 42


def txn(seq: int) -> bytes:
    return build_batch([(None, b"t%d" % seq)], producer_id=PID, producer_epoch=0, base_sequence=seq,
                       is_transactional=True)


def consumer(offset: int, committed: bool) -> FetchRequest:
    return FetchRequest(-1, offset, -1, -1, read_committed=committed)


def test_read_committed_stops_at_the_first_open_transaction(tmp_path: Path) -> None:
    a, b = replica(tmp_path, 1), replica(tmp_path, 2)
    a.apply_state(state(1, 0), 0)
    b.apply_state(state(1, 0), 0)
    a.append(build_batch([(None, b"plain")]), 0)  # 0
    a.append(txn(0), 0)  # 1, open
    a.append(build_batch([(None, b"after")]), 0)  # 2
    fetch(b, a)
    fetch(b, a)  # the second fetch tells the leader the follower has it all
    assert a.high_watermark == 3
    committed, _ = a.handle_fetch(consumer(0, True), 0)
    uncommitted, _ = a.handle_fetch(consumer(0, False), 0)
    assert committed.read_to == 1 and committed.last_stable_offset == 1
    assert uncommitted.read_to == 3 and uncommitted.last_stable_offset == 1
    # The ABORT marker decides it, but only once the follower has it is it stable.
    a.append(marker_batch(PID, 0, ControlType.ABORT, 0, 1000), 0)  # 3
    assert a.handle_fetch(consumer(0, True), 0)[0].read_to == 1
    fetch(b, a)
    fetch(b, a)
    assert a.high_watermark == 4
    assert a.handle_fetch(consumer(0, True), 0)[0].read_to == 4
    assert [t.first_offset for t in a.log.log.aborted_transactions(0, 4)] == [1]  # type: ignore[attr-defined]
    # The follower replicated the marker: leading now, it answers the same.
    b.apply_state(state(2, 1), 0)
    assert b.role is Role.LEADER
    b.high_watermark = 4
    assert b.handle_fetch(consumer(0, True), 0)[0].read_to == 4
    assert [t.first_offset for t in b.log.log.aborted_transactions(0, 4)] == [1]  # type: ignore[attr-defined]
