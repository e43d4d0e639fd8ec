"""One log segment: ``<base>.log`` with its sparse ``.index`` and ``.timeindex``.

The .log file holds record batches back to back exactly as appended. Index entries are kept in
memory and written out whole on flush, roll and close; after a crash they are rebuilt from the
data, so an index can never point past valid bytes.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import mmap
import os
import struct
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from epochlog.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    compute_crc,
    read_header,
)
from epochlog.storage import fileops
from epochlog.storage.checkpoints import write_atomically
from epochlog.storage.transaction_index import TransactionIndex

log = logging.getLogger("epochlog.storage")

_IDX = struct.Struct(">ii")
_TIDX = struct.Struct(">qi")
_MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # offsets in the index are 4-byte deltas from the segment base
NO_TIMESTAMP = -1


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class ScanResult:
    valid_bytes: int
    next_offset: int
    error: str | None  # why scanning stopped before the end of the file


# Bytes of recent appends a segment keeps in memory (at least the last append, whatever its size),
# and what all segments of the process may keep together. Followers fetch a batch or two behind the
# leader's end; with producers' ~1 MiB batches a 1 MiB tail missed them and every follower read went to
# pread (9% of an RF=3 leader's samples), so a hot segment keeps 8 MiB.
TAIL_CACHE_BYTES = 8 << 20
# Headers are read from the file this much at a time by headers_from(): one read per batch cost tens of
# microseconds each through a slow file system (a FUSE one: seconds per partition at start-up after a
# crash, and at every follower truncation, which replays the producer state). Batches bigger than an
# eighth of it are stepped over with one small read each instead, so big batches are not read whole.
HEADER_CHUNK_BYTES = 1 << 20
TAIL_BUDGET_BYTES = 64 << 20


class _TailBudget:
    """One budget for every segment's in-memory tail: when the sum passes it, the segments written to
    longest ago give theirs up first, so idle partitions pin no memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.recent: OrderedDict[int, Segment] = OrderedDict()

    def charge(self, seg: Segment, delta: int) -> None:
        self.total += delta
        key = id(seg)
        self.recent[key] = seg
        self.recent.move_to_end(key)
        while self.total > self.limit and len(self.recent) > 1:
            oldest = next(iter(self.recent.values()))
            if oldest is seg:
                break
            oldest.drop_tail_cache()

    def release(self, seg: Segment, amount: int) -> None:
        self.total -= amount
        self.recent.pop(id(seg), None)


TAIL_BUDGET = _TailBudget(TAIL_BUDGET_BYTES)


