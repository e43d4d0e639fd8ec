"""The records a consumer group is made of, and ``replay``, which rebuilds the group from them.

They are named after Kafka's KIP-848 records in ``__consumer_offsets`` and hold the same facts (topic names
where Kafka has topic ids). Kafka deletes with a tombstone (a key with no value); here a tombstone is its
own type. The coordinator returns records among an event's effects, in the order they must be written;
every record of an event is written before its answer is sent, so a coordinator that takes over and
replays what was written knows all that any member was told.

What the records leave out on purpose: timers (a replayed member gets a full session from the moment of
replay, as Kafka's loading does) and the group's derived state (partition owners, static member index),
which ``apply`` recomputes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import get_args

from epochlog.groups.consumer.model import NO_PARTITIONS, Assignment, ConsumerGroup, Member


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    group_id: str
    epoch: int


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadata:
    group_id: str
    topics: tuple[tuple[str, int], ...]  # (topic, partition count) of every subscribed topic


@dataclass(frozen=True)
class ConsumerGroupMemberMetadata:
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadata:
    group_id: str
    assignment_epoch: int


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMember:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned: Assignment
    pending_revocation: Assignment


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class OffsetCommit:
    group_id: str
    topic: str
    partition: int
    offset: int


Record = (
    ConsumerGroupMetadata
    | ConsumerGroupPartitionMetadata
    | ConsumerGroupMemberMetadata
    | ConsumerGroupMemberMetadataTombstone
    | ConsumerGroupTargetAssignmentMetadata
    | ConsumerGroupTargetAssignmentMember
    | ConsumerGroupTargetAssignmentMemberTombstone
    | ConsumerGroupCurrentMemberAssignment
    | ConsumerGroupCurrentMemberAssignmentTombstone
    | OffsetCommit
)
RECORD_TYPES: tuple[type, ...] = get_args(Record)  # for isinstance: which effects are records to write


def member_metadata(group_id: str, m: Member) -> ConsumerGroupMemberMetadata:
    return ConsumerGroupMemberMetadata(
        group_id,
        m.member_id,
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.server_assignor,
        m.rebalance_timeout_ms,
    )


def current_assignment(group_id: str, m: Member) -> ConsumerGroupCurrentMemberAssignment:
    return ConsumerGroupCurrentMemberAssignment(
        group_id, m.member_id, m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation
    )


def _member(g: ConsumerGroup, member_id: str) -> Member:
    m = g.members.get(member_id)
    if m is None:
        m = g.members[member_id] = Member(member_id)
    return m


def apply(g: ConsumerGroup, r: Record, now_ms: int, session_timeout_ms: int) -> None:
    """One record's change to ``g`` (records of other groups are the caller's to route)."""
    if isinstance(r, ConsumerGroupMetadata):
        g.group_epoch = r.epoch
    elif isinstance(r, ConsumerGroupPartitionMetadata):
        g.subscription_metadata = dict(r.topics)
    elif isinstance(r, ConsumerGroupMemberMetadata):
        m = _member(g, r.member_id)
        m.instance_id, m.rack_id, m.client_id, m.client_host = r.instance_id, r.rack_id, r.client_id, r.client_host
        m.subscribed_topic_names, m.subscribed_topic_regex = r.subscribed_topic_names, r.subscribed_topic_regex
        m.server_assignor, m.rebalance_timeout_ms = r.server_assignor, r.rebalance_timeout_ms
        m.session_deadline_ms = now_ms + session_timeout_ms
        if m.instance_id is not None:
            g.static_members[m.instance_id] = m.member_id
    elif isinstance(r, ConsumerGroupMemberMetadataTombstone):
        gone = g.members.pop(r.member_id, None)
        if gone is not None:
            g.set_current(gone, NO_PARTITIONS, NO_PARTITIONS, gone.member_epoch)
            if gone.instance_id is not None and g.static_members.get(gone.instance_id) == r.member_id:
                del g.static_members[gone.instance_id]
    elif isinstance(r, ConsumerGroupTargetAssignmentMetadata):
        g.assignment_epoch = r.assignment_epoch
    elif isinstance(r, ConsumerGroupTargetAssignmentMember):
        g.target[r.member_id] = r.partitions
    elif isinstance(r, ConsumerGroupTargetAssignmentMemberTombstone):
        g.target.pop(r.member_id, None)
    elif isinstance(r, ConsumerGroupCurrentMemberAssignment):
        m = _member(g, r.member_id)
        g.set_current(m, NO_PARTITIONS, NO_PARTITIONS, m.member_epoch)
        m.member_epoch, m.previous_member_epoch, m.state = r.member_epoch, r.previous_member_epoch, r.state
        g.set_current(m, r.assigned, r.pending_revocation, m.member_epoch)
        # A member caught mid-revocation gets a fresh rebalance timeout, as a fresh session.
        m.revocation_deadline_ms = now_ms + max(m.rebalance_timeout_ms, 0) if r.pending_revocation else None
    elif isinstance(r, ConsumerGroupCurrentMemberAssignmentTombstone):
        old = g.members.get(r.member_id)
        if old is not None:
            g.set_current(old, NO_PARTITIONS, NO_PARTITIONS, old.member_epoch)
            old.revocation_deadline_ms = None
    elif isinstance(r, OffsetCommit):
        g.offsets[(r.topic, r.partition)] = r.offset


def replay(group_id: str, records: Iterable[Record], now_ms: int, session_timeout_ms: int) -> ConsumerGroup:
    """The group as the records of ``group_id`` leave it: what a coordinator taking over the partition has."""
    g = ConsumerGroup(group_id)
    for r in records:
        if r.group_id == group_id:
            apply(g, r, now_ms, session_timeout_ms)
    return g
