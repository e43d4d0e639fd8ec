"""The log cleaner and transactions, on real segment files: aborted data goes, committed transactional
records are compacted like any others, nothing at or past the first unstable offset is touched, markers
stay until their transaction's data is gone and their delete horizon has passed, and a crash at any step
of the swap loses nothing a read_committed reader would see."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from epochlog.protocol.control_records import ControlType, marker_batch, read_marker
from epochlog.protocol.record_batch import BatchHeader, iter_batches
from epochlog.protocol.records import ZSTD, decode_batch
from epochlog.storage import fileops
from epochlog.storage.cleaner.cleaner import clean_log
from epochlog.storage.cleaner.record_filter import DELETE_HORIZON_MASK
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.fileops import FaultyFileOps
from epochlog.storage.partition_log import PartitionLog
from tests.unit.storage.test_log_cleaner import (  # noqa: F401  (scans, restore_fileops: fixtures)
    CRASH_POINTS,
    DAY,
    T0,
    cfg,
    open_log,
    produce,
    restore_fileops,
    scans,
)

pytestmark = pytest.mark.timeout(60)

Rec = tuple[int, bytes | None, bytes | None]


class Txn:
    """A transactional producer writing straight to the log, as the partition leader would see it."""

    def __init__(self, plog: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.plog, self.pid, self.epoch, self.seq = plog, pid, epoch, 0

    def send(self, pairs: list[tuple[bytes, bytes | None]], **kw: object) -> int:
        first = self.plog.log_end_offset
        produce(
            self.plog,
            pairs,  # type: ignore[arg-type]
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            is_transactional=True,
            **kw,
        )
        self.seq += len(pairs)
        return first

    def end(self, kind: ControlType) -> int:
        at = self.plog.log_end_offset
        self.plog.append_as_leader(marker_batch(self.pid, self.epoch, kind, 0, T0), 0, T0)
        self.plog.high_watermark = self.plog.log_end_offset
        return at

    def commit(self) -> int:
        return self.end(ControlType.COMMIT)

    def abort(self) -> int:
        return self.end(ControlType.ABORT)


@dataclass
class Batch:
    h: BatchHeader
    records: list[Rec]
    marker: ControlType | None


def batches(plog: PartitionLog, upto: int | None = None) -> list[Batch]:
    """Every batch below ``upto`` (the log end by default), through the log's own read path."""
    end = plog.log_end_offset if upto is None else upto
    out: list[Batch] = []
    offset = plog.log_start_offset
    while offset < end:
        res = plog.read(offset, 1 << 20)
        data = b"".join(bytes(c) for c in res.chunks)
        nxt = offset
        for pos, h in iter_batches(data):
            if h.next_offset <= offset or h.base_offset >= end:
                continue
            m = read_marker(data, pos) if h.is_control else None
            recs = [(r.offset, r.key, r.value) for r in decode_batch(data, pos)[1]]
            out.append(Batch(h, recs, m.type if m is not None else None))
            nxt = h.next_offset
        if nxt == offset:
            break
        offset = nxt
    return out


def read_committed(plog: PartitionLog) -> list[Rec]:
    """What a read_committed consumer gets: records below the LSO, without control records and without
    the records of the aborted transactions the log reports (the consumer's own rule: a producer's
    transactional batches are skipped from an aborted transaction's first offset to its ABORT marker)."""
    lso = plog.last_stable_offset
    pending = sorted(plog.aborted_transactions(plog.log_start_offset, lso), key=lambda a: a.first_offset)
    skipping: set[int] = set()
    out: list[Rec] = []
    for b in batches(plog, lso):
        while pending and pending[0].first_offset <= b.h.last_offset:
            skipping.add(pending.pop(0).producer_id)
        if b.h.is_control:
            if b.marker is ControlType.ABORT:
                skipping.discard(b.h.producer_id)
            continue
        if b.h.is_transactional and b.h.producer_id in skipping:
            continue
        out += b.records
    return out


def data_records(plog: PartitionLog) -> list[Rec]:
    """Every data record, read_uncommitted."""
    return [r for b in batches(plog) if not b.h.is_control for r in b.records]


def markers(plog: PartitionLog) -> list[tuple[int, int, ControlType | None, BatchHeader]]:
    return [(b.h.base_offset, b.h.producer_id, b.marker, b.h) for b in batches(plog) if b.h.is_control]


def latest(recs: list[Rec]) -> dict[bytes | None, bytes | None]:
    return {k: v for _o, k, v in recs}


