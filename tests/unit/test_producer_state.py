"""Idempotent-producer sequence checks and their survival across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import build_batch
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.producer_state import INT32_MAX, ProducerStateError, ProducerStateManager


def batch(seq: int, n: int = 1, pid: int = 7, epoch: int = 0) -> bytes:
    return build_batch([(None, b"v%d" % i) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def open_log(tmp: Path, recover: bool = False) -> PartitionLog:
    return PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(), recover=recover)


def test_duplicates_of_the_last_five_batches_answer_their_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    firsts = [log.append_as_leader(batch(i * 2, 2), 0, 0).first_offset for i in range(6)]
    for i in range(1, 6):
        r = log.append_as_leader(batch(i * 2, 2), 0, 0)
        assert r.duplicate and r.first_offset == firsts[i]
    assert log.log_end_offset == 12
    with pytest.raises(ProducerStateError) as e:
        log.append_as_leader(batch(0, 2), 0, 0)  # sixth-last: out of the window
    assert e.value.error_code == 45


def test_gap_and_fenced_epoch_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0), 0, 0)
    with pytest.raises(ProducerStateError) as gap:
        log.append_as_leader(batch(5), 0, 0)
    assert gap.value.error_code == 45
    log.append_as_leader(batch(0, epoch=1), 0, 0)  # a new epoch starts at 0
    with pytest.raises(ProducerStateError) as fenced:
        log.append_as_leader(batch(1, epoch=0), 0, 0)
    assert fenced.value.error_code == 47
    with pytest.raises(ProducerStateError) as not_zero:
        log.append_as_leader(batch(3, epoch=2), 0, 0)
    assert not_zero.value.error_code == 45


def test_unknown_producer_starts_anywhere_and_sequence_wraps() -> None:
    m = ProducerStateManager(None)
    h = read_header(batch(INT32_MAX))
    assert m.check(h) is None
    m.update(h, 0, 0, 0)
    assert m.check(read_header(batch(0))) is None


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restart(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path)
    offsets = [log.append_as_leader(batch(i), 0, 0).first_offset for i in range(8)]
    if clean:
        log.close()  # writes a snapshot holding the five-batch window
        assert list((tmp_path / "t-0").glob("*.snapshot"))
    log = open_log(tmp_path, recover=not clean)
    for i in range(3, 8):
        r = log.append_as_leader(batch(i), 0, 0)
        assert r.duplicate and r.first_offset == offsets[i]
    assert log.append_as_leader(batch(8), 0, 0).first_offset == 8


def test_corrupt_snapshot_is_ignored_and_log_replayed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(4):
        log.append_as_leader(batch(i), 0, 0)
    log.close()
    snap = next((tmp_path / "t-0").glob("*.snapshot"))
    snap.write_bytes(b"\x00\x01garbage")
    log = open_log(tmp_path)
    assert log.append_as_leader(batch(3), 0, 0).duplicate
    assert log.append_as_leader(batch(4), 0, 0).first_offset == 4
