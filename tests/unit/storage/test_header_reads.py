"""Walking a segment's batch headers (crash recovery's producer-state replay and epoch scan, and the replay
after every follower truncation) reads the file a chunk at a time, not once per batch: through a slow file
system one read per batch kept a restarted broker's partitions offline for seconds each."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from epochlog.protocol.control_records import ControlType, marker_batch
from epochlog.protocol.records import build_batch
from epochlog.storage import fileops, segment
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog

pytestmark = pytest.mark.unit


class CountingOps(fileops.FileOps):
    def __init__(self) -> None:
        self.preads = 0

    def pread(self, fd: int, size: int, offset: int, path: str | Path = "") -> bytes:
        self.preads += 1
        return super().pread(fd, size, offset, path)


def open_log(tmp: Path, recover: bool = False) -> PartitionLog:
    return PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(), recover=recover)


def write_transactions(log: PartitionLog, n: int) -> None:
    for i in range(n):
        pid = 1000 + i
        log.append_as_leader(
            build_batch(
                [(None, b"v%d" % i)], producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True
            ),
            0,
            1000,
        )
        kind = ControlType.ABORT if i % 4 == 0 else ControlType.COMMIT
        log.append_as_leader(marker_batch(pid, 0, kind, 0, 1000), 0, 1000)
        log.high_watermark = log.log_end_offset


def crash(tmp: Path, log: PartitionLog) -> None:
    log.flush()
    log.close()
    for p in (tmp / "t-0").iterdir():
        if p.suffix in (".snapshot", ".txnindex"):
            p.unlink()


def test_recovery_replays_the_producer_state_in_a_few_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_transactions(log, 1500)
    clean = list(log.aborted_transactions(0, log.log_end_offset))
    crash(tmp_path, log)
    counting = CountingOps()
    prev = fileops.install(counting)
    try:
        log = open_log(tmp_path, recover=True)
    finally:
        fileops.install(prev)
    # 3,000 batches, half of them markers whose records the replay decodes: one read per batch (or two per
    # marker) before; a handful of chunk reads now.
    assert counting.preads < 20, f"{counting.preads} reads to replay 3,000 batches"
    log.high_watermark = log.log_end_offset
    assert list(log.aborted_transactions(0, log.log_end_offset)) == clean
    assert len(clean) == 375


def test_a_follower_truncation_replays_in_a_few_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_transactions(log, 1000)
    counting = CountingOps()
    prev = fileops.install(counting)
    try:
        log.truncate_to(log.log_end_offset - 3)
    finally:
        fileops.install(prev)
    assert counting.preads < 20, f"{counting.preads} reads to replay after a truncation"
    assert log.producer_state.ongoing  # the cut marker reopened its transaction


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunked_walk_matches_a_walk_batch_by_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Batches straddling chunk ends, and batches bigger than an eighth of a chunk (stepped over with one
    small read each), give the same positions and headers as reading each header on its own."""
    monkeypatch.setattr(segment, "HEADER_CHUNK_BYTES", 4096)
    rng = random.Random(seed)
    log = open_log(tmp_path)
    for _ in range(300):
        size = rng.choice([1, 10, 200, 700, 3000, 9000])
        log.append_as_leader(build_batch([(None, bytes(rng.getrandbits(8) for _ in range(size)))]), 0, 1000)
    seg = log.segments[-1]
    expected = []
    pos = 0
    while pos < seg.size:
        h = seg.header_at(pos)
        expected.append((pos, h))
        pos += h.size
    walked = list(seg.headers_from(0))
    assert [(p, h) for p, h, _ in walked] == expected
    for p, h, batch in walked:
        if batch is not None:  # a whole batch handed out is that batch's bytes
            assert bytes(batch) == bytes(seg.read(p, h.size))
    assert any(batch is None for _, _, batch in walked) and any(batch is not None for _, _, batch in walked)
    middle = expected[len(expected) // 2]
    assert [(p, h) for p, h, _ in seg.headers_from(middle[0])] == expected[len(expected) // 2 :]
