"""One consumer group and its members, as the coordinator keeps them in memory.

State names are spelled as Kafka spells them on the wire (DescribeGroups, ListGroups). The core decides on
the membership fields; ``offsets``, ``offset_write_seq`` and ``state_timestamp_ms`` are the driver's (offsets
live in server/groups), kept here so that a group is one object.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)

TopicPartition = tuple[str, int]


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    last_heartbeat_ms: int = 0
    # The parked JoinGroup / SyncGroup request of this member, by the token its call was given.
    join_token: int | None = None
    sync_token: int | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")

    def protocol_names(self) -> set[str]:
        return {n for n, _ in self.protocols}

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order = join order
    # Member ids handed out with MEMBER_ID_REQUIRED, and when (ms) they lapse if the client never returns.
    pending: dict[str, int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    # Commits are applied in the order they were written, even if their appends finish out of order.
    offset_write_seq: dict[TopicPartition, int] = field(default_factory=dict)
    state_timestamp_ms: int = -1  # wall clock of the last state change: Kafka's currentStateTimestamp
    rebalance_deadline_ms: int = 0
    # Kafka's InitialDelayedJoin: while set, the join completes only at the deadline, which moves out
    # by another delay (up to the rebalance timeout) each time a new member arrives.
    initial_delay: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False

    def member_by_instance(self, group_instance_id: str | None) -> Member | None:
        if group_instance_id is None:
            return None
        mid = self.static_members.get(group_instance_id)
        return self.members.get(mid) if mid is not None else None

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]], member_id: str) -> bool:
        """Kafka's rule: an empty group takes any non-empty protocol type and list; otherwise the type
        must match and at least one of the offered protocols must be supported by every other member."""
        if not protocol_type or not protocols:
            return False
        others = [m for mid, m in self.members.items() if mid != member_id]
        if not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        offered = {n for n, _ in protocols}
        return any(all(name in m.protocol_names() for m in others) for name in offered)

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred protocol that every member supports; most votes wins,
        ties going to the protocol the leader prefers (Kafka leaves ties unspecified)."""
        members = list(self.members.values())
        if not members:
            return None
        candidates = set.intersection(*(m.protocol_names() for m in members))
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in members:
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader or "") or members[0]
        order = {n: i for i, (n, _) in enumerate(leader.protocols)}
        return min(votes, key=lambda n: (-votes[n], order.get(n, len(order))))
