"""The leader-epoch cache: the in-memory (epoch -> start offset) vector of KIP-101.

Pure logic, no I/O: storage/ persists it to ``leader-epoch-checkpoint`` through the
``on_change`` hook and sim/ keeps it in a simulated disk. The contract follows Kafka's
LeaderEpochFileCache: entries are strictly increasing in both epoch and start offset,
and an assignment that breaks monotonicity removes the entries it conflicts with.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(
        self,
        entries: Iterable[EpochEntry | tuple[int, int]] = (),
        on_change: Callable[[list[EpochEntry]], None] | None = None,
    ) -> None:
        self._entries: list[EpochEntry] = []
        for e in entries:
            self._assign(EpochEntry(int(e[0]), int(e[1])))
        self._on_change = on_change

    # -- queries -------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (the last entry starting at or before it)."""
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset) - 1
        return self._entries[i].epoch if i >= 0 else UNDEFINED_EPOCH

    def previous_epoch(self, epoch: int) -> int:
        """The largest known epoch strictly below ``epoch``."""
        best = UNDEFINED_EPOCH
        for e in self._entries:
            if e.epoch < epoch:
                best = e.epoch
        return best

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for ``requested_epoch``, the answer OffsetsForLeaderEpoch gives.

        The end offset is the start offset of the first epoch above the requested one, or
        the log end offset when the requested epoch is the latest. When the requested epoch
        is unknown the answer names the largest epoch below it, so a follower truncates
        exactly where the lineages part (KIP-101 step 4.3, KIP-279 refinement).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        hi = bisect.bisect_right(epochs, requested_epoch)
        if hi == len(epochs):
            # Larger than every epoch we know: we cannot say where it ends.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[hi]
        if hi == 0:
            # Older than our first epoch (its entries were removed with old segments).
            return requested_epoch, higher.start_offset
        floor = self._entries[hi - 1]
        return floor.epoch, higher.start_offset

    # -- updates -------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` begins at ``start_offset``; True when the cache changed."""
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self._changed()
        return changed

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"epoch and start offset must be >= 0, got {entry}")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries that start at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        self._entries = [e for e in self._entries if e.start_offset < end_offset]
        self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop older entries, keep the epoch that covers it."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return
        keep = [e for e in self._entries if e.start_offset > start_offset]
        entries = [EpochEntry(removed[-1].epoch, start_offset), *keep]
        # Every log is opened with this call; a first entry already at the log start changes nothing, and
        # saving it anyway cost each partition a checkpoint write and two fsyncs at every startup.
        if entries != self._entries:
            self._entries = entries
            self._changed()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(list(self._entries))
