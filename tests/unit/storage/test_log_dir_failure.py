"""A failing disk takes its log directory offline: nothing partial is acknowledged or exposed, a failed
fsync is never retried as a success, and every acknowledged record survives a restart.

Faults are injected through storage/fileops.py, the seam every storage file operation goes through."""

from __future__ import annotations

import errno
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.protocol.record_batch import iter_batches
from epochlog.protocol.records import build_batch
from epochlog.storage import fileops
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import KafkaStorageError, LogDirError
from epochlog.storage.fileops import FaultyFileOps, FileOps
from epochlog.storage.log_dirs import LogDirs
from epochlog.storage.partition_log import PartitionLog

CFG = LogConfig()


class Recording(FaultyFileOps):
    """Faulty by rule, and optionally tearing one write: half the bytes land, then ENOSPC."""

    def __init__(self, rules: str = "") -> None:
        super().__init__(rules)
        self.calls: list[tuple[str, str]] = []
        self.tear_next_write = False

    def check(self, op: str, path: str | Path) -> None:
        self.calls.append((op, str(path)))
        super().check(op, path)

    def write(self, fd: int, data: bytes | bytearray | memoryview, path: str | Path = "") -> int:
        if self.tear_next_write and str(path).endswith(".log"):
            self.tear_next_write = False
            self.rules_after_tear = f"write:ENOSPC:{path}"
            self.static = self.rules_after_tear
            return os.write(fd, memoryview(data)[: len(data) // 2])
        return super().write(fd, data, path)

    def count(self, op: str, suffix: str = "") -> int:
        return sum(1 for o, p in self.calls if o == op and p.endswith(suffix))


@pytest.fixture
def faults() -> Iterator[Recording]:
    impl = Recording()
    prev = fileops.install(impl)
    try:
        yield impl
    finally:
        fileops.install(prev)


def batch(i: int, size: int = 100) -> bytes:
    return build_batch([(None, i.to_bytes(4, "big") * (size // 4))], base_timestamp=1000 + i)


def payloads(log: PartitionLog | None) -> list[int]:
    """The value of every record from the log start to the log end (one read per segment)."""
    assert log is not None
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = b"".join(log.read(offset, 1 << 30).chunks)
        for pos, h in iter_batches(data, validate_crc=True):
            assert h.record_count == 1 and h.base_offset == offset
            out.append(int.from_bytes(data[pos + 61 + 8 : pos + 61 + 12], "big"))  # the value's first bytes
            offset = h.next_offset
    return out


def open_dirs(tmp: Path, n: int = 1, **cfg: int) -> LogDirs:
    dirs = LogDirs([tmp / f"d{i}" for i in range(n)], LogConfig(**cfg))
    dirs.open(node_id=1, cluster_id="c")
    dirs.load_all()
    return dirs


def produce(dirs: LogDirs, plog: PartitionLog, values: range, acked: list[int], epoch: int = 0) -> int:
    """Append each value as the leader would; record the acknowledged ones. Returns how many failed."""
    failed = 0
    for v in values:
        try:
            plog.append_as_leader(batch(v), epoch, 0)
        except KafkaStorageError as e:
            assert e.error_code == 56
            failed += 1
            continue
        acked.append(v)
    return failed


def restart(tmp: Path, n: int = 1, **cfg: int) -> LogDirs:
    """A new process: the faults are gone (the disk was repaired), nothing was closed cleanly."""
    fileops.install(Recording())
    return open_dirs(tmp, n, **cfg)


def test_torn_write_on_enospc_is_never_acknowledged_nor_exposed(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(5), acked)
    end, size = plog.log_end_offset, plog.size_bytes
    faults.tear_next_write = True
    assert produce(dirs, plog, range(5, 6), acked) == 1
    # The torn batch moved nothing: not the log end, not what a reader may see.
    assert (plog.log_end_offset, plog.size_bytes) == (end, size)
    # The disk has room again, but the directory stays offline: appending after the torn bytes would be
    # acknowledged, then cut by recovery.
    faults.static = ""
    produce(dirs, plog, range(6, 10), acked)
    offline = dirs.failures.is_offline(tmp_path / "d0")
    after = restart(tmp_path)
    log2 = after.get("t", 0)
    assert payloads(log2) == acked  # every acknowledged record, exactly once, and nothing partial
    assert acked == [0, 1, 2, 3, 4]
    assert offline and dirs.failures.offline_count == 1
    with pytest.raises(KafkaStorageError):
        plog.read(0, 1 << 20)
    produce(after, log2, range(10, 12), acked)
    assert payloads(log2) == acked


def test_eio_on_write_takes_the_dir_offline(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(3), acked)
    faults.static = "write:EIO:*/t-0/*.log"
    assert produce(dirs, plog, range(3, 6), acked) == 3
    assert plog.log_end_offset == 3
    faults.static = ""
    assert produce(dirs, plog, range(6, 8), acked) == 2  # offline until restart
    assert payloads(restart(tmp_path).get("t", 0)) == acked == [0, 1, 2]


def test_failed_fsync_is_never_retried_as_success(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path, flush_interval_ms=1)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(4), acked)
    faults.static = "fsync:EIO:*/t-0/*.log"
    now = time.time_ns() // 1_000_000
    dirs.tick(now + 10_000)  # the time-based flush: its fdatasync fails
    assert faults.count("fsync", ".log") == 1
    assert dirs.failures.offline_count == 1
    faults.static = ""  # a second fdatasync would now "succeed" over pages the kernel dropped
    for later in (20_000, 30_000):
        dirs.tick(now + later)
    with pytest.raises(KafkaStorageError):
        plog.flush()
    assert faults.count("fsync", ".log") == 1  # never tried again
    assert produce(dirs, plog, range(4, 6), acked) == 2
    assert payloads(restart(tmp_path).get("t", 0)) == acked


def test_eio_on_roll_refuses_the_append(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path, segment_bytes=1000)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(6), acked)
    segments = len(plog.segments)
    faults.static = "open:EIO:*/t-0/*.log"  # the next roll cannot create its segment
    failed = produce(dirs, plog, range(6, 40), acked)
    assert failed > 0 and len(plog.segments) == segments
    assert plog.log_end_offset == len(acked)
    after = restart(tmp_path, segment_bytes=1000)
    assert payloads(after.get("t", 0)) == acked


def test_eio_on_truncate_takes_the_dir_offline(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(6), acked)
    faults.static = "truncate:EIO:*/t-0/*.log"
    with pytest.raises(KafkaStorageError):
        plog.truncate_to(3)
    assert dirs.failures.offline_count == 1
    assert produce(dirs, plog, range(6, 8), acked) == 2


def test_truncation_is_fsynced_before_later_appends(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path)
    plog = dirs.create("t", 0, None)
    produce(dirs, plog, range(6), [])
    faults.calls.clear()
    plog.truncate_to(3)
    plog.append_as_follower(follower_batch_at(3))
    ops = [op for op, p in faults.calls if p.endswith(".log")]
    assert ops.index("truncate") < ops.index("fsync") < ops.index("write"), ops


def follower_batch_at(offset: int) -> bytes:
    from epochlog.protocol.record_batch import set_base_offset

    buf = bytearray(batch(offset))
    set_base_offset(buf, 0, offset)
    return bytes(buf)


def test_new_segments_and_checkpoints_fsync_their_directory(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path, segment_bytes=1000)
    plog = dirs.create("t", 0, None)
    faults.calls.clear()
    produce(dirs, plog, range(12), [])
    assert len(plog.segments) > 1
    part_dir = str(plog.dir)
    seq = faults.calls
    for seg in plog.segments[1:]:
        created = seq.index(("open", str(seg.path)))
        synced = seq.index(("dirfsync", part_dir), created)
        first_write = seq.index(("write", str(seg.path)), created)
        assert synced < first_write
    faults.calls.clear()
    dirs.checkpoint()
    renames = [i for i, (op, _p) in enumerate(seq) if op == "rename"]
    assert renames and all(seq[i + 1] == ("dirfsync", str(tmp_path / "d0")) for i in renames)


def test_epoch_cache_entry_never_ahead_of_the_data(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path)
    plog = dirs.create("t", 0, None)
    produce(dirs, plog, range(3), [], epoch=1)
    faults.static = "write:EIO:*/t-0/*.log"
    produce(dirs, plog, range(3, 4), [], epoch=2)  # a new epoch whose first append fails
    assert plog.epoch_cache.latest_epoch() == 1
    log2 = restart(tmp_path).get("t", 0)
    assert log2 is not None and log2.epoch_cache.latest_epoch() == 1


def test_checkpoint_failure_takes_only_that_dir_offline(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path, n=2)
    a = dirs.create("a", 0, None)
    b = dirs.create("b", 0, None)
    assert a.log_dir != b.log_dir  # spread: the directory with the fewest partitions
    acked_b: list[int] = []
    produce(dirs, b, range(3), acked_b)
    faults.static = f"rename:EIO:{a.log_dir}/recovery-point-offset-checkpoint"
    dirs.checkpoint()
    assert dirs.failures.offline_dirs == [a.log_dir]
    assert dirs.get("a", 0) is None and ("a", 0) in dirs.offline_partitions
    with pytest.raises(KafkaStorageError):
        dirs.create("a", 0, None)  # not silently re-created empty elsewhere
    produce(dirs, b, range(3, 6), acked_b)
    assert payloads(b) == acked_b == list(range(6))
    c = dirs.create("c", 0, None)
    assert c.log_dir == b.log_dir
    dirs.close()
    after = restart(tmp_path, n=2)
    assert payloads(after.get("b", 0)) == acked_b
    assert after.get("a", 0) is not None


def test_no_usable_dir_at_startup(tmp_path: Path, faults: Recording) -> None:
    faults.static = f"rename:EIO:{tmp_path}/*/meta.properties"
    dirs = LogDirs([tmp_path / "d0", tmp_path / "d1"], CFG)
    with pytest.raises(LogDirError):
        dirs.open(node_id=1)
    faults.static = f"rename:EIO:{tmp_path}/d1/meta.properties"
    dirs = LogDirs([tmp_path / "d0", tmp_path / "d1"], CFG)
    dirs.open(node_id=1)
    assert [str(m.dir) for m in dirs.online] == [str(tmp_path / "d0")]


def test_each_dir_has_its_own_meta_and_directory_id(tmp_path: Path) -> None:
    dirs = open_dirs(tmp_path, n=2)
    ids = [m.directory_id for m in dirs.managers]
    assert None not in ids and ids[0] != ids[1]
    for m in dirs.managers:
        assert "directory.id=" in (m.dir / "meta.properties").read_text()
    again = open_dirs(tmp_path, n=2)
    assert [m.directory_id for m in again.managers] == ids


def test_fault_rules_from_environment_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = tmp_path / "faults"
    rules.write_text("")
    monkeypatch.setenv(fileops.FAULTS_ENV, f"@{rules}")
    ops = FaultyFileOps()
    fd = ops.open(tmp_path / "x.log", os.O_WRONLY | os.O_CREAT)
    try:
        ops.write(fd, b"ok", tmp_path / "x.log")
        rules.write_text("write:EIO:*.log#1\n")  # armed while running; fails after one more success
        ops.write(fd, b"ok", tmp_path / "x.log")
        with pytest.raises(OSError) as e:
            ops.write(fd, b"no", tmp_path / "x.log")
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
    assert isinstance(fileops.ops(), FileOps)


def test_eio_on_read_takes_the_dir_offline(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(4), acked)
    plog.active.drop_tail_cache()  # so the read goes to the file
    faults.static = "read:EIO:*/t-0/*.log"
    with pytest.raises(KafkaStorageError):
        plog.read(0, 1 << 20)
    assert dirs.failures.offline_count == 1
    assert produce(dirs, plog, range(4, 6), acked) == 2
    assert payloads(restart(tmp_path).get("t", 0)) == acked


def test_eio_writing_the_index_at_roll_refuses_the_append(tmp_path: Path, faults: Recording) -> None:
    dirs = open_dirs(tmp_path, segment_bytes=1000)
    plog = dirs.create("t", 0, None)
    acked: list[int] = []
    produce(dirs, plog, range(3), acked)
    faults.static = "rename:EIO:*/t-0/*.index"
    assert produce(dirs, plog, range(3, 30), acked) > 0
    assert len(plog.segments) == 1 and plog.log_end_offset == len(acked)
    assert payloads(restart(tmp_path, segment_bytes=1000).get("t", 0)) == acked


def test_a_new_partition_is_made_durable_once_before_its_first_write(tmp_path: Path, faults: Recording) -> None:
    """Creating a partition costs no directory fsync until it is written to; then its directory and the log
    directory are synced, once, before the first batch, so nothing acknowledged can lose its files."""
    dirs = open_dirs(tmp_path)
    faults.calls.clear()
    plog = dirs.create("t", 0, uuid.UUID(int=7))
    plog.epoch_cache.assign(0, 0)  # becoming leader writes leader-epoch-checkpoint
    part_dir, log_dir = str(plog.dir), str(plog.dir.parent)
    assert not [c for c in faults.calls if c[0] == "dirfsync" and c[1] in (part_dir, log_dir)]
    produce(dirs, plog, range(3), [])
    seq = faults.calls
    first_write = seq.index(("write", str(plog.segments[0].path)))
    assert seq.index(("dirfsync", part_dir)) < first_write and seq.index(("dirfsync", log_dir)) < first_write
    assert seq.count(("dirfsync", log_dir)) == 1
    # and it reads back after a crash
    dirs2 = restart(tmp_path)
    assert payloads(dirs2.get("t", 0)) == [0, 1, 2]
