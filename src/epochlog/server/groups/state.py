"""The group coordinator's state and what its parts (membership, offsets, loading) share: the membership core,
the clocks, whether a group is ours to serve, the parked requests, and the writes to __consumer_offsets."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from epochlog.clock import now_ms
from epochlog.groups.consumer.coordinator import ConsumerGroupCoordinator
from epochlog.groups.consumer.model import ConsumerGroupConfig
from epochlog.groups.effects import (
    AnswerJoin,
    AnswerSync,
    Effect,
    GroupSnapshot,
    JoinResult,
    MembershipConfig,
    Note,
    PersistGroup,
    StateChanged,
    SyncResult,
    WakeAt,
)
from epochlog.groups.membership import GroupMembership
from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.server.groups import records as rec
from epochlog.server.groups.config import GroupConfig
from epochlog.server.groups.consumer_records import group_tombstones as consumer_group_tombstones
from epochlog.server.groups.hashing import partition_for
from epochlog.server.groups.model import Group
from epochlog.server.groups.store import OffsetsStore
from epochlog.server.groups.txn_offsets import PendingTxnOffsets

log = logging.getLogger("epochlog.groups")


def wall_seconds() -> float:
    """The process's one clock (epochlog.clock), in the seconds the coordinator's wall_clock speaks."""
    return now_ms() / 1000


class CoordinatorState:
    """What GroupCoordinator's parts (Membership, Offsets, Loading) all read and write."""

    def __init__(
        self,
        store: OffsetsStore,
        config: GroupConfig,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = wall_seconds,
    ) -> None:
        """``clock`` (seconds) times sessions and rebalances; ``wall_clock`` (seconds since the epoch)
        stamps commits and state changes, which are persisted and outlive the process."""
        self.store = store
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.core = GroupMembership(
            MembershipConfig(
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            )
        )
        self.loaded = False
        # The __consumer_offsets partitions this broker leads and has read. Reading one is synchronous, so no
        # request sees it half-read.
        self.owned: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[Any]] = set()
        self._write_seq = 0
        self.txn_offsets = PendingTxnOffsets()
        # The JoinGroup and SyncGroup requests parked in the core, by the token it gave them.
        self._joins: dict[int, asyncio.Future[JoinResult]] = {}
        self._syncs: dict[int, asyncio.Future[SyncResult]] = {}
        # KIP-848 consumer groups (consumer_groups.py): one core per group of the partitions we lead.
        self.consumer_config = ConsumerGroupConfig(
            session_timeout_ms=config.consumer_session_timeout_ms,
            heartbeat_interval_ms=config.consumer_heartbeat_interval_ms,
            max_size=config.consumer_max_size,
            assignors=config.consumer_assignors,
        )
        self.consumer_groups: dict[str, ConsumerGroupCoordinator] = {}
        # The cluster's topics and their partition counts; the broker points it at its metadata image.
        self.topic_counts: Callable[[], Mapping[str, int]] = dict
        # Their ids by name: the KIP-848 records in __consumer_offsets name topics by id, as Kafka's do.
        self.topic_ids: Callable[[], Mapping[str, uuid.UUID]] = dict
        self._consumer_queues: dict[str, Any] = {}
        self._consumer_wake_ms: int | None = None

    @property
    def groups(self) -> dict[str, Group]:
        return self.core.groups

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.store.num_partitions)

    def _now_ms(self) -> int:
        return int(self.wall_clock() * 1000)

    def _mono_ms(self) -> int:
        return round(self.clock() * 1000)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        fut = asyncio.ensure_future(coro)
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def _unavailable(self, group_id: str) -> int:
        """An error when this coordinator cannot serve the group now, else 0."""
        if not self.loaded:
            return Err.COORDINATOR_LOAD_IN_PROGRESS
        return Err.NONE if self.partition_for(group_id) in self.owned else Err.NOT_COORDINATOR

    async def _leave_consumer_protocol(self, group_id: str) -> int:
        """A classic JoinGroup for a KIP-848 group: an empty one becomes a classic group (its records go, its
        offsets stay), as Kafka converts it; one with members is refused (online migration is not served)."""
        if group_id not in self.consumer_groups:
            return Err.NONE
        # The group's own records still being written go first, so the tombstone follows them in the log.
        while (q := self._consumer_queues.get(group_id)) is not None and q.waiters:
            await asyncio.wait([q.waiters[-1]])
        core = self.consumer_groups.get(group_id)
        if core is None:
            return Err.NONE
        if core.group.members:
            return Err.INCONSISTENT_GROUP_PROTOCOL
        del self.consumer_groups[group_id]
        try:
            await self._append(group_id, consumer_group_tombstones(group_id))
        except Exception:
            log.exception("consumer group %s: cannot write its tombstone", group_id)
            return Err.COORDINATOR_NOT_AVAILABLE
        log.info("group %s: the empty consumer group becomes a classic group", group_id)
        return Err.NONE

    # -- carrying out the core's effects -----------------------------------------------------
    def _apply(self, effects: Iterable[Effect]) -> None:
        for e in effects:
            if isinstance(e, AnswerJoin):
                jf = self._joins.pop(e.token, None)
                if jf is not None and not jf.done():
                    jf.set_result(e.result)
            elif isinstance(e, AnswerSync):
                sf = self._syncs.pop(e.token, None)
                if sf is not None and not sf.done():
                    sf.set_result(e.result)
            elif isinstance(e, StateChanged):
                g = self.groups.get(e.group_id)
                if g is not None:
                    g.state_timestamp_ms = self._now_ms()
            elif isinstance(e, PersistGroup):
                g = self.groups.get(e.snapshot.group_id)
                stamp = g.state_timestamp_ms if g is not None else self._now_ms()
                self._spawn(self._persist(e.snapshot, stamp, e.confirm))
            elif isinstance(e, WakeAt):
                self._arm_timer((e.at_ms - self._mono_ms()) / 1000)
            elif isinstance(e, Note):
                log.info("group %s: %s", e.group_id, e.text)

    def _arm_timer(self, delay_s: float) -> None:
        # The background tick would find the deadline within tick_interval anyway; this makes short
        # deadlines exact with the real clock, and is harmless (tick is idempotent) with a fake one.
        if self._task is not None:
            asyncio.get_running_loop().call_later(max(delay_s, 0.0) + 0.001, self.tick)

    def tick(self, now: float | None = None) -> None:
        """Fire every group timer due at ``now`` (seconds on ``clock``; default: the clock)."""
        self._apply(self.core.tick(self._mono_ms() if now is None else round(now * 1000)))

    # -- persistence --------------------------------------------------------------------------
    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        batch = build_batch(records, base_timestamp=self._now_ms())
        await self.store.append(self.partition_for(group_id), batch)

    async def _persist(self, s: GroupSnapshot, state_timestamp_ms: int, confirm: bool) -> None:
        try:
            await self._append(s.group_id, [group_record(s, state_timestamp_ms)])
            ok = True
        except Exception:
            log.exception("group %s: cannot persist group metadata at generation %d", s.group_id, s.generation)
            ok = False
        if confirm:
            self._apply(self.core.assignment_written(s.group_id, s.generation, ok, self._mono_ms()))


def group_record(s: GroupSnapshot, state_timestamp_ms: int) -> tuple[bytes, bytes]:
    value = rec.GroupValue(
        s.protocol_type,
        s.generation,
        s.protocol_name,
        s.leader,
        state_timestamp_ms,
        [
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata,
                m.assignment,
            )
            for m in s.members
        ],
    )
    return rec.group_key(s.group_id), rec.group_value(value)
