"""The share group's records in ``__consumer_offsets``, and ``replay``, which rebuilds the group from them.

Named after Kafka's ShareGroup* records (topic names where Kafka has topic ids); a tombstone is its own type.
A share member's assignment is its target as soon as the target is computed (no partition needs revoking
before another member may have it), so the current assignment record carries the member epoch and partitions.
Timers are not recorded: a replayed member gets a full session from the moment of replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from epochlog.groups.share.model import NO_PARTITIONS, Assignment


@dataclass(frozen=True)
class ShareGroupMetadata:
    group_id: str
    epoch: int


@dataclass(frozen=True)
class ShareGroupPartitionMetadata:
    group_id: str
    topics: tuple[tuple[str, int], ...]  # (topic, partition count) of every subscribed topic


@dataclass(frozen=True)
class ShareGroupMemberMetadata:
    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareGroupMemberMetadataTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadata:
    group_id: str
    assignment_epoch: int


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMember:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignmentTombstone:
    group_id: str
    member_id: str


GroupRecord = (
    ShareGroupMetadata
    | ShareGroupPartitionMetadata
    | ShareGroupMemberMetadata
    | ShareGroupMemberMetadataTombstone
    | ShareGroupTargetAssignmentMetadata
    | ShareGroupTargetAssignmentMember
    | ShareGroupTargetAssignmentMemberTombstone
    | ShareGroupCurrentMemberAssignment
    | ShareGroupCurrentMemberAssignmentTombstone
)


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = NO_PARTITIONS
    session_deadline_ms: int = 0


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    subscription_metadata: dict[str, int] = field(default_factory=dict)


def member_metadata(group_id: str, m: ShareMember) -> ShareGroupMemberMetadata:
    return ShareGroupMemberMetadata(
        group_id, m.member_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names
    )


def apply(g: ShareGroup, r: GroupRecord, now_ms: int, session_timeout_ms: int) -> None:
    if isinstance(r, ShareGroupMetadata):
        g.group_epoch = r.epoch
    elif isinstance(r, ShareGroupPartitionMetadata):
        g.subscription_metadata = dict(r.topics)
    elif isinstance(r, ShareGroupMemberMetadata):
        m = g.members.setdefault(r.member_id, ShareMember(r.member_id))
        m.rack_id, m.client_id, m.client_host = r.rack_id, r.client_id, r.client_host
        m.subscribed_topic_names = r.subscribed_topic_names
        m.session_deadline_ms = now_ms + session_timeout_ms
    elif isinstance(r, ShareGroupMemberMetadataTombstone):
        g.members.pop(r.member_id, None)
    elif isinstance(r, ShareGroupTargetAssignmentMetadata):
        g.assignment_epoch = r.assignment_epoch
    elif isinstance(r, ShareGroupTargetAssignmentMember):
        g.target[r.member_id] = r.partitions
    elif isinstance(r, ShareGroupTargetAssignmentMemberTombstone):
        g.target.pop(r.member_id, None)
    elif isinstance(r, ShareGroupCurrentMemberAssignment):
        m = g.members.setdefault(r.member_id, ShareMember(r.member_id))
        m.member_epoch, m.previous_member_epoch, m.assigned = r.member_epoch, r.previous_member_epoch, r.assigned
    elif isinstance(r, ShareGroupCurrentMemberAssignmentTombstone):
        old = g.members.get(r.member_id)
        if old is not None:
            old.assigned = NO_PARTITIONS


def replay(group_id: str, records: Iterable[GroupRecord], now_ms: int, session_timeout_ms: int) -> ShareGroup:
    g = ShareGroup(group_id)
    for r in records:
        if r.group_id == group_id:
            apply(g, r, now_ms, session_timeout_ms)
    return g
