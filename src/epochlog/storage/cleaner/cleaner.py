"""Cleaning one log: Kafka's Cleaner.doClean, with its rules and in its order.

1. The cleanable range: the closed segments from the log start up to the first that is uncleanable
   (the active segment; one that reaches above the last stable offset, which is at most the high
   watermark: a truncation can never cut into cleaned data, and every transaction with data in the
   range is decided; one holding a record younger than ``min.compaction.lag.ms``). Segments from the
   first dirty offset (``cleaner-offset-checkpoint``) on are dirty, those before it were cleaned.
2. The offset map: each key's latest offset in the dirty segments (aborted transactions' records
   left out: they never supersede anything).
3. The segments from the log start through the dirty ones are grouped (a group's total size fits in
   ``segment.bytes``, its offsets in a 4-byte index delta) and each group is rewritten into one
   ``.cleaned`` segment: a record stays unless a later record of its key is in the map; tombstones
   stay until their batch's delete horizon; aborted transactions' records go, and markers go once
   their transaction's data is gone and their delete horizon has passed (cleaner/transactions.py);
   batches keep their offsets, epochs, timestamps and producer fields; an emptied batch goes, except
   the last batch of an active producer (its sequence state) and the last batch of each group (so a
   group's offset range survives, which also makes a swap's recovery exact).
4. Each group is swapped in under the partition's owner (the event loop), which checks first that the
   segments are still those that were read (retention, truncation or deletion may have changed the
   log meanwhile; the cleaning is then dropped and tried again later).

Everything here but the swap runs on the cleaner's thread: it reads the segments through descriptors
of its own, so nothing the event loop closes can pull a file out from under it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from epochlog.protocol.control_records import read_marker
from epochlog.protocol.record_batch import HEADER_SIZE, BatchHeader, CorruptBatchError, compute_crc, read_header
from epochlog.storage import fileops
from epochlog.storage.cleaner import swap
from epochlog.storage.cleaner.record_filter import (
    Filtered,
    empty_of,
    filter_batch,
    has_delete_horizon,
    map_keys,
    records_of,
    with_delete_horizon,
)
from epochlog.storage.cleaner.swap import CLEANED
from epochlog.storage.cleaner.throttler import Throttler
from epochlog.storage.cleaner.transactions import CleanedTransactions
from epochlog.storage.config import LogConfig
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.segment import Segment
from epochlog.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.cleaner")

READ_CHUNK = 8 << 20
WRITE_CHUNK = 4 << 20
_MAX_RELATIVE_OFFSET = 0x7FFFFFFF
# How long the cleaner works before pausing, and the pause (see Cleaner._batches).
GIL_SLICE_S = 0.001
GIL_PAUSE_S = 0.0001

T = TypeVar("T")


class RunOnOwner(Protocol):
    """Runs ``fn`` on the thread that owns the logs (the event loop) and returns what it returned."""

    def __call__(self, fn: Callable[[], T], /) -> T: ...


def run_here(fn: Callable[[], T]) -> T:
    """The owner is the calling thread (tests, tools)."""
    return fn()


class CleaningAborted(Exception):
    """The log changed under the cleaner (retention, truncation, deletion): try again later."""


@dataclass
class SegmentInfo:
    segment: Segment | None  # None in a cleaner process, which has only the files
    base: int
    next_offset: int
    size: int
    largest_ts: int
    fd: int = -1  # the cleaner's own descriptor (a dup), only in a view handed to the cleaner
    path: Path | None = None


@dataclass
class LogView:
    """What the cleaner may clean, taken on the owner's thread."""

    directory: Path
    name: str
    segments: list[SegmentInfo]  # the closed segments, oldest first
    log_start: int
    high_watermark: int
    config: LogConfig
    # producer id -> offset of its last data batch: that batch keeps its header (idempotence state).
    producer_last_offsets: dict[int, int] = field(default_factory=dict)
    first_dirty_ts: int = -1
    truncations: int = 0  # PartitionLog.truncations when the view was taken
    # Nothing at or past it is cleaned: an undecided transaction may still be aborted (-1: the HW).
    last_stable_offset: int = -1
    # The log's aborted transactions (every segment's .txnindex), which tell aborted data from committed.
    aborted: list[AbortedTxn] = field(default_factory=list)
    # producer id -> epoch, for active producers with no data batch cached (their last entry is a
    # marker, e.g. after an epoch bump): that marker keeps its header, the epoch fences older writers.
    marker_epochs: dict[int, int] = field(default_factory=dict)

    @property
    def cleanable_end(self) -> int:
        # The LSO is never past the HW (the log's owner computes both): -1 says the view has no LSO.
        return self.high_watermark if self.last_stable_offset < 0 else self.last_stable_offset

    def close(self) -> None:
        for s in self.segments:
            if s.fd >= 0:
                os.close(s.fd)
                s.fd = -1


