"""Transactions on one partition's log: the last stable offset, the aborted-transaction index, and both
surviving restarts, recovery and truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.protocol.control_records import ControlType, marker_batch, read_marker
from epochlog.protocol.records import build_batch
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.producer_state import ProducerStateError
from epochlog.storage.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

pytestmark = pytest.mark.unit

A, B = 7, 8  # producer ids


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return build_batch(
        [(None, b"%d-%d" % (pid, seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def plain(n: int = 1) -> bytes:
    return build_batch([(None, b"p")] * n)


def marker(pid: int, kind: ControlType, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return marker_batch(pid, epoch, kind, coordinator_epoch, 1000)


def open_log(tmp: Path, recover: bool = False, **cfg: int) -> PartitionLog:
    return PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(**cfg), recover=recover)


def append(log: PartitionLog, data: bytes) -> int:
    r = log.append_as_leader(data, 0, 1000)
    log.high_watermark = log.log_end_offset
    return r.first_offset


def test_marker_round_trip() -> None:
    m = read_marker(marker(A, ControlType.COMMIT, coordinator_epoch=5))
    assert m is not None and m.type is ControlType.COMMIT and m.coordinator_epoch == 5
    assert read_marker(plain()) is None


def test_an_open_transaction_holds_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, plain())  # 0
    first = append(log, txn_batch(A, 0))  # 1-2
    append(log, plain())  # 3
    assert log.high_watermark == 4 and log.last_stable_offset == first == 1
    end = append(log, marker(A, ControlType.COMMIT))  # 4
    assert log.last_stable_offset == 5 == end + 1
    assert log.aborted_transactions(0, 5) == []


def test_a_decided_transaction_is_stable_only_once_its_marker_is_below_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(A, 0))  # 0-1
    log.append_as_leader(marker(A, ControlType.COMMIT), 0, 1000)  # 2, not yet replicated
    log.high_watermark = 2
    assert log.last_stable_offset == 0
    log.high_watermark = 3
    assert log.last_stable_offset == 3


def test_an_abort_is_indexed_with_the_stable_offset_after_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(A, 0))  # 0-1
    append(log, txn_batch(B, 0))  # 2-3
    append(log, txn_batch(A, 2))  # 4-5
    assert log.last_stable_offset == 0
    append(log, marker(A, ControlType.ABORT))  # 6
    # B is still open from 2: that is the stable offset right after A's abort.
    assert log.aborted_transactions(0, 7) == [AbortedTxn(A, 0, 6, 2)]
    assert log.last_stable_offset == 2
    append(log, marker(B, ControlType.COMMIT))  # 7
    assert log.last_stable_offset == 8
    assert log.aborted_transactions(7, 8) == []  # the abort ended before offset 7
    assert log.aborted_transactions(0, 1) == [AbortedTxn(A, 0, 6, 2)]
    assert (log.active.txn_index.path.stat().st_size) == ENTRY_SIZE


def test_an_abort_whose_marker_lands_in_a_later_segment_is_found(tmp_path: Path) -> None:
    """A's transaction starts below the LSO that B's open transaction holds, and A's ABORT marker lands in a
    segment rolled after B began: a read_committed read up to that LSO must still learn of A (the index
    entry lives with the marker, in a segment that starts at or past the bound), or it hands out A's
    aborted records."""
    log = open_log(tmp_path, segment_bytes=200)
    append(log, txn_batch(A, 0))  # 0-1
    append(log, txn_batch(B, 0))  # 2-3: B opens after A
    seq = 2
    while len(log.segments) == 1:  # B grows until the log rolls
        append(log, txn_batch(B, seq))
        seq += 2
    rolled_at = log.segments[-1].base_offset
    append(log, marker(A, ControlType.ABORT))
    assert log.segments[-1].base_offset == rolled_at > 2 and log.last_stable_offset == 2
    assert log.aborted_transactions(0, log.last_stable_offset) == [AbortedTxn(A, 0, log.log_end_offset - 1, 2)]


def test_transactions_survive_a_clean_restart_and_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(A, 0))  # 0-1 aborted below
    append(log, marker(A, ControlType.ABORT))  # 2
    append(log, txn_batch(B, 0))  # 3-4 still open
    log.close()
    log = open_log(tmp_path)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 3
    assert log.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 2, 3)]
    log.flush()
    # A crash: no producer snapshot and no index, only the segments.
    for p in (tmp_path / "t-0").iterdir():
        if p.suffix in (".snapshot", ".txnindex"):
            p.unlink()
    log = open_log(tmp_path, recover=True)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 3
    assert log.aborted_transactions(0, 5) == [AbortedTxn(A, 0, 2, 3)]
    append(log, marker(B, ControlType.COMMIT))
    assert log.last_stable_offset == log.log_end_offset


def test_truncating_a_marker_reopens_its_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(A, 0))  # 0-1
    append(log, marker(A, ControlType.ABORT))  # 2
    assert log.aborted_transactions(0, 3)
    log.truncate_to(2)
    log.high_watermark = 2
    assert log.aborted_transactions(0, 3) == [] and log.last_stable_offset == 0
    assert not log.active.txn_index.path.exists()


def test_stale_markers_are_refused_and_change_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(A, 0, epoch=3))
    append(log, marker(A, ControlType.COMMIT, epoch=3, coordinator_epoch=4))
    end = log.log_end_offset
    with pytest.raises(ProducerStateError) as old_producer:
        append(log, marker(A, ControlType.ABORT, epoch=2, coordinator_epoch=4))
    assert old_producer.value.error_code == 47  # INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as old_coordinator:
        append(log, marker(A, ControlType.ABORT, epoch=3, coordinator_epoch=3))
    assert old_coordinator.value.error_code == 52  # TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == end


def test_a_damaged_index_is_rebuilt_from_the_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, txn_batch(A, 0))
    append(log, marker(A, ControlType.ABORT))
    append(log, txn_batch(B, 0))
    append(log, marker(B, ControlType.ABORT))
    path = log.active.txn_index.path
    log.close()
    data = bytearray(path.read_bytes())
    data[ENTRY_SIZE + 17] ^= 0xFF  # the second entry's last offset goes below the first's
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        _ = TransactionIndex(path).entries
    log = open_log(tmp_path)
    assert [t.producer_id for t in log.aborted_transactions(0, log.log_end_offset)] == [A, B]


def test_retention_deletes_a_segment_with_its_index(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    append(log, txn_batch(A, 0))
    append(log, marker(A, ControlType.ABORT))
    first_index = log.segments[0].txn_index.path
    for _ in range(4):
        append(log, plain(3))
    assert len(log.segments) > 1 and first_index.exists()
    log.config.retention_bytes = 1
    log.apply_retention(10**13)
    assert not first_index.exists()


def test_recovery_reads_each_marker_where_the_replay_found_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash with no producer snapshot replays the whole log: each marker is read at the position its
    header was found at, not looked up again through the offset index (that cost tens of header reads per
    marker: seconds per transactional partition before its broker could serve)."""
    from epochlog.storage.segment import Segment

    log = open_log(tmp_path)
    pids = range(100, 300)
    for i, pid in enumerate(pids):
        append(log, txn_batch(pid, 0))
        append(log, marker(pid, ControlType.ABORT if i % 3 == 0 else ControlType.COMMIT))
    log.flush()
    log.close()
    for p in (tmp_path / "t-0").iterdir():
        if p.suffix in (".snapshot", ".txnindex"):
            p.unlink()
    lookups = 0
    real = Segment.find_position

    def counting(self: Segment, offset: int) -> object:
        nonlocal lookups
        lookups += 1
        return real(self, offset)

    monkeypatch.setattr(Segment, "find_position", counting)
    log = open_log(tmp_path, recover=True)
    assert lookups < 10, f"{lookups} index lookups to replay {len(pids)} markers"
    log.high_watermark = log.log_end_offset
    aborted = log.aborted_transactions(0, log.log_end_offset)
    assert [a.producer_id for a in aborted] == [pid for i, pid in enumerate(pids) if i % 3 == 0]
