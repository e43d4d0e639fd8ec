"""DeleteRecords on disk: the log start offset moves, is checkpointed at once, and whole segments below go."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochlog.protocol.record_batch import iter_batches
from epochlog.protocol.records import build_batch
from epochlog.storage import checkpoints
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import OffsetOutOfRangeError
from epochlog.storage.log_manager import LOG_STARTS, LogManager


def batch(i: int, size: int = 200) -> bytes:
    return build_batch([(None, bytes([i % 256]) * size)], base_timestamp=1000 + i)


def manager(tmp: Path) -> LogManager:
    lm = LogManager(tmp, LogConfig(segment_bytes=2000))
    lm.open(node_id=1)
    lm.load_all()
    return lm


def filled(tmp: Path, n: int = 40) -> LogManager:
    lm = manager(tmp)
    plog = lm.create("t", 0, None)
    for i in range(n):
        plog.append_as_leader(batch(i), 3, 0)
    plog.high_watermark = plog.log_end_offset
    return lm


def bases(lm: LogManager) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (lm.dir / "t-0").glob("*.log"))


def test_the_start_moves_and_whole_segments_below_it_are_deleted(tmp_path: Path) -> None:
    lm = filled(tmp_path)
    plog = lm.logs[("t", 0)]
    before = bases(lm)
    assert len(before) > 4
    target = before[3] + 2  # inside the fourth segment
    assert plog.advance_log_start(target, "DeleteRecords")
    assert plog.log_start_offset == target
    assert bases(lm) == before[3:], "segments wholly below the new start stay on disk"
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(target - 1, 1 << 20)
    first = next(iter_batches(plog.read(target, 1 << 20).chunks[0]))[1]
    assert first.base_offset == target
    assert plog.epoch_cache.entries()[0].start_offset == target


def test_the_start_survives_a_kill_without_any_periodic_checkpoint(tmp_path: Path) -> None:
    lm = filled(tmp_path)
    plog = lm.logs[("t", 0)]
    target = bases(lm)[2] + 1  # records below it stay in their segment: only the checkpoint says they are gone
    plog.advance_log_start(target, "DeleteRecords")
    assert checkpoints.read_offsets(tmp_path / LOG_STARTS) == {("t", 0): target}
    # No close(), no checkpoint(): what a kill -9 leaves. The next start recovers from the files.
    again = manager(tmp_path)
    assert not again.had_clean_shutdown
    reopened = again.logs[("t", 0)]
    assert reopened.log_start_offset == target
    assert reopened.log_end_offset == 40
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(target - 1, 1 << 20)


def test_the_start_never_moves_back_nor_past_the_log_end(tmp_path: Path) -> None:
    lm = filled(tmp_path, 10)
    plog = lm.logs[("t", 0)]
    assert plog.advance_log_start(5, "DeleteRecords")
    assert not plog.advance_log_start(3, "DeleteRecords")
    assert not plog.advance_log_start(5, "DeleteRecords")
    assert plog.log_start_offset == 5
    plog.advance_log_start(99, "DeleteRecords")
    assert plog.log_start_offset == 10


def test_deleting_everything_rolls_so_no_old_segment_is_kept_and_appends_go_on(tmp_path: Path) -> None:
    lm = filled(tmp_path)
    plog = lm.logs[("t", 0)]
    plog.advance_log_start(plog.log_end_offset, "DeleteRecords")
    assert bases(lm) == [40]
    assert plog.read(40, 1 << 20).chunks == []
    r = plog.append_as_leader(batch(99), 4, 0)
    assert r.first_offset == 40
    lm.close()
    again = manager(tmp_path)
    reopened = again.logs[("t", 0)]
    assert (reopened.log_start_offset, reopened.log_end_offset) == (40, 41)