class Segment:
    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int, suffix: str = ""
    ) -> None:
        """``suffix``: a segment the cleaner is writing (``.cleaned``), not yet part of the log."""
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval = index_interval_bytes
        self.path = directory / (file_name(base_offset, ".log") + suffix)
        self.index_path = directory / (file_name(base_offset, ".index") + suffix)
        self.time_index_path = directory / (file_name(base_offset, ".timeindex") + suffix)
        self.txn_index = TransactionIndex(directory / (file_name(base_offset, ".txnindex") + suffix))
        self.fd = fileops.ops().open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.created_ms = created_ms
        self.idx_rel: list[int] = []
        self.idx_pos: list[int] = []
        self.tidx_ts: list[int] = []
        self.tidx_rel: list[int] = []
        self.bytes_since_index = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.indexes_dirty = False
        # Writes made and writes known synced: a sync running in a worker thread (group commit) covers the
        # writes made before it began, and only those, whatever is appended meanwhile.
        self.writes = 0
        self.synced_writes = 0
        # The latest appends, kept so that a reader at the log end (a follower, a tailing consumer) is
        # served without a read system call and a fresh copy: on an RF=3 leader, pread of the batch just
        # written was 13% of the CPU. Buffers handed to append() are never changed afterwards.
        self._tail: deque[tuple[int, bytes | bytearray | memoryview]] = deque()
        self._tail_bytes = 0
        # The first batch of each append in the tail, by base offset: a follower asks for the offset right
        # after what it last got, which is where an append began (a leader appends a batch per produce), so
        # its read starts without walking batch headers from the last index entry.
        self._tail_first: dict[int, tuple[int, BatchHeader]] = {}
        self._tail_keys: deque[int] = deque()

    @property
    def unflushed(self) -> bool:
        return self.writes > self.synced_writes

    @unflushed.setter
    def unflushed(self, value: bool) -> None:
        if value:
            self.writes += 1
        else:
            self.synced_writes = self.writes

    def mark_synced(self, writes: int) -> None:
        """A sync that began when ``writes`` writes had been made completed."""
        self.synced_writes = max(self.synced_writes, writes)

    # -- building the in-memory state ------------------------------------------------
    def _track(self, pos: int, h: BatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        if self.bytes_since_index >= self.index_interval or not self.idx_pos:
            self.idx_rel.append(h.last_offset - self.base_offset)
            self.idx_pos.append(pos)
            self.bytes_since_index = 0
            self._index_max_timestamp()
        self.bytes_since_index += h.size
        self.next_offset = h.next_offset
        self.indexes_dirty = True

    def _index_max_timestamp(self) -> None:
        """A time index entry is the largest timestamp so far and its offset, as in Kafka: no record
        before that offset is later, so a lookup may start there. A batch's own max timestamp would not
        do: a later timestamp in a batch between two index points would be skipped."""
        if self.max_timestamp > (self.tidx_ts[-1] if self.tidx_ts else NO_TIMESTAMP):
            self.tidx_ts.append(self.max_timestamp)
            self.tidx_rel.append(self.offset_of_max_timestamp - self.base_offset)

    def scan(self, validate_crc: bool, from_position: int = 0, before_offset: int | None = None) -> ScanResult:
        """Walk every batch, rebuilding indexes; stop at the first torn or corrupt one. ``before_offset``
        (the next segment's base) bounds the offsets this segment may hold: the base offset is outside
        the CRC, and a flipped bit can move a batch past the segments that follow it."""
        if from_position == 0:
            self.idx_rel, self.idx_pos, self.tidx_ts, self.tidx_rel = [], [], [], []
            self.bytes_since_index = 0
            self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, -1
            self.next_offset = self.base_offset
        size = os.fstat(self.fd).st_size
        pos = from_position
        error = None
        if size > from_position:
            with mmap.mmap(self.fd, size, prot=mmap.PROT_READ) as mm:
                view = memoryview(mm)
                try:
                    while pos < size:
                        try:
                            h = read_header(view, pos)
                        except CorruptBatchError as e:
                            error = str(e)
                            break
                        if pos + h.size > size:
                            error = f"batch at position {pos} is torn: needs {h.size} bytes, {size - pos} left"
                            break
                        if h.base_offset < self.next_offset or (pos == 0 and h.base_offset < self.base_offset):
                            error = f"batch at position {pos} has base offset {h.base_offset} below {self.next_offset}"
                            break
                        if before_offset is not None and h.last_offset >= before_offset:
                            error = f"batch at position {pos} has offset {h.last_offset} past the next segment's base"
                            break
                        if h.last_offset - self.base_offset > _MAX_RELATIVE_OFFSET:
                            # the base offset is outside the CRC: a flipped high bit lands here (Kafka's
                            # LogSegment refuses offsets its 4-byte relative index cannot hold)
                            error = f"batch at position {pos} has offset {h.last_offset} too far past the segment base"
                            break
                        if validate_crc and compute_crc(view, pos, h) != h.crc:
                            error = f"CRC32C mismatch in batch at position {pos} (base offset {h.base_offset})"
                            break
                        self._track(pos, h)
                        pos += h.size
                finally:
                    view.release()
        self.size = size
        return ScanResult(pos, self.next_offset, error)

    def load_indexes(self) -> bool:
        """Trust the index files of a cleanly closed segment when they are consistent."""
        try:
            idx = self.index_path.read_bytes()
            tidx = self.time_index_path.read_bytes() if self.time_index_path.exists() else b""
        except OSError:
            return False
        if len(idx) % _IDX.size or len(tidx) % _TIDX.size:
            return False
        rel = [r for r, _ in _IDX.iter_unpack(idx)]
        pos = [p for _, p in _IDX.iter_unpack(idx)]
        if any(b <= a for a, b in itertools.pairwise(rel)) or any(b <= a for a, b in itertools.pairwise(pos)):
            return False
        if pos and pos[-1] >= self.size:
            return False
        if self.size and not pos:
            return False
        tidx_ts = [t for t, _ in _TIDX.iter_unpack(tidx)]
        tidx_rel = [r for _, r in _TIDX.iter_unpack(tidx)]
        # Both grow with every entry as written; a damaged entry that breaks the order means a rebuild.
        if any(b <= a for a, b in itertools.pairwise(tidx_ts)) or any(b < a for a, b in itertools.pairwise(tidx_rel)):
            return False
        if tidx_rel and (tidx_rel[0] < 0 or (rel and tidx_rel[-1] > max(rel[-1], 0) + _MAX_RELATIVE_OFFSET)):
            return False
        self.idx_rel, self.idx_pos = rel, pos
        self.tidx_ts, self.tidx_rel = tidx_ts, tidx_rel
        if self.tidx_ts:
            self.max_timestamp = max(self.tidx_ts)
            self.offset_of_max_timestamp = self.base_offset + self.tidx_rel[self.tidx_ts.index(self.max_timestamp)]
        # Walk the tail from the last indexed batch to learn the next offset; that batch is
        # already indexed, so the byte counter starts at zero.
        self.bytes_since_index = 0
        result = self.scan(validate_crc=False, from_position=pos[-1] if pos else 0)
        if result.error is not None or result.valid_bytes != self.size:
            return False
        self.indexes_dirty = False
        return True

    def renamed(self) -> None:
        """Its files took their final names (the cleaner's swap renamed them): the open descriptor still
        holds the same file, only the paths change."""
        self.path = self.dir / file_name(self.base_offset, ".log")
        self.index_path = self.dir / file_name(self.base_offset, ".index")
        self.time_index_path = self.dir / file_name(self.base_offset, ".timeindex")
        # The aborted-transaction index too: a later truncation or deletion must reach the renamed file.
        self.txn_index.path = self.dir / file_name(self.base_offset, ".txnindex")

    def append_cleaned(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        """The cleaner's write: like append(), but no tail cache (the shared tail budget belongs to the
        event loop's thread, and a cleaned segment is never the active one)."""
        start = self.size
        fileops.ops().write_all(self.fd, data, self.path)
        for pos, h in batches:
            self._track(start + pos, h)
        self.size += len(data)
        self.unflushed = True

    # -- writing -------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        start = self.size
        # On an error part-way (ENOSPC after some bytes) the size and indexes stay where they were, so
        # nothing of the torn batch is readable; the caller takes the log directory offline, so nothing
        # is ever appended after the torn bytes either, and recovery cuts them at the next start.
        fileops.ops().write_all(self.fd, data, self.path)
        for pos, h in batches:
            self._track(start + pos, h)
        self.size += len(data)
        self.unflushed = True
        self._tail.append((start, data))
        self._tail_bytes += len(data)
        if batches:
            pos, h = batches[0]
            self._tail_first[h.base_offset] = (start + pos, h)
            self._tail_keys.append(h.base_offset)
        else:
            self._tail_keys.append(-1)
        dropped = 0
        while len(self._tail) > 1 and self._tail_bytes > TAIL_CACHE_BYTES:
            n = len(self._tail.popleft()[1])
            self._tail_first.pop(self._tail_keys.popleft(), None)
            self._tail_bytes -= n
            dropped += n
        TAIL_BUDGET.charge(self, len(data) - dropped)

    def drop_tail_cache(self) -> None:
        if self._tail:
            TAIL_BUDGET.release(self, self._tail_bytes)
        self._tail.clear()
        self._tail_first.clear()
        self._tail_keys.clear()
        self._tail_bytes = 0

    def flush(self) -> None:
        """Make the data durable. Index files are written at roll and close only: after a crash
        they are checked and completed from the data, so a stale one costs a scan, not safety."""
        if self.unflushed:
            # A failed fdatasync leaves ``unflushed`` set, and the caller takes the directory offline: it
            # is never retried, since a second call may "succeed" after the kernel dropped the pages.
            writes = self.writes
            fileops.ops().fdatasync(self.fd, self.path)
            self.txn_index.flush()
            self.mark_synced(writes)

    def write_indexes(self) -> None:
        if not self.indexes_dirty:
            return
        # The last entry carries the segment's largest timestamp (Kafka adds it when a segment rolls),
        # which is what a reopened segment takes as its max timestamp.
        self._index_max_timestamp()
        idx = b"".join(_IDX.pack(r, p) for r, p in zip(self.idx_rel, self.idx_pos, strict=True))
        tidx = b"".join(_TIDX.pack(t, r) for t, r in zip(self.tidx_ts, self.tidx_rel, strict=True))
        for path, data in ((self.index_path, idx), (self.time_index_path, tidx)):
            write_atomically(path, data, sync_dir=False)
        self.indexes_dirty = False

    def truncate_to_position(self, position: int) -> None:
        self.drop_tail_cache()
        fileops.ops().truncate(self.fd, position, self.path)
        self.unflushed = True
        self.scan(validate_crc=False)

    # -- reading -------------------------------------------------------------------------
    def header_at(self, pos: int) -> BatchHeader:
        # Fetches near the log end (followers, tailing consumers) find their batch in the tail: no syscall.
        tail = self._tail
        if tail and pos >= tail[0][0]:
            for start, buf in reversed(tail):
                if start <= pos:
                    if pos - start + HEADER_SIZE <= len(buf):
                        return read_header(buf, pos - start)
                    break
        return read_header(fileops.ops().pread(self.fd, HEADER_SIZE, pos, self.path))

    def headers_from(self, pos: int) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        """(position, header, whole batch when the chunk read holds it, else None) of each batch from byte
        ``pos`` (a batch boundary) to the end of the segment."""
        buf = memoryview(b"")
        start = pos
        while pos < self.size:
            if pos - start + HEADER_SIZE > len(buf):
                start = pos
                buf = memoryview(fileops.ops().pread(self.fd, min(HEADER_CHUNK_BYTES, self.size - pos), pos, self.path))
            at = pos - start
            h = read_header(buf, at)
            yield pos, h, buf[at : at + h.size] if at + h.size <= len(buf) else None
            pos += h.size
            if h.size > HEADER_CHUNK_BYTES // 8 and pos < self.size:
                start, buf = pos, memoryview(fileops.ops().pread(self.fd, HEADER_SIZE, pos, self.path))

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch holding ``offset`` (or the first batch after it)."""
        if offset >= self.next_offset:
            return None
        first = self._tail_first.get(offset)
        if first is not None:
            return first
        i = bisect.bisect_left(self.idx_rel, offset - self.base_offset) - 1
        pos = self.idx_pos[i] if i >= 0 else 0
        if i >= 0 and not self._entry_holds(i):
            # An index trusted at start (a clean shutdown) whose entry does not point at the batch it names:
            # the file was damaged. Rebuild the indexes from the data rather than read from the wrong place.
            log.warning("%s: offset index entry %d is wrong; rebuilding the indexes from the segment", self.path, i)
            self.scan(validate_crc=False)
            i = bisect.bisect_left(self.idx_rel, offset - self.base_offset) - 1
            pos = self.idx_pos[i] if i >= 0 else 0
        while pos < self.size:
            h = self.header_at(pos)
            if h.last_offset >= offset:
                return pos, h
            pos += h.size
        return None

    def _entry_holds(self, i: int) -> bool:
        """Whether offset index entry ``i`` points at a batch ending at the offset it names."""
        try:
            h = self.header_at(self.idx_pos[i])
        except CorruptBatchError:
            return False
        return h.last_offset == self.base_offset + self.idx_rel[i]

    def read(self, position: int, size: int) -> bytes | memoryview:
        parts = self.read_parts(position, size)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def in_tail(self, position: int) -> bool:
        """Whether a read from ``position`` is answered from memory (the tail) rather than the file."""
        return bool(self._tail) and position >= self._tail[0][0]

    def read_parts(self, position: int, size: int) -> list[bytes | memoryview]:
        """Up to ``size`` bytes from ``position``: views of the in-memory tail when it holds them (one per
        append, so every part starts on a batch boundary), else one read from the file."""
        end = min(position + size, self.size)
        tail = self._tail
        if tail and position >= tail[0][0]:
            parts: list[bytes | memoryview] = []
            for start, buf in tail:
                stop = start + len(buf)
                if stop <= position or start >= end:
                    continue
                parts.append(memoryview(buf)[max(position - start, 0) : min(end, stop) - start])
            if parts:
                return parts
        # A view: the caller trims a partial last batch off, which on bytes would copy all the rest.
        return [memoryview(fileops.ops().pread(self.fd, end - position, position, self.path))]

    def find_timestamp(self, ts: int) -> int:
        """A position from which to look for the first batch with max timestamp >= ts."""
        i = bisect.bisect_left(self.tidx_ts, ts) - 1
        if i < 0:
            return 0
        found = self.find_position(self.base_offset + self.tidx_rel[i])
        return found[0] if found else 0

    def largest_timestamp_ms(self) -> int:
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    # -- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        self.drop_tail_cache()
        if self.fd >= 0:
            self.flush()
            self.write_indexes()
            os.close(self.fd)
            self.fd = -1

    def abandon(self) -> None:
        """Close without writing anything: the directory failed, its files are left as they are."""
        self.drop_tail_cache()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self, sync_dir: bool = True) -> None:
        self.drop_tail_cache()  # or the shared budget keeps counting a deleted segment's tail
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for p in (self.path, self.index_path, self.time_index_path, self.txn_index.path):
            fileops.ops().unlink(p)
        if sync_dir:
            fileops.ops().fsync_dir(self.dir)