def filler(plog: PartitionLog, n: int, prefix: bytes, keys: int | None = None) -> None:
    """``n`` plain records (each key once unless ``keys`` bounds them), enough to roll segments."""
    for i in range(n):
        k = i % keys if keys else i
        produce(plog, [(prefix + b"%d" % k, b"filler-%d" % i * 4)])


def roll_and_close(plog: PartitionLog) -> None:
    """Close the segments written so far: the active one is never cleaned."""
    filler(plog, 60, b"tail-")


def test_aborted_records_vanish_and_the_read_committed_view_does_not_change(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    produce(plog, [(b"shared", b"committed-before")])
    committer, aborter = Txn(plog, 1), Txn(plog, 2)
    aborted_first = aborter.send([(b"shared", b"aborted-1"), (b"only-aborted", b"aborted-2")])
    committer.send([(b"c1", b"committed-1")])
    filler(plog, 40, b"a-")  # the aborted transaction spans segments
    aborter.send([(b"shared", b"aborted-3")], compression=ZSTD)
    committer.send([(b"c2", b"committed-2")])
    abort_at = aborter.abort()
    committer.commit()
    aborter.send([(b"after", b"committed-later")])  # the producer goes on: its aborted batches are not its last
    aborter.commit()
    roll_and_close(plog)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.aborted_transactions(0, 1 << 62)] == [
        (2, aborted_first, abort_at)
    ]
    view = read_committed(plog)
    state = {pid: (e.epoch, e.last_seq) for pid, e in plog.producer_state.producers.items()}
    epochs = plog.epoch_cache.entries()
    assert any(v.startswith(b"aborted") for _o, _k, v in data_records(plog) if v)

    stats = clean_log(plog, T0, force=True)
    assert stats is not None and stats.aborted_records_removed == 3
    assert not [v for _o, _k, v in data_records(plog) if v and v.startswith(b"aborted")]
    assert read_committed(plog) == view
    assert latest(data_records(plog))[b"shared"] == b"committed-before"  # an aborted write superseded nothing
    # Its marker and index entry stay for now: a reader that fetched the aborted data before this
    # cleaning still needs both.
    assert next((o, pid, m) for o, pid, m, _h in markers(plog)) == (abort_at, 2, ControlType.ABORT)
    assert [a.last_offset for a in plog.aborted_transactions(0, 1 << 62)] == [abort_at]

    # After a restart (producer snapshots, or a replay of what is left when there are none) the producer
    # state, the LSO and the epochs are those from before the cleaning: no transaction hangs open.
    hw = plog.high_watermark
    plog.close()
    for drop_snapshots in (False, True):
        if drop_snapshots:
            for p in (tmp_path / "t-0").glob("*.snapshot"):
                p.unlink()
        again = open_log(tmp_path / "t-0", cfg(), recover=True)
        again.high_watermark = hw
        assert {pid: (e.epoch, e.last_seq) for pid, e in again.producer_state.producers.items()} == state
        assert again.producer_state.ongoing_transactions() == []
        assert again.last_stable_offset == hw
        assert again.epoch_cache.entries() == epochs
        assert read_committed(again) == view
        again.close()


