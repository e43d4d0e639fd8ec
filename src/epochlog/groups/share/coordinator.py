"""One share group's membership as a state machine: ShareGroupHeartbeat, session timeouts, describe.

As Kafka's coordinator does for a share group:

1. Validate (INVALID_REQUEST: empty group id or rack id, no member id for epoch > 0 or -1, no subscription on
   a join, any other negative epoch); a full group refuses a newcomer (GROUP_MAX_SIZE_REACHED, at
   ``group.share.max.size``); an epoch other than 0 must name a known member (UNKNOWN_MEMBER_ID) at its
   current or previous epoch (FENCED_MEMBER_EPOCH otherwise; the previous one is a member whose last answer
   was lost).
2. Record changed member metadata; a new member, a changed subscription or changed partition counts of the
   subscribed topics bump the group epoch.
3. A group epoch ahead of the target's: recompute every member's target with the ``simple`` assignor.
4. The member moves to its target at once, at the target's epoch (no revocation phase: members share
   partitions). The answer carries the assignment on a join and whenever it changed.

A member leaving (epoch -1) or whose session (``group.share.session.timeout.ms``) lapsed is removed and the
group epoch bumped; ``MemberGone`` tells the driver to release the member's records on its partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from epochlog.codes import Err
from epochlog.groups.share.assignor import simple_assign
from epochlog.groups.share.group_records import (
    GroupRecord,
    ShareGroup,
    ShareGroupCurrentMemberAssignment,
    ShareGroupCurrentMemberAssignmentTombstone,
    ShareGroupMemberMetadataTombstone,
    ShareGroupMetadata,
    ShareGroupPartitionMetadata,
    ShareGroupTargetAssignmentMember,
    ShareGroupTargetAssignmentMemberTombstone,
    ShareGroupTargetAssignmentMetadata,
    ShareMember,
    member_metadata,
    replay,
)
from epochlog.groups.share.messages import (
    GroupEffect,
    MemberGone,
    Note,
    ShareGroupDescription,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareMemberDescription,
    WakeAt,
)
from epochlog.groups.share.model import (
    GROUP_EMPTY,
    GROUP_STABLE,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    NO_PARTITIONS,
    ShareGroupConfig,
)


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _uuid_member_id() -> str:
    return str(uuid.uuid4())


class ShareGroupCoordinator:
    def __init__(
        self,
        group_id: str,
        config: ShareGroupConfig | None = None,
        topics: Mapping[str, int] | None = None,
        new_member_id: Callable[[], str] = _uuid_member_id,
        group: ShareGroup | None = None,
    ) -> None:
        self.config = config or ShareGroupConfig()
        self.topics: dict[str, int] = dict(topics or {})
        self.new_member_id = new_member_id
        self.group = group or ShareGroup(group_id)

    @classmethod
    def from_records(
        cls,
        group_id: str,
        records: Iterable[GroupRecord],
        now_ms: int,
        config: ShareGroupConfig | None = None,
        topics: Mapping[str, int] | None = None,
        new_member_id: Callable[[], str] = _uuid_member_id,
    ) -> ShareGroupCoordinator:
        config = config or ShareGroupConfig()
        g = replay(group_id, records, now_ms, config.session_timeout_ms)
        return cls(group_id, config, topics, new_member_id, g)

    def heartbeat(self, now_ms: int, req: ShareHeartbeatRequest) -> tuple[ShareHeartbeatResponse, list[GroupEffect]]:
        out: list[GroupEffect] = []
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                resp = self._leave(req, out)
            else:
                resp = self._heartbeat(now_ms, req, out)
        except _Refused as e:
            return ShareHeartbeatResponse(e.code, e.message), []
        self._wake(out)
        return resp, out

    def _validate(self, req: ShareHeartbeatRequest) -> None:
        bad = Err.INVALID_REQUEST
        if not req.group_id:
            raise _Refused(bad, "GroupId can't be empty.")
        if req.group_id != self.group.group_id:
            raise _Refused(Err.NOT_COORDINATOR, f"this coordinator has group {self.group.group_id!r}")
        if req.rack_id == "":
            raise _Refused(bad, "RackId can't be empty.")
        if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id:
                raise _Refused(bad, "MemberId can't be empty.")
        elif req.member_epoch == JOIN_EPOCH:
            if not req.subscribed_topic_names:
                raise _Refused(bad, "SubscribedTopicNames must be set in first request.")
        else:
            raise _Refused(bad, "MemberEpoch is invalid.")

    def _heartbeat(self, now_ms: int, req: ShareHeartbeatRequest, out: list[GroupEffect]) -> ShareHeartbeatResponse:
        g = self.group
        member_id = req.member_id or self.new_member_id()
        m = g.members.get(member_id)
        if m is None:
            if req.member_epoch != JOIN_EPOCH:
                raise _Refused(Err.UNKNOWN_MEMBER_ID, f"member {member_id} is unknown")
            if len(g.members) >= self.config.max_size:
                raise _Refused(Err.GROUP_MAX_SIZE_REACHED, f"the group has {self.config.max_size} members")
        elif req.member_epoch > m.member_epoch or (
            req.member_epoch < m.member_epoch and req.member_epoch != m.previous_member_epoch
        ):
            raise _Refused(Err.FENCED_MEMBER_EPOCH, f"epoch {req.member_epoch}, the member's is {m.member_epoch}")
        joined = m is None
        if m is None:
            m = g.members[member_id] = ShareMember(member_id)
            out.append(Note(g.group_id, f"member {member_id} joins"))
        before_meta = member_metadata(g.group_id, m)
        before_subs = m.subscribed_topic_names
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.subscribed_topic_names is not None:
            m.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        m.client_id, m.client_host = req.client_id, req.client_host
        if joined or member_metadata(g.group_id, m) != before_meta:
            out.append(member_metadata(g.group_id, m))
        self._maybe_bump(joined or m.subscribed_topic_names != before_subs, out)
        if g.group_epoch > g.assignment_epoch:
            self._update_target(out)
        before = m.assigned
        target = g.target.get(member_id, NO_PARTITIONS)
        if m.member_epoch != g.assignment_epoch or m.assigned != target:
            m.previous_member_epoch, m.member_epoch, m.assigned = m.member_epoch, g.assignment_epoch, target
            out.append(
                ShareGroupCurrentMemberAssignment(
                    g.group_id, member_id, m.member_epoch, m.previous_member_epoch, target
                )
            )
        m.session_deadline_ms = now_ms + self.config.session_timeout_ms
        changed = req.member_epoch == JOIN_EPOCH or m.assigned != before
        return ShareHeartbeatResponse(
            Err.NONE,
            None,
            member_id,
            m.member_epoch,
            self.config.heartbeat_interval_ms,
            m.assigned if changed else None,
        )

    def _subscribed_metadata(self) -> dict[str, int]:
        wanted = {t for m in self.group.members.values() for t in m.subscribed_topic_names}
        return {t: self.topics[t] for t in sorted(wanted) if t in self.topics}

    def _maybe_bump(self, bump: bool, out: list[GroupEffect]) -> None:
        g = self.group
        meta = self._subscribed_metadata()
        if meta != g.subscription_metadata:
            g.subscription_metadata = meta
            out.append(ShareGroupPartitionMetadata(g.group_id, tuple(sorted(meta.items()))))
            bump = True
        if bump:
            g.group_epoch += 1
            out.append(ShareGroupMetadata(g.group_id, g.group_epoch))

    def _update_target(self, out: list[GroupEffect]) -> None:
        g = self.group
        subs = {mid: frozenset(m.subscribed_topic_names) for mid, m in g.members.items()}
        for mid, tps in simple_assign(subs, g.subscription_metadata).items():
            if g.target.get(mid) != tps:
                g.target[mid] = tps
                out.append(ShareGroupTargetAssignmentMember(g.group_id, mid, tps))
        g.assignment_epoch = g.group_epoch
        out.append(ShareGroupTargetAssignmentMetadata(g.group_id, g.assignment_epoch))

    def _leave(self, req: ShareHeartbeatRequest, out: list[GroupEffect]) -> ShareHeartbeatResponse:
        m = self.group.members.get(req.member_id)
        if m is None:
            raise _Refused(Err.UNKNOWN_MEMBER_ID, f"member {req.member_id} is unknown")
        out.append(Note(self.group.group_id, f"member {m.member_id} leaves"))
        self._remove(m, out)
        return ShareHeartbeatResponse(Err.NONE, None, m.member_id, LEAVE_EPOCH)

    def _remove(self, m: ShareMember, out: list[GroupEffect]) -> None:
        g = self.group
        gid = g.group_id
        g.members.pop(m.member_id, None)
        g.target.pop(m.member_id, None)
        out.append(ShareGroupCurrentMemberAssignmentTombstone(gid, m.member_id))
        out.append(ShareGroupTargetAssignmentMemberTombstone(gid, m.member_id))
        out.append(ShareGroupMemberMetadataTombstone(gid, m.member_id))
        out.append(MemberGone(gid, m.member_id))
        self._maybe_bump(True, out)

    def tick(self, now_ms: int) -> list[GroupEffect]:
        out: list[GroupEffect] = []
        for m in list(self.group.members.values()):
            if now_ms >= m.session_deadline_ms:
                out.append(Note(self.group.group_id, f"member {m.member_id} fenced: session timed out"))
                self._remove(m, out)
        self._wake(out)
        return out

    def _wake(self, out: list[GroupEffect]) -> None:
        at = min((m.session_deadline_ms for m in self.group.members.values()), default=None)
        if at is not None:
            out.append(WakeAt(at))

    def topics_changed(self, topics: Mapping[str, int]) -> list[GroupEffect]:
        """The cluster's topics changed: a new group epoch if the subscribed topics look different now."""
        self.topics = dict(topics)
        out: list[GroupEffect] = []
        self._maybe_bump(False, out)
        return out

    def describe(self) -> ShareGroupDescription:
        g = self.group
        members = tuple(
            ShareMemberDescription(
                m.member_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names, m.member_epoch, m.assigned
            )
            for m in g.members.values()
        )
        state = GROUP_STABLE if g.members else GROUP_EMPTY
        return ShareGroupDescription(g.group_id, state, g.group_epoch, g.assignment_epoch, "simple", members)
