"""Finding records by timestamp in a partition log: ListOffsets' lookups of a timestamp and of MAX_TIMESTAMP."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from epochlog.protocol.record_batch import BatchHeader, CorruptBatchError
from epochlog.protocol.records import decode_batch
from epochlog.storage.segment import Segment

if TYPE_CHECKING:
    from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.storage")


def offset_for_timestamp(plog: PartitionLog, ts: int) -> tuple[int, int, int] | None:
    for seg in plog.segments:
        if seg.max_timestamp < ts or seg.size == 0:
            continue
        pos = seg.find_timestamp(ts)
        while pos < seg.size:
            h = seg.header_at(pos)
            if h.max_timestamp >= ts and h.last_offset >= plog.log_start_offset:
                found = _first_record_at_or_after(plog, seg, pos, h, ts)
                if found is not None:
                    return found[0], found[1], plog.epoch_cache.epoch_for_offset(found[0])
            pos += h.size
    return None


def _first_record_at_or_after(
    plog: PartitionLog, seg: Segment, pos: int, h: BatchHeader, ts: int
) -> tuple[int, int] | None:
    if h.last_offset < plog.log_start_offset:
        return None
    if h.is_log_append_time:  # every record carries the batch's max timestamp: nothing to decode
        return max(h.base_offset, plog.log_start_offset), h.max_timestamp
    try:
        _h, records = decode_batch(seg.read(pos, h.size), verify_crc=False)
    except CorruptBatchError as e:
        # The batch passed its checks on append; if it cannot be read now, answer for the batch as
        # a whole (where a consumer must start to see the record) rather than fail the request.
        log.warning(
            "%s-%d: reading batch at offset %d for a timestamp: %s", plog.topic, plog.partition, h.base_offset, e
        )
        return max(h.base_offset, plog.log_start_offset), h.max_timestamp
    for r in records:
        if r.timestamp >= ts and r.offset >= plog.log_start_offset:
            return r.offset, r.timestamp
    return None


def max_timestamp_and_offset(plog: PartitionLog) -> tuple[int, int] | None:
    best: Segment | None = None
    for seg in plog.segments:
        if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
            best = seg
    if best is None:
        return None
    ts, offset = best.max_timestamp, best.offset_of_max_timestamp
    found = best.find_position(offset)
    if found is not None:
        pos, h = found
        hit = _first_record_at_or_after(plog, best, pos, h, ts)
        if hit is not None:
            offset = hit[0]
    return ts, offset
