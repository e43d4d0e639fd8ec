"""What the coordinator takes and returns: plain values with Kafka error codes as ints (JoinResult and
SyncResult are the membership core's)."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.groups.effects import JoinResult, SyncResult

__all__ = ["CommittedOffset", "JoinResult", "OffsetCommit", "SyncResult"]


@dataclass
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1  # KIP-320; -1 when the client does not know it
    metadata: str | None = None


@dataclass
class CommittedOffset:
    topic: str
    partition: int
    offset: int  # -1 when the group has no offset for the partition
    leader_epoch: int
    metadata: str
    error_code: int = 0
