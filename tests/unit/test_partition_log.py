"""PartitionLog and LogManager: appends, reads, rolls, recovery, checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from epochlog.protocol.record_batch import iter_batches, read_header
from epochlog.protocol.records import GZIP, LOG_APPEND_TIME, ZSTD, Record, build_batch
from epochlog.storage.config import ConfigError, LogConfig
from epochlog.storage.errors import CorruptRecordError, LogDirError, OffsetOutOfRangeError, RecordTooLargeError
from epochlog.storage.log_manager import LogManager
from epochlog.storage.partition_log import PartitionLog


def batch(i: int, size: int = 100, ts: int = 1000) -> bytes:
    return build_batch([(None, bytes([i % 256]) * size)], base_timestamp=ts + i)


def open_log(tmp: Path, recover: bool = False, **cfg: int) -> PartitionLog:
    return PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(**cfg), recover=recover)


def test_offsets_and_epoch_are_patched_and_crc_stays_valid(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(3):
        r = log.append_as_leader(batch(i), 5, 0)
        assert (r.first_offset, r.last_offset) == (i, i)
    data = b"".join(log.read(0, 1 << 20).chunks)
    heads = [h for _, h in iter_batches(data, validate_crc=True)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in heads] == [(0, 5), (1, 5), (2, 5)]


def test_read_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(10):
        log.append_as_leader(batch(i, 500), 0, 0)
    one = log.read(3, 10)  # smaller than a batch: the whole first batch anyway
    assert [h.base_offset for _, h in iter_batches(one.chunks[0])] == [3]
    assert log.read(3, 10, min_one_batch=False).chunks == []
    capped = log.read(0, 1 << 20, max_offset=4)
    assert [h.base_offset for _, h in iter_batches(b"".join(capped.chunks))] == [0, 1, 2, 3]
    assert log.read(10, 100).chunks == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)


def test_roll_and_reopen_keeps_reads_and_indexes(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=300)
    for i in range(40):
        log.append_as_leader(batch(i, 200), 0, 0)
    assert len(log.segments) > 5
    log.close()
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=300)
    assert log.log_end_offset == 40
    for o in (0, 17, 39):
        first = read_header(log.read(o, 1).chunks[0])
        assert first.base_offset == o
    assert log.offset_for_timestamp(1000 + 25) == (25, 1025, 0)
    assert log.offset_for_timestamp(999_999) is None


@pytest.mark.parametrize("codec", [0, GZIP, ZSTD])
def test_offset_for_timestamp_answers_the_record_not_the_batch(tmp_path: Path, codec: int) -> None:
    """Kafka's rule: the first record (by offset) whose timestamp is >= ts, looked up inside the batch;
    timestamps within a batch need not be in order. Likewise the record with the largest timestamp."""
    log = open_log(tmp_path)
    stamps = [[100, 105, 103, 110], [120, 115, 130]]
    for batch_stamps in stamps:
        records = [Record(0, t, None, b"v%d" % t) for t in batch_stamps]
        log.append_as_leader(build_batch(records, compression=codec), 3, 0)
    # offsets 0-3 carry 100, 105, 103, 110; offsets 4-6 carry 120, 115, 130
    assert log.offset_for_timestamp(100) == (0, 100, 3)
    assert log.offset_for_timestamp(101) == (1, 105, 3)
    assert log.offset_for_timestamp(106) == (3, 110, 3)
    assert log.offset_for_timestamp(111) == (4, 120, 3)
    assert log.offset_for_timestamp(121) == (6, 130, 3)
    assert log.offset_for_timestamp(131) is None
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(2)  # the log now starts inside the first batch
    assert log.offset_for_timestamp(100) == (2, 103, 3)
    assert log.offset_for_timestamp(104) == (3, 110, 3)
    # MAX_TIMESTAMP: the record holding the largest timestamp, not the last offset of its batch
    assert log.max_timestamp_and_offset() == (130, 6)
    log.append_as_leader(build_batch([Record(0, t, None, b"x") for t in (125, 140, 135)], compression=codec), 3, 0)
    assert log.max_timestamp_and_offset() == (140, 8)


def test_offset_for_timestamp_in_a_log_append_time_batch(tmp_path: Path) -> None:
    """Every record of a LogAppendTime batch carries the batch's max timestamp."""
    log = open_log(tmp_path)
    records = [Record(0, t, None, b"x") for t in (10, 20, 30)]
    log.append_as_leader(build_batch(records, timestamp_type=LOG_APPEND_TIME), 0, 0)
    assert log.offset_for_timestamp(5) == (0, 30, 0)
    assert log.offset_for_timestamp(30) == (0, 30, 0)
    assert log.max_timestamp_and_offset() == (30, 0)


