"""What a file holds that is not yet durable: its dirty pages, its size, and how far it was truncated.

The backing file holds exactly what the last fsync made durable. A read is the backing bytes, zero from the
lowest truncation since then, with the dirty pages laid over them, cut at the cached size. ``flush`` makes
the backing file equal to that view and fsyncs it; dropping the state is a power loss.
"""

from __future__ import annotations

import os

PAGE = 4096
NEVER = 1 << 62  # "no truncation below the backing file's end since the last fsync"


class Unsynced:
    def __init__(self, size: int) -> None:
        self.size = size  # the size readers see
        self.floor = NEVER  # backing bytes at or past this offset read as zeros (a truncation not yet synced)
        self.pages: dict[int, bytearray] = {}

    def _base_page(self, fd: int, idx: int) -> bytearray:
        start = idx * PAGE
        page = bytearray(PAGE)
        if start < self.floor:
            got = os.pread(fd, min(PAGE, self.floor - start), start)
            page[: len(got)] = got
        return page

    def read(self, fd: int, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        buf = bytearray(end - offset)
        if offset < self.floor:
            got = os.pread(fd, min(end, self.floor) - offset, offset)
            buf[: len(got)] = got
        for idx in range(offset // PAGE, (end - 1) // PAGE + 1):
            page = self.pages.get(idx)
            if page is None:
                continue
            lo, hi = max(offset, idx * PAGE), min(end, (idx + 1) * PAGE)
            buf[lo - offset : hi - offset] = page[lo - idx * PAGE : hi - idx * PAGE]
        return bytes(buf)

    def write(self, fd: int, data: bytes, offset: int) -> int:
        pos, view = offset, memoryview(data)
        while view:
            idx, within = divmod(pos, PAGE)
            page = self.pages.get(idx)
            if page is None:
                page = self.pages[idx] = self._base_page(fd, idx)
            n = min(PAGE - within, len(view))
            page[within : within + n] = view[:n]
            pos, view = pos + n, view[n:]
        self.size = max(self.size, offset + len(data))
        return len(data)

    def truncate(self, length: int) -> None:
        if length < self.size:
            self.floor = min(self.floor, length)
            for idx in [i for i in self.pages if i * PAGE >= length]:
                del self.pages[idx]
            tail = self.pages.get(length // PAGE)
            if tail is not None:
                within = length % PAGE
                tail[within:] = bytes(PAGE - within)
        self.size = length

    @property
    def dirty_bytes(self) -> int:
        return len(self.pages) * PAGE

    def flush(self, fd: int) -> None:
        """Make the backing file what readers see, and durable."""
        if self.floor < os.fstat(fd).st_size:
            os.ftruncate(fd, self.floor)
        for idx in sorted(self.pages):
            n = min(PAGE, self.size - idx * PAGE)
            if n > 0:
                os.pwrite(fd, self.pages[idx][:n], idx * PAGE)
        if os.fstat(fd).st_size != self.size:
            os.ftruncate(fd, self.size)
        os.fsync(fd)
        self.pages.clear()
        self.floor = NEVER
