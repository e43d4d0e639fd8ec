"""Group membership as a state machine: JoinGroup and SyncGroup barriers, heartbeats, LeaveGroup, static
members, and the timers ``tick`` fires (session expiry, rebalance deadline, initial delay, pending member ids).

The rules are Kafka's GroupCoordinator's:

- States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable (-> Dead when deleted or expired).
  The first joiner leads; the protocol is chosen by votes among the protocols every member supports.
- The first rebalance of an Empty group waits group.initial.rebalance.delay.ms, extended by that much for
  each new arrival up to the rebalance timeout. Later rebalances complete as soon as every member has
  rejoined, or at the rebalance timeout, which drops the members that did not.
- A member that neither heartbeats, commits, joins nor syncs within its session timeout is removed, which
  starts a rebalance. Members parked in JoinGroup or SyncGroup are not expired.
- Heartbeat: REBALANCE_IN_PROGRESS while PreparingRebalance, NONE in CompletingRebalance and Stable;
  ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID as they apply.
- The generation moves to Stable only once the leader's assignment is durable (``PersistGroup`` with
  ``confirm``, reported back by ``assignment_written``).
- Static membership (group.instance.id): a restarted static member takes over its old slot under a new
  member id, without a rebalance when the group is Stable and its metadata is unchanged; the old id is
  fenced (FENCED_INSTANCE_ID).

Times are the caller's ``now_ms`` (a monotonic clock is best: sessions should not jump with the wall clock).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from epochlog.codes import Err
from epochlog.groups.effects import (
    AnswerJoin,
    AnswerSync,
    Effect,
    GroupSnapshot,
    JoinRequest,
    JoinResult,
    LeaveOutcome,
    MembershipConfig,
    MemberSnapshot,
    Note,
    PersistGroup,
    StateChanged,
    Step,
    SyncResult,
    WakeAt,
)
from epochlog.groups.model import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group, Member


def _uuid_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupMembership:
    """The groups of the ``__consumer_offsets`` partitions one coordinator serves."""

    def __init__(
        self, config: MembershipConfig | None = None, new_member_id: Callable[[str], str] = _uuid_member_id
    ) -> None:
        """``new_member_id(client_id)`` names a new member (the simulator passes a deterministic one)."""
        self.config = config or MembershipConfig()
        self.new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        self._tokens = 0
        self._out: list[Effect] = []

    # -- plumbing -----------------------------------------------------------------------------
    def _begin(self) -> list[Effect]:
        self._out = []
        return self._out

    def _token(self) -> int:
        self._tokens += 1
        return self._tokens

    def _answer_join(self, token: int, result: JoinResult) -> None:
        self._out.append(AnswerJoin(token, result))

    def _answer_sync(self, token: int, result: SyncResult) -> None:
        self._out.append(AnswerSync(token, result))

    def _set_state(self, g: Group, state: str) -> None:
        if g.state != state:
            g.state = state
            self._out.append(StateChanged(g.group_id, state))

    def set_state(self, g: Group, state: str) -> list[Effect]:
        """Move ``g`` to ``state`` (the driver's deletions: Dead, and back to Empty if the write fails)."""
        out = self._begin()
        self._set_state(g, state)
        return out

    def _persist(self, g: Group, confirm: bool = False) -> None:
        self._out.append(PersistGroup(snapshot(g), confirm))

    def _new_group(self, group_id: str) -> Group:
        g = self.groups[group_id] = Group(group_id)
        self._out.append(StateChanged(group_id, EMPTY))
        return g

    def create_group(self, group_id: str) -> list[Effect]:
        """An Empty group with no members: one that only stores offsets (assign() consumers, admin tools)."""
        out = self._begin()
        self._new_group(group_id)
        return out

    # -- timers -------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Effect]:
        """Fire every group timer due at ``now_ms``."""
        out = self._begin()
        for g in list(self.groups.values()):
            for mid, deadline in list(g.pending.items()):
                if now_ms >= deadline:
                    del g.pending[mid]
                    out.append(Note(g.group_id, f"pending member {mid} never rejoined"))
                    self._maybe_complete_join(g, now_ms)
            for m in list(g.members.values()):
                # A member parked in JoinGroup or SyncGroup cannot heartbeat; the rebalance deadline
                # (or the leader's own session) bounds how long it can stay parked.
                if m.awaiting_join or m.awaiting_sync:
                    continue
                if now_ms - m.last_heartbeat_ms >= m.session_timeout_ms:
                    out.append(Note(g.group_id, f"member {m.member_id} session expired"))
                    self._remove_member(g, m, now_ms)
            if g.state == PREPARING_REBALANCE and now_ms >= g.rebalance_deadline_ms:
                self._on_rebalance_deadline(g, now_ms)
        return out

    def _on_rebalance_deadline(self, g: Group, now_ms: int) -> None:
        if g.initial_delay and g.new_member_added and g.initial_delay_remaining_ms > 0:
            g.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, g.initial_delay_remaining_ms)
            g.initial_delay_remaining_ms -= delay
            g.rebalance_deadline_ms = now_ms + delay
            self._out.append(WakeAt(g.rebalance_deadline_ms))
            return
        for m in list(g.members.values()):
            if not m.awaiting_join:
                self._out.append(Note(g.group_id, f"member {m.member_id} did not rejoin in time"))
                self._remove_member(g, m, now_ms, rebalance=False)
        self._complete_join(g, now_ms)

    # -- join ---------------------------------------------------------------------------------
    def join(self, req: JoinRequest, now_ms: int) -> Step:
        token = self._token()
        out = self._begin()
        self._join(req, token, now_ms)
        return Step(token, out)

    def _join(self, req: JoinRequest, token: int, now_ms: int) -> None:
        def refuse(code: int) -> None:
            self._answer_join(token, JoinResult(code, member_id=req.member_id))

        if not req.group_id:
            return refuse(Err.INVALID_GROUP_ID)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return refuse(Err.INVALID_SESSION_TIMEOUT)
        g = self.groups.get(req.group_id)
        if g is None:
            if req.member_id:
                return refuse(Err.UNKNOWN_MEMBER_ID)
            g = self._new_group(req.group_id)
        if g.state == DEAD:
            return refuse(Err.COORDINATOR_NOT_AVAILABLE)
        if not g.supports_protocols(req.protocol_type, req.protocols, req.member_id):
            return refuse(Err.INCONSISTENT_GROUP_PROTOCOL)
        new_member = Member(
            "",
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            [(n, bytes(md)) for n, md in req.protocols],
        )
        if not req.member_id:
            new_member.member_id = self.new_member_id(req.client_id)
            if req.group_instance_id is not None:
                return self._join_static_unknown(g, new_member, token, now_ms)
            if req.require_known_member_id:
                # JoinGroup v4+: hand out the id first, so a client that times out and retries does
                # not leave a ghost member behind that the group must wait for.
                g.pending[new_member.member_id] = now_ms + req.session_timeout_ms
                return self._answer_join(token, JoinResult(Err.MEMBER_ID_REQUIRED, member_id=new_member.member_id))
            return self._add_member_and_rebalance(g, new_member, token, now_ms)
        if req.member_id in g.pending:
            del g.pending[req.member_id]
            new_member.member_id = req.member_id
            return self._add_member_and_rebalance(g, new_member, token, now_ms)
        m = g.members.get(req.member_id)
        if m is None:
            return refuse(Err.UNKNOWN_MEMBER_ID)
        if req.group_instance_id is not None and g.static_members.get(req.group_instance_id) != req.member_id:
            return refuse(Err.FENCED_INSTANCE_ID)
        return self._join_known(g, m, new_member, token, now_ms)

    def _join_known(self, g: Group, m: Member, req: Member, token: int, now_ms: int) -> None:
        unchanged = m.same_protocols(req.protocols)
        m.session_timeout_ms, m.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        m.client_id, m.client_host = req.client_id, req.client_host
        m.last_heartbeat_ms = now_ms
        if g.state == PREPARING_REBALANCE:
            m.protocols = req.protocols
            return self._await_join(g, m, token, now_ms)
        if g.state == COMPLETING_REBALANCE and unchanged:
            # The member lost our JoinGroup response: answer it again for the same generation.
            return self._answer_join(token, self._join_result(g, m))
        if g.state == STABLE and unchanged and m.member_id != g.leader:
            # A follower with nothing new needs no rebalance: it may SyncGroup for this generation.
            return self._answer_join(token, self._join_result(g, m))
        m.protocols = req.protocols
        self._prepare_rebalance(g, f"member {m.member_id} rejoined with new metadata or as leader", now_ms)
        return self._await_join(g, m, token, now_ms)

    def _join_static_unknown(self, g: Group, req: Member, token: int, now_ms: int) -> None:
        assert req.group_instance_id is not None
        old = g.member_by_instance(req.group_instance_id)
        if old is None:
            return self._add_member_and_rebalance(g, req, token, now_ms)
        # A static member restarted: it takes over its old slot under a new member id, and the old
        # id is fenced. Kafka skips the rebalance when nothing changed and the group is stable.
        self._out.append(Note(g.group_id, f"static member {req.group_instance_id} replaces {old.member_id}"))
        unchanged = old.same_protocols(req.protocols)
        self._replace_member_id(g, old, req.member_id)
        old.protocols = req.protocols
        old.session_timeout_ms, old.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        old.last_heartbeat_ms = now_ms
        if g.state == STABLE and unchanged and g.leader != old.member_id:
            self._persist(g)
            return self._answer_join(token, self._join_result(g, old))
        if g.state != PREPARING_REBALANCE:
            self._prepare_rebalance(g, f"static member {req.group_instance_id} rejoined", now_ms)
        return self._await_join(g, old, token, now_ms)

    def _replace_member_id(self, g: Group, m: Member, new_id: str) -> None:
        old_id = m.member_id
        if m.join_token is not None:
            self._answer_join(m.join_token, JoinResult(Err.FENCED_INSTANCE_ID, member_id=old_id))
        if m.sync_token is not None:
            self._answer_sync(m.sync_token, SyncResult(Err.FENCED_INSTANCE_ID))
        m.join_token = m.sync_token = None
        g.members = {(new_id if k == old_id else k): v for k, v in g.members.items()}
        m.member_id = new_id
        if g.leader == old_id:
            g.leader = new_id
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = new_id

    def _add_member_and_rebalance(self, g: Group, m: Member, token: int, now_ms: int) -> None:
        m.last_heartbeat_ms = now_ms
        g.members[m.member_id] = m
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = m.member_id
        if g.leader is None:
            g.leader = m.member_id  # the first joiner leads, and keeps leading while it stays
        if g.protocol_type is None or len(g.members) == 1:
            g.protocol_type = m.protocol_type
        if g.state == PREPARING_REBALANCE:
            g.new_member_added = True
        else:
            self._prepare_rebalance(g, f"member {m.member_id} joined", now_ms)
        return self._await_join(g, m, token, now_ms)

    def _await_join(self, g: Group, m: Member, token: int, now_ms: int) -> None:
        if m.join_token is not None:
            self._answer_join(m.join_token, JoinResult(Err.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        m.join_token = token
        self._maybe_complete_join(g, now_ms)

    def _prepare_rebalance(self, g: Group, reason: str, now_ms: int) -> None:
        if g.state == COMPLETING_REBALANCE:
            # The leader's assignment for this generation will never come: send waiters back to join.
            for m in g.members.values():
                if m.sync_token is not None:
                    self._answer_sync(m.sync_token, SyncResult(Err.REBALANCE_IN_PROGRESS))
                m.sync_token = None
        delay = self.config.group_initial_rebalance_delay_ms
        if g.state == EMPTY and delay > 0:
            g.initial_delay = True
            g.new_member_added = False
            g.initial_delay_remaining_ms = max(g.rebalance_timeout_ms() - delay, 0)
            g.rebalance_deadline_ms = now_ms + delay
        else:
            g.initial_delay = False
            g.rebalance_deadline_ms = now_ms + g.rebalance_timeout_ms()
        self._set_state(g, PREPARING_REBALANCE)
        self._out.append(Note(g.group_id, f"preparing rebalance at generation {g.generation}: {reason}"))
        self._out.append(WakeAt(g.rebalance_deadline_ms))

    def _maybe_complete_join(self, g: Group, now_ms: int) -> None:
        if g.state == PREPARING_REBALANCE and not g.initial_delay and g.all_members_joined():
            self._complete_join(g, now_ms)

    def _complete_join(self, g: Group, now_ms: int) -> None:
        g.initial_delay = False
        g.new_member_added = False
        g.generation += 1
        if not g.members:
            g.protocol_name, g.leader = None, None
            self._set_state(g, EMPTY)
            self._out.append(Note(g.group_id, f"empty at generation {g.generation}"))
            self._persist(g)
            return
        g.protocol_name = g.select_protocol()
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        self._set_state(g, COMPLETING_REBALANCE)
        self._out.append(
            Note(
                g.group_id,
                f"generation {g.generation}: {len(g.members)} members, protocol {g.protocol_name}, leader {g.leader}",
            )
        )
        for m in g.members.values():
            m.last_heartbeat_ms = now_ms
            m.assignment = b""
            if m.join_token is not None:
                self._answer_join(m.join_token, self._join_result(g, m))
            m.join_token = None

    def _join_result(self, g: Group, m: Member) -> JoinResult:
        members = []
        if m.member_id == g.leader:
            members = [(x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name)) for x in g.members.values()]
        return JoinResult(
            Err.NONE, g.generation, g.protocol_type, g.protocol_name, g.leader or "", m.member_id, members
        )

    # -- sync ---------------------------------------------------------------------------------
    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now_ms: int,
    ) -> Step:
        token = self._token()
        out = self._begin()
        g = self.groups.get(group_id)
        err = self.validate_member(g, member_id, group_instance_id, generation_id)
        if err:
            self._answer_sync(token, SyncResult(err))
            return Step(token, out)
        assert g is not None
        if (protocol_type and protocol_type != g.protocol_type) or (protocol_name and protocol_name != g.protocol_name):
            self._answer_sync(token, SyncResult(Err.INCONSISTENT_GROUP_PROTOCOL))
            return Step(token, out)
        m = g.members[member_id]
        m.last_heartbeat_ms = now_ms
        if g.state == PREPARING_REBALANCE:
            self._answer_sync(token, SyncResult(Err.REBALANCE_IN_PROGRESS))
        elif g.state == STABLE:
            self._answer_sync(token, SyncResult(Err.NONE, g.protocol_type, g.protocol_name, m.assignment))
        else:
            # CompletingRebalance: park until the leader's assignment is durable.
            if m.sync_token is not None:
                self._answer_sync(m.sync_token, SyncResult(Err.REBALANCE_IN_PROGRESS))
            m.sync_token = token
            if member_id == g.leader:
                for mid, x in g.members.items():
                    x.assignment = bytes(assignments.get(mid, b""))
                self._persist(g, confirm=True)
        return Step(token, out)

    def assignment_written(self, group_id: str, generation: int, ok: bool, now_ms: int) -> list[Effect]:
        """The outcome of a ``PersistGroup(confirm=True)``: the generation becomes Stable, or (the write
        failed) the group rebalances again."""
        out = self._begin()
        g = self.groups.get(group_id)
        if g is None or g.state != COMPLETING_REBALANCE or g.generation != generation:
            return out  # a join or leave moved the group on while the write waited; waiters were answered
        if not ok:
            for m in g.members.values():
                m.assignment = b""
            self._prepare_rebalance(g, "cannot persist the leader's assignment", now_ms)
            return out
        self._set_state(g, STABLE)
        for m in g.members.values():
            if m.sync_token is not None:
                self._answer_sync(m.sync_token, SyncResult(Err.NONE, g.protocol_type, g.protocol_name, m.assignment))
            m.sync_token = None
        return out

    # -- heartbeat, leave, commits ------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> int:
        g = self.groups.get(group_id)
        err = self.validate_member(g, member_id, group_instance_id, generation_id)
        if err:
            return err
        assert g is not None
        g.members[member_id].last_heartbeat_ms = now_ms
        if g.state == PREPARING_REBALANCE:
            return Err.REBALANCE_IN_PROGRESS
        return Err.NONE  # CompletingRebalance too: clients heartbeat between join and sync

    def leave(self, group_id: str, members: list[tuple[str | None, str | None]], now_ms: int) -> LeaveOutcome:
        """``members`` are (member_id, group_instance_id), as LeaveGroup v3+ names them."""
        out = self._begin()
        g = self.groups.get(group_id)
        if g is None:
            return LeaveOutcome(Err.NONE, [Err.UNKNOWN_MEMBER_ID] * len(members), out)
        codes: list[int] = []
        for member_id, instance_id in members:
            if member_id and member_id in g.pending:
                del g.pending[member_id]
                self._maybe_complete_join(g, now_ms)
                codes.append(Err.NONE)
                continue
            if instance_id is not None:
                m = g.member_by_instance(instance_id)
                if m is not None and member_id and m.member_id != member_id:
                    codes.append(Err.FENCED_INSTANCE_ID)
                    continue
            else:
                m = g.members.get(member_id or "")
            if m is None:
                codes.append(Err.UNKNOWN_MEMBER_ID)
                continue
            out.append(Note(group_id, f"member {m.member_id} leaves"))
            self._remove_member(g, m, now_ms)
            codes.append(Err.NONE)
        return LeaveOutcome(Err.NONE, codes, out)

    def _remove_member(self, g: Group, m: Member, now_ms: int, rebalance: bool = True) -> None:
        g.members.pop(m.member_id, None)
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        if m.join_token is not None:
            self._answer_join(m.join_token, JoinResult(Err.UNKNOWN_MEMBER_ID, member_id=m.member_id))
        if m.sync_token is not None:
            self._answer_sync(m.sync_token, SyncResult(Err.UNKNOWN_MEMBER_ID))
        m.join_token = m.sync_token = None
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)
        if not rebalance:
            return
        if g.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(g, f"member {m.member_id} left", now_ms)
        if g.state == PREPARING_REBALANCE:
            self._maybe_complete_join(g, now_ms)

    def validate_member(self, g: Group | None, member_id: str, instance_id: str | None, generation_id: int) -> int:
        """Whether ``member_id`` of ``generation_id`` may act in ``g`` (sync, heartbeat, commit)."""
        if g is None or g.state in (EMPTY, DEAD):
            return Err.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            known = g.static_members.get(instance_id)
            if known is not None and known != member_id:
                return Err.FENCED_INSTANCE_ID
        if member_id not in g.members:
            return Err.UNKNOWN_MEMBER_ID
        if generation_id != g.generation:
            return Err.ILLEGAL_GENERATION
        return Err.NONE

    def touch(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A member's offset commit counts as a heartbeat, as in Kafka."""
        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g is not None else None
        if m is not None:
            m.last_heartbeat_ms = now_ms

    # -- loading and unloading ----------------------------------------------------------------
    def restore(self, s: GroupSnapshot, now_ms: int) -> Group:
        """A group as its last GroupMetadata record left it (a coordinator loading its partition)."""
        g = self.groups.get(s.group_id) or Group(s.group_id)
        self.groups[s.group_id] = g
        g.generation, g.protocol_type, g.protocol_name, g.leader = (
            s.generation,
            s.protocol_type or None,
            s.protocol_name,
            s.leader,
        )
        g.members.clear()
        g.static_members.clear()
        for x in s.members:
            m = Member(
                x.member_id,
                x.group_instance_id,
                x.client_id,
                x.client_host,
                x.session_timeout_ms,
                x.rebalance_timeout_ms,
                s.protocol_type,
                [(s.protocol_name or "", x.metadata)],
                assignment=x.assignment,
                last_heartbeat_ms=now_ms,  # restored members get a full session to find us again
            )
            g.members[x.member_id] = m
            if x.group_instance_id is not None:
                g.static_members[x.group_instance_id] = x.member_id
        # Kafka resumes a group with members as Stable: they keep their assignment and only have to
        # heartbeat within their session, so a coordinator moving does not force a rebalance.
        g.state = STABLE if g.members else EMPTY
        return g

    def drop(self, group_ids: set[str]) -> list[Effect]:
        """These groups are no longer ours (their partition moved): parked requests hear NOT_COORDINATOR."""
        out = self._begin()
        for gid in group_ids:
            g = self.groups.pop(gid, None)
            for m in g.members.values() if g is not None else ():
                if m.join_token is not None:
                    self._answer_join(m.join_token, JoinResult(Err.NOT_COORDINATOR, member_id=m.member_id))
                if m.sync_token is not None:
                    self._answer_sync(m.sync_token, SyncResult(Err.NOT_COORDINATOR))
                m.join_token = m.sync_token = None
        return out


def snapshot(g: Group) -> GroupSnapshot:
    return GroupSnapshot(
        g.group_id,
        g.protocol_type or "",
        g.generation,
        g.protocol_name,
        g.leader,
        tuple(
            MemberSnapshot(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(g.protocol_name),
                m.assignment,
            )
            for m in g.members.values()
        ),
    )
