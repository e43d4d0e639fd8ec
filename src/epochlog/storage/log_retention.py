"""Retention of a partition log: whole old segments deleted by time and size (retention.ms, retention.bytes), and
the log start offset moved (DeleteRecords, a follower following its leader's start, retention itself)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from epochlog.clock import now_ms as _now_ms
from epochlog.storage.segment import Segment

if TYPE_CHECKING:
    from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.storage")



def apply_retention(plog: PartitionLog, now_ms: int) -> int:
    cfg = plog.config
    if "delete" not in cfg.cleanup_policy:
        return 0
    total = plog.size_bytes

    def expired(seg: Segment) -> str | None:
        nonlocal total
        if seg.next_offset > plog.high_watermark:
            return None
        by_time = cfg.retention_ms >= 0 and now_ms - seg.largest_timestamp_ms() > cfg.retention_ms
        by_size = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
        if not (by_time or by_size):
            return None
        total -= seg.size
        return "time" if by_time else "size"

    freed = _delete_oldest_segments(plog, expired)
    if freed:
        plog.increment_log_start_offset(plog.segments[0].base_offset)
    return freed


def _delete_oldest_segments(plog: PartitionLog, reason_to_delete: Callable[[Segment], str | None]) -> int:
    """Delete segments from the oldest on while ``reason_to_delete`` names a reason (the active segment
    always stays); returns the bytes freed."""
    freed = 0
    while len(plog.segments) > 1:
        seg = plog.segments[0]
        reason = reason_to_delete(seg)
        if reason is None:
            break
        log.info(
            "%s-%d: %s deletes segment %d (%d bytes)",
            plog.topic,
            plog.partition,
            reason,
            seg.base_offset,
            seg.size,
        )
        plog.segments.pop(0)
        plog._bases.pop(0)
        freed += seg.size
        seg.delete()
    return freed


def advance_log_start(plog: PartitionLog, offset: int, reason: str) -> bool:
    offset = min(offset, plog.log_end_offset)
    if offset <= plog.log_start_offset:
        return False
    old = plog.log_start_offset
    plog.log_start_offset = offset
    plog.epoch_cache.truncate_from_start(offset)
    if plog.persist_log_start is not None:
        plog.persist_log_start()
    if plog.active.size > 0 and plog.active.next_offset <= offset:
        # Everything is below the new start: roll, so the old active segment can go too.
        plog._new_segment(plog.log_end_offset, _now_ms())
    _delete_oldest_segments(plog, lambda seg: reason if seg.next_offset <= offset else None)
    plog.producer_state.delete_snapshots_below(plog.segments[0].base_offset)
    log.info("%s-%d: log start offset %d -> %d (%s)", plog.topic, plog.partition, old, offset, reason)
    return True


def increment_log_start_offset(plog: PartitionLog, offset: int) -> None:
    offset = min(offset, plog.high_watermark)
    if offset <= plog.log_start_offset:
        return
    plog.log_start_offset = offset
    plog.epoch_cache.truncate_from_start(offset)
    plog.producer_state.delete_snapshots_below(plog.segments[0].base_offset)