def test_time_index_keeps_the_largest_timestamp_so_far(tmp_path: Path) -> None:
    """A batch with a late timestamp between two index points must still be found, before and after a
    reopen (the time index holds the running maximum, as Kafka's does)."""
    stamps = [100, 500, 150, 200, 210, 220]
    log = open_log(tmp_path, index_interval_bytes=300)
    for t in stamps:
        log.append_as_leader(build_batch([Record(0, t, None, b"v" * 100)]), 0, 0)
    assert log.offset_for_timestamp(300) == (1, 500, 0)
    assert log.offset_for_timestamp(205) == (1, 500, 0)
    assert log.max_timestamp_and_offset() == (500, 1)
    log.close()
    log = open_log(tmp_path, index_interval_bytes=300)
    assert log.max_timestamp_and_offset() == (500, 1)
    assert log.offset_for_timestamp(300) == (1, 500, 0)
    assert log.offset_for_timestamp(501) is None


def test_recovery_cuts_a_torn_tail_and_epoch_entries_past_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0), 1, 0)
    log.append_as_leader(batch(1), 1, 0)
    log.append_as_leader(batch(2), 2, 0)  # epoch 2 starts at offset 2
    seg = log.active.path
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 10)
    log = open_log(tmp_path, recover=True)
    assert log.log_end_offset == 2
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(1, 0)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    assert log.append_as_leader(batch(3), 3, 0).first_offset == 2


def test_bad_batches_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=300)
    good = bytearray(batch(0))
    good[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(good), 0, 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch(0, 1000), 0, 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(b"\x00" * 30, 0, 0)
    assert log.log_end_offset == 0


def test_truncate_and_follower_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(5):
        log.append_as_leader(batch(i), i, 0)
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.epoch_cache.latest_epoch() == 2
    other = open_log(tmp_path / "f")
    data = b"".join(log.read(0, 1 << 20).chunks)
    other.append_as_follower(data)
    assert other.log_end_offset == 3 and other.epoch_cache.latest_epoch() == 2


def test_truncate_at_the_log_end_drops_an_epoch_that_never_got_a_record(tmp_path: Path) -> None:
    """A replica led epoch 1 without appending, then follows a leader that never saw epoch 1. The leader
    answers LastFetchedEpoch=1 with DivergingEpoch(0, 3); truncating to 3 must drop the empty epoch, or the
    follower asks with epoch 1 again forever (seen on a real cluster after an automatic rebalance)."""
    log = open_log(tmp_path)
    for i in range(3):
        log.append_as_leader(batch(i), 0, 0)
    log.epoch_cache.assign(1, log.log_end_offset)
    assert log.epoch_cache.latest_epoch() == 1
    log.truncate_to(3)
    assert log.log_end_offset == 3 and log.epoch_cache.latest_epoch() == 0


def test_retention_by_bytes_never_passes_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000, retention_bytes=1500)
    for i in range(20):
        log.append_as_leader(batch(i, 200), i // 5, 0)
    log.high_watermark = 4
    log.apply_retention(0)
    assert log.log_start_offset <= 4
    log.high_watermark = log.log_end_offset
    log.apply_retention(0)
    assert log.log_start_offset > 4
    assert log.epoch_cache.entries()[0].start_offset == log.log_start_offset


def test_log_manager_meta_and_clean_shutdown(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, LogConfig())
    cluster = lm.open(node_id=1)
    assert not lm.had_clean_shutdown
    lm.create("t", 0, None).append_as_leader(batch(0), 0, 0)
    lm.close()
    lm = LogManager(tmp_path, LogConfig())
    assert lm.open(node_id=1) == cluster and lm.had_clean_shutdown
    lm.load_all()
    assert lm.get("t", 0).log_end_offset == 1
    with pytest.raises(LogDirError):
        LogManager(tmp_path, LogConfig()).open(node_id=2)


def test_config_errors_name_the_property() -> None:
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        LogConfig.from_properties({"segment.bytes": "big"})
    assert LogConfig.from_properties({"log.retention.hours": "1"}).retention_ms == 3_600_000
    assert LogConfig.from_properties({"retention.ms": "5", "log.retention.ms": "9"}).retention_ms == 5


def _file_bytes(log: PartitionLog, offset: int, max_bytes: int) -> bytes:
    """What the files hold for this read, bypassing the in-memory tail of the active segment."""
    for seg in log.segments:
        seg.drop_tail_cache()
    return b"".join(bytes(c) for c in log.read(offset, max_bytes).chunks)


def test_reads_at_the_log_end_are_served_from_memory_and_match_the_files(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1_500_000, max_message_bytes=2_000_000)
    sizes = [100, 5_000, 200_000, 700_000, 50, 1_200_000, 30, 30, 400_000]
    for i, size in enumerate(sizes):
        log.append_as_leader(batch(i, size), 3, 0)
    reads = [(o, m) for o in range(len(sizes)) for m in (1, 10_000, 600_000, 3 << 20)]
    seen = [(o, m, b"".join(bytes(c) for c in log.read(o, m).chunks)) for o, m in reads]
    last = log.read(len(sizes) - 1, 1 << 20).chunks[0]
    assert isinstance(last, memoryview)  # the batch just written, not a pread
    for o, m, data in seen:
        assert data == _file_bytes(log, o, m), (o, m)


def test_a_writable_request_is_patched_in_place_and_truncation_forgets_the_cached_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(0), 1, 0)
    request = bytearray(batch(1))
    log.append_as_leader(memoryview(request), 1, 0)
    assert read_header(request).base_offset == 1  # patched where it lies: no copy of the request
    log.truncate_to(1)
    log.append_as_leader(batch(7, 300), 2, 0)
    got = b"".join(bytes(c) for c in log.read(1, 1 << 20).chunks)
    h = read_header(got)
    assert (h.base_offset, h.partition_leader_epoch, len(got)) == (1, 2, len(batch(7, 300)))
    assert got == _file_bytes(log, 1, 1 << 20)


