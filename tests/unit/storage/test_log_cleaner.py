"""The log cleaner on real segment files: Kafka's compaction rules, offsets and indexes, the epoch cache,
and a crash at every step of the swap (faults injected through storage/fileops.py) followed by a restart
that must neither lose a record nor bring one back twice."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from epochlog.protocol.record_batch import iter_batches, read_header
from epochlog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, build_batch, decode_batch
from epochlog.storage import fileops
from epochlog.storage.cleaner.cleaner import Cleaner, CleaningAborted, clean_log
from epochlog.storage.cleaner.record_filter import DELETE_HORIZON_MASK
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.fileops import FaultyFileOps
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.segment import Segment

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000_000
DAY = 86_400_000


def cfg(**kw: object) -> LogConfig:
    c = LogConfig(segment_bytes=4096, cleanup_policy="compact", index_interval_bytes=256)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def open_log(path: Path, c: LogConfig, recover: bool = False) -> PartitionLog:
    return PartitionLog.open(path, "t", 0, c, recover=recover)


def produce(plog: PartitionLog, pairs: list[tuple[bytes | None, bytes | None]], epoch: int = 0, **kw: object) -> None:
    ts = kw.pop("ts", T0)
    batch = build_batch(pairs, base_timestamp=ts, **kw)  # type: ignore[arg-type]
    plog.append_as_leader(batch, epoch, T0)
    plog.high_watermark = plog.log_end_offset


def records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record, read through the log's own read path."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        res = plog.read(offset, 1 << 20)
        if not res.chunks:
            break
        data = b"".join(bytes(c) for c in res.chunks)
        nxt = offset
        for pos, h in iter_batches(data):
            if h.next_offset <= offset:
                continue
            for r in decode_batch(data, pos)[1]:
                out.append((r.offset, r.key, r.value, r.timestamp))
            nxt = h.next_offset
        if nxt == offset:
            break
        offset = nxt
    return out


def latest(recs: list[tuple[int, bytes | None, bytes | None, int]]) -> dict[bytes | None, bytes | None]:
    m: dict[bytes | None, bytes | None] = {}
    for _o, k, v, _t in recs:
        m[k] = v
    return m


def headers(plog: PartitionLog) -> list:
    return list(plog.read_headers(plog.log_start_offset))


def fill(plog: PartitionLog, n: int, keys: int, seed: int = 1, codec: int = NONE) -> None:
    rnd = random.Random(seed)
    for i in range(n):
        batch = [(f"k{rnd.randrange(keys)}".encode(), f"v{i}-{j}".encode() * 3) for j in range(rnd.randint(1, 5))]
        produce(plog, batch, compression=codec)  # type: ignore[arg-type]
    produce(plog, [(b"tail", b"in the active segment")])


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_latest_value_per_key_survives_and_offsets_are_kept(tmp_path: Path, codec: int) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    fill(plog, 300, 20, codec=codec)
    before = records(plog)
    start, end = plog.log_start_offset, plog.log_end_offset
    active_before = plog.active
    stats = clean_log(plog, T0)
    assert stats is not None and stats.records_kept < stats.records_read
    after = records(plog)
    assert latest(after) == latest(before)
    # Every record left is the one that was at that offset, offsets only increase, nothing is new.
    by_offset = {o: (k, v, t) for o, k, v, t in before}
    assert all(by_offset[o] == (k, v, t) for o, k, v, t in after)
    offs = [o for o, *_ in after]
    assert offs == sorted(set(offs))
    # Within the cleaned range each key appears once.
    cleaned_keys = [k for o, k, *_ in after if o < stats.end_offset]
    assert len(cleaned_keys) == len(set(cleaned_keys))
    assert (plog.log_start_offset, plog.log_end_offset) == (start, end)
    assert plog.active is active_before
    assert len(after) < len(before) / 3


def test_batches_keep_offsets_epochs_and_producer_fields(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    for i in range(120):
        epoch = i // 40  # three leader epochs
        if i % 40 == 0:
            plog.epoch_cache.assign(epoch, plog.log_end_offset)
        produce(
            plog,
            [(b"a", b"x%d" % i), (b"k%d" % (i % 7), b"y%d" % i)],
            epoch=epoch,
            producer_id=1000 + i % 3,
            producer_epoch=2,
            base_sequence=(i // 3) * 2,
        )
    produce(plog, [(b"z", b"active")], epoch=2)
    old = {h.base_offset: h for h in headers(plog)}
    entries = plog.epoch_cache.entries()
    assert clean_log(plog, T0) is not None
    new = headers(plog)
    assert len(new) < len(old)
    for h in new:
        o = old[h.base_offset]
        assert (h.last_offset_delta, h.partition_leader_epoch, h.producer_id, h.producer_epoch) == (
            o.last_offset_delta,
            o.partition_leader_epoch,
            o.producer_id,
            o.producer_epoch,
        )
        assert (h.base_sequence, h.max_timestamp) == (o.base_sequence, o.max_timestamp)
        assert plog.epoch_cache.epoch_for_offset(h.base_offset) == h.partition_leader_epoch
    assert plog.epoch_cache.entries() == entries
    # The last batch of every producer keeps its header (its sequence state), even if emptied.
    last_by_pid: dict[int, int] = {}
    for h in old.values():
        if h.producer_id >= 0:
            last_by_pid[h.producer_id] = max(last_by_pid.get(h.producer_id, -1), h.base_offset)
    kept = {h.base_offset for h in new}
    assert set(last_by_pid.values()) <= kept
    # After a restart the producer state and epochs come back the same.
    state = {pid: e.last_seq for pid, e in plog.producer_state.producers.items()}
    plog.close()
    again = open_log(tmp_path / "t-0", cfg(), recover=True)
    assert {pid: e.last_seq for pid, e in again.producer_state.producers.items()} == state
    assert again.epoch_cache.entries() == entries


def test_tombstones_stay_for_delete_retention_then_go(tmp_path: Path) -> None:
    c = cfg(delete_retention_ms=DAY)
    plog = open_log(tmp_path / "t-0", c)
    for i in range(60):
        produce(plog, [(b"k%d" % (i % 10), b"v%d" % i)])
    produce(plog, [(b"k3", None), (b"k4", None)])
    for i in range(60):
        produce(plog, [(b"other%d" % (i % 5), b"w%d" % i)])
    produce(plog, [(b"tail", b"active")])
    assert clean_log(plog, T0) is not None
    after = records(plog)
    assert latest(after)[b"k3"] is None and latest(after)[b"k4"] is None
    assert [v for _o, k, v, _t in after if k == b"k3"] == [None]  # the older values went, the tombstone stays
    marked = [h for h in headers(plog) if h.attributes & DELETE_HORIZON_MASK]
    assert marked and all(h.base_timestamp == T0 + DAY for h in marked)
    # The timestamps the records carry did not change with the batch's base timestamp.
    assert all(t == T0 for _o, _k, _v, t in after)
    # Before the horizon another cleaning keeps them; after it they go.
    assert clean_log(plog, T0 + DAY - 1, first_dirty=plog.log_end_offset, force=True) is not None
    assert b"k3" in latest(records(plog))
    assert clean_log(plog, T0 + DAY, first_dirty=plog.log_end_offset, force=True) is not None
    final = latest(records(plog))
    assert b"k3" not in final and b"k4" not in final
    assert final[b"k5"] == latest(after)[b"k5"]


def test_indexes_match_the_data_after_cleaning_and_after_reopening(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    fill(plog, 400, 30)
    assert clean_log(plog, T0) is not None
    remaining = records(plog)
    for seg in plog.segments:
        fresh = Segment(seg.dir, seg.base_offset, 256, 0)
        fresh.scan(validate_crc=True)
        assert (fresh.idx_rel, fresh.idx_pos) == (seg.idx_rel, seg.idx_pos)
        assert fresh.next_offset == seg.next_offset
        fresh.abandon()
    # Every remaining offset is found through the indexes, and a timestamp lookup lands on a record.
    for o, _k, _v, _t in remaining[::7]:
        res = plog.read(o, 100)
        h = read_header(bytes(res.chunks[0]))
        assert h.base_offset <= o <= h.last_offset
    assert plog.offset_for_timestamp(T0) is not None
    plog.close()
    again = open_log(tmp_path / "t-0", cfg())
    for seg in again.segments[:-1]:
        assert not seg.indexes_dirty  # the written index files were trusted
    assert records(again) == remaining


def test_the_active_segment_and_data_above_the_high_watermark_are_never_cleaned(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg(segment_bytes=10 << 20))
    for i in range(50):
        produce(plog, [(b"same", b"v%d" % i)])
    assert len(plog.segments) == 1
    assert clean_log(plog, T0, force=True) is None
    plog.config = cfg()  # now let segments roll
    for i in range(200):
        produce(plog, [(b"same", b"w%d" % i)])
    hw = plog.segments[1].next_offset
    plog.high_watermark = hw
    assert clean_log(plog, T0) is not None
    recs = records(plog)
    above = [o for o, *_ in recs if o >= hw]
    assert above == list(range(hw, plog.log_end_offset))  # untouched


def test_min_compaction_lag_and_dirty_ratio(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg(min_compaction_lag_ms=60_000))
    fill(plog, 200, 10)
    assert clean_log(plog, T0 + 59_999) is None  # every record is younger than the lag
    assert clean_log(plog, T0 + 60_000) is not None
    plog.config = cfg(min_cleanable_dirty_ratio=0.99)
    fill(plog, 20, 10, seed=2)
    # A little new dirt over a big clean part is below the ratio.
    assert clean_log(plog, T0, first_dirty=plog.segments[-3].base_offset) is None
    plog.config = cfg(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000)
    assert clean_log(plog, T0 + 1001, first_dirty=plog.segments[-3].base_offset) is not None


def test_a_follower_copies_a_compacted_log_with_empty_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "t-0", cfg())
    for i in range(100):
        produce(leader, [(b"k", b"v%d" % i)], producer_id=7, producer_epoch=0, base_sequence=i)
    for i in range(100):
        produce(leader, [(b"j%d" % i, b"w")])
    produce(leader, [(b"tail", b"x")])
    assert clean_log(leader, T0) is not None
    empties = [h for h in headers(leader) if h.record_count == 0]
    assert empties  # the producer's last batch kept its header
    follower = PartitionLog.open(tmp_path / "f" / "t-0", "t", 0, cfg(), recover=False)
    while follower.log_end_offset < leader.log_end_offset:  # as a replica fetcher would
        res = leader.read(follower.log_end_offset, 1 << 20)
        follower.append_as_follower(b"".join(bytes(c) for c in res.chunks))
    assert records(follower) == records(leader)
    assert follower.log_end_offset == leader.log_end_offset


def test_cleaning_drops_out_when_a_truncation_got_there_first(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    fill(plog, 300, 20)
    before = records(plog)

    class Meddling(Cleaner):
        def __init__(self) -> None:
            super().__init__(run_on_owner=self.owner)

        def owner(self, fn):  # type: ignore[no-untyped-def]
            plog.truncate_to(plog.segments[2].base_offset + 1)  # cuts into the group being cleaned
            return fn()

    with pytest.raises(CleaningAborted):
        clean_log(plog, T0, cleaner=Meddling())
    cut = plog.log_end_offset
    assert records(plog) == [r for r in before if r[0] < cut]
    assert not list(plog.dir.glob("*.cleaned")) and not list(plog.dir.glob("*.swap"))


# -- a crash at each step of the swap --------------------------------------------------------------
# Each rule fails one file operation of the swap (the first to match); the log directory goes offline
# there, and the files are left as a kill -9 at that instant would leave them (every earlier step done,
# that one not). Reopening with recovery must then show the log before or after the cleaning of each
# group, with nothing lost and nothing twice.
CRASH_POINTS = [
    "rename:EIO:*.index.cleaned",  # writing the cleaned index (before any swap step)
    "rename:EIO:*.index.swap",  # step 1, first rename
    "rename:EIO:*.log.swap",  # step 1, the commit point
    "dirfsync:EIO:*",  # step 1's directory sync
    "rename:EIO:*.log.deleted",  # step 2
    "rename:EIO:*.timeindex.deleted#1",  # step 2, second segment
    "rename:EIO:*[0-9].index",  # step 3, first rename
    "rename:EIO:*[0-9].log",  # step 3, the log's rename
    "dirfsync:EIO:*#1",  # step 2's directory sync
    "dirfsync:EIO:*#2",  # step 3's directory sync
    "unlink:EIO:*.deleted",  # step 4
    "rename:EIO:*.log.swap#1",  # the second group's commit point
    "rename:EIO:*[0-9].log#1",  # the second group's final rename
]


@pytest.fixture(autouse=True, params=["C", "Python"])
def scans(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs with the C record scans (when built) and with the Python ones."""
    from epochlog.storage.cleaner import record_filter

    compiled = record_filter.native
    if request.param == "C" and compiled is None:
        pytest.skip("storage/cleaner/_native is not built")
    record_filter.native = compiled if request.param == "C" else None
    try:
        yield request.param
    finally:
        record_filter.native = compiled


