"""What goes into the share-group cores and what comes out: acquired ranges, acknowledgements, effects, the
heartbeat's fields and answer, and the group as ShareGroupDescribe shows it.

Answers carry Kafka error codes as ints (``epochlog.codes.Err``). A share-partition's effects are the state
writes to make through the share coordinator before answering (``StateWrite``), that released records wait
for a fetch (``RecordsAvailable``) and when to call ``tick`` (``WakeAt``). The group coordinator's effects are
its records (group_records.py), ``WakeAt`` and ``MemberGone`` (release the member's records everywhere).
"""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.groups.share.group_records import GroupRecord
from epochlog.groups.share.model import Assignment
from epochlog.groups.share.records import StateBatch


@dataclass(frozen=True)
class Acquired:
    """Records given to a member by one ShareFetch (Kafka's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class AckBatch:
    """One acknowledgement batch: a type for the whole range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True)
class StateWrite:
    """WriteShareGroupState for this share-partition: what changed, with the start offset after the change."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True)
class RecordsAvailable:
    """Records became available again (released, timed out): a waiting ShareFetch may be answered."""


@dataclass(frozen=True)
class WakeAt:
    at_ms: int


@dataclass(frozen=True)
class MemberGone:
    """A member left or was fenced: the leaders of its partitions release what it holds."""

    group_id: str
    member_id: str


@dataclass(frozen=True)
class Note:
    group_id: str
    text: str


PartitionEffect = StateWrite | RecordsAvailable | WakeAt
GroupEffect = GroupRecord | WakeAt | MemberGone | Note


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int  # 0 joins, -1 leaves
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatResponse:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    member_epoch: int
    assignment: Assignment


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMemberDescription, ...]
