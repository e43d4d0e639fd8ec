"""Where a follower's log parts from the leader's, as functions of the log alone (KIP-595's diverging epoch,
KIP-630's snapshots): what the leader tells a Fetch that does not continue its log, and where the follower
truncates to when told of a diverging epoch."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.raft.log import RaftLog
from epochlog.raft.messages import DivergingEpoch, FetchRequest, SnapshotId


@dataclass(frozen=True)
class Restart:
    """The follower must go back to where the logs agree (``diverging``) or load ``snapshot``."""

    diverging: DivergingEpoch | None = None
    snapshot: SnapshotId | None = None


def restart_point(log: RaftLog, req: FetchRequest) -> Restart | None:
    """None when the fetch continues the leader's ``log``; else where the follower starts again from."""
    start = log.log_start_offset
    snapshot = log.latest_snapshot()
    at_start_elsewhere = (
        snapshot is not None and req.fetch_offset == start > 0 and req.last_fetched_epoch != snapshot.epoch
    )
    if snapshot is not None and (req.fetch_offset < start or at_start_elsewhere):
        return Restart(snapshot=snapshot)
    if req.fetch_offset > start:
        epoch, end = log.end_offset_for(req.last_fetched_epoch)
        if epoch != req.last_fetched_epoch or end < req.fetch_offset:
            # Below our log start the epoch history is gone with the entries it described: a
            # divergence point there cannot be trusted, so the follower starts from the snapshot.
            below_start = epoch < 0 or end <= start
            return Restart(
                diverging=None if below_start and snapshot is not None else DivergingEpoch(epoch, max(end, 0)),
                snapshot=snapshot if below_start else None,
            )
    return None


def truncation_offset(log: RaftLog, diverging: DivergingEpoch) -> int:
    """Where our log and the leader's part: the end of the diverging epoch on both sides, or, if we
    never had that epoch, the end of the last epoch we had before it."""
    epoch, local_end = log.end_offset_for(diverging.epoch)
    offset = min(local_end, diverging.end_offset) if epoch == diverging.epoch else local_end
    return max(log.log_start_offset, min(offset, log.log_end_offset))
