"""The classic consumer-group coordinator: join/sync barriers, heartbeats, offsets, persistence.

Runs on the broker's event loop. JoinGroup and SyncGroup wait on asyncio futures; every timer
(session expiry, rebalance deadline, initial rebalance delay, pending member ids) is a deadline on
the injected ``clock`` that ``tick(now)`` checks, so tests drive time by hand. The background task
started by ``start()`` only calls ``tick`` and the offset expiry. See the package docstring for the
API and the rules, which follow Kafka's GroupCoordinator.

GroupCoordinator is one object assembled from parts over one CoordinatorState (state.py, which holds the
membership core, epochlog.groups, and carries out its effects): membership.py (join, sync, heartbeat, leave),
offsets.py (commit, fetch, delete, expiry) and loading.py (replaying __consumer_offsets). Here: its
lifecycle, the background loop, and the group admin calls.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from epochlog.codes import Err
from epochlog.server.groups import records as rec
from epochlog.server.groups.loading import Loading
from epochlog.server.groups.membership import Membership
from epochlog.server.groups.model import DEAD, EMPTY, STABLE
from epochlog.server.groups.offsets import Offsets

log = logging.getLogger("epochlog.groups")

# A Kafka error code that protocol/errors.py does not name.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


class GroupCoordinator(Membership, Offsets, Loading):
    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, run_background: bool = True) -> None:
        """Serve requests from now on. A group's partition of __consumer_offsets is read when this broker
        becomes its leader (``load_partition``), on a single node as in a cluster."""
        self.loaded = True
        if run_background:
            self._task = asyncio.create_task(self._background_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        parked: list[asyncio.Future[Any]] = [*self._joins.values(), *self._syncs.values()]
        for fut in parked:
            if not fut.done():
                fut.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # -- timers -------------------------------------------------------------------------------
    async def _background_loop(self) -> None:
        interval = self.config.tick_interval_ms / 1000
        next_offset_expiry = self.clock() + self.config.offsets_retention_check_interval_ms / 1000
        expiry: asyncio.Future[int] | None = None
        while True:
            await asyncio.sleep(interval)
            try:
                now = self.clock()
                self.tick(now)
                if now >= next_offset_expiry and (expiry is None or expiry.done()):
                    next_offset_expiry = now + self.config.offsets_retention_check_interval_ms / 1000
                    # Beside the timers, not in their way: its tombstones wait for the ISR.
                    expiry = asyncio.ensure_future(self.expire_offsets())
                    self._background.add(expiry)
                    expiry.add_done_callback(self._background.discard)
            except Exception:
                log.exception("group coordinator timer failed")

    # -- admin --------------------------------------------------------------------------------
    def list_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) for every group; state names compared case-insensitively."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [
            (g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if (wanted is None or g.state.lower() in wanted) and g.group_id not in self.consumer_groups
        ]

    def describe_groups(self, group_ids: list[str]) -> list[dict[str, Any]]:
        """One dict per group with DescribeGroups' field names. Like Kafka, the protocol name and the
        members' metadata and assignment are shown only while Stable; an unknown group is "Dead"."""
        out = []
        for gid in group_ids:
            # A KIP-848 group is no classic group: Kafka describes it as Dead (ConsumerGroupDescribe shows it).
            g = None if gid in self.consumer_groups else self.groups.get(gid)
            if unavailable := self._unavailable(gid):
                err, state = unavailable, DEAD
            else:
                err, state = Err.NONE, g.state if g is not None else DEAD
            protocol = g.protocol_name if g is not None else None
            stable = g is not None and g.state == STABLE
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(protocol) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in (g.members.values() if g is not None and not unavailable else ())
            ]
            out.append(
                {
                    "error_code": err,
                    "group_id": gid,
                    "group_state": state,
                    "protocol_type": (g.protocol_type or "") if g is not None else "",
                    "protocol_data": (g.protocol_name or "") if stable and g is not None else "",
                    "members": members,
                    "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                }
            )
        return out

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]:
        """Kafka's rule: only a group with no members can be deleted; its offsets go with it."""
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if unavailable := self._unavailable(gid):
                out.append((gid, unavailable))
            elif not gid:
                out.append((gid, Err.INVALID_GROUP_ID))
            elif gid in self.consumer_groups:
                out.append((gid, await self.delete_consumer_group(gid)))
            elif gid in self.share_groups:
                out.append((gid, await self.delete_share_group(gid)))
            elif g is None or g.state == DEAD:
                out.append((gid, Err.GROUP_ID_NOT_FOUND))
            elif g.state != EMPTY or g.members:
                out.append((gid, Err.NON_EMPTY_GROUP))
            else:
                tombstones: list[tuple[bytes, bytes | None]] = [(rec.offset_key(gid, t, p), None) for t, p in g.offsets]
                tombstones.append((rec.group_key(gid), None))
                # Dead before the wait for the ISR, as in Kafka: a JoinGroup or commit arriving meanwhile
                # starts a new group, whose records follow the tombstones in the log.
                self._apply(self.core.set_state(g, DEAD))
                self.groups.pop(gid, None)
                try:
                    await self._append(gid, tombstones)
                except Exception:
                    log.exception("group %s: cannot write deletion tombstones", gid)
                    if gid not in self.groups and not self._unavailable(gid):
                        self.groups[gid] = g
                        self._apply(self.core.set_state(g, EMPTY))
                    out.append((gid, Err.COORDINATOR_NOT_AVAILABLE))
                    continue
                log.info("group %s deleted with %d committed offsets", gid, len(g.offsets))
                out.append((gid, Err.NONE))
        return out
