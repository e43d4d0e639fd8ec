"""The replication core's ReplicaLog interface, implemented over a real PartitionLog.

replication/ states what it needs from a log (replication/log.py) and imports no storage code;
this adapter is how the server hands it files. Batches stay bytes end to end.
"""

from __future__ import annotations

from epochlog.storage.log_results import AppendResult
from epochlog.storage.partition_log import PartitionLog


class PartitionReplicaLog:
    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def latest_epoch(self) -> int:
        return self.log.epoch_cache.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.log.epoch_cache.end_offset_for(epoch, self.log.log_end_offset)

    def epoch_start_offset(self, epoch: int) -> int:
        return next((e.start_offset for e in self.log.epoch_cache.entries() if e.epoch == epoch), -1)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        # The cache writes leader-epoch-checkpoint atomically (with fsync) on every change.
        self.log.epoch_cache.assign(epoch, start_offset)

    def append_as_leader(self, records: bytes | memoryview, epoch: int, now_ms: int) -> AppendResult:
        # Every leader write reaches the core either from Produce, whose validation checked each batch's CRC
        # on these very bytes, or built by the broker itself (coordinator records, transaction markers).
        return self.log.append_as_leader(records, epoch, now_ms, crc_checked=True)

    def append_as_follower(self, batches: bytes | memoryview) -> None:
        if batches:
            self.log.append_as_follower(batches)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def advance_log_start(self, offset: int, reason: str) -> bool:
        return self.log.advance_log_start(offset, reason)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def flush(self) -> None:
        self.log.flush()

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        return self.log.producer_state.first_unstable_offset(high_watermark)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from ``offset`` up to the log end, for a follower's fetch."""
        if offset >= self.log.log_end_offset:
            return b""
        return b"".join(self.log.read(offset, max_bytes, max_offset=None, min_one_batch=True).chunks)