@dataclass
class Cleanable:
    """The cleanable range of a log: clean segments, then dirty ones, all closed and below the HW."""

    clean: list[SegmentInfo]
    dirty: list[SegmentInfo]
    first_dirty: int

    @property
    def clean_bytes(self) -> int:
        return sum(s.size for s in self.clean)

    @property
    def dirty_bytes(self) -> int:
        return sum(s.size for s in self.dirty)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def rebind(self, view: LogView) -> Cleanable:
        """The same range over ``view``'s segments (a view taken later, with the cleaner's descriptors)."""
        by_base = {s.base: s for s in view.segments}
        return Cleanable([by_base[s.base] for s in self.clean], [by_base[s.base] for s in self.dirty], self.first_dirty)

    @property
    def end_offset(self) -> int:
        """Where the next cleaning's dirty part starts once this one is done."""
        return self.dirty[-1].next_offset if self.dirty else self.first_dirty


def cleanable_range(view: LogView, checkpoint: int | None, now_ms: int) -> Cleanable:
    cfg = view.config
    first_dirty = checkpoint if checkpoint is not None else view.log_start
    last_next = view.segments[-1].next_offset if view.segments else view.log_start
    if first_dirty < view.log_start or first_dirty > last_next:
        first_dirty = view.log_start  # out of range (truncation, retention): everything is dirty again
    clean: list[SegmentInfo] = []
    dirty: list[SegmentInfo] = []
    for s in view.segments:
        if s.next_offset <= view.log_start and s.size == 0:
            continue
        if s.next_offset > view.cleanable_end:
            break
        if cfg.min_compaction_lag_ms > 0 and now_ms - s.largest_ts < cfg.min_compaction_lag_ms:
            break
        (clean if s.next_offset <= first_dirty else dirty).append(s)
    return Cleanable(clean, dirty, first_dirty)


def needs_cleaning(view: LogView, rng: Cleanable, now_ms: int, tombstone_due: bool) -> str | None:
    """Why the log should be cleaned now (None: it should not)."""
    cfg = view.config
    if rng.dirty and rng.dirty_ratio >= cfg.min_cleanable_dirty_ratio:
        return f"dirty ratio {rng.dirty_ratio:.2f}"
    if rng.dirty and view.first_dirty_ts >= 0 and now_ms - view.first_dirty_ts > cfg.max_compaction_lag_ms:
        return "max.compaction.lag.ms passed"
    if tombstone_due and (rng.clean or rng.dirty):
        return "tombstones past their delete horizon"
    return None


@dataclass
class CleanStats:
    dirty_bytes: int = 0  # the dirty part's size: what "MB/s cleaned" counts
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    groups: int = 0
    seconds: float = 0.0
    # The earliest delete horizon among the tombstones kept (-1: none): when to clean again for them.
    next_horizon_ms: int = -1
    end_offset: int = -1
    aborted_records_removed: int = 0
    markers_removed: int = 0

    def due_at(self, ms: int) -> None:
        """Another cleaning is due at ``ms`` (the earliest such time is kept)."""
        if self.next_horizon_ms < 0 or ms < self.next_horizon_ms:
            self.next_horizon_ms = ms


def iter_segment_batches(
    fd: int, path: Path, size: int, throttler: Throttler | None = None
) -> Iterator[tuple[bytes | memoryview, BatchHeader]]:
    """Every batch of a segment file, read in large chunks through ``fd``; CRCs are checked (a corrupt
    batch stops the cleaning: it must never be copied onwards as if it were good)."""
    ops = fileops.ops()
    pos = 0
    while pos < size:
        want = min(READ_CHUNK, size - pos)
        buf = ops.pread(fd, want, pos, path)
        if len(buf) < want:
            raise CleaningAborted(f"{path} shrank under the cleaner")
        if throttler is not None:
            throttler.throttle(len(buf))
        view = memoryview(buf)
        off = 0
        n = len(buf)
        while off + HEADER_SIZE <= n:
            h = read_header(view, off)
            if off + h.size > n:
                break
            if compute_crc(view, off, h) != h.crc:
                raise CorruptBatchError(f"{path}: CRC32C mismatch in the batch at offset {h.base_offset}")
            yield view[off : off + h.size], h
            off += h.size
        if off == 0:  # one batch larger than the chunk
            h = read_header(view, 0)
            if pos + h.size > size:
                raise CorruptBatchError(f"{path}: the batch at position {pos} runs past the end")
            whole = ops.pread(fd, h.size, pos, path)
            if compute_crc(whole, 0, h) != h.crc:
                raise CorruptBatchError(f"{path}: CRC32C mismatch in the batch at offset {h.base_offset}")
            yield whole, h
            off = h.size
        pos += off


