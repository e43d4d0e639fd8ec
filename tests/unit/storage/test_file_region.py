"""PartitionLog.read_region: the same whole batches as read(), as a region of the segment file."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from epochlog.protocol.records import build_batch
from epochlog.storage.config import LogConfig
from epochlog.storage.file_region import FileRegion, RegionTruncated
from epochlog.storage.partition_log import PartitionLog


def open_log(tmp: Path, **cfg: int) -> PartitionLog:
    return PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(**cfg), recover=False)


def fill(tmp: Path, **cfg: int) -> PartitionLog:
    """Batches of 1-5 records of varied sizes over several segments; reopened, so no segment has a tail."""
    rng = random.Random(7)
    log = open_log(tmp, **cfg)
    for i in range(300):
        n = rng.randint(1, 5)
        log.append_as_leader(build_batch([(None, bytes([i % 256]) * rng.randint(10, 900)) for _ in range(n)]), 0, 0)
    log.close()
    return open_log(tmp, **cfg)


def as_bytes(chunks: list[object]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)  # type: ignore[arg-type]


@pytest.mark.parametrize("index_interval", [1, 300, 4096, 100_000])
def test_region_holds_exactly_what_read_returns(tmp_path: Path, index_interval: int) -> None:
    log = fill(tmp_path, segment_bytes=60_000, index_interval_bytes=index_interval)
    assert len(log.segments) > 3
    rng = random.Random(index_interval)
    end = log.log_end_offset
    for _ in range(400):
        offset = rng.randrange(0, end)
        max_bytes = rng.choice([1, 100, 1000, 5000, 30_000, 1 << 20])
        max_offset = rng.choice([None, rng.randrange(offset, end + 1)])
        first = rng.random() < 0.7
        want = log.read(offset, max_bytes, max_offset, first)
        got = log.read_region(offset, max_bytes, max_offset, first)
        assert all(isinstance(c, FileRegion) for c in got.chunks)
        assert len(got.chunks) <= 1
        assert got.first_offset == want.first_offset
        assert as_bytes(got.chunks) == as_bytes(want.chunks), (offset, max_bytes, max_offset, first)
    log.close()


def test_the_in_memory_tail_is_answered_from_memory(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(10):
        log.append_as_leader(build_batch([(None, bytes([i]) * 300)]), 0, 0)
    got = log.read_region(4, 1 << 20)
    assert got.chunks and not any(isinstance(c, FileRegion) for c in got.chunks)
    assert as_bytes(got.chunks) == as_bytes(log.read(4, 1 << 20).chunks)
    log.close()


def test_a_region_outlives_its_deleted_segment_and_refuses_a_truncated_one(tmp_path: Path) -> None:
    log = fill(tmp_path, segment_bytes=60_000)
    want = as_bytes(log.read(0, 20_000).chunks)
    region = log.read_region(0, 20_000).chunks[0]
    assert isinstance(region, FileRegion)
    path = region.path
    log.segments[0].delete()  # what retention does: closes the segment's descriptor and unlinks the file
    assert not path.exists()
    assert region.read() == want
    assert region.fd == -1  # read() closes it

    short = log.read_region(log.segments[1].base_offset, 20_000).chunks[0]
    assert isinstance(short, FileRegion)
    os.truncate(short.path, short.position + short.length - 1)
    with pytest.raises(RegionTruncated):
        short.read()
    assert short.fd == -1
    log.close()


def test_a_dropped_region_closes_its_descriptor(tmp_path: Path) -> None:
    log = fill(tmp_path, segment_bytes=60_000)
    region = log.read_region(0, 20_000).chunks[0]
    assert isinstance(region, FileRegion)
    fd = region.fd
    os.fstat(fd)
    del region
    with pytest.raises(OSError):
        os.fstat(fd)
    log.close()
