"""One topic-partition's log: segments, epoch cache and producer state; appends, reads, truncation and flushes.

Opening and recovery are in log_loader, retention in log_retention, the cleaner's view of the log and the swap of
a cleaned segment in log_cleaning, the lookups by timestamp in log_timestamps, and what appends and reads answer in
log_results.

Offsets and the leader epoch are written into each batch header in place (the CRC does not
cover them); everything else stays exactly as the producer sent it.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sized
from pathlib import Path
from typing import Protocol, TypeGuard, cast

from epochlog.clock import now_ms as _now_ms
from epochlog.offsets import last_stable_offset
from epochlog.protocol.control_records import read_marker
from epochlog.protocol.record_batch import (
    BatchHeader,
    CorruptBatchError,
    iter_batches,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
)
from epochlog.storage import checkpoints, fileops, log_cleaning, log_loader, log_retention, log_sync, log_timestamps
from epochlog.storage.cleaner.cleaner import LogView
from epochlog.storage.config import LogConfig
from epochlog.storage.epoch_cache import EpochEntry, LeaderEpochCache
from epochlog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from epochlog.storage.file_region import region_read
from epochlog.storage.log_dir_failure import LogDirFailureChannel, io_guard
from epochlog.storage.log_loader import EPOCH_CHECKPOINT
from epochlog.storage.log_results import AppendResult, FileRead, ReadResult, whole_batches
from epochlog.storage.producer_state import CompletedTxn, ProducerStateManager
from epochlog.storage.segment import Segment
from epochlog.storage.transaction_index import AbortedTxn

log = logging.getLogger("epochlog.storage")


class HighWatermarkOwner(Protocol):
    """The replication core of a served partition: the one owner of its HW and LSO."""

    @property
    def high_watermark(self) -> int: ...

    def last_stable_offset(self) -> int: ...


# Called with each flush's duration in seconds (the broker's LogFlushRateAndTimeMs); storage imports no
# metrics library, so the broker sets this at start.
on_flush: Callable[[float], None] | None = None


def _owns_frame(records: bytes | bytearray | memoryview) -> TypeGuard[memoryview]:
    """A writable view that is (nearly) the whole buffer a frame was read into: ours to patch and to keep
    in the segment's tail. A view that is only part of a larger frame is not kept, so it cannot pin a
    request or answer that also carried other partitions' data."""
    return (
        isinstance(records, memoryview)
        and not records.readonly
        and records.nbytes + 4096 >= len(cast(Sized, records.obj))
    )


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        failures: LogDirFailureChannel | None = None,
    ) -> None:
        self.dir = directory
        # The log directory this partition lives in (log.dirs entry): the unit that goes offline.
        self.log_dir = str(directory.parent)
        self.failures = failures if failures is not None else LogDirFailureChannel()
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        # The HW as the checkpoint left it, until a replication core takes the partition over
        # (bind_high_watermark); from then on the core owns it and this log only reads it.
        self._hw = 0
        self._hw_owner: HighWatermarkOwner | None = None
        self.topic_id: uuid.UUID | None = None
        self.epoch_cache = LeaderEpochCache(on_change=self._save_epochs)
        self.producer_state = ProducerStateManager(directory)
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()
        # Set by a broker that syncs by group commit (server/group_commit.py): a flush the policy calls for
        # is handed to it instead of made inside the append, so one sync covers a whole event-loop turn.
        self.on_dirty: Callable[[PartitionLog], None] | None = None
        # A partition created here and not yet written to: its directory entries (its own, in the log dir,
        # and its files') are made durable together just before the first batch is written, not one fsync
        # at a time as each file appears. Until then it holds nothing that a crash could lose: a partition
        # lost with its empty directory is created again from the metadata. Creating a topic of a thousand
        # partitions was four directory fsyncs per partition before any record arrived.
        self._dir_durable = True
        # Set by the LogManager holding this log: makes log-start-offset-checkpoint (one file for the whole
        # directory) durable. A start offset moved by DeleteRecords leaves the records below it in their
        # segment, so without the checkpoint a restart would bring them back. None: a bare log (tests).
        self.persist_log_start: Callable[[], None] | None = None
        # Counts truncations: a cleaning that began before one is not swapped in, since its offset map
        # may name records that are gone (Kafka aborts the cleaning of a log it truncates).
        self.truncations = 0

    @property
    def high_watermark(self) -> int:
        owner = self._hw_owner
        return self._hw if owner is None else owner.high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        if self._hw_owner is not None:
            raise RuntimeError(f"{self}: the replication core owns the high watermark of a served partition")
        self._hw = value

    def bind_high_watermark(self, owner: HighWatermarkOwner) -> None:
        """Hand the HW (and the LSO) to ``owner``, the partition's replication core: retention, compaction, the
        HW checkpoint and ListOffsets read the core's values from then on, never a copy."""
        self._hw_owner = owner

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition} [{self.log_start_offset}, {self.log_end_offset}))"

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        recover: bool,
        topic_id: uuid.UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        failures: LogDirFailureChannel | None = None,
    ) -> PartitionLog:
        self = cls(directory, topic, partition, config, failures)
        self._open(recover, topic_id, recovery_point, log_start_offset, high_watermark)
        return self

    @io_guard
    def _open(
        self, recover: bool, topic_id: uuid.UUID | None, recovery_point: int, log_start_offset: int, high_watermark: int
    ) -> None:
        log_loader.open_log(self, recover, topic_id, recovery_point, log_start_offset, high_watermark)

    @io_guard
    def _save_epochs(self, entries: list[EpochEntry]) -> None:
        checkpoints.write_epochs(
            self.dir / EPOCH_CHECKPOINT, [(e.epoch, e.start_offset) for e in entries], sync_dir=self._dir_durable
        )

    # -- state -------------------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def _new_segment(self, base: int, now_ms: int) -> Segment:
        if self.segments:
            self.active.flush()
            self.active.write_indexes()
            # The rolled segment keeps its tail: followers and tailing consumers still reading its end are
            # served from memory, and the shared budget (segment.TAIL_BUDGET) takes it back first, since it
            # is written to no more.
            self.producer_state.take_snapshot()
        seg = Segment(self.dir, base, self.config.index_interval_bytes, now_ms)
        if seg.size:  # a leftover file at this base offset holds nothing we still own
            fileops.ops().truncate(seg.fd, 0, seg.path)
            fileops.ops().fdatasync(seg.fd, seg.path)
            seg.size = 0
        # The new segment's name, and the renamed index and snapshot files of the one before it, are
        # durable before anything is appended to it.
        if self._dir_durable:
            fileops.ops().fsync_dir(self.dir)
        self.segments.append(seg)
        self._bases.append(base)
        return seg

    def _maybe_roll(self, incoming: int, now_ms: int) -> Segment:
        seg = self.active
        if seg.size > 0 and (
            seg.size + incoming > self.config.segment_bytes
            or now_ms - seg.created_ms >= self.config.max_segment_ms
            or self.log_end_offset - seg.base_offset + 1 > 2**31 - 1
        ):
            log.info("%s-%d: rolling segment at offset %d", self.topic, self.partition, self.log_end_offset)
            seg = self._new_segment(self.log_end_offset, now_ms)
        return seg

    # -- appends -----------------------------------------------------------------------------
    def _validate(
        self, buf: bytes | bytearray | memoryview, crc: bool = True, allow_empty: bool = False
    ) -> list[tuple[int, BatchHeader]]:
        """``allow_empty``: a replica copies a compacted leader's log, where a batch may have lost all its
        records but kept its header (an active producer's last batch)."""
        try:
            batches = list(iter_batches(buf, validate_crc=crc))
        except CorruptBatchError as e:
            raise CorruptRecordError(str(e)) from e
        if not batches:
            raise InvalidRecordError("no record batch in the request")
        for pos, h in batches:
            if h.size > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {h.size} bytes at position {pos} exceeds "
                    f"max.message.bytes={self.config.max_message_bytes}"
                )
            if h.record_count < 0 or (h.record_count == 0 and not allow_empty) or h.last_offset_delta < 0:
                raise InvalidRecordError(f"batch at position {pos} has {h.record_count} records")
        return batches

    @io_guard
    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int, crc_checked: bool = False
    ) -> AppendResult:
        """``crc_checked``: the caller verified every batch's CRC (produce validation does) and the bytes
        have not changed since, so the append does not compute it again."""
        batches = self._validate(records, crc=not crc_checked)
        for pos, h in batches:
            if h.has_producer_id and h.is_control:
                marker = read_marker(records, pos)
                if marker is not None:
                    self.producer_state.check_marker(h, marker)
            elif h.has_producer_id:
                dup = self.producer_state.check(h)
                if dup is not None:
                    return AppendResult(dup.first_offset, dup.last_offset, -1, self.log_start_offset, 0, True)
        # The request's own buffer when it is ours to change (framing.py hands over a large frame in a
        # buffer of its own): patching offsets in place saves a copy of the whole request.
        buf = records if _owns_frame(records) else bytearray(records)
        offset = self.log_end_offset
        first = offset
        append_time = now_ms if self.config.log_append_time else -1
        final: list[tuple[int, BatchHeader]] = []
        count = 0
        for pos, _h in batches:
            set_base_offset(buf, pos, offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            if append_time >= 0:
                set_max_timestamp_log_append(buf, pos, append_time)
            nh = read_header(buf, pos)
            final.append((pos, nh))
            offset = nh.next_offset
            count += nh.record_count
        self._write(buf, final, now_ms)
        # After the data: a failed write leaves no epoch entry ahead of the log end.
        self.epoch_cache.assign(leader_epoch, first)
        return AppendResult(first, offset - 1, append_time, self.log_start_offset, count)

    @io_guard
    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int | None = None) -> int:
        """Append batches that already carry offsets and epochs; returns the new log end offset."""
        batches = self._validate(records, allow_empty=True)
        expected = self.log_end_offset
        for pos, h in batches:
            if h.base_offset < expected:
                raise InvalidRecordError(
                    f"batch at position {pos} has base offset {h.base_offset}, below the log end {expected}"
                )
            expected = h.next_offset
        # The segment's tail keeps what is written: a view of the fetch answer's own buffer may stay,
        # anything else (bytes of the caller's that could change) is copied.
        kept = records if isinstance(records, bytes) or _owns_frame(records) else bytes(records)
        self._write(kept, batches, now_ms or _now_ms())
        for _pos, h in batches:  # KIP-101 step 4.7.1, once the data is written
            if h.partition_leader_epoch > self.epoch_cache.latest_epoch():
                self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        return self.log_end_offset

    def make_dir_durable(self) -> None:
        """Sync the partition directory's entries now (the first write does it anyway); for a directory that
        holds a file whose loss matters before any record arrives, as the quorum-state file does."""
        if not self._dir_durable:
            fileops.ops().fsync_dir(self.dir)  # its files: the first segment, partition.metadata, epochs
            fileops.ops().fsync_dir(self.dir.parent)  # the partition directory itself
            self._dir_durable = True

    def _write(self, buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        self.make_dir_durable()
        seg = self._maybe_roll(len(buf), now_ms)
        if batches[0][1].base_offset > seg.next_offset and seg.size == 0:
            # A follower starting mid-log: begin the segment where the data begins.
            self.segments.pop()
            self._bases.pop()
            seg.delete(sync_dir=False)  # _new_segment syncs the directory
            seg = self._new_segment(batches[0][1].base_offset, now_ms)
        seg.append(buf, batches)
        for pos, h in batches:
            if h.has_producer_id:
                marker = read_marker(buf, pos) if h.is_control else None
                if marker is not None:
                    txn = self.producer_state.complete_txn(h, h.base_offset, marker, h.max_timestamp)
                    self._index_completed(txn, self.producer_state.stable_after(txn))
                else:
                    self.producer_state.update(h, h.base_offset, h.last_offset, h.max_timestamp)
            self.unflushed_messages += h.record_count
        if self.unflushed_messages >= self.config.flush_interval_messages:
            if self.on_dirty is not None:
                self.on_dirty(self)
            else:
                self.flush()

    # -- transactions ------------------------------------------------------------------------
    def _index_completed(self, txn: CompletedTxn, stable: int) -> None:
        """An aborted transaction goes into the index of the segment holding its marker, once."""
        if not txn.aborted:
            return
        seg = self.segments[self._segment_index(txn.last_offset)]
        if txn.last_offset > seg.txn_index.last_offset:
            seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, stable))

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed reads stop: the first offset of a transaction not yet decided (or decided by
        a marker not yet below the high watermark), capped by the high watermark."""
        owner = self._hw_owner
        if owner is not None:
            return owner.last_stable_offset()
        return last_stable_offset(self.producer_state.first_unstable_offset(self._hw), self._hw)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed reader of [fetch_offset, upper_bound) must know of.

        An entry is indexed with its ABORT marker, which may sit in a segment at or past ``upper_bound``
        (another transaction opened meanwhile held the LSO down, and the log rolled): so the search goes on
        through later segments until an entry written once the LSO had passed the bound says nothing later
        can overlap, as Kafka's does. The indexes are read once and kept, so the walk is in memory."""
        out: list[AbortedTxn] = []
        for seg in self.segments[self._segment_index(fetch_offset) :]:
            found, done = seg.txn_index.collect(fetch_offset, upper_bound)
            out += found
            if done:
                break
        return out

    # -- reads -------------------------------------------------------------------------------
    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def _locate(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[Segment, int, int, int, int] | None:
        """(segment, position, bytes to read, offset limit, first batch's base offset) for a read, or None
        when there is nothing to read."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}"
            )
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if offset >= limit:
            return None
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            found = seg.find_position(offset)
            if found is not None:
                break
            i += 1
        else:
            return None
        pos, first = found
        if first.base_offset >= limit:
            return None
        want = max_bytes
        if first.size > max_bytes:
            if not min_one_batch:
                return None
            want = first.size
        return seg, pos, want, limit, first.base_offset

    @io_guard
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        found = self._locate(offset, max_bytes, max_offset, min_one_batch)
        if found is None:
            return ReadResult()
        seg, pos, want, limit, base = found
        return whole_batches(seg.read_parts(pos, want), limit, base)

    @io_guard
    def plan_read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult | FileRead:
        """read(), except that bytes which must come from the file are not read here: the answer is then
        a FileRead whose run() (safe in a worker thread: it reads through its own duplicate of the
        segment's descriptor, which nothing else closes) and finish() complete it. Recent data, held in
        the segment's tail, is answered at once."""
        found = self._locate(offset, max_bytes, max_offset, min_one_batch)
        if found is None:
            return ReadResult()
        seg, pos, want, limit, base = found
        if seg.in_tail(pos):
            return whole_batches(seg.read_parts(pos, want), limit, base)
        return FileRead(os.dup(seg.fd), seg.path, pos, min(want, seg.size - pos), limit, base)

    @io_guard
    def read_region(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """read(), with bytes that must come from the file answered as a FileRegion (storage/file_region.py)."""
        found = self._locate(offset, max_bytes, max_offset, min_one_batch)
        return ReadResult() if found is None else region_read(*found)

    def read_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        for _seg, _pos, h, _batch in self.read_headers_at(from_offset):
            yield h

    def read_headers_at(self, from_offset: int) -> Iterator[tuple[Segment, int, BatchHeader, memoryview | None]]:
        """Each batch header from ``from_offset`` on, with its segment and byte position, and the whole batch
        when the read that found the header already holds it (a reader of the body then reads nothing)."""
        for seg in list(self.segments):
            if seg.next_offset <= from_offset:
                continue
            found = seg.find_position(from_offset) if from_offset > seg.base_offset else None
            for pos, h, batch in seg.headers_from(found[0] if found else 0):
                yield seg, pos, h, batch

    # -- by timestamp (log_timestamps.py) -------------------------------------------------------
    @io_guard
    def offset_for_timestamp(self, ts: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the first record, at or after the log start, whose timestamp is
        >= ts; None when there is none. As Kafka does: find the first batch whose max timestamp reaches
        ts, then look at its records (decompressing them if need be), since timestamps inside a batch
        need not be ordered."""
        return log_timestamps.offset_for_timestamp(self, ts)

    @io_guard
    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp, the first such by offset
        (ListOffsets MAX_TIMESTAMP; Kafka answers the record's offset since KAFKA-16310)."""
        return log_timestamps.max_timestamp_and_offset(self)

    # -- truncation ----------------------------------------------------------------------------
    @io_guard
    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (a follower's truncation)."""
        if offset >= self.log_end_offset:
            # Nothing to cut from the log, but the epoch cache may still end with an epoch this replica
            # started as leader and never appended to; a leader that never saw that epoch answers the
            # follower's LastFetchedEpoch with DivergingEpoch at this very offset, so keeping the entry
            # would make the follower ask again forever (Kafka's truncateTo does the same).
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            return
        log.info("%s-%d: truncating from %d to %d", self.topic, self.partition, self.log_end_offset, offset)
        self.truncations += 1
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self._bases.pop()
        seg = self.active
        found = seg.find_position(offset)
        if found is not None:
            seg.truncate_to_position(found[0])
        # Durable before anything appended after it can be acknowledged: otherwise a crash could bring
        # back the cut records under offsets that new, acknowledged records were given.
        seg.flush()
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._hw = min(self._hw, self.log_end_offset)  # a bound core caps its own HW when it truncates
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        seg.txn_index.truncate_to(self.log_end_offset)
        self.producer_state.delete_snapshots_above(self.log_end_offset)
        log_loader.load_producer_state(self)

    @io_guard
    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.truncations += 1
        for seg in self.segments:
            seg.delete(sync_dir=False)  # _new_segment syncs the directory
        self.segments, self._bases = [], []
        self._new_segment(offset, _now_ms())
        self.log_start_offset = offset
        self._hw = offset  # a bound core moves its own HW to the new start
        self.recovery_point = offset
        self.epoch_cache.clear()
        self.producer_state.delete_snapshots_above(-1)
        log_loader.load_producer_state(self)

    # -- retention (log_retention.py) ---------------------------------------------------------
    @io_guard
    def apply_retention(self, now_ms: int) -> int:
        """Delete whole old segments (never the active one, nor data above the HW); returns bytes freed."""
        return log_retention.apply_retention(self, now_ms)

    @io_guard
    def advance_log_start(self, offset: int, reason: str) -> bool:
        """Start the log at ``offset`` (DeleteRecords on a leader, a follower following its leader's start;
        Kafka's maybeIncrementLogStartOffset). The caller (the replication core) decides the offset, at most
        the high watermark; here it never goes backwards nor past the log end. The new start is durable
        (log-start-offset-checkpoint) before any segment below it is deleted, so a crash in between leaves
        the records below it unreadable rather than back. Returns whether the start moved."""
        return log_retention.advance_log_start(self, offset, reason)

    @io_guard
    def increment_log_start_offset(self, offset: int) -> None:
        log_retention.increment_log_start_offset(self, offset)

    # -- compaction (storage/cleaner; log_cleaning.py) ---------------------------------------
    def cleaning_view(self, with_files: bool) -> LogView:
        """The closed segments, as the cleaner sees them (on the owner's thread). ``with_files``: each
        with a descriptor of the cleaner's own, which it closes (LogView.close)."""
        return log_cleaning.cleaning_view(self, with_files)

    def first_batch_timestamp(self, offset: int) -> int:
        """The max timestamp of the batch holding ``offset`` (max.compaction.lag.ms looks at the first
        dirty batch); -1 when there is none."""
        return log_cleaning.first_batch_timestamp(self, offset)

    @io_guard
    def replace_segments(
        self, cleaned: Segment, old: list[Segment], sizes: list[int], truncations: int
    ) -> list[Path] | None:
        """Swap a cleaned segment in for the segments it was made from (storage/cleaner/swap.py has the
        steps, all but the last: the old segments' ``.deleted`` files are returned for the caller to
        remove). None, and nothing changed, when those segments are no longer all there as they were
        read (retention or deletion got to them first) or the log was truncated since the cleaning
        began (``truncations`` is the count it saw)."""
        return log_cleaning.replace_segments(self, cleaned, old, sizes, truncations)

    # -- durability ----------------------------------------------------------------------------
    @io_guard
    def flush(self, up_to: int | None = None) -> None:
        t0 = time.monotonic()
        for seg in self.segments:
            if seg.unflushed:
                seg.flush()
        if on_flush is not None:
            on_flush(time.monotonic() - t0)
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        self.last_flush_ms = _now_ms()

    @io_guard
    def begin_sync(self) -> log_sync.SyncPlan:
        """A sync of everything written so far, to run off the loop (log_sync.py): plan.run(), then
        finish_sync(plan)."""
        return log_sync.begin_sync(self)

    def finish_sync(self, plan: log_sync.SyncPlan) -> bool:
        """Whether the log is now durable up to plan.end_offset."""
        if on_flush is not None and plan.error is None:
            on_flush(plan.seconds)
        return log_sync.finish_sync(self, plan)

    def maybe_flush_by_time(self, now_ms: int) -> None:
        if self.unflushed_messages and now_ms - self.last_flush_ms >= self.config.flush_interval_ms:
            self.flush()

    @io_guard
    def close(self) -> None:
        self.flush()
        self.producer_state.take_snapshot()
        for seg in self.segments:
            seg.close()
        if self._dir_durable:
            fileops.ops().fsync_dir(self.dir)
        else:
            self.make_dir_durable()

    def abandon(self) -> None:
        """The directory failed: let go of the files without writing (Kafka closes the logs of an offline
        dir and drops them from its checkpoints); what is on disk is recovered at the next start."""
        for seg in self.segments:
            seg.abandon()

    def delete(self) -> None:
        for seg in self.segments:
            seg.delete()
        self.segments, self._bases = [], []