@pytest.fixture
def restore_fileops() -> Iterator[None]:
    prev = fileops.ops()
    try:
        yield
    finally:
        fileops.install(prev)


@pytest.mark.parametrize("rule", CRASH_POINTS)
def test_a_crash_at_any_swap_step_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, rule: str, restore_fileops: None
) -> None:
    c = cfg(segment_bytes=3000)
    plog = open_log(tmp_path / "t-0", c)
    fill(plog, 400, 25, seed=7)
    before = records(plog)
    plog.flush()
    start, end = plog.log_start_offset, plog.log_end_offset
    epochs = plog.epoch_cache.entries()
    fileops.install(FaultyFileOps(rule))
    with pytest.raises((KafkaStorageError, OSError)):
        clean_log(plog, T0)
    assert plog.failures.is_offline(plog.log_dir)
    plog.abandon()
    fileops.install(restore_fileops_default := fileops.FileOps())
    del restore_fileops_default
    again = open_log(tmp_path / "t-0", c, recover=True)
    after = records(again)
    offs = [o for o, *_ in after]
    assert offs == sorted(set(offs)), "an offset appears twice or out of order"
    by_offset = {o: (k, v, t) for o, k, v, t in before}
    assert all(by_offset[o] == (k, v, t) for o, k, v, t in after), "a record changed"
    assert latest(after) == latest(before), "a key's latest value was lost"
    assert (again.log_start_offset, again.log_end_offset) == (start, end)
    assert again.epoch_cache.entries() == epochs
    assert not [p.name for p in again.dir.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    # And the next cleaning finishes the job.
    again.high_watermark = again.log_end_offset
    assert clean_log(again, T0, force=True) is not None
    assert latest(records(again)) == latest(before)


def test_cleaning_drops_out_when_retention_deleted_its_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg(cleanup_policy="compact,delete", retention_bytes=8000))
    fill(plog, 300, 20)
    before = records(plog)

    class Retaining(Cleaner):
        def __init__(self) -> None:
            super().__init__(run_on_owner=self.owner)

        def owner(self, fn):  # type: ignore[no-untyped-def]
            plog.apply_retention(T0)
            return fn()

    with pytest.raises(CleaningAborted):
        clean_log(plog, T0, cleaner=Retaining())
    assert records(plog) == [r for r in before if r[0] >= plog.log_start_offset]
    assert not list(plog.dir.glob("*.cleaned"))


