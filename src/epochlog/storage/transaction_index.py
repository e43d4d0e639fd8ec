"""A segment's aborted transactions: Kafka's ``.txnindex`` file.

One 34-byte entry per transaction whose ABORT marker is in this segment (facts of Kafka's format:
version int16 = 0, producerId int64, firstOffset int64, lastOffset int64 = the marker's offset,
lastStableOffset int64 = the partition's LSO just after the abort). Entries are appended in marker
order, so lastOffset only increases. A read_committed fetch asks every segment from the one holding its
fetch offset for the aborted transactions that overlap what it returns, so the consumer can drop their
records; the lastStableOffset lets that search stop early.

The file is created on the first abort and written through the file-operations seam like every other
log file; its durability follows the segment's (it is flushed with the segment, and recovery rebuilds
the entries of any segment it re-reads from the markers themselves).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from epochlog.storage import fileops

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TransactionIndexCorrupt(ValueError):
    pass


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self.dirty = False  # appended to since the last fsync

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    @property
    def last_offset(self) -> int:
        """The last marker offset indexed here, -1 when none."""
        return self.entries[-1].last_offset if self.entries else -1

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % ENTRY_SIZE  # a torn last entry is not an entry
        out: list[AbortedTxn] = []
        for version, pid, first, last, lso in ENTRY.iter_unpack(data[:whole]):
            if version != VERSION or first > last or (out and last <= out[-1].last_offset):
                raise TransactionIndexCorrupt(f"{self.path}: bad entry at byte {len(out) * ENTRY_SIZE}")
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def append(self, txn: AbortedTxn) -> None:
        if txn.last_offset <= self.last_offset:
            raise ValueError(
                f"{self.path}: aborted transaction ending at {txn.last_offset} after one ending at {self.last_offset}"
            )
        ops = fileops.ops()
        fd = ops.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            ops.write(fd, txn.encode(), self.path)
        finally:
            os.close(fd)
        self.entries.append(txn)
        self.dirty = True

    def rewrite(self, entries: list[AbortedTxn]) -> None:
        """Replace the file's entries (recovery and truncation)."""
        ops = fileops.ops()
        if not entries:
            ops.unlink(self.path)
        else:
            ops.write_file(self.path, b"".join(e.encode() for e in entries))
        self._entries = list(entries)
        self.dirty = False

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or past ``offset`` (the log is cut there)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.rewrite(keep)

    def flush(self) -> None:
        if not self.dirty:
            return
        ops = fileops.ops()
        fd = ops.open(self.path, os.O_RDONLY)
        try:
            ops.fsync(fd, self.path)
        finally:
            os.close(fd)
        self.dirty = False

    def delete(self) -> None:
        fileops.ops().unlink(self.path)
        self._entries = []

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), and whether the search may stop
        here (an entry's LSO at or past the bound means no later segment has an overlapping one)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False