def group_segments(segments: list[SegmentInfo], max_bytes: int) -> list[list[SegmentInfo]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose sizes add up to at most ``max_bytes`` and
    whose offsets fit a segment's 4-byte relative index."""
    groups: list[list[SegmentInfo]] = []
    for s in segments:
        g = groups[-1] if groups else None
        if (
            g is not None
            and sum(x.size for x in g) + s.size <= max_bytes
            and s.next_offset - 1 - g[0].base <= _MAX_RELATIVE_OFFSET
        ):
            g.append(s)
        else:
            groups.append([s])
    return groups


class Cleaner:
    def __init__(
        self,
        throttler: Throttler | None = None,
        run_on_owner: RunOnOwner = run_here,
        max_map_entries: int = 1 << 62,
        alive: Callable[[], bool] = lambda: True,
    ) -> None:
        """``alive``: asked between chunks; False stops the cleaning (a cleaner process whose broker died)."""
        self.throttler = throttler or Throttler(float("inf"))
        self.run_on_owner = run_on_owner
        self.max_map_entries = max_map_entries
        self.alive = alive

    def clean(
        self,
        plog: PartitionLog,
        view: LogView,
        rng: Cleanable,
        now_ms: int,
        is_live: Callable[[], bool] = lambda: True,
    ) -> CleanStats:
        """Clean ``rng`` of ``plog``; raises CleaningAborted when the log changed under it. ``is_live``
        (asked on the owner, before each swap): the log is still the broker's and online."""
        t0 = time.monotonic()
        stats = CleanStats()
        offsets, map_end, groups = self.plan(view, rng, stats)
        txns = self.transactions_for(view, groups)
        for group in groups:
            cleaned = self.write_group(view, group, offsets, map_end, now_ms, stats, txns)
            self.swap_group(plog, view, group, cleaned, is_live)
            stats.groups += 1
        if txns.revisit:
            stats.due_at(now_ms)
        stats.seconds = time.monotonic() - t0
        self.log_stats(view, stats)
        return stats

    def plan(
        self, view: LogView, rng: Cleanable, stats: CleanStats
    ) -> tuple[dict[bytes, int], int, list[list[SegmentInfo]]]:
        """The offset map of the dirty segments (as many as the map holds), where it ends, and the groups
        of segments to rewrite."""
        offsets: dict[bytes, int] = {}
        mapped: list[SegmentInfo] = []
        txns = CleanedTransactions(view.aborted, rng.dirty[0].base if rng.dirty else rng.first_dirty)
        for s in rng.dirty:
            if mapped and len(offsets) >= self.max_map_entries:
                # The map is full (log.cleaner.dedupe.buffer.size): this cleaning stops at the segments
                # mapped so far, and the next one starts where it stopped.
                log.info("%s: offset map full at %d keys; cleaning up to offset %d", view.name, len(offsets), s.base)
                break
            for batch, h in self._batches(s):
                stats.bytes_read += h.size
                if h.is_control:
                    txns.on_marker(h, read_marker(batch) if h.record_count else None)
                    continue
                if txns.on_batch(h) or h.record_count == 0:
                    continue  # aborted data supersedes nothing
                map_keys(records_of(batch, h), h, offsets)
            mapped.append(s)
        stats.dirty_bytes = sum(s.size for s in mapped)
        map_end = mapped[-1].next_offset if mapped else rng.first_dirty
        stats.end_offset = map_end
        return offsets, map_end, group_segments(rng.clean + mapped, view.config.segment_bytes)

    @staticmethod
    def transactions_for(view: LogView, groups: list[list[SegmentInfo]]) -> CleanedTransactions:
        """The walk of the rewrite, shared by all its groups."""
        return CleanedTransactions(view.aborted, groups[0][0].base if groups else view.log_start)

    def _batches(self, s: SegmentInfo) -> Iterator[tuple[bytes | memoryview, BatchHeader]]:
        path = s.path if s.path is not None else s.segment.path if s.segment is not None else Path()
        clock = time.monotonic
        ran_since = clock()
        for item in iter_segment_batches(s.fd, path, s.size, self.throttler):
            yield item
            if not self.alive():
                raise CleaningAborted("the broker is stopping or gone")
            now = clock()
            if now - ran_since >= GIL_SLICE_S:
                # Give the GIL up for a moment. A thread that is only preempted keeps the event loop
                # waiting a whole switch interval (5 ms) each time the loop comes back from a system
                # call, and far longer when the machine's cores are busy; a pause long enough for the
                # waiting thread to wake bounds that wait by GIL_SLICE_S.
                time.sleep(GIL_PAUSE_S)
                ran_since = clock()

    @staticmethod
    def log_stats(view: LogView, stats: CleanStats) -> None:
        log.info(
            "%s: cleaned [%d, %d) in %d groups: %d -> %d bytes, %d of %d records kept "
            "(%d aborted records and %d markers removed), %.2f s (%.1f MB/s)",
            view.name,
            view.log_start,
            stats.end_offset,
            stats.groups,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_kept,
            stats.records_read,
            stats.aborted_records_removed,
            stats.markers_removed,
            stats.seconds,
            stats.bytes_read / max(stats.seconds, 1e-9) / 1e6,
        )

    def write_group(
        self,
        view: LogView,
        group: list[SegmentInfo],
        offsets: dict[bytes, int],
        map_end: int,
        now_ms: int,
        stats: CleanStats,
        txns: CleanedTransactions,
    ) -> Segment:
        """Rewrite ``group`` into ``<base>.log.cleaned`` (+ indexes), durable; on any failure its files
        are removed and the error raised. ``txns``: the walk of this cleaning's groups, in order."""
        cfg = view.config
        base = group[0].base
        ops = fileops.ops()
        for stale in (f"{base:020d}{s}{CLEANED}" for s in (".log", ".index", ".timeindex", ".txnindex")):
            ops.unlink(view.directory / stale)
        cleaned = Segment(view.directory, base, cfg.index_interval_bytes, now_ms, suffix=CLEANED)
        written = False
        try:
            out = bytearray()
            headers: list[tuple[int, BatchHeader]] = []
            last_seg = group[-1]
            for s in group:
                for batch, h in self._batches(s):
                    stats.bytes_read += h.size
                    retain_empty = (s is last_seg and h.next_offset == s.next_offset) or (
                        h.has_producer_id and view.producer_last_offsets.get(h.producer_id) == h.last_offset
                    )
                    if h.is_control:
                        if h.has_producer_id and view.marker_epochs.get(h.producer_id) == h.producer_epoch:
                            retain_empty = True
                        f = self._filter_marker(batch, h, txns, now_ms, cfg.delete_retention_ms, retain_empty, stats)
                    elif txns.on_batch(h):
                        f = Filtered(empty_of(h) if retain_empty else None, h.record_count, 0, 0)
                        stats.aborted_records_removed += h.record_count
                    else:
                        f = filter_batch(batch, h, offsets, map_end, now_ms, cfg.delete_retention_ms, retain_empty)
                    if f.data is not None:
                        txns.kept(h)
                    stats.records_read += f.records_in
                    stats.records_kept += f.records_kept
                    if f.delete_horizon_ms >= 0 and (
                        stats.next_horizon_ms < 0 or f.delete_horizon_ms < stats.next_horizon_ms
                    ):
                        stats.next_horizon_ms = f.delete_horizon_ms
                    if f.data is None:
                        continue
                    nh = h if f.data is batch else read_header(f.data)
                    headers.append((len(out), nh))
                    out += f.data
                    if len(out) >= WRITE_CHUNK:
                        self._write(cleaned, out, headers, stats)
                        out, headers = bytearray(), []
            if out:
                self._write(cleaned, out, headers, stats)
            cleaned.flush()
            cleaned.write_indexes()
            # The aborted transactions whose ABORT marker this group kept (their data was in the log until
            # this cleaning); the replaced segments' other entries go with their markers.
            aborted = txns.take_index()
            if aborted:
                cleaned.txn_index.rewrite(aborted)
            # The replaced segments' modification time, as Kafka keeps it: time retention falls back on
            # it for batches without timestamps.
            mtime = os.fstat(last_seg.fd).st_mtime_ns
            os.utime(cleaned.fd, ns=(mtime, mtime))
            written = True
            return cleaned
        finally:
            if not written:
                discard(cleaned)

    @staticmethod
    def _filter_marker(
        batch: bytes | memoryview,
        h: BatchHeader,
        txns: CleanedTransactions,
        now_ms: int,
        delete_retention_ms: int,
        retain_empty: bool,
        stats: CleanStats,
    ) -> Filtered:
        """Kafka's rule for a control batch: kept while its transaction has data before it; then it gets a
        delete horizon, and goes once the horizon has passed (its header stays when it is a producer's
        last batch)."""
        n = h.record_count
        marker = read_marker(batch) if n else None
        if not txns.on_marker(h, marker):
            return Filtered(batch, n, n, 0, h.base_timestamp if has_delete_horizon(h) else -1)
        if n == 0:
            return Filtered(batch if retain_empty else None, 0, 0, 0)
        if not has_delete_horizon(h):
            horizon = now_ms + delete_retention_ms
            return Filtered(with_delete_horizon(batch, h, horizon), n, n, 0, horizon)
        if now_ms < h.base_timestamp:
            return Filtered(batch, n, n, 0, h.base_timestamp)
        stats.markers_removed += 1
        return Filtered(empty_of(h) if retain_empty else None, n, 0, 0)

    def swap_group(
        self, plog: PartitionLog, view: LogView, group: list[SegmentInfo], cleaned: Segment, is_live: Callable[[], bool]
    ) -> None:
        """Put ``cleaned`` in place of ``group`` (on the owner); CleaningAborted, and the cleaned files
        removed, when the log changed meanwhile."""
        replaced = [s.segment for s in group if s.segment is not None]
        sizes = [s.size for s in group]
        seen = view.truncations
        retired = None
        try:
            if len(replaced) == len(group):
                retired = self.run_on_owner(
                    lambda: plog.replace_segments(cleaned, replaced, sizes, seen) if is_live() else None
                )
        finally:
            if retired is None:
                discard(cleaned)
        if retired is None:
            raise CleaningAborted(f"{view.name}: segments {[s.base for s in group]} changed while cleaning")
        # The old files are out of the log already; removing them (freeing a segment's blocks can take
        # a while) is done here rather than on the event loop.
        swap.delete_retired(retired)

    def _write(
        self, cleaned: Segment, out: bytearray, headers: list[tuple[int, BatchHeader]], stats: CleanStats
    ) -> None:
        self.throttler.throttle(len(out))
        cleaned.append_cleaned(out, headers)
        stats.bytes_written += len(out)


def discard(cleaned: Segment) -> None:
    """Close and remove a cleaned segment that will not be swapped in. Only its ``.cleaned`` files: once
    a swap has begun they are the log's, and a failure part-way is the log directory's failure."""
    cleaned.abandon()
    if not cleaned.path.name.endswith(CLEANED):
        return
    for p in (cleaned.path, cleaned.index_path, cleaned.time_index_path, cleaned.txn_index.path):
        try:
            fileops.ops().unlink(p)
        except OSError:
            pass


def clean_log(
    plog: PartitionLog,
    now_ms: int,
    first_dirty: int | None = None,
    cleaner: Cleaner | None = None,
    force: bool = False,
) -> CleanStats | None:
    """Clean one log here and now, on the calling thread (tests, benchmarks, tools): None when it does
    not need cleaning (``force``: clean whatever is cleanable, as a due delete horizon would)."""
    probe = plog.cleaning_view(with_files=False)
    rng = cleanable_range(probe, first_dirty, now_ms)
    if rng.dirty:
        probe.first_dirty_ts = plog.first_batch_timestamp(rng.dirty[0].base)
    if needs_cleaning(probe, rng, now_ms, tombstone_due=force) is None:
        return None
    view = plog.cleaning_view(with_files=True)
    rng = rng.rebind(view)
    try:
        return (cleaner or Cleaner()).clean(plog, view, rng, now_ms)
    except OSError as e:  # on the owner's thread here: the directory goes offline like any write's
        plog.failures.mark_offline(plog.log_dir, f"cleaning {plog.topic}-{plog.partition}: {e}")
        raise KafkaStorageError(f"{plog.topic}-{plog.partition}: cleaning failed: {e}") from e
    finally:
        view.close()
