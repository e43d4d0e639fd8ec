"""What a quorum member tells the trace checker (trace/check.py): commits with the epochs they cover, and
truncations with the epoch of the first entry dropped. Kept beside the node so its state machine stays short."""

from __future__ import annotations

from epochlog.raft.log import RaftLog
from epochlog.trace import events as trace


def commit(tracer: trace.Tracer, log: RaftLog, epoch: int, role: str, traced_hw: int, hw: int | None) -> int:
    """Trace a Ready's high watermark (where every Ready passes); returns the HW traced so far."""
    if hw is None or not tracer.enabled:
        return traced_hw
    lo = max(traced_hw, log.log_start_offset, 0)
    runs = trace.epochs_between(log, lo, min(hw, log.log_end_offset))
    tracer.emit(trace.RaftHw(epoch, role, hw, runs))
    return hw


def truncate(tracer: trace.Tracer, log: RaftLog, epoch: int, to: int) -> None:
    if tracer.enabled and to < log.log_end_offset:
        tracer.emit(trace.RaftTruncate(epoch, log.log_end_offset, to, trace.epoch_at(log, to)))
