"""A read answered as a byte range of a segment file rather than its bytes: the connection sends it with
os.sendfile (server/sendfile_writer.py), so record bytes never pass through Python.

The range is cut to whole batches here, as read() cuts the bytes it read (log_results.whole_batches), but
from batch headers only: the offset index finds a batch start near the end of the range and a few header
reads step from there, so planning a megabyte costs a couple of small reads, not the megabyte."""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import TYPE_CHECKING

from epochlog.protocol.record_batch import HEADER_SIZE
from epochlog.storage import fileops
from epochlog.storage.log_results import ReadResult, whole_batches

if TYPE_CHECKING:
    from epochlog.storage.segment import Segment


class RegionTruncated(OSError):
    """The segment file became shorter than a region of it while the region was in flight."""


class FileRegion:
    """``length`` bytes at ``position`` of a segment file, through a descriptor of its own: retention or
    compaction may delete the segment (closing its descriptor) before the answer is sent, and the
    duplicate keeps the file's bytes readable until the region is closed."""

    __slots__ = ("fd", "length", "path", "position")

    def __init__(self, fd: int, path: Path, position: int, length: int) -> None:
        self.fd = fd
        self.path = path
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The region's bytes (for a connection that cannot sendfile); closes the region."""
        try:
            data = fileops.ops().pread(self.fd, self.length, self.position, self.path)
        finally:
            self.close()
        if len(data) != self.length:
            raise RegionTruncated(f"{self.path}: {len(data)} of {self.length} bytes at {self.position}")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        # An answer can be dropped unsent (a long poll that looks again, a connection that closed first):
        # its regions must not leak descriptors of deleted segments.
        self.close()


def whole_batches_end(seg: Segment, pos: int, cap: int, limit: int) -> int:
    """The end of the whole batches from ``pos`` (a batch start) that lie below byte ``cap`` and start below
    offset ``limit``: what whole_batches() keeps of the bytes [pos, cap) read from the file."""
    if limit < seg.next_offset:
        found = seg.find_position(limit)
        if found is not None:
            at, h = found
            cap = min(cap, at if h.base_offset >= limit else at + h.size)
    cap = min(cap, seg.size)
    # Start from the last index entry at or below cap (a batch start), when the index holds one past pos
    # and it names the batch it should (find_position checks entries the same way).
    i = bisect.bisect_right(seg.idx_pos, cap) - 1
    walk = pos
    if i >= 0 and seg.idx_pos[i] > pos and seg._entry_holds(i):
        walk = seg.idx_pos[i]
    while walk + HEADER_SIZE <= cap:
        h = seg.header_at(walk)
        if walk + h.size > cap:
            break
        walk += h.size
    return walk


def region_read(seg: Segment, pos: int, want: int, limit: int, base: int) -> ReadResult:
    """A located read (PartitionLog._locate) as a region of the segment file, or as views of the segment's
    in-memory tail when it starts there (those bytes are in memory already: nothing to save)."""
    if seg.in_tail(pos):
        return whole_batches(seg.read_parts(pos, want), limit, base)
    end = whole_batches_end(seg, pos, pos + want, limit)
    if end <= pos:
        return ReadResult()
    return ReadResult([FileRegion(os.dup(seg.fd), seg.path, pos, end - pos)], base)  # type: ignore[list-item]