def test_the_tails_share_one_budget_and_the_least_recently_written_give_theirs_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from epochlog.storage import segment

    budget = segment._TailBudget(250_000)
    monkeypatch.setattr(segment, "TAIL_BUDGET", budget)
    logs = [PartitionLog.open(tmp_path / f"t-{i}", "t", i, LogConfig(), recover=False) for i in range(3)]
    for i, log in enumerate(logs):
        log.append_as_leader(batch(i, 100_000), 0, 0)
    assert [bool(log.active._tail) for log in logs] == [False, True, True]
    assert budget.total <= 250_000
    for log in logs:
        got = b"".join(bytes(c) for c in log.read(0, 1 << 20).chunks)
        assert read_header(got).base_offset == 0 and got == _file_bytes(log, 0, 1 << 20)
        log.close()
    assert budget.total == 0


def test_a_deleted_log_gives_its_tail_back_to_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from epochlog.storage import segment

    budget = segment._TailBudget(1 << 30)
    monkeypatch.setattr(segment, "TAIL_BUDGET", budget)
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), recover=False)
    log.append_as_leader(batch(0, 100_000), 0, 0)
    assert budget.total > 0
    log.delete()
    assert budget.total == 0 and not budget.recent


def test_a_read_across_appends_hands_out_the_tail_views_uncopied(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    appended = [batch(i, 300) for i in range(3)]
    for b in appended:
        log.append_as_leader(b, 0, 0)
    chunks = log.read(0, 1 << 20).chunks
    assert len(chunks) == 3 and all(isinstance(c, memoryview) for c in chunks)
    assert [h.base_offset for _, h in iter_batches(b"".join(chunks))] == [0, 1, 2]
    # a limit inside the third batch keeps the whole batches before it only
    cut = log.read(0, len(chunks[0]) + len(chunks[1]) + 10).chunks
    assert [h.base_offset for _, h in iter_batches(b"".join(cut))] == [0, 1]


def test_headers_read_from_the_tail_match_the_file(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(5):
        log.append_as_leader(batch(i, 200 + i), 3, 0)
    seg = log.segments[-1]
    pos = 0
    while pos < seg.size:
        from_tail = seg.header_at(pos)
        assert from_tail == read_header(os.pread(seg.fd, 61, pos))
        assert from_tail.partition_leader_epoch == 3  # the patched bytes, as written
        pos += from_tail.size
    seg.drop_tail_cache()
    assert seg.header_at(0).base_offset == 0


def test_clean_shutdown_marker_holds_the_broker_epoch(tmp_path: Path) -> None:
    # KIP-966: the epoch goes back to the controller as PreviousBrokerEpoch; no marker, an old empty one or
    # garbage all mean the broker may have lost unflushed records (-1).
    from epochlog.storage.log_dirs import LogDirs
    from epochlog.storage.log_manager import CLEAN_SHUTDOWN

    lm = LogManager(tmp_path, LogConfig())
    lm.open(node_id=1)
    assert lm.previous_broker_epoch == -1
    lm.close(broker_epoch=7)
    lm = LogManager(tmp_path, LogConfig())
    lm.open(node_id=1)
    assert lm.had_clean_shutdown and lm.previous_broker_epoch == 7
    assert not (tmp_path / CLEAN_SHUTDOWN).exists()  # consumed: a crash from here on is unclean
    for text in ("", "not json", '{"brokerEpoch": "7"}', "[1]", '{"brokerEpoch": true}'):
        (tmp_path / CLEAN_SHUTDOWN).write_text(text)
        lm = LogManager(tmp_path, LogConfig())
        lm.open(node_id=1)
        assert lm.had_clean_shutdown and lm.previous_broker_epoch == -1, text
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = LogDirs([a, b], LogConfig())
    dirs.open(node_id=1)
    dirs.close(broker_epoch=3)
    dirs = LogDirs([a, b], LogConfig())
    dirs.open(node_id=1)
    assert dirs.previous_broker_epoch == 3
    dirs.close(broker_epoch=3)
    (b / CLEAN_SHUTDOWN).unlink()  # one directory without its marker: the broker as a whole was not clean
    dirs = LogDirs([a, b], LogConfig())
    dirs.open(node_id=1)
    assert dirs.previous_broker_epoch == -1


def test_the_tail_finds_where_each_append_begins_as_the_index_walk_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from epochlog.storage import segment

    monkeypatch.setattr(segment, "TAIL_CACHE_BYTES", 2_000)
    log = open_log(tmp_path)
    for i in range(6):
        multi = build_batch([(None, b"a" * 100), (None, b"b" * 100)], base_timestamp=i)  # offsets 2i, 2i+1
        log.append_as_leader(multi, 0, 0)
    follower = open_log(tmp_path / "f")
    follower.append_as_follower(b"".join(bytes(c) for c in log.read(0, 1 << 20).chunks))  # one append, six batches
    log.truncate_to(6)
    # offsets 6-8 in one batch: 8 began a batch before the truncation and lies inside one now
    log.append_as_leader(build_batch([(None, b"c" * 300)] * 3), 1, 0)
    for plog in (log, follower):
        seg = plog.active
        assert seg._tail_first  # something to answer from
        found = [seg.find_position(o) for o in range(plog.log_end_offset + 1)]
        seg._tail_first.clear()  # the walk from the index alone
        assert found == [seg.find_position(o) for o in range(plog.log_end_offset + 1)]
    assert set(log.active._tail_first) <= {4, 6}  # evicted appends are forgotten with their bytes


def test_a_rolled_segment_keeps_its_tail_for_readers_still_at_its_end(tmp_path: Path) -> None:
    from epochlog.storage import fileops

    class CountingOps(fileops.FileOps):
        preads = 0

        def pread(self, fd: int, size: int, offset: int, path: str | Path = "") -> bytes:
            CountingOps.preads += 1
            return super().pread(fd, size, offset, path)

    log = open_log(tmp_path, segment_bytes=3_000)
    for i in range(8):
        log.append_as_leader(batch(i, 1_000), 0, 0)
    assert len(log.segments) > 1
    # a follower a batch behind the roll reads the old segment's last batch, then the new segment's
    offsets = range(log.segments[-1].base_offset - 1, 8)
    prev = fileops.install(CountingOps())
    try:
        got = [b"".join(bytes(c) for c in log.read(o, 1 << 20).chunks) for o in offsets]
    finally:
        fileops.install(prev)
    assert CountingOps.preads == 0
    assert got == [_file_bytes(log, o, 1 << 20) for o in offsets]
