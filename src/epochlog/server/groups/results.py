"""What the coordinator takes and returns: plain values with Kafka error codes as ints."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    # (member_id, group_instance_id, metadata of the chosen protocol): filled for the leader only.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
