"""One KIP-848 consumer group as a state machine: ConsumerGroupHeartbeat, timeouts, metadata, offset commits.

Events come in with ``now_ms`` and return the answer and the effects (records to write before answering, in
order; when to ``tick``; log lines). A heartbeat does, as Kafka's coordinator does:

1. Validate the request and find the member: a join (epoch 0) creates it, or takes over a static member's
   slot once that member left with epoch -2 (else UNRELEASED_INSTANCE_ID); any other epoch must name a known
   member (UNKNOWN_MEMBER_ID; FENCED_INSTANCE_ID for another member's instance id) at its current epoch, or at
   its previous epoch owning a subset of its assignment (the answer that moved it on was lost), else
   FENCED_MEMBER_EPOCH. A join from a member we know that fails that test is a fenced member coming back
   with nothing: its old incarnation is removed, releasing its partitions, and it joins afresh.
2. Record changed member metadata; bump the group epoch when a subscription, the member set or the
   subscribed topics' partition counts changed.
3. When the group epoch is ahead of the target assignment's, recompute the target with the group's
   assignor (the one most members ask for, else the first of ``group.consumer.assignors``), writing only
   the members whose target changed.
4. Reconcile the member towards its target (reconcile.py): revoke first, hand over only released partitions.

``tick`` fences members whose session (``group.consumer.session.timeout.ms``) lapsed, and members that did
not revoke within their rebalance timeout. A fenced or departed member's partitions are released at once.

Choices where Kafka leaves room: an empty member id at join gets one from ``new_member_id`` (Kafka 4 clients
bring their own); a static member re-sending its join under the same member id (the answer was lost) is
treated as that member's retry, not as a second instance (Kafka answers UNRELEASED_INSTANCE_ID).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from epochlog.codes import Err
from epochlog.groups.consumer.assignors import MemberSpec, assign
from epochlog.groups.consumer.messages import (
    Effect,
    GroupDescription,
    HeartbeatRequest,
    HeartbeatResponse,
    MemberDescription,
    Note,
    WakeAt,
)
from epochlog.groups.consumer.model import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    NO_PARTITIONS,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerGroupConfig,
    Member,
    TopicPartition,
)
from epochlog.groups.consumer.reconcile import CurrentAssignment, reconcile
from epochlog.groups.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadata,
    OffsetCommit,
    Record,
    current_assignment,
    member_metadata,
    replay,
)
from epochlog.groups.consumer.topic_regex import InvalidRegex, compile_topic_regex, matching_topics


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_offset_commit(g: ConsumerGroup, member_id: str, member_epoch: int) -> int:
    """Kafka's rule for OffsetCommit (v9+) to a consumer group: a commit without a member (epoch < 0) only
    while the group is empty; else the member must be known and at exactly its current epoch. An older
    epoch means the member has moved on (or was told to give the partitions up): STALE_MEMBER_EPOCH."""
    if member_epoch < 0 and not g.members:
        return Err.NONE
    m = g.members.get(member_id)
    if m is None:
        return Err.UNKNOWN_MEMBER_ID
    if member_epoch != m.member_epoch:
        return Err.STALE_MEMBER_EPOCH
    return Err.NONE


def _uuid_member_id(client_id: str) -> str:
    return str(uuid.uuid4())


class ConsumerGroupCoordinator:
    def __init__(
        self,
        group_id: str,
        config: ConsumerGroupConfig | None = None,
        topics: Mapping[str, int] | None = None,
        new_member_id: Callable[[str], str] = _uuid_member_id,
        group: ConsumerGroup | None = None,
    ) -> None:
        """``topics`` is the cluster's topics and partition counts (``topics_changed`` keeps it current)."""
        self.config = config or ConsumerGroupConfig()
        self.topics: dict[str, int] = dict(topics or {})
        self.new_member_id = new_member_id
        self.group = group or ConsumerGroup(group_id)

    @classmethod
    def from_records(
        cls,
        group_id: str,
        records: Iterable[Record],
        now_ms: int,
        config: ConsumerGroupConfig | None = None,
        topics: Mapping[str, int] | None = None,
        new_member_id: Callable[[str], str] = _uuid_member_id,
    ) -> ConsumerGroupCoordinator:
        """A coordinator taking the group over: the group as its records left it. What each member has said
        it owns is not in them: until a member says so again (its client sends a full request on finding the
        coordinator moved), every partition of its assignment counts as one it may be taking."""
        config = config or ConsumerGroupConfig()
        g = replay(group_id, records, now_ms, config.session_timeout_ms)
        for m in g.members.values():
            m.unconfirmed = m.owns()
        return cls(group_id, config, topics, new_member_id, g)

    def keep_confirmations(self, previous: ConsumerGroupCoordinator) -> None:
        """This coordinator rebuilt ``previous``'s group from the records (a write failed): what the members
        said they own to ``previous`` still holds, for the partitions they still have."""
        for mid, m in self.group.members.items():
            old = previous.group.members.get(mid)
            if old is not None:
                m.unconfirmed = m.owns() & (old.unconfirmed | (m.owns() - old.owns()))

    # -- heartbeat ----------------------------------------------------------------------------
    def heartbeat(self, now_ms: int, req: HeartbeatRequest) -> tuple[HeartbeatResponse, list[Effect]]:
        out: list[Effect] = []
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                resp = self._leave(now_ms, req, out)
            else:
                resp = self._heartbeat(now_ms, req, out)
        except _Refused as e:
            # Every refusal comes before the group is touched: nothing to write.
            return HeartbeatResponse(e.code, e.message), []
        self._wake(out)
        return resp, out

    def _validate(self, req: HeartbeatRequest) -> None:
        bad = Err.INVALID_REQUEST
        if not req.group_id:
            raise _Refused(bad, "GroupId can't be empty.")
        if req.group_id != self.group.group_id:
            raise _Refused(Err.NOT_COORDINATOR, f"this coordinator has group {self.group.group_id!r}")
        if req.instance_id == "":
            raise _Refused(bad, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise _Refused(bad, "RackId can't be empty.")
        if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id:
                raise _Refused(bad, "MemberId can't be empty.")
        elif req.member_epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise _Refused(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise _Refused(bad, "TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                raise _Refused(bad, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if not req.member_id:
                raise _Refused(bad, "MemberId can't be empty.")
            if req.instance_id is None:
                raise _Refused(bad, "InstanceId can't be null.")
        else:
            raise _Refused(bad, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            supported = ", ".join(self.config.assignors)
            raise _Refused(
                Err.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported: {supported}."
            )
        if req.subscribed_topic_regex:
            try:
                compile_topic_regex(req.subscribed_topic_regex)
            except InvalidRegex as e:
                raise _Refused(Err.INVALID_REGULAR_EXPRESSION, str(e)) from e

    def _check_epoch(self, m: Member, epoch: int, owned: Assignment | None) -> None:
        if epoch > m.member_epoch:
            raise _Refused(Err.FENCED_MEMBER_EPOCH, f"epoch {epoch} is ahead of the member's {m.member_epoch}")
        if epoch < m.member_epoch and not self._lost_answer(m, epoch, owned):
            raise _Refused(Err.FENCED_MEMBER_EPOCH, f"epoch {epoch} is behind the member's {m.member_epoch}")

    @staticmethod
    def _lost_answer(m: Member, epoch: int, owned: Assignment | None) -> bool:
        """The member is one answer behind: at its previous epoch and owning nothing it may not own."""
        return epoch == m.previous_member_epoch and owned is not None and owned <= m.assigned

    def _check_room(self) -> None:
        if len(self.group.members) >= self.config.max_size:
            raise _Refused(Err.GROUP_MAX_SIZE_REACHED, f"the group has {self.config.max_size} members")

    def _find_member(self, req: HeartbeatRequest, member_id: str) -> tuple[Member | None, Member | None, bool]:
        """(the member, if known and kept; a member to remove first; whether the new member takes over the
        removed one's slot as a returning static member)."""
        g = self.group
        joining = req.member_epoch == JOIN_EPOCH
        slot = g.static_member(req.instance_id)
        if req.instance_id is not None and slot is not None and slot.member_id != member_id:
            if not joining:
                raise _Refused(Err.FENCED_INSTANCE_ID, f"instance {req.instance_id} is member {slot.member_id}")
            if slot.member_epoch != STATIC_LEAVE_EPOCH:
                raise _Refused(Err.UNRELEASED_INSTANCE_ID, f"instance {req.instance_id} is still {slot.member_id}")
            if member_id in g.members:
                raise _Refused(Err.INVALID_REQUEST, f"member id {member_id} is taken")
            return None, slot, True
        if req.instance_id is not None and slot is None and not joining:
            raise _Refused(Err.UNKNOWN_MEMBER_ID, f"instance {req.instance_id} is unknown")
        m = g.members.get(member_id)
        if m is None:
            if not joining:
                raise _Refused(Err.UNKNOWN_MEMBER_ID, f"member {member_id} is unknown")
            self._check_room()
            return None, None, False
        if joining and m.member_epoch == STATIC_LEAVE_EPOCH and m.instance_id == req.instance_id:
            return None, m, True  # a static member back under the same member id: its own slot
        if joining and (
            m.instance_id != req.instance_id or not (m.member_epoch > 0 and self._lost_answer(m, JOIN_EPOCH, req.owned))
        ):
            return None, m, False  # a fenced member back with nothing: replace its old incarnation
        if not joining:
            self._check_epoch(m, req.member_epoch, req.owned)
        return m, None, False

    def _heartbeat(self, now_ms: int, req: HeartbeatRequest, out: list[Effect]) -> HeartbeatResponse:
        g = self.group
        member_id = req.member_id or self.new_member_id(req.client_id)
        m, replaced, takeover = self._find_member(req, member_id)
        bump = False
        if m is None:
            m = Member(member_id, instance_id=req.instance_id)
            if replaced is not None and takeover:
                self._take_over(replaced, m, out)
            else:
                if replaced is not None:
                    out.append(Note(g.group_id, f"member {member_id} rejoins: its old incarnation is fenced"))
                    self._remove(replaced, out)
                out.append(Note(g.group_id, f"member {member_id} joins"))
                g.members[member_id] = m
                if m.instance_id is not None:
                    g.static_members[m.instance_id] = member_id
                bump = True
        before_meta = member_metadata(g.group_id, m)
        before_sub = m.subscription()
        self._update_fields(m, req)
        if member_metadata(g.group_id, m) != before_meta or bump:
            out.append(member_metadata(g.group_id, m))
        bump = bump or m.subscription() != before_sub
        self._maybe_bump(bump, out)
        if g.group_epoch > g.assignment_epoch:
            self._update_target(out)
        before_told = m.told()
        self._reconcile(now_ms, m, self._owned(m, req), out)
        m.session_deadline_ms = now_ms + self.config.session_timeout_ms
        # The assignment goes out on a full request (a join, or a client that lost track), when it changed,
        # and to a member one answer behind, which has not heard the last one. It also goes out again as
        # long as the member has something to do that only the assignment tells it: partitions to take that
        # it has not acknowledged, or partitions to give up. The answer that told it may have been lost (a
        # client that stops waiting for an answer does not say so: its next heartbeat is not a full request),
        # and a client ignores an assignment it already has.
        # A full request names its subscription, by topic names or by a regex (a regex-only member that lost
        # track sends no names).
        subscribed = req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
        full = req.member_epoch in (JOIN_EPOCH, m.previous_member_epoch) or (
            req.rebalance_timeout_ms != -1 and subscribed and req.owned is not None
        )
        told = m.told()
        unheard = bool(m.unconfirmed or m.pending_revocation)
        return HeartbeatResponse(
            Err.NONE,
            None,
            m.member_id,
            m.member_epoch,
            self.config.heartbeat_interval_ms,
            told if full or unheard or told != before_told else None,
        )

    @staticmethod
    def _owned(m: Member, req: HeartbeatRequest) -> Assignment | None:
        """What the member may hold, as far as revoking goes. A request from before the member's last answer
        (one answer behind, or a join retried) lists what it owned before that answer gave it more, so it
        says nothing about those; a join does: a client joins holding nothing. Partitions given but never
        listed as owned still count: the member may be taking them while it lists only what it had
        acknowledged."""
        if req.owned is not None and req.member_epoch == JOIN_EPOCH:
            m.unconfirmed = NO_PARTITIONS
            return req.owned
        if req.owned is None or req.member_epoch != m.member_epoch:
            return None
        m.unconfirmed -= req.owned
        return req.owned | m.unconfirmed

    def _update_fields(self, m: Member, req: HeartbeatRequest) -> None:
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            m.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            m.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            m.server_assignor = req.server_assignor
        m.client_id, m.client_host = req.client_id, req.client_host

    def _take_over(self, old: Member, new: Member, out: list[Effect]) -> None:
        """A static member back under a new member id takes its old slot: subscription, target and current
        assignment move to the new id at epoch 0, so nothing is reassigned."""
        g = self.group
        out.append(Note(g.group_id, f"static member {old.instance_id}: {new.member_id} replaces {old.member_id}"))
        for f in ("rack_id", "client_id", "client_host", "rebalance_timeout_ms", "subscribed_topic_names"):
            setattr(new, f, getattr(old, f))
        new.subscribed_topic_regex, new.server_assignor = old.subscribed_topic_regex, old.server_assignor
        assigned, target = old.assigned, g.target.get(old.member_id, NO_PARTITIONS)
        self._forget(old, out)
        g.members[new.member_id] = new
        g.static_members[new.instance_id or ""] = new.member_id
        out.append(member_metadata(g.group_id, new))
        g.target[new.member_id] = target
        out.append(ConsumerGroupTargetAssignmentMember(g.group_id, new.member_id, target))
        g.set_current(new, assigned, NO_PARTITIONS, JOIN_EPOCH)
        new.previous_member_epoch = JOIN_EPOCH
        out.append(current_assignment(g.group_id, new))

    def _resolved_topics(self, m: Member) -> frozenset[str]:
        names = frozenset(t for t in m.subscribed_topic_names if t in self.topics)
        if m.subscribed_topic_regex:
            names |= matching_topics(m.subscribed_topic_regex, self.topics)
        return names

    def _subscription_metadata(self) -> dict[str, int]:
        subscribed: set[str] = set()
        for m in self.group.members.values():
            subscribed |= self._resolved_topics(m)
        return {t: self.topics[t] for t in sorted(subscribed)}

    def _maybe_bump(self, bump: bool, out: list[Effect]) -> None:
        g = self.group
        meta = self._subscription_metadata()
        if meta != g.subscription_metadata:
            g.subscription_metadata = meta
            out.append(ConsumerGroupPartitionMetadata(g.group_id, tuple(meta.items())))
            bump = True
        if bump:
            g.group_epoch += 1
            out.append(ConsumerGroupMetadata(g.group_id, g.group_epoch))
            out.append(Note(g.group_id, f"group epoch {g.group_epoch}"))

    def assignor(self) -> str:
        wanted = Counter(m.server_assignor for m in self.group.members.values() if m.server_assignor)
        if wanted:
            return min(wanted, key=lambda a: (-wanted[a], a))
        return self.config.assignors[0]

    def compute_target(self) -> dict[str, Assignment]:
        g = self.group
        specs = {
            mid: MemberSpec(self._resolved_topics(m), g.target.get(mid, NO_PARTITIONS), m.instance_id)
            for mid, m in g.members.items()
        }
        return assign(self.assignor(), specs, g.subscription_metadata)

    def _update_target(self, out: list[Effect]) -> None:
        g = self.group
        for mid, tps in self.compute_target().items():
            if g.target.get(mid) != tps:
                g.target[mid] = tps
                out.append(ConsumerGroupTargetAssignmentMember(g.group_id, mid, tps))
        g.assignment_epoch = g.group_epoch
        out.append(ConsumerGroupTargetAssignmentMetadata(g.group_id, g.assignment_epoch))

    def owner_epoch(self, tp: TopicPartition) -> int:
        return self.group.owner_epoch(tp)

    def _reconcile(self, now_ms: int, m: Member, owned: Assignment | None, out: list[Effect]) -> None:
        g = self.group
        cur = CurrentAssignment(m.member_epoch, m.state, m.assigned, m.pending_revocation)
        nxt = reconcile(cur, g.assignment_epoch, g.target.get(m.member_id, NO_PARTITIONS), owned, self.owner_epoch)
        if nxt == cur:
            return
        was_revoking = m.state == UNREVOKED_PARTITIONS and m.member_epoch == nxt.member_epoch
        given = nxt.assigned - m.assigned
        m.state = nxt.state
        g.set_current(m, nxt.assigned, nxt.pending_revocation, nxt.member_epoch)
        m.unconfirmed = (m.unconfirmed | given) & m.owns()
        if nxt.state != UNREVOKED_PARTITIONS:
            m.revocation_deadline_ms = None
        elif not was_revoking or m.revocation_deadline_ms is None:
            m.revocation_deadline_ms = now_ms + max(m.rebalance_timeout_ms, 0)
        out.append(current_assignment(g.group_id, m))

    # -- leaving and fencing ------------------------------------------------------------------
    def _leave(self, now_ms: int, req: HeartbeatRequest, out: list[Effect]) -> HeartbeatResponse:
        g = self.group
        if req.instance_id is None:
            m = g.members.get(req.member_id)
            if m is None:
                raise _Refused(Err.UNKNOWN_MEMBER_ID, f"member {req.member_id} is unknown")
        else:
            found = g.static_member(req.instance_id)
            if found is None:
                raise _Refused(Err.UNKNOWN_MEMBER_ID, f"instance {req.instance_id} is unknown")
            if found.member_id != req.member_id:
                raise _Refused(Err.FENCED_INSTANCE_ID, f"instance {req.instance_id} is member {found.member_id}")
            m = found
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                # It keeps its slot and assignment for its session, so a quick restart moves nothing.
                out.append(Note(g.group_id, f"static member {req.instance_id} ({m.member_id}) leaves for now"))
                previous = m.previous_member_epoch
                g.set_current(m, m.assigned, NO_PARTITIONS, STATIC_LEAVE_EPOCH)
                m.previous_member_epoch = previous
                m.revocation_deadline_ms = None
                out.append(current_assignment(g.group_id, m))
                return HeartbeatResponse(Err.NONE, None, m.member_id, STATIC_LEAVE_EPOCH)
        out.append(Note(g.group_id, f"member {m.member_id} leaves"))
        self._remove(m, out)
        return HeartbeatResponse(Err.NONE, None, m.member_id, LEAVE_EPOCH)

    def _forget(self, m: Member, out: list[Effect]) -> None:
        g = self.group
        gid = g.group_id
        g.set_current(m, NO_PARTITIONS, NO_PARTITIONS, m.member_epoch)
        g.members.pop(m.member_id, None)
        g.target.pop(m.member_id, None)
        if m.instance_id is not None and g.static_members.get(m.instance_id) == m.member_id:
            del g.static_members[m.instance_id]
        out.append(ConsumerGroupCurrentMemberAssignmentTombstone(gid, m.member_id))
        out.append(ConsumerGroupTargetAssignmentMemberTombstone(gid, m.member_id))
        out.append(ConsumerGroupMemberMetadataTombstone(gid, m.member_id))

    def _remove(self, m: Member, out: list[Effect]) -> None:
        """Fence ``m``: its partitions are free for the others once the new target is computed."""
        self._forget(m, out)
        self._maybe_bump(True, out)

    def tick(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        for m in list(self.group.members.values()):
            if now_ms >= m.session_deadline_ms:
                out.append(Note(self.group.group_id, f"member {m.member_id} fenced: session timed out"))
                self._remove(m, out)
            elif m.revocation_deadline_ms is not None and now_ms >= m.revocation_deadline_ms:
                out.append(Note(self.group.group_id, f"member {m.member_id} fenced: did not revoke in time"))
                self._remove(m, out)
        self._wake(out)
        return out

    def next_deadline(self) -> int | None:
        times = [m.session_deadline_ms for m in self.group.members.values()]
        times += [m.revocation_deadline_ms for m in self.group.members.values() if m.revocation_deadline_ms is not None]
        return min(times, default=None)

    def _wake(self, out: list[Effect]) -> None:
        at = self.next_deadline()
        if at is not None:
            out.append(WakeAt(at))

    # -- metadata, offsets, describe ----------------------------------------------------------
    def topics_changed(self, now_ms: int, topics: Mapping[str, int]) -> list[Effect]:
        """The cluster's topics changed (created, deleted, partitions added): a new group epoch if the
        group's subscribed topics look different now. The new target is computed on the next heartbeat."""
        self.topics = dict(topics)
        out: list[Effect] = []
        self._maybe_bump(False, out)
        return out

    def commit_offsets(
        self, now_ms: int, member_id: str, member_epoch: int, offsets: Mapping[TopicPartition, int]
    ) -> tuple[int, list[Effect]]:
        """OffsetCommit by a member: validated by epoch, and written as records before it is acknowledged."""
        err = validate_offset_commit(self.group, member_id, member_epoch)
        if err != Err.NONE:
            return err, []
        out: list[Effect] = []
        for (topic, partition), offset in sorted(offsets.items()):
            self.group.offsets[(topic, partition)] = offset
            out.append(OffsetCommit(self.group.group_id, topic, partition, offset))
        return Err.NONE, out

    def describe(self) -> GroupDescription:
        g = self.group
        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                m.subscribed_topic_regex,
                m.member_epoch,
                m.state,
                m.assigned,
                g.target.get(m.member_id, NO_PARTITIONS),
            )
            for m in g.members.values()
        )
        return GroupDescription(g.group_id, g.state, g.group_epoch, g.assignment_epoch, self.assignor(), members)
