"""Micro-batch planning with the connector's arithmetic: rate limits, trigger delay, range splitting.

Pure functions over plain dicts so that each rule can be tested without Spark or a broker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Share `limit` offsets among partitions in proportion to each one's backlog.

    `start` must already hold a start for every partition of `latest` (new partitions at their earliest
    offset). A partition whose share rounds below one still gets one offset, so that a small partition
    next to a busy one is never starved; nothing goes past the latest offset.
    """
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start[tp] + step)
    return out


def backlog(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Offsets available past `start`; partitions not yet in `start` count from 0, as in the connector."""
    return sum(end - start.get(tp, 0) for tp, end in latest.items())


def should_delay(
    min_rows: int,
    available: int,
    now_ms: int,
    last_trigger_ms: int,
    max_delay_ms: int,
) -> bool:
    """minOffsetsPerTrigger: skip this trigger while too little is available, unless maxTriggerDelay has
    passed since the last batch ran."""
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False
    return available < min_rows


def _parts(size: int, total: int, min_parts: int) -> int:
    # round() half-to-even differs from Java's Math.round at exactly .5; use half-up like the connector.
    return max(math.floor(size / total * min_parts + 0.5), 1)


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """minPartitions: when there are fewer non-empty ranges than asked, cut the large ones into pieces
    proportional to their size. Empty and negative ranges are dropped."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    unsplit = [r for r in ranges if _parts(r.size, total, min_partitions) == 1]
    unsplit_keys = {(r.topic, r.partition) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if (r.topic, r.partition) in unsplit_keys else _parts(r.size, split_total, split_min)
        remaining, start = r.size, r.from_offset
        for i in range(parts):
            this = remaining // (parts - i)
            remaining -= this
            end = min(start + this, r.until_offset)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out
