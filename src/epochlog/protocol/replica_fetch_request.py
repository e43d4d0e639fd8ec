"""The replica fetcher's own Fetch v12 request, read with struct alone on the leader.

Every follower round trip is one of these; through the tolerant reader and kio its decode was about a
quarter of the leader's samples under handle_fetch in an RF=3 run (docs/performance-profile.md, section
3). Our followers always send the same shape (protocol/fetch_request_writer.py): no fetch session, read
uncommitted, no forgotten topics, no tagged fields, and short names and arrays whose lengths fit one varint
byte. Anything else (another broker's follower, a consumer, a malformed frame) is not read here:
``parse_replica_fetch`` answers None and the general decoder, with its length checks and error
reporting, reads the request instead. tests/unit/protocol/test_replica_fetch_request.py holds both ends.
"""

from __future__ import annotations

import struct

from epochlog.protocol.fetch_response import VERSION

_BODY_HEAD = struct.Struct(">iiiibii")  # replica, max wait, min bytes, max bytes, isolation, session, epoch
_PARTITION = struct.Struct(">iiqiqiB")  # partition, leader epoch, offset, last epoch, log start, max, tags
_TAIL = b"\x01\x01\x00"  # no forgotten topics, rack id "", no tagged fields

# (partition, current leader epoch, fetch offset, last fetched epoch, log start offset, partition max bytes)
ReplicaPartition = tuple[int, int, int, int, int, int]


class ReplicaFetch:
    __slots__ = ("max_bytes", "max_wait_ms", "min_bytes", "replica_id", "topics")

    def __init__(
        self,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        topics: list[tuple[str, list[ReplicaPartition]]],
    ) -> None:
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.topics = topics


def parse_replica_fetch(frame: memoryview, pos: int, version: int) -> ReplicaFetch | None:
    """A follower's sessionless Fetch body starting at ``pos`` (after the request header's tags), or None
    when the request is anything else."""
    if version != VERSION:
        return None
    try:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = _BODY_HEAD.unpack_from(
            frame, pos
        )
        if replica_id < 0 or isolation != 0 or session_id != 0 or session_epoch != -1:
            return None
        pos += _BODY_HEAD.size
        n_topics = frame[pos] - 1
        pos += 1
        if n_topics < 0 or n_topics > 126:
            return None
        topics: list[tuple[str, list[ReplicaPartition]]] = []
        unpack = _PARTITION.unpack_from
        step = _PARTITION.size
        for _ in range(n_topics):
            n = frame[pos] - 1
            if n <= 0 or n > 126:
                return None
            name = bytes(frame[pos + 1 : pos + 1 + n]).decode()
            pos += 1 + n
            n_parts = frame[pos] - 1
            pos += 1
            if n_parts < 0 or n_parts > 126:
                return None
            parts: list[ReplicaPartition] = []
            for _ in range(n_parts):
                p, epoch, offset, last_epoch, log_start, part_max, tags = unpack(frame, pos)
                if tags:
                    return None
                parts.append((p, epoch, offset, last_epoch, log_start, part_max))
                pos += step
            if frame[pos] != 0:  # the topic's tagged fields
                return None
            pos += 1
            topics.append((name, parts))
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    if frame[pos:] != _TAIL:
        return None
    return ReplicaFetch(replica_id, max_wait, min_bytes, max_bytes, topics)
