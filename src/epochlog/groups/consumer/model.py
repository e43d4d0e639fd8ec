"""A KIP-848 consumer group and its members, as the coordinator keeps them in memory.

Partitions are (topic name, partition) pairs and an assignment is a frozenset of them: the cores speak in
names; the driver maps Kafka's topic ids to names at the wire. State names are Kafka's, as
ConsumerGroupDescribe spells them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
Assignment = frozenset[TopicPartition]
NO_PARTITIONS: Assignment = frozenset()

# Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# A member's reconciliation state (Kafka's MemberState).
STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"
MEMBER_STATES = (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS)

# The group's state, derived from its epochs and its members (Kafka's ConsumerGroupState).
GROUP_EMPTY = "Empty"
GROUP_ASSIGNING = "Assigning"
GROUP_RECONCILING = "Reconciling"
GROUP_STABLE = "Stable"

# Topics a regex never matches: Kafka leaves internal topics out of pattern subscriptions.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default


@dataclass
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    # The current assignment: what the member was told it owns, and what it must still give up.
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: str = STABLE
    assigned: Assignment = NO_PARTITIONS
    pending_revocation: Assignment = NO_PARTITIONS
    # Partitions given to the member that none of its heartbeats has yet said it owns: it may not have heard
    # of them (the answer was lost) or may be taking them right now, and a client lists only what it had
    # acknowledged, so a list without them does not say they were given up. Not in the records.
    unconfirmed: Assignment = NO_PARTITIONS
    # Timers; not in the records (a coordinator that takes over gives every member a fresh session).
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None

    def subscription(self) -> tuple[tuple[str, ...], str | None]:
        return self.subscribed_topic_names, self.subscribed_topic_regex

    def owns(self) -> Assignment:
        """What the coordinator counts as this member's: assigned, and not yet revoked."""
        return self.assigned | self.pending_revocation

    def told(self) -> Assignment:
        """The assignment the member is answered with: what it keeps, and what it must first take before it
        can give it up (a partition being revoked that it never said it had)."""
        return self.assigned | (self.pending_revocation & self.unconfirmed)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0  # the epoch of the target assignment
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    # The partition counts of the topics the members subscribe to, as the last epoch bump saw them.
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    # Who owns each partition (assigned or pending revocation), with that member's epoch: a partition is
    # released, and may go to its next owner, only once it is in no member's current assignment.
    partition_owner: dict[TopicPartition, tuple[str, int]] = field(default_factory=dict)
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # committed offsets

    @property
    def state(self) -> str:
        if not self.members:
            return GROUP_EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GROUP_ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return GROUP_RECONCILING
        return GROUP_STABLE

    def static_member(self, instance_id: str | None) -> Member | None:
        if instance_id is None:
            return None
        mid = self.static_members.get(instance_id)
        return self.members.get(mid) if mid is not None else None

    def set_current(self, m: Member, assigned: Assignment, pending: Assignment, epoch: int) -> None:
        """Move ``m``'s current assignment, keeping the partition owners in step."""
        for tp in m.owns():
            if self.partition_owner.get(tp, ("", 0))[0] == m.member_id:
                del self.partition_owner[tp]
        m.assigned, m.pending_revocation = assigned, pending
        if epoch != m.member_epoch:
            m.previous_member_epoch, m.member_epoch = m.member_epoch, epoch
        for tp in m.owns():
            self.partition_owner[tp] = (m.member_id, m.member_epoch)

    def owner_epoch(self, tp: TopicPartition) -> int:
        """Kafka's currentPartitionEpoch: the owner's epoch, or -1 when the partition is free."""
        owner = self.partition_owner.get(tp)
        return owner[1] if owner is not None else -1
