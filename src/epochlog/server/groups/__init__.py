"""The classic consumer-group coordinator (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, offsets)."""

from epochlog.server.groups.coordinator import (
    CommittedOffset,
    GroupConfig,
    GroupCoordinator,
    JoinResult,
    OffsetCommit,
    OffsetsStore,
    SyncResult,
)

__all__ = [
    "CommittedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "JoinResult",
    "OffsetCommit",
    "OffsetsStore",
    "SyncResult",
]
