"""What goes into the membership core and what comes out: requests, answers and effects.

Answers carry Kafka error codes as ints (``epochlog.codes.Err`` values). Every JoinGroup and SyncGroup call
is given a token; its answer is an ``AnswerJoin``/``AnswerSync`` with that token, either among the effects of
the call itself or, for a request that must wait (a rebalance barrier), among the effects of a later event.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MembershipConfig:
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    # JoinGroup v4+: a join without member id is answered MEMBER_ID_REQUIRED with the id to join with.
    require_known_member_id: bool = False


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


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    metadata: bytes  # of the chosen protocol
    assignment: bytes


@dataclass(frozen=True)
class GroupSnapshot:
    """The group as its ``__consumer_offsets`` GroupMetadata record holds it."""

    group_id: str
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader: str | None
    members: tuple[MemberSnapshot, ...]


@dataclass(frozen=True)
class AnswerJoin:
    token: int
    result: JoinResult


@dataclass(frozen=True)
class AnswerSync:
    token: int
    result: SyncResult


@dataclass(frozen=True)
class PersistGroup:
    """Write the group's record. With ``confirm``, the leader's assignment waits for it: report the outcome
    with ``GroupMembership.assignment_written(group_id, generation, ok, now_ms)``."""

    snapshot: GroupSnapshot
    confirm: bool = False


@dataclass(frozen=True)
class StateChanged:
    group_id: str
    state: str


@dataclass(frozen=True)
class WakeAt:
    """A group timer falls due at ``at_ms``: call ``tick`` then (earlier or later calls are harmless)."""

    at_ms: int


@dataclass(frozen=True)
class Note:
    """Something worth one log line (a member expired, a rebalance began)."""

    group_id: str
    text: str


Effect = AnswerJoin | AnswerSync | PersistGroup | StateChanged | WakeAt | Note


@dataclass
class Step:
    """A call's token (for JoinGroup/SyncGroup) and the effects it produced, in order."""

    token: int
    effects: list[Effect] = field(default_factory=list)


@dataclass
class LeaveOutcome:
    error_code: int
    member_errors: list[int]
    effects: list[Effect] = field(default_factory=list)