# -- the C scans and the Python ones agree -----------------------------------------------------------
def _random_batch(rnd: random.Random, base: int) -> bytes:
    recs = []
    for i in range(rnd.randint(1, 40)):
        key = None if rnd.random() < 0.05 else b"k%d" % rnd.randrange(30) + b"x" * rnd.choice((0, 0, 70, 300))
        value = None if rnd.random() < 0.2 else bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 5, 200))))
        recs.append(Record(base + i, T0 + rnd.randint(-5000, 5000), key, value, [("h", b"v")] * rnd.randint(0, 2)))
    return build_batch(recs, base_offset=base, compression=rnd.choice((NONE, NONE, ZSTD)))


def test_c_and_python_record_scans_give_the_same_answers() -> None:
    from epochlog.storage.cleaner import record_filter

    if record_filter.native is None:
        pytest.skip("storage/cleaner/_native is not built (no C compiler): the Python scans run everywhere")
    compiled = record_filter.native
    rnd = random.Random(5)
    try:
        for trial in range(300):
            base = rnd.randrange(0, 1 << 40)
            batch = _random_batch(rnd, base)
            h = read_header(batch)
            data = record_filter.records_of(batch, h)
            offsets_py: dict[bytes, int] = {}
            offsets_c: dict[bytes, int] = {}
            record_filter.native = None
            record_filter.map_keys(data, h, offsets_py)
            record_filter.native = compiled
            record_filter.map_keys(data, h, offsets_c)
            assert offsets_c == offsets_py
            # A map where some keys have later offsets, some earlier ones.
            later = {k: o + rnd.choice((-3, 0, 5)) for k, o in offsets_py.items()}
            args = (later, base + rnd.randint(0, 50), T0 + (DAY if trial % 3 else 0), DAY, rnd.random() < 0.5)
            if trial % 4 == 0:  # a batch that already carries a delete horizon
                batch = bytearray(batch)
                attrs = int.from_bytes(batch[21:23], "big") | DELETE_HORIZON_MASK
                batch[21:23] = attrs.to_bytes(2, "big")
                batch = bytes(batch)
                h = read_header(batch)
            record_filter.native = None
            want = record_filter.filter_batch(batch, h, *args)
            record_filter.native = compiled
            got = record_filter.filter_batch(batch, h, *args)
            assert (got.records_in, got.records_kept, got.delete_horizon_ms) == (
                want.records_in,
                want.records_kept,
                want.delete_horizon_ms,
            )
            assert (bytes(got.data) if got.data is not None else None) == (
                bytes(want.data) if want.data is not None else None
            )
    finally:
        record_filter.native = compiled


