"""One topic-partition's log: segments, epoch cache, producer state, recovery and retention.

Offsets and the leader epoch are written into each batch header in place (the CRC does not
cover them); everything else stays exactly as the producer sent it.
"""

from __future__ import annotations

import base64
import bisect
import functools
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from epochlog.offsets import last_stable_offset
from epochlog.protocol.control_records import Marker, read_marker
from epochlog.protocol.record_batch import (
    BatchHeader,
    CorruptBatchError,
    iter_batches,
    read_header,
    set_base_offset,
    set_max_timestamp_log_append,
    set_partition_leader_epoch,
)
from epochlog.protocol.records import decode_batch
from epochlog.storage import checkpoints, fileops
from epochlog.storage.cleaner import swap
from epochlog.storage.cleaner.cleaner import LogView, SegmentInfo
from epochlog.storage.config import LogConfig
from epochlog.storage.epoch_cache import EpochEntry, LeaderEpochCache
from epochlog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from epochlog.storage.log_dir_failure import LogDirFailureChannel
from epochlog.storage.producer_state import CompletedTxn, ProducerStateManager
from epochlog.storage.segment import Segment
from epochlog.storage.transaction_index import AbortedTxn, TransactionIndexCorrupt

log = logging.getLogger("epochlog.storage")

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _io(fn: Callable[Concatenate[PartitionLog, _P], _R]) -> Callable[Concatenate[PartitionLog, _P], _R]:
    """Kafka's maybeHandleIOException: refused while the log directory is offline, and an OSError takes
    it offline (once, for every partition in it) and surfaces as KAFKA_STORAGE_ERROR."""

    @functools.wraps(fn)
    def guarded(self: PartitionLog, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        failures = self.failures
        if failures.offline_count and failures.is_offline(self.log_dir):
            raise KafkaStorageError(f"{self.topic}-{self.partition}: log directory {self.log_dir} is offline")
        try:
            return fn(self, *args, **kwargs)
        except OSError as e:
            failures.mark_offline(self.log_dir, f"{fn.__name__} on {self.topic}-{self.partition}: {e}")
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {fn.__name__} failed: {e}") from e

    return guarded


def _whole_batches(parts: list[bytes | memoryview], limit: int, base: int) -> ReadResult:
    """Whole batches below ``limit`` only. The parts are handed on as they are (a follower's fetch spans
    two appends more often than not): joining them would copy a megabyte per fetch."""
    chunks: list[bytes | memoryview] = []
    for data in parts:
        end = 0
        n = len(data)
        while end + 61 <= n:
            h = read_header(data, end)
            if h.base_offset >= limit or end + h.size > n:
                break
            end += h.size
        if end:
            chunks.append(data[:end] if end < n else data)
        if end < n:
            break
    if not chunks:
        return ReadResult()
    return ReadResult(chunks, base)


@dataclass
class FileRead:
    """A read from a segment file, planned on the event loop and done elsewhere (see plan_read)."""

    fd: int
    path: Path
    position: int
    length: int
    limit: int
    base_offset: int

    def run(self) -> memoryview:
        try:
            return memoryview(fileops.ops().pread(self.fd, self.length, self.position, self.path))
        finally:
            os.close(self.fd)

    def finish(self, data: memoryview) -> ReadResult:
        return _whole_batches([data], self.limit, self.base_offset)

    def discard(self) -> None:
        os.close(self.fd)


@dataclass(slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    duplicate: bool = False


class HighWatermarkOwner(Protocol):
    """The replication core of a served partition: the one owner of its HW and LSO."""

    @property
    def high_watermark(self) -> int: ...

    def last_stable_offset(self) -> int: ...


@dataclass(slots=True)
class ReadResult:
    chunks: list[bytes | memoryview] = field(default_factory=list)
    first_offset: int = -1

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)


def parse_dir_name(name: str) -> tuple[str, int] | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def _encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


# Called with each flush's duration in seconds (the broker's LogFlushRateAndTimeMs); storage imports no
# metrics library, so the broker sets this at start.
on_flush: Callable[[float], None] | None = None


def _decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _owns_frame(records: bytes | bytearray | memoryview) -> bool:
    """A writable view that is (nearly) the whole buffer a frame was read into: ours to patch and to keep
    in the segment's tail. A view that is only part of a larger frame is not kept, so it cannot pin a
    request or answer that also carried other partitions' data."""
    return isinstance(records, memoryview) and not records.readonly and records.nbytes + 4096 >= len(records.obj)


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

    @_io
    def _open(
        self, recover: bool, topic_id: uuid.UUID | None, recovery_point: int, log_start_offset: int, high_watermark: int
    ) -> None:
        directory, config = self.dir, self.config
        if not directory.exists():
            fileops.ops().mkdir(directory)
            self._dir_durable = False  # synced before the first write (make_dir_durable)
        self._load_topic_id(topic_id)
        strays = list(directory.glob("*.tmp")) + list(directory.glob("*.deleted"))
        for stray in strays:
            fileops.ops().unlink(stray)
        if strays:
            fileops.ops().fsync_dir(directory)
        # A cleaner's swap that a crash interrupted is completed or rolled back before the segments are
        # listed (storage/cleaner/swap.py says which, and why neither loses nor duplicates a record).
        swap.recover_swaps(directory)
        bases = sorted(int(p.name[:-4]) for p in directory.glob("*.log") if p.name[:-4].isdigit())
        now = _now_ms()
        self.segments = [Segment(directory, b, config.index_interval_bytes, now) for b in bases]
        self._bases = bases
        self.recovery_point = recovery_point
        self._load_segments(recover)
        if not self.segments:
            self._new_segment(max(log_start_offset, 0), now)
        self.log_start_offset = max(self.segments[0].base_offset, log_start_offset)
        if self.log_start_offset > self.log_end_offset:
            self.log_start_offset = self.log_end_offset
        self.recovery_point = min(max(recovery_point, 0), self.log_end_offset) if not recover else self.log_end_offset
        self._hw = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        try:
            entries = checkpoints.read_epochs(directory / EPOCH_CHECKPOINT)
        except (checkpoints.CheckpointError, ValueError) as e:
            log.error("%s: leader-epoch-checkpoint unreadable (%s); rebuilding it from the batches", self, e)
            entries = self._epochs_from_batches()
        self.epoch_cache = LeaderEpochCache(entries, on_change=self._save_epochs)
        # KIP-101 "Unclean Shutdown": the checkpoint may be ahead of the log.
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        if recover:
            # Appends write the data before its epoch entry (so an entry is never ahead of the data after
            # an error); a crash in between leaves batches whose epoch the checkpoint lacks. Kafka's
            # segment recovery assigns the epochs of the batches it re-reads; so do we, past the
            # recovery point.
            latest = self.epoch_cache.latest_entry()
            start = max(recovery_point, self.log_start_offset, latest.start_offset if latest else 0)
            for h in self.read_headers(start):
                if h.partition_leader_epoch > self.epoch_cache.latest_epoch():
                    self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self._check_txn_indexes()
        self._load_producer_state()

    def _load_topic_id(self, topic_id: uuid.UUID | None) -> None:
        path = self.dir / PARTITION_METADATA
        if path.exists():
            try:
                fields = dict(line.split(":", 1) for line in path.read_text().splitlines() if ":" in line)
                self.topic_id = _decode_topic_id(fields["topic_id"].strip())
            except (KeyError, ValueError) as e:
                log.error("%s: unreadable %s: %s", self.dir, PARTITION_METADATA, e)
        if topic_id is not None and self.topic_id != topic_id:
            self.topic_id = topic_id
            checkpoints.write_atomically(
                path, f"version: 0\ntopic_id: {_encode_topic_id(topic_id)}\n", sync_dir=self._dir_durable
            )

    def _load_segments(self, recover: bool) -> None:
        kept: list[Segment] = []
        for i, seg in enumerate(self.segments):
            needs_scan = recover and (
                i + 1 >= len(self.segments) or self.segments[i + 1].base_offset > self.recovery_point
            )
            if not needs_scan and seg.load_indexes():
                kept.append(seg)
                continue
            following = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            result = seg.scan(validate_crc=needs_scan or recover, before_offset=following)
            if result.error is not None:
                log.warning(
                    "%s-%d: recovery truncates segment %d at byte %d of %d (offset %d): %s",
                    self.topic,
                    self.partition,
                    seg.base_offset,
                    result.valid_bytes,
                    seg.size,
                    result.next_offset,
                    result.error,
                )
                seg.truncate_to_position(result.valid_bytes)
                kept.append(seg)
                for later in self.segments[i + 1 :]:
                    log.warning(
                        "%s-%d: recovery drops segment %d after the corruption",
                        self.topic,
                        self.partition,
                        later.base_offset,
                    )
                    later.delete()
                break
            kept.append(seg)
        # An empty trailing segment after a crash is fine; an empty segment in the middle is not kept.
        self.segments = [s for j, s in enumerate(kept) if s.size > 0 or j == len(kept) - 1]
        for s in kept:
            if s not in self.segments:
                s.delete()
        self._bases = [s.base_offset for s in self.segments]

    def _epochs_from_batches(self) -> list[tuple[int, int]]:
        entries: list[tuple[int, int]] = []
        for h in self.read_headers(self.log_start_offset):
            if h.partition_leader_epoch >= 0 and (not entries or h.partition_leader_epoch > entries[-1][0]):
                entries.append((h.partition_leader_epoch, h.base_offset))
        return entries

    @_io
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
            self.active.drop_tail_cache()
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

    @_io
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

    @_io
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
            self.flush()

    # -- transactions ------------------------------------------------------------------------
    def _marker_of(self, h: BatchHeader) -> Marker | None:
        i = self._segment_index(h.base_offset)
        seg = self.segments[i]
        found = seg.find_position(h.base_offset)
        if found is None:
            return None
        return read_marker(seg.read(found[0], found[1].size))

    def _index_completed(self, txn: CompletedTxn, stable: int) -> None:
        """An aborted transaction goes into the index of the segment holding its marker, once."""
        if not txn.aborted:
            return
        seg = self.segments[self._segment_index(txn.last_offset)]
        if txn.last_offset > seg.txn_index.last_offset:
            seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, stable))

    def _load_producer_state(self) -> None:
        self.producer_state.load(
            self.log_start_offset, self.log_end_offset, self.read_headers, self._marker_of, self._index_completed
        )

    def _check_txn_indexes(self) -> None:
        """Entries past the log end (recovery cut the log) go; an unreadable index is rebuilt from the
        markers, by replaying the whole log into the producer state."""
        rebuild = False
        for seg in self.segments:
            try:
                seg.txn_index.truncate_to(self.log_end_offset)
            except TransactionIndexCorrupt as e:
                log.error("%s: %s; rebuilding the transaction index from the log", self, e)
                seg.txn_index.rewrite([])
                rebuild = True
        if rebuild:
            self.producer_state.delete_snapshots_above(-1)

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed reads stop: the first offset of a transaction not yet decided (or decided by
        a marker not yet below the high watermark), capped by the high watermark."""
        owner = self._hw_owner
        if owner is not None:
            return owner.last_stable_offset()
        return last_stable_offset(self.producer_state.first_unstable_offset(self._hw), self._hw)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed reader of [fetch_offset, upper_bound) must know of."""
        out: list[AbortedTxn] = []
        for seg in self.segments[self._segment_index(fetch_offset) :]:
            if seg.base_offset >= upper_bound:
                break
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

    @_io
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        found = self._locate(offset, max_bytes, max_offset, min_one_batch)
        if found is None:
            return ReadResult()
        seg, pos, want, limit, base = found
        return _whole_batches(seg.read_parts(pos, want), limit, base)

    @_io
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
            return _whole_batches(seg.read_parts(pos, want), limit, base)
        return FileRead(os.dup(seg.fd), seg.path, pos, min(want, seg.size - pos), limit, base)

    def read_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        for seg in list(self.segments):
            if seg.next_offset <= from_offset:
                continue
            found = seg.find_position(from_offset) if from_offset > seg.base_offset else None
            pos = found[0] if found else 0
            while pos < seg.size:
                h = seg.header_at(pos)
                yield h
                pos += h.size

    @_io
    def offset_for_timestamp(self, ts: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the first record, at or after the log start, whose timestamp is
        >= ts; None when there is none. As Kafka does: find the first batch whose max timestamp reaches
        ts, then look at its records (decompressing them if need be), since timestamps inside a batch
        need not be ordered."""
        for seg in self.segments:
            if seg.max_timestamp < ts or seg.size == 0:
                continue
            pos = seg.find_timestamp(ts)
            while pos < seg.size:
                h = seg.header_at(pos)
                if h.max_timestamp >= ts and h.last_offset >= self.log_start_offset:
                    found = self._first_record_at_or_after(seg, pos, h, ts)
                    if found is not None:
                        return found[0], found[1], self.epoch_cache.epoch_for_offset(found[0])
                pos += h.size
        return None

    def _first_record_at_or_after(self, seg: Segment, pos: int, h: BatchHeader, ts: int) -> tuple[int, int] | None:
        if h.last_offset < self.log_start_offset:
            return None
        if h.is_log_append_time:  # every record carries the batch's max timestamp: nothing to decode
            return max(h.base_offset, self.log_start_offset), h.max_timestamp
        try:
            _h, records = decode_batch(seg.read(pos, h.size), verify_crc=False)
        except CorruptBatchError as e:
            # The batch passed its checks on append; if it cannot be read now, answer for the batch as
            # a whole (where a consumer must start to see the record) rather than fail the request.
            log.warning(
                "%s-%d: reading batch at offset %d for a timestamp: %s", self.topic, self.partition, h.base_offset, e
            )
            return max(h.base_offset, self.log_start_offset), h.max_timestamp
        for r in records:
            if r.timestamp >= ts and r.offset >= self.log_start_offset:
                return r.offset, r.timestamp
        return None

    @_io
    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp, the first such by offset
        (ListOffsets MAX_TIMESTAMP; Kafka answers the record's offset since KAFKA-16310)."""
        best: Segment | None = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        ts, offset = best.max_timestamp, best.offset_of_max_timestamp
        found = best.find_position(offset)
        if found is not None:
            pos, h = found
            hit = self._first_record_at_or_after(best, pos, h, ts)
            if hit is not None:
                offset = hit[0]
        return ts, offset

    # -- truncation, retention -----------------------------------------------------------------
    @_io
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
        self._load_producer_state()

    @_io
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
        self._load_producer_state()

    @_io
    def apply_retention(self, now_ms: int) -> int:
        """Delete whole old segments (never the active one, nor data above the HW); returns bytes freed."""
        cfg = self.config
        if "delete" not in cfg.cleanup_policy:
            return 0
        total = self.size_bytes

        def expired(seg: Segment) -> str | None:
            nonlocal total
            if seg.next_offset > self.high_watermark:
                return None
            by_time = cfg.retention_ms >= 0 and now_ms - seg.largest_timestamp_ms() > cfg.retention_ms
            by_size = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            if not (by_time or by_size):
                return None
            total -= seg.size
            return "time" if by_time else "size"

        freed = self._delete_oldest_segments(expired)
        if freed:
            self.increment_log_start_offset(self.segments[0].base_offset)
        return freed

    def _delete_oldest_segments(self, reason_to_delete: Callable[[Segment], str | None]) -> int:
        """Delete segments from the oldest on while ``reason_to_delete`` names a reason (the active segment
        always stays); returns the bytes freed."""
        freed = 0
        while len(self.segments) > 1:
            seg = self.segments[0]
            reason = reason_to_delete(seg)
            if reason is None:
                break
            log.info(
                "%s-%d: %s deletes segment %d (%d bytes)",
                self.topic,
                self.partition,
                reason,
                seg.base_offset,
                seg.size,
            )
            self.segments.pop(0)
            self._bases.pop(0)
            freed += seg.size
            seg.delete()
        return freed

    @_io
    def advance_log_start(self, offset: int, reason: str) -> bool:
        """Start the log at ``offset`` (DeleteRecords on a leader, a follower following its leader's start;
        Kafka's maybeIncrementLogStartOffset). The caller (the replication core) decides the offset, at most
        the high watermark; here it never goes backwards nor past the log end. The new start is durable
        (log-start-offset-checkpoint) before any segment below it is deleted, so a crash in between leaves
        the records below it unreadable rather than back. Returns whether the start moved."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return False
        old = self.log_start_offset
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        if self.persist_log_start is not None:
            self.persist_log_start()
        if self.active.size > 0 and self.active.next_offset <= offset:
            # Everything is below the new start: roll, so the old active segment can go too.
            self._new_segment(self.log_end_offset, _now_ms())
        self._delete_oldest_segments(lambda seg: reason if seg.next_offset <= offset else None)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        log.info("%s-%d: log start offset %d -> %d (%s)", self.topic, self.partition, old, offset, reason)
        return True

    @_io
    def increment_log_start_offset(self, offset: int) -> None:
        offset = min(offset, self.high_watermark)
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)

    # -- compaction (storage/cleaner) ----------------------------------------------------------
    def cleaning_view(self, with_files: bool) -> LogView:
        """The closed segments, as the cleaner sees them (on the owner's thread). ``with_files``: each
        with a descriptor of the cleaner's own, which it closes (LogView.close)."""
        infos = []
        for seg in self.segments[:-1]:
            fd = os.dup(seg.fd) if with_files else -1
            infos.append(SegmentInfo(seg, seg.base_offset, seg.next_offset, seg.size, seg.largest_timestamp_ms(), fd))
        producers = {pid: e.batches[-1].last_offset for pid, e in self.producer_state.producers.items() if e.batches}
        marker_epochs = {pid: e.epoch for pid, e in self.producer_state.producers.items() if not e.batches}
        return LogView(
            self.dir,
            f"{self.topic}-{self.partition}",
            infos,
            self.log_start_offset,
            self.high_watermark,
            self.config,
            producers,
            truncations=self.truncations,
            last_stable_offset=self.last_stable_offset,
            # Only the cleaning itself needs them, not the probes that choose a log.
            aborted=[e for seg in self.segments for e in seg.txn_index.entries] if with_files else [],
            marker_epochs=marker_epochs,
        )

    def first_batch_timestamp(self, offset: int) -> int:
        """The max timestamp of the batch holding ``offset`` (max.compaction.lag.ms looks at the first
        dirty batch); -1 when there is none."""
        for seg in self.segments[self._segment_index(offset) :]:
            found = seg.find_position(offset)
            if found is not None:
                return found[1].max_timestamp
        return -1

    @_io
    def replace_segments(
        self, cleaned: Segment, old: list[Segment], sizes: list[int], truncations: int
    ) -> list[Path] | None:
        """Swap a cleaned segment in for the segments it was made from (storage/cleaner/swap.py has the
        steps, all but the last: the old segments' ``.deleted`` files are returned for the caller to
        remove). None, and nothing changed, when those segments are no longer all there as they were
        read (retention or deletion got to them first) or the log was truncated since the cleaning
        began (``truncations`` is the count it saw)."""
        if truncations != self.truncations:
            return None
        ids = [id(s) for s in self.segments]
        try:
            first = ids.index(id(old[0]))
        except ValueError:
            return None
        current = self.segments[first : first + len(old)]
        if (
            len(current) != len(old)
            or any(a is not b for a, b in zip(current, old, strict=True))
            or first + len(old) >= len(self.segments)  # the active segment is never replaced
            or [s.size for s in current] != sizes
            or cleaned.base_offset != old[0].base_offset
        ):
            return None
        swap.commit_cleaned(self.dir, cleaned.base_offset)
        retired = swap.retire(self.dir, [s.base_offset for s in old])
        for s in old:
            s.abandon()  # closed, not deleted: their files are the .deleted ones now
        self.segments[first : first + len(old)] = [cleaned]
        self._bases = [s.base_offset for s in self.segments]
        swap.install(self.dir, cleaned.base_offset)
        cleaned.renamed()
        return retired

    # -- durability ----------------------------------------------------------------------------
    @_io
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

    def maybe_flush_by_time(self, now_ms: int) -> None:
        if self.unflushed_messages and now_ms - self.last_flush_ms >= self.config.flush_interval_ms:
            self.flush()

    @_io
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
