"""What goes into the consumer-group core and what comes out: the heartbeat's fields, its answer, effects,
and the group as ConsumerGroupDescribe shows it.

Requests carry ConsumerGroupHeartbeat's fields with Kafka's conventions: None (or -1 for the rebalance
timeout) means "unchanged since my last heartbeat". Answers carry Kafka error codes as ints
(``epochlog.codes.Err``). Effects are the group records to write, in order, before the answer is sent,
plus when to call ``tick`` and lines worth logging.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.groups.consumer.model import Assignment
from epochlog.groups.consumer.records import Record


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int  # 0 joins, -1 leaves, -2 a static member leaves for now and will be back
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # TopicPartitions: what the member owns now
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged (the client keeps what it has)


@dataclass(frozen=True)
class WakeAt:
    """A member's session or rebalance timeout falls due at ``at_ms``: call ``tick`` then."""

    at_ms: int


@dataclass(frozen=True)
class Note:
    """Something worth one log line (a member joined, was fenced, the group epoch moved)."""

    group_id: str
    text: str


Effect = Record | WakeAt | Note


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    member_epoch: int
    state: str
    assignment: Assignment
    target_assignment: Assignment


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[MemberDescription, ...]
