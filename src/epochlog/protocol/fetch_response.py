"""A hand-written Fetch response v12 parser for the replica fetcher, zero-copy over the records.

kio would copy each partition's records (a megabyte per replica fetch) into a new ``bytes``; here they
stay a slice of the frame the response was read into, and the follower appends them from there.
Version 12 is the one the replica fetcher and the Spark reader send: the first with DivergingEpoch
(KIP-320) and the last that names topics (v13+ use topic ids).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from epochlog.protocol.cursor import Cursor
from epochlog.protocol.errors import InvalidRequest

VERSION = 12
_DIVERGING_EPOCH_TAG = 0
_EPOCH_END_OFFSET = struct.Struct(">iq")


@dataclass(slots=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


@dataclass(slots=True)
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    diverging_epoch: EpochEndOffset | None
    records: memoryview | None


@dataclass(slots=True)
class FetchedTopic:
    topic: str
    partitions: list[FetchedPartition] = field(default_factory=list)


@dataclass(slots=True)
class FetchAnswer:
    error_code: int
    responses: list[FetchedTopic]


def parse_fetch_response_v12(frame: memoryview) -> FetchAnswer:
    """``frame``: the response after its size prefix and correlation id (from the header's tag buffer)."""
    c = Cursor(frame, flexible=True, what="fetch response")
    c.tags()  # response header v1
    c.i32()  # throttle time
    error_code = c.i16()
    c.i32()  # session id: epochlog's followers use no fetch session
    topics: list[FetchedTopic] = []
    for _ in range(max(c.count(len(frame)), 0)):
        name = c.string()
        if name is None:
            raise InvalidRequest("fetch response: null topic name")
        topic = FetchedTopic(name)
        for _ in range(max(c.count(len(frame)), 0)):
            index = c.i32()
            code = c.i16()
            hw = c.i64()
            c.i64()  # last stable offset
            log_start = c.i64()
            for _ in range(max(c.count(len(frame)), 0)):  # aborted transactions
                c.i64()
                c.i64()
                c.tags()
            c.i32()  # preferred read replica
            size = c.length()
            records = c.raw(size) if size >= 0 else None
            diverging = None
            tag = c.tags().get(_DIVERGING_EPOCH_TAG)
            if tag is not None:
                if len(tag) < _EPOCH_END_OFFSET.size:
                    raise InvalidRequest("fetch response: DivergingEpoch too short")
                epoch, end = _EPOCH_END_OFFSET.unpack_from(tag, 0)
                diverging = EpochEndOffset(epoch, end)
            topic.partitions.append(FetchedPartition(index, code, hw, log_start, diverging, records))
        c.tags()
        topics.append(topic)
    c.tags()
    return FetchAnswer(error_code, topics)
