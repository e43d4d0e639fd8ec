"""What a partition log's appends and reads answer. A read answers whole batches, either at once (ReadResult) or
planned on the event loop and read from the segment file elsewhere (FileRead)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from epochlog.protocol.record_batch import read_header
from epochlog.storage import fileops


@dataclass(slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    duplicate: bool = False


@dataclass(slots=True)
class ReadResult:
    chunks: list[bytes | memoryview] = field(default_factory=list)
    first_offset: int = -1

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)


def whole_batches(parts: list[bytes | memoryview], limit: int, base: int) -> ReadResult:
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
    """A read from a segment file, planned on the event loop and done elsewhere (see PartitionLog.plan_read)."""

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
        return whole_batches([data], self.limit, self.base_offset)

    def discard(self) -> None:
        os.close(self.fd)
