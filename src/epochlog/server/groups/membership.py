"""Group membership: JoinGroup and SyncGroup barriers, heartbeats, LeaveGroup, static members, and the
rebalance timers that ``tick`` fires (session expiry, rebalance deadline, initial delay, pending member ids)."""

from __future__ import annotations

import asyncio
import logging
import uuid

from epochlog.protocol.errors import Err
from epochlog.server.groups.model import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group, Member
from epochlog.server.groups.results import JoinResult, SyncResult
from epochlog.server.groups.state import CoordinatorState

log = logging.getLogger("epochlog.groups")


class Membership(CoordinatorState):
    # -- timers -------------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> None:
        """Fire every group timer due at ``now`` (default: the clock)."""
        now = self.clock() if now is None else now
        for g in list(self.groups.values()):
            for mid, deadline in list(g.pending.items()):
                if now >= deadline:
                    del g.pending[mid]
                    log.info("group %s: pending member %s never rejoined", g.group_id, mid)
                    self._maybe_complete_join(g)
            for m in list(g.members.values()):
                # A member parked in JoinGroup or SyncGroup cannot heartbeat; the rebalance deadline
                # (or the leader's own session) bounds how long it can stay parked.
                if m.awaiting_join or m.awaiting_sync:
                    continue
                if now - m.last_heartbeat >= m.session_timeout_ms / 1000:
                    log.info("group %s: member %s session expired", g.group_id, m.member_id)
                    self._remove_member(g, m)
            if g.state == PREPARING_REBALANCE and now >= g.rebalance_deadline:
                self._on_rebalance_deadline(g, now)

    def _on_rebalance_deadline(self, g: Group, now: float) -> None:
        if g.initial_delay and g.new_member_added and g.initial_delay_remaining_ms > 0:
            g.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, g.initial_delay_remaining_ms)
            g.initial_delay_remaining_ms -= delay
            g.rebalance_deadline = now + delay / 1000
            return
        for m in list(g.members.values()):
            if not m.awaiting_join:
                log.info("group %s: member %s did not rejoin in time", g.group_id, m.member_id)
                self._remove_member(g, m, rebalance=False)
        self._complete_join(g)

    # -- join ---------------------------------------------------------------------------------
    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinResult:
        if err := self._unavailable(group_id):
            return JoinResult(err, member_id=member_id)
        if not group_id:
            return JoinResult(Err.INVALID_GROUP_ID, member_id=member_id)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return JoinResult(Err.INVALID_SESSION_TIMEOUT, member_id=member_id)
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                return JoinResult(Err.UNKNOWN_MEMBER_ID, member_id=member_id)
            g = self.groups[group_id] = Group(group_id, state_timestamp_ms=self._now_ms())
        if g.state == DEAD:
            return JoinResult(Err.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not g.supports_protocols(protocol_type, protocols, member_id):
            return JoinResult(Err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        protocols = [(n, bytes(md)) for n, md in protocols]
        new_member = Member(
            "",
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
        )

        if not member_id:
            new_member.member_id = f"{client_id}-{uuid.uuid4()}"
            if group_instance_id is not None:
                return await self._join_static_unknown(g, new_member)
            if require_known_member_id:
                # JoinGroup v4+: hand out the id first, so a client that times out and retries does
                # not leave a ghost member behind that the group must wait for.
                g.pending[new_member.member_id] = self.clock() + session_timeout_ms / 1000
                return JoinResult(Err.MEMBER_ID_REQUIRED, member_id=new_member.member_id)
            return await self._add_member_and_rebalance(g, new_member)

        if member_id in g.pending:
            del g.pending[member_id]
            new_member.member_id = member_id
            return await self._add_member_and_rebalance(g, new_member)
        m = g.members.get(member_id)
        if m is None:
            return JoinResult(Err.UNKNOWN_MEMBER_ID, member_id=member_id)
        if group_instance_id is not None and g.static_members.get(group_instance_id) != member_id:
            return JoinResult(Err.FENCED_INSTANCE_ID, member_id=member_id)
        return await self._join_known(g, m, new_member)

    async def _join_known(self, g: Group, m: Member, req: Member) -> JoinResult:
        unchanged = m.same_protocols(req.protocols)
        m.session_timeout_ms, m.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        m.client_id, m.client_host = req.client_id, req.client_host
        m.last_heartbeat = self.clock()
        if g.state == PREPARING_REBALANCE:
            m.protocols = req.protocols
            return await self._await_join(g, m)
        if g.state == COMPLETING_REBALANCE and unchanged:
            # The member lost our JoinGroup response: answer it again for the same generation.
            return self._join_result(g, m)
        if g.state == STABLE and unchanged and m.member_id != g.leader:
            # A follower with nothing new needs no rebalance: it may SyncGroup for this generation.
            return self._join_result(g, m)
        m.protocols = req.protocols
        self._prepare_rebalance(g, f"member {m.member_id} rejoined with new metadata or as leader")
        return await self._await_join(g, m)

    async def _join_static_unknown(self, g: Group, req: Member) -> JoinResult:
        assert req.group_instance_id is not None
        old = g.member_by_instance(req.group_instance_id)
        if old is None:
            return await self._add_member_and_rebalance(g, req)
        # A static member restarted: it takes over its old slot under a new member id, and the old
        # id is fenced. Kafka skips the rebalance when nothing changed and the group is stable.
        log.info("group %s: static member %s replaces %s", g.group_id, req.group_instance_id, old.member_id)
        unchanged = old.same_protocols(req.protocols)
        self._replace_member_id(g, old, req.member_id)
        old.protocols = req.protocols
        old.session_timeout_ms, old.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        old.last_heartbeat = self.clock()
        if g.state == STABLE and unchanged and g.leader != old.member_id:
            self._spawn(self._persist_group(g))
            return self._join_result(g, old)
        if g.state != PREPARING_REBALANCE:
            self._prepare_rebalance(g, f"static member {req.group_instance_id} rejoined")
        return await self._await_join(g, old)

    def _replace_member_id(self, g: Group, m: Member, new_id: str) -> None:
        old_id = m.member_id
        for fut, res in (
            (m.join_future, JoinResult(Err.FENCED_INSTANCE_ID, member_id=old_id)),
            (m.sync_future, SyncResult(Err.FENCED_INSTANCE_ID)),
        ):
            if fut is not None and not fut.done():
                fut.set_result(res)  # type: ignore[arg-type]
        m.join_future = m.sync_future = None
        g.members = {(new_id if k == old_id else k): v for k, v in g.members.items()}
        m.member_id = new_id
        if g.leader == old_id:
            g.leader = new_id
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = new_id

    async def _add_member_and_rebalance(self, g: Group, m: Member) -> JoinResult:
        m.last_heartbeat = self.clock()
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
            self._prepare_rebalance(g, f"member {m.member_id} joined")
        return await self._await_join(g, m)

    async def _await_join(self, g: Group, m: Member) -> JoinResult:
        if m.awaiting_join:
            assert m.join_future is not None
            m.join_future.set_result(JoinResult(Err.REBALANCE_IN_PROGRESS, member_id=m.member_id))
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        m.join_future = fut
        self._maybe_complete_join(g)
        return await fut

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.state == COMPLETING_REBALANCE:
            # The leader's assignment for this generation will never come: send waiters back to join.
            for m in g.members.values():
                if m.awaiting_sync:
                    assert m.sync_future is not None
                    m.sync_future.set_result(SyncResult(Err.REBALANCE_IN_PROGRESS))
                m.sync_future = None
        now = self.clock()
        delay = self.config.group_initial_rebalance_delay_ms
        if g.state == EMPTY and delay > 0:
            g.initial_delay = True
            g.new_member_added = False
            g.initial_delay_remaining_ms = max(g.rebalance_timeout_ms() - delay, 0)
            g.rebalance_deadline = now + delay / 1000
        else:
            g.initial_delay = False
            g.rebalance_deadline = now + g.rebalance_timeout_ms() / 1000
        self._set_state(g, PREPARING_REBALANCE)
        log.info("group %s preparing rebalance at generation %d: %s", g.group_id, g.generation, reason)
        self._arm_timer(g.rebalance_deadline - now)

    def _arm_timer(self, delay_s: float) -> None:
        # The background tick would find the deadline within tick_interval anyway; this makes short
        # deadlines exact with the real clock, and is harmless (tick is idempotent) with a fake one.
        if self._task is not None:
            asyncio.get_running_loop().call_later(max(delay_s, 0.0) + 0.001, self.tick)

    def _maybe_complete_join(self, g: Group) -> None:
        if g.state == PREPARING_REBALANCE and not g.initial_delay and g.all_members_joined():
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        g.initial_delay = False
        g.new_member_added = False
        g.generation += 1
        if not g.members:
            g.protocol_name, g.leader = None, None
            self._set_state(g, EMPTY)
            log.info("group %s is empty at generation %d", g.group_id, g.generation)
            self._spawn(self._persist_group(g))
            return
        g.protocol_name = g.select_protocol()
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        self._set_state(g, COMPLETING_REBALANCE)
        log.info(
            "group %s generation %d: %d members, protocol %s, leader %s",
            g.group_id,
            g.generation,
            len(g.members),
            g.protocol_name,
            g.leader,
        )
        now = self.clock()
        for m in g.members.values():
            m.last_heartbeat = now
            m.assignment = b""
            if m.join_future is not None and not m.join_future.done():
                m.join_future.set_result(self._join_result(g, m))
            m.join_future = None

    def _join_result(self, g: Group, m: Member) -> JoinResult:
        members = []
        if m.member_id == g.leader:
            members = [(x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name)) for x in g.members.values()]
        return JoinResult(
            Err.NONE, g.generation, g.protocol_type, g.protocol_name, g.leader or "", m.member_id, members
        )

    # -- sync ---------------------------------------------------------------------------------
    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        if err := self._unavailable(group_id):
            return SyncResult(err)
        g = self.groups.get(group_id)
        err = self._validate_member(g, member_id, group_instance_id, generation_id)
        if err:
            return SyncResult(err)
        assert g is not None
        if (protocol_type and protocol_type != g.protocol_type) or (protocol_name and protocol_name != g.protocol_name):
            return SyncResult(Err.INCONSISTENT_GROUP_PROTOCOL)
        m = g.members[member_id]
        m.last_heartbeat = self.clock()
        if g.state == PREPARING_REBALANCE:
            return SyncResult(Err.REBALANCE_IN_PROGRESS)
        if g.state == STABLE:
            return SyncResult(Err.NONE, g.protocol_type, g.protocol_name, m.assignment)
        # CompletingRebalance: park until the leader's assignment is durable.
        if m.awaiting_sync:
            assert m.sync_future is not None
            m.sync_future.set_result(SyncResult(Err.REBALANCE_IN_PROGRESS))
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        if member_id == g.leader:
            self._spawn(self._apply_assignment(g, g.generation, {k: bytes(v) for k, v in assignments.items()}))
        return await fut

    async def _apply_assignment(self, g: Group, generation: int, assignments: dict[str, bytes]) -> None:
        for mid, m in g.members.items():
            m.assignment = assignments.get(mid, b"")
        ok = await self._persist_group(g)
        if g.state != COMPLETING_REBALANCE or g.generation != generation:
            return  # a join or leave moved the group on while we were writing; waiters were answered
        if not ok:
            for m in g.members.values():
                m.assignment = b""
            self._prepare_rebalance(g, "cannot persist the leader's assignment")
            return
        self._set_state(g, STABLE)
        for m in g.members.values():
            if m.awaiting_sync:
                assert m.sync_future is not None
                m.sync_future.set_result(SyncResult(Err.NONE, g.protocol_type, g.protocol_name, m.assignment))
            m.sync_future = None

    # -- heartbeat and leave ------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        if err := self._unavailable(group_id):
            return err
        g = self.groups.get(group_id)
        err = self._validate_member(g, member_id, group_instance_id, generation_id)
        if err:
            return err
        assert g is not None
        g.members[member_id].last_heartbeat = self.clock()
        if g.state == PREPARING_REBALANCE:
            return Err.REBALANCE_IN_PROGRESS
        return Err.NONE  # CompletingRebalance too: clients heartbeat between join and sync

    async def leave_group(
        self, group_id: str, members: list[tuple[str | None, str | None]]
    ) -> tuple[int, list[int]]:
        """``members`` are (member_id, group_instance_id); returns (top-level error, per-member errors)."""
        if err := self._unavailable(group_id):
            return err, [err] * len(members)
        g = self.groups.get(group_id)
        if g is None:
            return Err.NONE, [Err.UNKNOWN_MEMBER_ID] * len(members)
        codes: list[int] = []
        for member_id, instance_id in members:
            if member_id and member_id in g.pending:
                del g.pending[member_id]
                self._maybe_complete_join(g)
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
            log.info("group %s: member %s leaves", group_id, m.member_id)
            self._remove_member(g, m)
            codes.append(Err.NONE)
        return Err.NONE, codes

    def _remove_member(self, g: Group, m: Member, rebalance: bool = True) -> None:
        g.members.pop(m.member_id, None)
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        for fut, res in (
            (m.join_future, JoinResult(Err.UNKNOWN_MEMBER_ID, member_id=m.member_id)),
            (m.sync_future, SyncResult(Err.UNKNOWN_MEMBER_ID)),
        ):
            if fut is not None and not fut.done():
                fut.set_result(res)  # type: ignore[arg-type]
        m.join_future = m.sync_future = None
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)
        if not rebalance:
            return
        if g.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(g, f"member {m.member_id} left")
        if g.state == PREPARING_REBALANCE:
            self._maybe_complete_join(g)
