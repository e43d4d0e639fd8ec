"""An in-memory replica log on a simulated disk: unflushed records are lost on a crash.

One record per batch keeps the pictures readable; the epoch logic is the real LeaderEpochCache.
"""

from __future__ import annotations

from typing import NamedTuple

from epochlog.storage.epoch_cache import LeaderEpochCache


class Entry(NamedTuple):
    epoch: int
    value: str


class Appended(NamedTuple):
    """One leader append, as the replication core asks a log to report it."""

    first_offset: int
    last_offset: int
    duplicate: bool = False
    record_count: int = 0
    log_append_time_ms: int = -1


class SimLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.flushed = 0  # entries[:flushed] are on the simulated disk
        self.cache = LeaderEpochCache()
        self.truncations: list[int] = []  # offsets truncated to, for the invariant bookkeeping
        self.flush_every_append = False
        self.transactional = False  # its values spell transactions out (sim/transactions.py)

    # -- ReplicaLog ----------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    @property
    def log_start_offset(self) -> int:
        return 0

    def latest_epoch(self) -> int:
        return self.cache.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.log_end_offset)

    def epoch_start_offset(self, epoch: int) -> int:
        return next((e.start_offset for e in self.cache.entries() if e.epoch == epoch), -1)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.cache.assign(epoch, start_offset)

    def append_as_leader(self, records: list[str], epoch: int, now_ms: int) -> Appended:
        first = len(self.entries)
        self.cache.assign(epoch, first)
        self.entries.extend(Entry(epoch, v) for v in records)
        if self.flush_every_append:
            self.flush()
        return Appended(first, len(self.entries) - 1, record_count=len(records))

    def append_as_follower(self, batches: list[tuple[int, Entry]]) -> None:
        for offset, entry in batches:
            if offset != len(self.entries):
                continue  # not contiguous (a reordered or duplicated response): ignore
            if entry.epoch > self.cache.latest_epoch():
                self.cache.assign(entry.epoch, offset)
            self.entries.append(entry)
        if self.flush_every_append:
            self.flush()

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.entries):
            del self.entries[offset:]
            self.truncations.append(offset)
        self.flushed = min(self.flushed, len(self.entries))
        self.cache.truncate_from_end(len(self.entries))

    def advance_log_start(self, offset: int, reason: str) -> bool:
        # The simulated log always starts at 0 and its leaders never delete records, so a follower never
        # learns a start above it.
        if offset <= 0:
            return False
        raise NotImplementedError("SimLog always starts at offset 0")

    def truncate_fully_and_start_at(self, offset: int) -> None:
        # The simulated log has no retention, so its start never passes a follower's end.
        raise NotImplementedError("SimLog always starts at offset 0")

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        if not self.transactional:
            return None
        from epochlog.sim.transactions import first_unstable_offset

        return first_unstable_offset(self.entries, high_watermark)

    def flush(self) -> None:
        self.flushed = len(self.entries)

    # -- the simulated disk ----------------------------------------------------------------
    def read(self, offset: int, max_records: int) -> list[tuple[int, Entry]]:
        return [(o, self.entries[o]) for o in range(offset, min(len(self.entries), offset + max_records))]

    def crash(self, tear_last: bool = False) -> int:
        """Lose what was not flushed (and, torn, the last flushed record); returns records lost."""
        keep = self.flushed - (1 if tear_last and self.flushed else 0)
        lost = len(self.entries) - keep
        if lost:
            del self.entries[keep:]
            self.truncations.append(keep)
        self.flushed = len(self.entries)
        # KIP-101 "Unclean Shutdown": drop epoch entries past the recovered log end.
        self.cache.truncate_from_end(len(self.entries))
        return lost
