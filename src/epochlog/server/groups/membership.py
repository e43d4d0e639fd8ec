"""Group membership on the event loop: JoinGroup and SyncGroup wait on futures until the core
(epochlog.groups.membership) answers their token; heartbeats and LeaveGroup are answered at once. Every
decision is the core's; this side brings the clock and carries out the effects (state.py ``_apply``)."""

from __future__ import annotations

import asyncio

from epochlog.groups.effects import JoinRequest, JoinResult, SyncResult
from epochlog.server.groups.state import CoordinatorState


class Membership(CoordinatorState):
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
        if err := await self._leave_consumer_protocol(group_id):
            return JoinResult(err, member_id=member_id)
        req = JoinRequest(
            group_id,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            require_known_member_id,
        )
        step = self.core.join(req, self._mono_ms())
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self._joins[step.token] = fut
        self._apply(step.effects)
        try:
            return await fut
        finally:
            self._joins.pop(step.token, None)

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
        step = self.core.sync(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
            self._mono_ms(),
        )
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self._syncs[step.token] = fut
        self._apply(step.effects)
        try:
            return await fut
        finally:
            self._syncs.pop(step.token, None)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        if err := self._unavailable(group_id):
            return err
        return self.core.heartbeat(group_id, generation_id, member_id, group_instance_id, self._mono_ms())

    async def leave_group(self, group_id: str, members: list[tuple[str | None, str | None]]) -> tuple[int, list[int]]:
        """``members`` are (member_id, group_instance_id); returns (top-level error, per-member errors)."""
        if err := self._unavailable(group_id):
            return err, [err] * len(members)
        out = self.core.leave(group_id, members, self._mono_ms())
        self._apply(out.effects)
        return out.error_code, out.member_errors