def test_the_scans_refuse_records_that_do_not_parse() -> None:
    from epochlog.protocol.record_batch import CorruptBatchError
    from epochlog.storage.cleaner import record_filter

    batch = build_batch([(b"key", b"value")] * 3)
    h = read_header(batch)
    data = record_filter.records_of(batch, h)[:-4]  # the last record cut short
    for impl in {record_filter.native, None}:
        compiled = record_filter.native
        record_filter.native = impl
        try:
            with pytest.raises(CorruptBatchError):
                record_filter.map_keys(data, h, {})
        finally:
            record_filter.native = compiled


def test_a_full_offset_map_cleans_up_to_a_segment_boundary_and_the_next_cleaning_goes_on(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    for i in range(400):
        produce(plog, [(b"key%d" % i, b"v" * 20)])  # every key distinct: the map fills fast
    for i in range(400):
        produce(plog, [(b"key%d" % i, b"w" * 20)])
    produce(plog, [(b"tail", b"x")])
    before = records(plog)
    small = Cleaner(max_map_entries=50)
    first = clean_log(plog, T0, cleaner=small)
    assert first is not None
    closed_end = plog.segments[-1].base_offset
    assert first.end_offset < closed_end
    assert first.end_offset in {s.base_offset for s in plog.segments}  # a segment boundary
    assert [r for r in records(plog) if r[0] >= first.end_offset] == [r for r in before if r[0] >= first.end_offset]
    end = first.end_offset
    while end < closed_end:
        nxt = clean_log(plog, T0, first_dirty=end, cleaner=small, force=True)
        assert nxt is not None and nxt.end_offset > end
        end = nxt.end_offset
    assert latest(records(plog)) == latest(before)
    # Every old value whose replacement is in a closed segment went; the active segment is not cleaned.
    in_active = {k for o, k, _v, _t in before if o >= closed_end}
    assert all(v == b"w" * 20 for _o, k, v, _t in records(plog) if k not in in_active)


def test_a_cleaned_segment_keeps_the_modification_time_of_the_last_segment_it_replaces(tmp_path: Path) -> None:
    import os

    plog = open_log(tmp_path / "t-0", cfg(segment_bytes=10 << 20))
    fill(plog, 50, 5)
    plog.config = cfg(segment_bytes=1)  # the next append rolls
    produce(plog, [(b"z", b"rolls")])
    old = plog.segments[0].path
    os.utime(old, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    assert clean_log(plog, T0) is not None
    assert plog.segments[0].path.stat().st_mtime_ns == 1_000_000_000_000_000_000


def test_a_compacted_log_rolls_by_max_compaction_lag_too(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg(segment_bytes=10 << 20, max_compaction_lag_ms=1000))
    born = plog.active.created_ms
    plog.append_as_leader(build_batch([(b"a", b"1")], base_timestamp=T0), 0, born)
    plog.append_as_leader(build_batch([(b"a", b"2")], base_timestamp=T0), 0, born + 999)
    assert len(plog.segments) == 1
    plog.append_as_leader(build_batch([(b"a", b"3")], base_timestamp=T0), 0, plog.active.created_ms + 1000)
    assert len(plog.segments) == 2
    assert cfg(cleanup_policy="delete", max_compaction_lag_ms=1000).max_segment_ms == cfg().segment_ms


# -- transactions: markers, aborted data and the .txnindex come through a cleaning --------------------
def _with_an_aborted_transaction(plog: PartitionLog) -> tuple[int, int]:
    """txkey = "before", then a transaction writing txkey = "aborted" and its ABORT marker, then enough keyed
    records to close the segments; returns (first offset, marker offset) of the transaction."""
    from epochlog.protocol.control_records import ControlType, marker_batch

    produce(plog, [(b"txkey", b"before")])
    first = plog.log_end_offset
    produce(plog, [(b"txkey", b"aborted")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = plog.log_end_offset
    plog.append_as_leader(marker_batch(9, 0, ControlType.ABORT, 0, T0), 0, T0)
    plog.high_watermark = plog.log_end_offset
    fill(plog, 200, 10, seed=3)
    return first, marker


def test_an_aborted_transaction_is_removed_and_does_not_supersede(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    first, marker = _with_an_aborted_transaction(plog)
    assert [(a.first_offset, a.last_offset) for a in plog.aborted_transactions(0, plog.log_end_offset)] == [
        (first, marker)
    ]
    assert clean_log(plog, T0, force=True) is not None
    assert len(plog.segments) > 1
    # The marker's segment was rewritten; its index came with it.
    assert [(a.first_offset, a.last_offset) for a in plog.aborted_transactions(0, plog.log_end_offset)] == [
        (first, marker)
    ]
    # The aborted write is gone, and it did not take txkey's committed value with it.
    values = {o: v for o, k, v, _t in records(plog) if k == b"txkey"}
    assert b"before" in values.values() and first not in values
    again = open_log(tmp_path / "t-0", cfg(), recover=True)
    assert [(a.first_offset, a.last_offset) for a in again.aborted_transactions(0, again.log_end_offset)] == [
        (first, marker)
    ]


@pytest.mark.parametrize("rule", ["rename:EIO:*.log.swap", "rename:EIO:*[0-9].log", "unlink:EIO:*.deleted"])
def test_a_crash_in_the_swap_keeps_the_aborted_transactions(tmp_path: Path, rule: str, restore_fileops: None) -> None:
    c = cfg()
    plog = open_log(tmp_path / "t-0", c)
    first, marker = _with_an_aborted_transaction(plog)
    plog.flush()
    fileops.install(FaultyFileOps(rule))
    with pytest.raises((KafkaStorageError, OSError)):
        clean_log(plog, T0, force=True)
    plog.abandon()
    fileops.install(fileops.FileOps())
    again = open_log(tmp_path / "t-0", c, recover=True)
    assert [(a.first_offset, a.last_offset) for a in again.aborted_transactions(0, again.log_end_offset)] == [
        (first, marker)
    ]
