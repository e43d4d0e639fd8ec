"""The group coordinator's state and what its parts (membership, offsets, loading) share: the groups,
the clocks, whether a group is ours to serve, and the writes to __consumer_offsets."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.server.groups import records as rec
from epochlog.server.groups.config import GroupConfig
from epochlog.server.groups.hashing import partition_for
from epochlog.server.groups.model import DEAD, EMPTY, Group
from epochlog.server.groups.store import OffsetsStore
from epochlog.server.groups.txn_offsets import PendingTxnOffsets

log = logging.getLogger("epochlog.groups")

# A Kafka error code that protocol/errors.py does not name.


class CoordinatorState:
    """What GroupCoordinator's parts (Membership, Offsets, Loading) all read and write."""

    def __init__(
        self,
        store: OffsetsStore,
        config: GroupConfig,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock`` (seconds) times sessions and rebalances; ``wall_clock`` (seconds since the epoch)
        stamps commits and state changes, which are persisted and outlive the process."""
        self.store = store
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.groups: dict[str, Group] = {}
        self.loaded = False
        # Cluster mode: the __consumer_offsets partitions this broker leads and has read (None: all of
        # them, the single-node case). Reading one is synchronous, so no request sees it half-read.
        self.owned: set[int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._write_seq = 0
        self.txn_offsets = PendingTxnOffsets()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.store.num_partitions)

    def _now_ms(self) -> int:
        return int(self.wall_clock() * 1000)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        fut = asyncio.ensure_future(coro)
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def _set_state(self, g: Group, state: str) -> None:
        if g.state != state:
            g.state = state
            g.state_timestamp_ms = self._now_ms()

    def _unavailable(self, group_id: str) -> int:
        """An error when this coordinator cannot serve the group now, else 0."""
        if not self.loaded:
            return Err.COORDINATOR_LOAD_IN_PROGRESS
        if self.owned is None:
            return Err.NONE
        return Err.NONE if self.partition_for(group_id) in self.owned else Err.NOT_COORDINATOR

    def _validate_member(self, g: Group | None, member_id: str, instance_id: str | None, generation_id: int) -> int:
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

    # -- persistence --------------------------------------------------------------------------
    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        batch = build_batch(records, base_timestamp=self._now_ms())
        await self.store.append(self.partition_for(group_id), batch)

    def _group_record(self, g: Group) -> tuple[bytes, bytes]:
        value = rec.GroupValue(
            g.protocol_type or "",
            g.generation,
            g.protocol_name,
            g.leader,
            g.state_timestamp_ms,
            [
                (
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
            ],
        )
        return rec.group_key(g.group_id), rec.group_value(value)

    async def _persist_group(self, g: Group) -> bool:
        try:
            await self._append(g.group_id, [self._group_record(g)])
            return True
        except Exception:
            log.exception("group %s: cannot persist group metadata at generation %d", g.group_id, g.generation)
            return False
