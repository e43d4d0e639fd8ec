"""What the quorum core asks of the metadata log and its snapshots; storage/ and sim/ implement it.

The log is the same shape as a partition's (the leader-epoch cache answers ``end_offset_for``), plus
snapshots: a snapshot replaces the log below its end offset, and only a snapshot moves the log start.
"""

from __future__ import annotations

from typing import Any, Protocol

from epochlog.raft.messages import SnapshotId
from epochlog.raft.voters import VoterSet


class RaftLog(Protocol):
    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    def latest_epoch(self) -> int:
        """The epoch of the last entry (or of the snapshot the log starts at); -1 when empty."""
        ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) per the leader-epoch cache: the largest epoch <= ``epoch`` and where it ends."""
        ...

    def append_as_leader(self, records: list[Any], epoch: int, now_ms: int) -> tuple[int, int]:
        """Append ``records`` stamped with ``epoch``; returns (first offset, last offset)."""
        ...

    def append_as_follower(self, batches: Any) -> None:
        """Append batches read from the leader's log; they start at ``log_end_offset``."""
        ...

    def truncate_to(self, offset: int) -> None: ...

    def voter_sets(self, start: int) -> list[tuple[int, VoterSet]]:
        """(offset, voter set) of every Voters control record at or after ``start``, in order; a snapshot the
        log starts at that is at or after ``start`` counts as one at its last offset (end offset - 1)."""
        ...

    def flush(self) -> None: ...

    # -- snapshots (KIP-630) ------------------------------------------------------------------
    def latest_snapshot(self) -> SnapshotId | None: ...

    def snapshot_size(self, snapshot: SnapshotId) -> int:
        """Bytes in that snapshot, -1 if this log does not hold it."""
        ...

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> bytes: ...

    def write_snapshot_part(self, snapshot: SnapshotId, position: int, chunk: bytes) -> None:
        """Write into a snapshot being received (Kafka's ``.checkpoint.part``)."""
        ...

    def install_snapshot(self, snapshot: SnapshotId) -> bool:
        """The received snapshot is complete: if it reads back whole, make it durable, drop the whole log,
        start at its end and return True; if it does not (a malformed snapshot), discard it, change
        nothing else and return False."""
        ...

    def trim_to_snapshot(self, snapshot: SnapshotId) -> None:
        """This node took ``snapshot`` of its own committed state: the log below it may go."""
        ...
