"""The broker's log cleaner: which log it cleans and when, its checkpoint, its thread talking to an event
loop, and an I/O error on its own files taking the log directory offline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.protocol.records import build_batch
from epochlog.storage import checkpoints, fileops
from epochlog.storage.cleaner.config import CLEANER_OFFSET_CHECKPOINT, CleanerConfig
from epochlog.storage.cleaner.manager import LogCleaner
from epochlog.storage.config import ConfigError, LogConfig
from epochlog.storage.fileops import FaultyFileOps
from epochlog.storage.log_dirs import LogDirs
from epochlog.storage.partition_log import PartitionLog

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000_000
COMPACT = LogConfig(segment_bytes=4096, cleanup_policy="compact", delete_retention_ms=1000)


def write(plog: PartitionLog, n: int, keys: int, tombstones: tuple[bytes, ...] = ()) -> None:
    for i in range(n):
        plog.append_as_leader(build_batch([(b"k%d" % (i % keys), b"v%d" % i * 20)], base_timestamp=T0), 0, T0)
    for k in tombstones:
        plog.append_as_leader(build_batch([(k, None)], base_timestamp=T0), 0, T0)
    plog.append_as_leader(build_batch([(b"roll", b"x" * 5000)], base_timestamp=T0), 0, T0)
    plog.append_as_leader(build_batch([(b"active", b"x")], base_timestamp=T0), 0, T0)
    plog.high_watermark = plog.log_end_offset


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[LogDirs]:
    d = LogDirs([tmp_path / "data"], LogConfig())
    d.open(node_id=1)
    d.load_all()
    yield d


def keys_left(plog: PartitionLog) -> list[bytes | None]:
    from epochlog.protocol.records import iter_records

    out = []
    for seg in plog.segments:
        out += [r.key for r in iter_records(seg.read(0, seg.size))]
    return out


def test_cleans_compacted_logs_only_and_checkpoints_where_it_stopped(dirs: LogDirs) -> None:
    compacted = dirs.create("c", 0, None, COMPACT)
    deleting = dirs.create("d", 0, None, LogConfig(segment_bytes=4096))
    write(compacted, 300, 5)
    write(deleting, 300, 5)
    cleaner = LogCleaner(dirs, CleanerConfig(process=False), clock=lambda: T0)
    size_d = deleting.size_bytes
    assert cleaner.clean_once()
    assert deleting.size_bytes == size_d
    assert keys_left(compacted).count(b"k1") == 1
    stored = checkpoints.read_offsets(dirs.dir / CLEANER_OFFSET_CHECKPOINT)
    assert stored == {("c", 0): compacted.segments[-1].base_offset}
    # Nothing new is dirty: nothing to do. A fresh cleaner (a restart) reads the checkpoint.
    assert not cleaner.clean_once()
    assert not LogCleaner(dirs, CleanerConfig(process=False), clock=lambda: T0).clean_once()


def test_comes_back_for_tombstones_once_their_horizon_passed(dirs: LogDirs) -> None:
    plog = dirs.create("c", 0, None, COMPACT)
    write(plog, 300, 5, tombstones=(b"k2", b"k3"))
    now = [T0]
    cleaner = LogCleaner(dirs, CleanerConfig(process=False), clock=lambda: now[0])
    assert cleaner.clean_once()
    assert b"k2" in keys_left(plog)
    now[0] = T0 + 999
    assert not cleaner.clean_once()
    now[0] = T0 + 1000
    assert cleaner.clean_once()
    left = keys_left(plog)
    assert b"k2" not in left and b"k3" not in left and b"k4" in left


def test_an_io_error_on_the_cleaners_files_takes_the_directory_offline(dirs: LogDirs) -> None:
    plog = dirs.create("c", 0, None, COMPACT)
    write(plog, 300, 5)
    prev = fileops.install(FaultyFileOps("write:EIO:*.cleaned"))
    try:
        assert not LogCleaner(dirs, CleanerConfig(process=False), clock=lambda: T0).clean_once()
    finally:
        fileops.install(prev)
    assert dirs.failures.is_offline(dirs.dir)


@pytest.mark.parametrize("in_process", [False, True], ids=["thread", "process"])
def test_the_thread_swaps_on_the_event_loop_and_stops(dirs: LogDirs, in_process: bool) -> None:
    plog = dirs.create("c", 0, None, COMPACT)
    loop_threads: set[str] = set()
    real = plog.replace_segments

    def on_loop(*args, **kwargs):  # type: ignore[no-untyped-def]
        import threading

        loop_threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    plog.replace_segments = on_loop  # type: ignore[method-assign]

    async def main() -> None:
        cleaner = LogCleaner(dirs, CleanerConfig(backoff_ms=10, process=in_process))
        cleaner.start(asyncio.get_running_loop())
        write(plog, 300, 5)  # on the loop, as produce is
        for _ in range(500):
            if cleaner.rounds:
                break
            await asyncio.sleep(0.01)
        cleaner.request_stop()
        while cleaner.running:
            await asyncio.sleep(0.01)
        assert cleaner.rounds >= 1

    asyncio.run(main())
    assert loop_threads == {"MainThread"}
    assert keys_left(plog).count(b"k1") == 1


def test_disabled_cleaner_starts_no_thread(dirs: LogDirs) -> None:
    cleaner = LogCleaner(dirs, CleanerConfig.from_properties({"log.cleaner.enable": "false"}))
    cleaner.start()
    assert not cleaner.running


def test_config_names_and_checks() -> None:
    c = CleanerConfig.from_properties(
        {
            "log.cleaner.threads": "2",
            "log.cleaner.backoff.ms": "500",
            "log.cleaner.io.max.bytes.per.second": "1048576",
        }
    )
    assert (c.enable, c.threads, c.backoff_ms, c.io_max_bytes_per_second) == (True, 2, 500, 1048576.0)
    for bad in (
        {"log.cleaner.enable": "yes"},
        {"log.cleaner.threads": "-1"},
        {"log.cleaner.io.max.bytes.per.second": "0"},
    ):
        with pytest.raises(ConfigError):
            CleanerConfig.from_properties(bad)
    lc = LogConfig.from_properties(
        {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1", "log.cleaner.delete.retention.ms": "5"}
    )
    assert (lc.compact, lc.min_cleanable_dirty_ratio, lc.delete_retention_ms) == (True, 0.1, 5)
    with pytest.raises(ConfigError):
        LogConfig.from_properties({"min.cleanable.dirty.ratio": "1.5"})


def test_the_throttler_holds_the_rate() -> None:
    from epochlog.storage.cleaner.throttler import Throttler

    t = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        t[0] += s

    th = Throttler(1000.0, check_interval_s=0.1, clock=lambda: t[0], sleep=sleep)
    for _ in range(50):
        th.throttle(100)  # 5000 bytes at 1000 B/s: about five seconds
        t[0] += 0.001
    assert 4.5 <= t[0] <= 5.5


def test_the_cleaner_process_writes_and_the_broker_swaps(dirs: LogDirs) -> None:
    plog = dirs.create("c", 0, None, COMPACT)
    write(plog, 300, 5, tombstones=(b"k2",))
    cleaner = LogCleaner(dirs, CleanerConfig(process=True), clock=lambda: T0)
    try:
        assert cleaner.clean_once()
        left = keys_left(plog)
        assert left.count(b"k1") == 1 and left.count(b"k2") == 1  # the tombstone stays, for now
        assert cleaner.last_stats is not None and cleaner.last_stats.groups >= 1
        assert not list(plog.dir.glob("*.cleaned"))
        stored = checkpoints.read_offsets(dirs.dir / CLEANER_OFFSET_CHECKPOINT)
        assert stored == {("c", 0): plog.segments[-1].base_offset}
        # The horizon the child set is known here, and honoured.
        assert not cleaner.clean_once(T0 + 999)
        assert cleaner.clean_once(T0 + 1000)
        assert b"k2" not in keys_left(plog)
    finally:
        cleaner.close()


def test_an_io_error_in_the_cleaner_process_takes_the_directory_offline(
    dirs: LogDirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = dirs.create("c", 0, None, COMPACT)
    write(plog, 300, 5)
    monkeypatch.setenv(fileops.FAULTS_ENV, "write:EIO:*.cleaned")  # what the spawned child reads
    cleaner = LogCleaner(dirs, CleanerConfig(process=True), clock=lambda: T0)
    try:
        assert not cleaner.clean_once()
    finally:
        cleaner.close()
    assert dirs.failures.is_offline(dirs.dir)
    assert not list(plog.dir.glob("*.cleaned"))


def test_a_stop_drops_a_slow_cleaning_at_once(dirs: LogDirs) -> None:
    plog = dirs.create("c", 0, None, COMPACT)
    write(plog, 300, 5)
    before = keys_left(plog)

    async def main() -> float:
        # 20 kB/s: this cleaning would take seconds.
        cleaner = LogCleaner(dirs, CleanerConfig(backoff_ms=10, io_max_bytes_per_second=20_000))
        cleaner.start(asyncio.get_running_loop())
        for _ in range(500):
            if cleaner._in_progress:
                break
            await asyncio.sleep(0.01)
        assert cleaner._in_progress, "the cleaning never began"
        await asyncio.sleep(0.2)
        t = asyncio.get_running_loop().time()
        cleaner.request_stop()
        while cleaner.running:
            await asyncio.sleep(0.01)
        return asyncio.get_running_loop().time() - t

    took = asyncio.run(main())
    assert took < 1.5
    assert keys_left(plog) == before  # nothing swapped in
    assert not list(plog.dir.glob("*.cleaned"))


@pytest.mark.parametrize("in_process", [False, True], ids=["thread", "process"])
def test_aborted_data_goes_and_the_cleaner_comes_back_for_its_marker(dirs: LogDirs, in_process: bool) -> None:
    """The transaction rules through the broker's cleaner, on its thread and in its process: the aborted
    record goes at once; its marker gets its delete horizon at the next round (asked for, no new dirt
    needed), and goes once that has passed; no round is spent when nothing is due."""
    from epochlog.protocol.control_records import ControlType, marker_batch

    plog = dirs.create("c", 0, None, COMPACT)

    def txn(pairs: list[tuple[bytes, bytes]], seq: int, kind: ControlType) -> None:
        plog.append_as_leader(
            build_batch(
                pairs, base_timestamp=T0, producer_id=7, producer_epoch=0, base_sequence=seq, is_transactional=True
            ),
            0,
            T0,
        )
        plog.append_as_leader(marker_batch(7, 0, kind, 0, T0), 0, T0)

    txn([(b"aborted", b"x")], 0, ControlType.ABORT)
    txn([(b"committed", b"y")], 1, ControlType.COMMIT)
    write(plog, 300, 5)

    def markers() -> list[int]:
        return [h.base_offset for h in plog.read_headers(0) if h.is_control and h.record_count]

    cleaner = LogCleaner(dirs, CleanerConfig(process=in_process), clock=lambda: T0)
    try:
        assert cleaner.clean_once()
        assert b"aborted" not in keys_left(plog) and b"committed" in keys_left(plog)
        assert markers() == [1, 3]
        assert cleaner.clean_once()  # due again at once: the ABORT marker's data is gone
        assert markers() == [1, 3]
        assert not cleaner.clean_once()  # its horizon is T0 + delete.retention.ms
        assert not cleaner.clean_once(T0 + 999)
        assert cleaner.clean_once(T0 + 1000)
        assert markers() == [3]
        assert b"committed" in keys_left(plog)
    finally:
        cleaner.close()