def test_committed_transactional_records_are_compacted_like_any_others(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    one, three = Txn(plog, 1), Txn(plog, 3)
    first_batch = one.send([(b"k", b"v1-txn"), (b"gone", b"g1")])
    one.commit()
    produce(plog, [(b"k", b"v2-plain"), (b"gone", b"g2")])
    last_of_one = one.send([(b"j", b"w1-txn")])
    one.commit()
    three.send([(b"j", b"w2-txn"), (b"k", b"v3-txn")])
    three.commit()
    produce(plog, [(b"gone", None)])
    roll_and_close(plog)
    before = read_committed(plog)
    assert clean_log(plog, T0, force=True) is not None
    recs = data_records(plog)
    by_key: dict[bytes | None, list[bytes | None]] = {}
    for _o, k, v in recs:
        by_key.setdefault(k, []).append(v)
    assert by_key[b"k"] == [b"v3-txn"] and by_key[b"j"] == [b"w2-txn"] and by_key[b"gone"] == [None]
    assert latest(read_committed(plog)) == latest(before)
    hs = {b.h.base_offset: b.h for b in batches(plog)}
    # The producer's first batch lost all its records and went whole; its last keeps an empty header
    # (its sequence state), as an idempotent producer's does.
    assert first_batch not in hs
    assert hs[last_of_one].record_count == 0 and hs[last_of_one].is_transactional


def test_nothing_at_or_past_an_open_transaction_is_cleaned(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg())
    filler(plog, 100, b"k", keys=5)
    txn = Txn(plog, 5)
    first = txn.send([(b"open", b"undecided")])
    filler(plog, 200, b"k", keys=5)  # closed segments, below the high watermark, but after the open txn
    produce(plog, [(b"last", b"in the active segment")])
    assert plog.last_stable_offset == first
    assert len(plog.segments) > 4
    before = batches(plog)
    stats = clean_log(plog, T0, force=True)
    assert stats is not None and stats.end_offset <= first
    after = batches(plog)
    # Every batch of the segment holding the open transaction's first offset, and after it, is as it was.
    from_seg = plog.segments[plog._segment_index(first)].base_offset
    assert from_seg <= first
    assert [(b.h, b.records) for b in after if b.h.base_offset >= from_seg] == [
        (b.h, b.records) for b in before if b.h.base_offset >= from_seg
    ]
    assert len(after) < len(before)  # what came before it was cleaned
    # Once the transaction is aborted (and its marker below the HW) the cleaning goes past it, and
    # removes its record.
    txn.abort()
    produce(plog, [(b"last", b"again")])
    filler(plog, 60, b"z")
    assert plog.last_stable_offset == plog.high_watermark
    assert clean_log(plog, T0, force=True) is not None
    assert b"open" not in latest(data_records(plog))
    assert latest(read_committed(plog))[b"k1"] == latest(data_records(plog))[b"k1"]


def test_markers_stay_until_their_data_is_gone_and_their_horizon_has_passed(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", cfg(delete_retention_ms=DAY))
    a, c = Txn(plog, 2), Txn(plog, 4)
    a.send([(b"x", b"aborted")])
    abort_at = a.abort()
    c.send([(b"y", b"committed, superseded later")])
    commit_gone = c.commit()
    c.send([(b"z", b"committed, the latest")])
    commit_kept = c.commit()
    a.send([(b"w", b"committed, the latest")])  # producer 2's last batch is not the aborted one
    commit_a = a.commit()
    produce(plog, [(b"y", b"plain")])
    roll_and_close(plog)

    def present() -> dict[int, BatchHeader]:
        return {o: h for o, _pid, _m, h in markers(plog)}

    # 1st cleaning: the aborted record and the superseded committed one go; their markers stay (a reader
    # may have fetched the data before it went), and the cleaner wants to come back for them.
    s1 = clean_log(plog, T0, force=True)
    assert s1 is not None and s1.next_horizon_ms == T0
    assert set(present()) == {abort_at, commit_gone, commit_kept, commit_a}
    assert [a.last_offset for a in plog.aborted_transactions(0, 1 << 62)] == [abort_at]
    # 2nd: nothing of the first two transactions is left before their markers: their delete horizon
    # starts; the ABORT marker's index entry goes (there is no aborted data left to skip).
    s2 = clean_log(plog, T0 + 10, first_dirty=plog.log_end_offset, force=True)
    assert s2 is not None and s2.next_horizon_ms == T0 + 10 + DAY
    hs = present()
    for o in (abort_at, commit_gone):
        assert hs[o].attributes & DELETE_HORIZON_MASK and hs[o].base_timestamp == T0 + 10 + DAY
    for o in (commit_kept, commit_a):
        assert not hs[o].attributes & DELETE_HORIZON_MASK
    assert plog.aborted_transactions(0, 1 << 62) == []
    # The marker records keep their own timestamp.
    assert all(b.h.max_timestamp == T0 for b in batches(plog) if b.h.is_control)
    # Before the horizon they stay, after it they go; markers of transactions with data left stay.
    assert clean_log(plog, T0 + 9 + DAY, first_dirty=plog.log_end_offset, force=True) is not None
    assert set(present()) == {abort_at, commit_gone, commit_kept, commit_a}
    s4 = clean_log(plog, T0 + 10 + DAY, first_dirty=plog.log_end_offset, force=True)
    assert s4 is not None and s4.markers_removed == 2
    assert set(present()) == {commit_kept, commit_a}
    assert latest(read_committed(plog))[b"z"] == b"committed, the latest"
    # A replay of what is left (no producer snapshots) leaves no transaction open.
    plog.close()
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    again = open_log(tmp_path / "t-0", cfg(delete_retention_ms=DAY), recover=True)
    assert again.producer_state.ongoing_transactions() == []


def test_a_producers_last_batch_keeps_its_header_and_its_marker(tmp_path: Path) -> None:
    """An aborted batch that is its producer's last keeps an empty header (the sequence state), and so
    its transaction's marker stays too: a replay must see the transaction closed."""
    plog = open_log(tmp_path / "t-0", cfg(delete_retention_ms=0))
    a = Txn(plog, 8)
    last = a.send([(b"x", b"aborted")])
    abort_at = a.abort()
    roll_and_close(plog)
    for i in range(3):
        assert clean_log(plog, T0 + i, first_dirty=plog.log_end_offset, force=True) is not None
    hs = {b.h.base_offset: b.h for b in batches(plog)}
    assert hs[last].record_count == 0 and abort_at in hs
    assert plog.producer_state.producers[8].last_seq == 0
    plog.close()
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    again = open_log(tmp_path / "t-0", cfg(delete_retention_ms=0), recover=True)
    assert again.producer_state.ongoing_transactions() == []
    assert again.producer_state.producers[8].last_seq == 0


def _transactional_history(plog: PartitionLog, seed: int) -> None:
    """Plain writes and transactions of several producers, interleaved, some committed, some aborted."""
    rnd = random.Random(seed)
    txns = [Txn(plog, pid) for pid in (11, 12, 13)]
    open_: set[int] = set()
    for i in range(500):
        t = rnd.choice(txns)
        r = rnd.random()
        if r < 0.3:
            produce(plog, [(b"k%d" % rnd.randrange(20), b"plain-%d" % i)])
        elif r < 0.85 or t.pid not in open_:
            pairs = [(b"k%d" % rnd.randrange(20), b"txn-%d-%d-%d" % (t.pid, i, j)) for j in range(rnd.randint(1, 3))]
            t.send(pairs)  # type: ignore[arg-type]
            open_.add(t.pid)
        else:
            (t.abort if rnd.random() < 0.4 else t.commit)()
            open_.discard(t.pid)
    for t in txns:
        if t.pid in open_:
            t.commit()
    roll_and_close(plog)


# The steps of the swap that move transaction indexes, on top of the others.
TXN_CRASH_POINTS = [
    *CRASH_POINTS,
    "rename:EIO:*.txnindex.swap",  # step 1
    "rename:EIO:*.txnindex.deleted",  # step 2
    "rename:EIO:*[0-9].txnindex",  # step 3
]


@pytest.mark.parametrize("rule", TXN_CRASH_POINTS)
def test_a_crash_at_any_swap_step_loses_nothing_a_reader_sees(
    tmp_path: Path,
    rule: str,
    restore_fileops: None,  # noqa: F811
) -> None:
    c = cfg(segment_bytes=3000)
    plog = open_log(tmp_path / "t-0", c)
    _transactional_history(plog, seed=3)
    plog.flush()
    view = read_committed(plog)
    all_before = {o: (k, v) for o, k, v in data_records(plog)}
    start, end, epochs = plog.log_start_offset, plog.log_end_offset, plog.epoch_cache.entries()
    indexed = {a.last_offset for a in plog.aborted_transactions(0, 1 << 62)}
    assert indexed and any(p.name.endswith(".txnindex") for p in plog.dir.iterdir())
    fileops.install(FaultyFileOps(rule))
    with pytest.raises((KafkaStorageError, OSError)):
        clean_log(plog, T0, force=True)
    plog.abandon()
    fileops.install(fileops.FileOps())
    again = open_log(tmp_path / "t-0", c, recover=True)
    again.high_watermark = again.log_end_offset
    after = read_committed(again)
    offs = [o for o, _k, _v in data_records(again)]
    assert offs == sorted(set(offs)), "an offset appears twice or out of order"
    assert all(all_before[o] == (k, v) for o, k, v in data_records(again)), "a record changed"
    assert latest(after) == latest(view), "a key's latest committed value was lost or an aborted one shows"
    assert {o for o, _k, _v in after} <= {o for o, _k, _v in view}
    assert (again.log_start_offset, again.log_end_offset) == (start, end)
    assert again.epoch_cache.entries() == epochs
    assert again.producer_state.ongoing_transactions() == []
    # Each aborted transaction still indexed is one that was, and none whose records remain is missing.
    left = {a.last_offset for a in again.aborted_transactions(0, 1 << 62)}
    assert left <= indexed
    assert not [p.name for p in again.dir.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    # The next cleaning finishes the job: no aborted record is left, and the readers' view holds.
    assert clean_log(again, T0, force=True) is not None
    assert latest(read_committed(again)) == latest(view)
    assert read_committed(again) == [r for r in data_records(again)]


def test_a_follower_copying_a_cleaned_log_sees_every_transaction_closed(tmp_path: Path) -> None:
    """A replica fetching a cleaned log from the start (aborted data gone, markers with and without their
    data, header-only batches) ends with no open transaction, the leader's LSO, and the same read_committed
    view, with its own transaction index built from the markers it copied."""
    c = cfg(segment_bytes=3000, delete_retention_ms=0)
    leader = open_log(tmp_path / "t-0", c)
    _transactional_history(leader, seed=9)
    removed = 0
    for i in range(3):  # the markers whose data is gone go too (delete.retention.ms=0)
        stats = clean_log(leader, T0 + i, first_dirty=leader.log_end_offset, force=True)
        assert stats is not None
        removed += stats.markers_removed
    assert removed > 0
    assert any(b.h.is_transactional and not b.h.is_control and b.h.record_count == 0 for b in batches(leader))
    follower = PartitionLog.open(tmp_path / "f" / "t-0", "t", 0, c, recover=False)
    while follower.log_end_offset < leader.log_end_offset:  # as a replica fetcher would
        res = leader.read(follower.log_end_offset, 1 << 20)
        follower.append_as_follower(b"".join(bytes(ch) for ch in res.chunks))
    follower.high_watermark = leader.high_watermark
    assert follower.producer_state.ongoing_transactions() == []
    assert follower.last_stable_offset == leader.last_stable_offset == leader.log_end_offset
    assert read_committed(follower) == read_committed(leader)
    assert {pid: e.last_seq for pid, e in follower.producer_state.producers.items()} == {
        pid: e.last_seq for pid, e in leader.producer_state.producers.items()
    }


def test_a_marker_that_is_its_producers_last_entry_keeps_its_header(tmp_path: Path) -> None:
    """A coordinator that fenced a producer wrote the ABORT at a bumped epoch, and the producer wrote
    nothing since: once the marker's data is gone and its horizon has passed, its record goes but its
    header stays, with the producer's latest epoch (Kafka keeps it for fencing)."""
    plog = open_log(tmp_path / "t-0", cfg(delete_retention_ms=0))
    Txn(plog, 20, epoch=0).send([(b"x", b"aborted")])
    fenced = Txn(plog, 20, epoch=1).abort()
    other = Txn(plog, 21)
    other.send([(b"y", b"superseded")])
    gone = other.abort()
    other.send([(b"z", b"kept")])  # producer 21's last entry is data: its old marker may go whole
    other.commit()
    roll_and_close(plog)
    assert plog.producer_state.producers[20].epoch == 1 and not plog.producer_state.producers[20].batches
    for i in range(3):
        assert clean_log(plog, T0 + i, first_dirty=plog.log_end_offset, force=True) is not None
    hs = {b.h.base_offset: b.h for b in batches(plog)}
    assert hs[fenced].is_control and hs[fenced].record_count == 0 and hs[fenced].producer_epoch == 1
    assert gone not in hs


def test_a_truncation_after_the_swap_reaches_the_cleaned_segments_transaction_index(tmp_path: Path) -> None:
    """The swapped-in segment's .txnindex is the one under its final name: a truncation below an ABORT
    marker (a follower's, after an unclean election) must rewrite that file, not a stale .cleaned path."""
    plog = open_log(tmp_path / "t-0", cfg())
    produce(plog, [(b"a", b"1")])
    aborter = Txn(plog, 2)
    aborter.send([(b"x", b"aborted")])
    abort_at = aborter.abort()
    aborter.send([(b"y", b"committed")])
    aborter.commit()
    roll_and_close(plog)
    assert clean_log(plog, T0, force=True) is not None
    seg = plog.segments[plog._segment_index(abort_at)]
    index_file = tmp_path / "t-0" / f"{seg.base_offset:020d}.txnindex"
    assert index_file.stat().st_size > 0
    plog.truncate_to(abort_at)
    assert not index_file.exists() or index_file.stat().st_size == 0
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    plog.close()
    again = open_log(tmp_path / "t-0", cfg(), recover=True)
    assert again.aborted_transactions(0, 1 << 62) == []
