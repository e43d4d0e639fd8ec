"""A partition log as the cleaner (storage/cleaner) sees it, and the swap of a cleaned segment into it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from epochlog.storage.cleaner import swap
from epochlog.storage.cleaner.cleaner import LogView, SegmentInfo
from epochlog.storage.segment import Segment

if TYPE_CHECKING:
    from epochlog.storage.partition_log import PartitionLog


def cleaning_view(plog: PartitionLog, with_files: bool) -> LogView:
    infos = []
    for seg in plog.segments[:-1]:
        fd = os.dup(seg.fd) if with_files else -1
        infos.append(SegmentInfo(seg, seg.base_offset, seg.next_offset, seg.size, seg.largest_timestamp_ms(), fd))
    producers = {pid: e.batches[-1].last_offset for pid, e in plog.producer_state.producers.items() if e.batches}
    marker_epochs = {pid: e.epoch for pid, e in plog.producer_state.producers.items() if not e.batches}
    return LogView(
        plog.dir,
        f"{plog.topic}-{plog.partition}",
        infos,
        plog.log_start_offset,
        plog.high_watermark,
        plog.config,
        producers,
        truncations=plog.truncations,
        last_stable_offset=plog.last_stable_offset,
        # Only the cleaning itself needs them, not the probes that choose a log.
        aborted=[e for seg in plog.segments for e in seg.txn_index.entries] if with_files else [],
        marker_epochs=marker_epochs,
    )


def first_batch_timestamp(plog: PartitionLog, offset: int) -> int:
    for seg in plog.segments[plog._segment_index(offset) :]:
        found = seg.find_position(offset)
        if found is not None:
            return found[1].max_timestamp
    return -1


def replace_segments(
    plog: PartitionLog, cleaned: Segment, old: list[Segment], sizes: list[int], truncations: int
) -> list[Path] | None:
    if truncations != plog.truncations:
        return None
    ids = [id(s) for s in plog.segments]
    try:
        first = ids.index(id(old[0]))
    except ValueError:
        return None
    current = plog.segments[first : first + len(old)]
    if (
        len(current) != len(old)
        or any(a is not b for a, b in zip(current, old, strict=True))
        or first + len(old) >= len(plog.segments)  # the active segment is never replaced
        or [s.size for s in current] != sizes
        or cleaned.base_offset != old[0].base_offset
    ):
        return None
    swap.commit_cleaned(plog.dir, cleaned.base_offset)
    retired = swap.retire(plog.dir, [s.base_offset for s in old])
    for s in old:
        s.abandon()  # closed, not deleted: their files are the .deleted ones now
    plog.segments[first : first + len(old)] = [cleaned]
    plog._bases = [s.base_offset for s in plog.segments]
    swap.install(plog.dir, cleaned.base_offset)
    cleaned.renamed()
    return retired
