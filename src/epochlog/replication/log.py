"""The narrow log interface the replication core needs; storage/ and sim/ each implement it."""

from __future__ import annotations

from typing import Any, Protocol


class AppendInfo(Protocol):
    """What a log reports of one leader append."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def duplicate(self) -> bool: ...

    @property
    def record_count(self) -> int: ...

    @property
    def log_append_time_ms(self) -> int: ...


class ReplicaLog(Protocol):
    """What a partition replica asks of its log. Batches are opaque to the core."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    def latest_epoch(self) -> int:
        """The epoch of the newest entry of the leader-epoch cache, -1 when empty."""
        ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) per KIP-101 / Kafka's LeaderEpochFileCache.endOffsetFor."""
        ...

    def epoch_start_offset(self, epoch: int) -> int:
        """Start offset of ``epoch`` in the cache, -1 when unknown."""
        ...

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` and make it durable."""
        ...

    def append_as_leader(self, records: Any, epoch: int, now_ms: int) -> AppendInfo:
        """Append, stamping ``epoch``; a batch the producer state shows already appended is not written
        again (``duplicate``, with the earlier offsets). Refusals (sequence, size, I/O) raise."""
        ...

    def append_as_follower(self, batches: Any) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def advance_log_start(self, offset: int, reason: str) -> bool:
        """Start the log at ``offset`` (never backwards, never past the log end), durably, dropping what
        lies below; returns whether it moved. The core never asks past the high watermark."""
        ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at ``offset`` (the leader's log start passed ours)."""
        ...

    def flush(self) -> None: ...

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of a transaction not yet decided, or decided by a marker not yet below
        ``high_watermark``; None when there is none."""
        ...
