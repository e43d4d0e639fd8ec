"""The classic consumer-group coordinator: join/sync barriers, heartbeats, offsets, persistence.

Runs on the broker's event loop. JoinGroup and SyncGroup wait on asyncio futures; every timer
(session expiry, rebalance deadline, initial rebalance delay, pending member ids) is a deadline on
the injected ``clock`` that ``tick(now)`` checks, so tests drive time by hand. The background task
started by ``start()`` only calls ``tick`` and the offset expiry. See the package docstring for the
API and the rules, which follow Kafka's GroupCoordinator.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from epochlog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL
from epochlog.protocol.control_records import ControlType, read_marker
from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import Record, build_batch, iter_records
from epochlog.server.groups import records as rec
from epochlog.server.groups.config import GroupConfig
from epochlog.server.groups.hashing import partition_for
from epochlog.server.groups.model import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Group,
    Member,
)
from epochlog.server.groups.results import CommittedOffset, JoinResult, OffsetCommit, SyncResult
from epochlog.server.groups.store import OffsetsStore
from epochlog.server.groups.txn_offsets import PendingTxnOffsets, TopicPartition

log = logging.getLogger("epochlog.groups")

# What an offset commit writes: the errors of the offsets refused, the records, and the offsets they hold.
_Records = list[tuple[bytes, bytes | None]]
_OffsetWrite = tuple[dict[TopicPartition, int], _Records, list[tuple[TopicPartition, "rec.OffsetValue"]]]

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def _every(offsets: list[OffsetCommit], code: int) -> dict[TopicPartition, int]:
    return {(o.topic, o.partition): code for o in offsets}


class GroupCoordinator:
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

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, run_background: bool = True, load_all: bool = True) -> None:
        """``load_all``: read every partition of __consumer_offsets now (single node). Otherwise (a
        cluster) partitions are loaded and unloaded as this broker gains and loses their leadership."""
        if load_all:
            for p in range(self.store.num_partitions):
                self._read_partition(p)
        else:
            self.owned = set()
        self.loaded = True
        log.info(
            "group coordinator loaded %d groups and %d committed offsets",
            len(self.groups),
            sum(len(g.offsets) for g in self.groups.values()),
        )
        if run_background:
            self._task = asyncio.create_task(self._background_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for g in self.groups.values():
            for m in g.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def _read_partition(self, p: int) -> None:
        for batch in self.store.read_batches(p):
            try:
                h = read_header(batch)
                if h.is_control:
                    marker = read_marker(batch)
                    if marker is not None:
                        self._complete_txn(p, h.producer_id, marker.type is ControlType.COMMIT)
                    continue
                for r in iter_records(batch):
                    if h.is_transactional:
                        self._replay_txn_offset(h.producer_id, r)
                    else:
                        self._replay(r)
            except ValueError as e:  # CorruptBatchError included: skip what we cannot read
                log.error("__consumer_offsets-%d: skipping unreadable batch: %s", p, e)
        now = self.clock()
        for gid, g in self.groups.items():
            if self.partition_for(gid) == p:
                for m in g.members.values():
                    m.last_heartbeat = now  # restored members get a full session to find us again

    def load_partition(self, p: int) -> None:
        """This broker now leads __consumer_offsets-p: take over its groups from the replicated log."""
        if self.owned is None or p in self.owned:
            return
        self._drop_groups(p)  # anything left from an earlier term here is stale
        self._read_partition(p)
        self.owned.add(p)
        log.info("__consumer_offsets-%d: loaded, coordinating its groups", p)

    def unload_partition(self, p: int) -> None:
        """Leadership of __consumer_offsets-p moved away: its groups are no longer ours."""
        if self.owned is None or p not in self.owned:
            return
        self.owned.discard(p)
        self._drop_groups(p)
        log.info("__consumer_offsets-%d: unloaded", p)

    def _drop_groups(self, p: int) -> None:
        self.txn_offsets.drop_groups({gid for gid in self.txn_offsets.groups() if self.partition_for(gid) == p})
        for gid in [gid for gid in self.groups if self.partition_for(gid) == p]:
            g = self.groups.pop(gid)
            for m in g.members.values():
                if m.join_future is not None and not m.join_future.done():
                    m.join_future.set_result(JoinResult(Err.NOT_COORDINATOR, member_id=m.member_id))
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(Err.NOT_COORDINATOR))

    def _unavailable(self, group_id: str) -> int:
        """An error when this coordinator cannot serve the group now, else 0."""
        if not self.loaded:
            return Err.COORDINATOR_LOAD_IN_PROGRESS
        if self.owned is None:
            return Err.NONE
        return Err.NONE if self.partition_for(group_id) in self.owned else Err.NOT_COORDINATOR

    def _replay(self, r: Record) -> None:
        if r.key is None:
            return
        key = rec.decode_key(r.key)
        if isinstance(key, rec.OffsetKey):
            tp = (key.topic, key.partition)
            g = self.groups.get(key.group)
            if r.value is None:
                if g is not None:
                    g.offsets.pop(tp, None)
                    if g.state == EMPTY and not g.offsets and g.protocol_type is None:
                        del self.groups[key.group]
                return
            if g is None:
                g = self.groups[key.group] = Group(key.group)
            g.offsets[tp] = rec.decode_offset_value(r.value)
        elif isinstance(key, rec.GroupKey):
            if r.value is None:
                g = self.groups.pop(key.group, None)
                if g is not None and g.offsets:  # offsets of a deleted group arrive as their own tombstones
                    self.groups[key.group] = Group(key.group, offsets=g.offsets)
                return
            v = rec.decode_group_value(r.value)
            g = self.groups.setdefault(key.group, Group(key.group))
            g.generation, g.protocol_type, g.protocol_name = v.generation, v.protocol_type or None, v.protocol
            g.leader, g.state_timestamp_ms = v.leader, v.state_timestamp
            g.members.clear()
            g.static_members.clear()
            for mid, iid, cid, host, rto, sto, sub, asg in v.members:
                m = Member(mid, iid, cid, host, sto, rto, v.protocol_type, [(v.protocol or "", sub)], assignment=asg)
                g.members[mid] = m
                if iid is not None:
                    g.static_members[iid] = mid
            # Kafka resumes a group with members as Stable: they keep their assignment and only have
            # to heartbeat within their session, so a broker restart does not force a rebalance.
            g.state = STABLE if g.members else EMPTY

    def _replay_txn_offset(self, producer_id: int, r: Record) -> None:
        key = rec.decode_key(r.key) if r.key is not None else None
        if isinstance(key, rec.OffsetKey) and r.value is not None:
            self.txn_offsets.add(producer_id, key.group, (key.topic, key.partition), rec.decode_offset_value(r.value))

    def complete_txn(self, p: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker is durable on __consumer_offsets-p: its offsets become visible or go."""
        if self.owned is not None and p not in self.owned:
            return
        self._complete_txn(p, producer_id, commit)

    def _complete_txn(self, p: int, producer_id: int, commit: bool) -> None:
        groups = {gid for gid in self.txn_offsets.groups() if self.partition_for(gid) == p}
        for gid, offsets in self.txn_offsets.take(producer_id, groups).items():
            if not commit:
                continue
            g = self.groups.get(gid)
            if g is None:
                g = self.groups[gid] = Group(gid, state_timestamp_ms=self._now_ms())
            g.offsets.update(offsets)
            # A plain commit whose write began before this marker landed must not overwrite it.
            self._write_seq += 1
            for tp in offsets:
                g.offset_write_seq[tp] = self._write_seq

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

    async def leave_group(self, group_id: str, members: list[tuple[str | None, str | None]]) -> tuple[int, list[int]]:
        """``members`` are (member_id, group_instance_id); returns (top-level error, per-member errors)."""
        if err := self._unavailable(group_id):
            return err, [err] * len(members)
        g = self.groups.get(group_id)
        if g is None:
            return Err.NONE, [Err.UNKNOWN_MEMBER_ID] * len(members)
        codes = []
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

    # -- offsets ------------------------------------------------------------------------------
    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetCommit],
    ) -> dict[tuple[str, int], int]:
        """Returns an error code per (topic, partition); offsets are visible once durable."""
        if err := self._unavailable(group_id) or (Err.NONE if group_id else Err.INVALID_GROUP_ID):
            return _every(offsets, err)
        g = self.groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return _every(offsets, Err.ILLEGAL_GENERATION)  # a member of a generation that no longer exists
            g = self.groups[group_id] = Group(group_id, state_timestamp_ms=self._now_ms())
        elif g.state == DEAD:
            return _every(offsets, Err.COORDINATOR_NOT_AVAILABLE)
        elif member_id and member_id in g.pending:
            return _every(offsets, Err.UNKNOWN_MEMBER_ID)
        elif generation_id < 0 and g.state == EMPTY:
            pass  # a group that only stores offsets (assign() consumers, admin tools): Kafka's rule
        else:
            err = self._validate_member(g, member_id, group_instance_id, generation_id)
            if err:
                return _every(offsets, err)
            if g.state == COMPLETING_REBALANCE:
                return _every(offsets, Err.REBALANCE_IN_PROGRESS)
            # Stable, and PreparingRebalance too: consumers commit from their revocation callback
            # while the group prepares, and Kafka lets them.
            g.members[member_id].last_heartbeat = self.clock()

        now_ms = self._now_ms()
        result, records, accepted = self._offset_records(group_id, offsets, now_ms)
        if not records:
            return result
        self._write_seq += 1
        seq = self._write_seq
        try:
            await self._append(group_id, records)
        except Exception:
            log.exception("group %s: cannot write committed offsets", group_id)
            for tp, _ in accepted:
                result[tp] = Err.COORDINATOR_NOT_AVAILABLE
            return result
        if err := self._unavailable(group_id):  # the partition moved to another broker meanwhile
            return {tp: err for tp in result} | {tp: err for tp, _ in accepted}
        if g.state == DEAD and self.groups.get(group_id) is not g:
            # Deleted while this write waited: its tombstones follow our record in the log, so the
            # deletion wins; the write itself did happen.
            return result | {tp: Err.NONE for tp, _ in accepted}
        g = self.groups.setdefault(group_id, g)  # the group may have been deleted meanwhile
        for tp, v in accepted:
            if g.offset_write_seq.get(tp, 0) < seq:
                g.offsets[tp] = v
                g.offset_write_seq[tp] = seq
            result[tp] = Err.NONE
        return result

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[OffsetCommit],
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: written as the producer's transactional batch, visible once its marker is."""
        if err := self._unavailable(group_id) or (Err.NONE if group_id else Err.INVALID_GROUP_ID):
            return _every(offsets, err)
        g = self.groups.get(group_id)
        if g is not None and g.state == DEAD:
            return _every(offsets, Err.COORDINATOR_NOT_AVAILABLE)
        if generation_id >= 0 or member_id:
            # KIP-447: a producer committing for a consumer of the group is checked like that consumer, so
            # a zombie of an older generation cannot commit.
            if g is None:
                return _every(offsets, Err.ILLEGAL_GENERATION)
            err = self._validate_member(g, member_id, group_instance_id, generation_id)
            if err:
                return _every(offsets, err)
        now_ms = self._now_ms()
        result, records, accepted = self._offset_records(group_id, offsets, now_ms)
        if not records:
            return result
        batch = build_batch(
            records,
            base_timestamp=now_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            is_transactional=True,
        )
        try:
            await self.store.append(self.partition_for(group_id), batch)
        except Exception as e:
            code = getattr(e, "error_code", None)
            log.info("group %s: cannot write transactional offsets: %s", group_id, e)
            return result | {tp: code or Err.COORDINATOR_NOT_AVAILABLE for tp, _ in accepted}
        if err := self._unavailable(group_id):
            return result | {tp: err for tp, _ in accepted}
        for tp, v in accepted:
            self.txn_offsets.add(producer_id, group_id, tp, v)
            result[tp] = Err.NONE
        return result

    def _offset_records(
        self, group_id: str, offsets: list[OffsetCommit], now_ms: int
    ) -> _OffsetWrite:
        """The records to write for ``offsets``, the offsets they hold, and the errors of those refused."""
        refused: dict[tuple[str, int], int] = {}
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[tuple[str, int], rec.OffsetValue]] = []
        for o in offsets:
            meta = o.metadata or ""
            if len(meta.encode()) > self.config.offset_metadata_max_bytes:
                refused[(o.topic, o.partition)] = Err.OFFSET_METADATA_TOO_LARGE
                continue
            v = rec.OffsetValue(o.offset, o.leader_epoch, meta, now_ms)
            records.append((rec.offset_key(group_id, o.topic, o.partition), rec.offset_value(v)))
            accepted.append(((o.topic, o.partition), v))
        return refused, records, accepted

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[int, list[CommittedOffset]]:
        """All committed offsets of the group when ``partitions`` is None; offset -1 where none."""
        if err := self._unavailable(group_id):
            return err, []
        g = self.groups.get(group_id)
        offsets = g.offsets if g is not None else {}
        if partitions is None:
            partitions = sorted(offsets)
        out = []
        for t, p in partitions:
            v = offsets.get((t, p))
            if v is None:
                out.append(CommittedOffset(t, p, -1, -1, ""))
            else:
                out.append(CommittedOffset(t, p, v.offset, v.leader_epoch, v.metadata))
        return Err.NONE, out

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Drop offsets past offsets.retention.ms and delete groups left with nothing; returns how many.

        Kafka's rule (KIP-211): a group that uses the group protocol keeps its offsets while it has
        members, and loses them once it has been Empty for the retention period; a group that only
        stores offsets loses each offset once it is that old.
        """
        now_ms = self._now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        removed = 0
        for g in list(self.groups.values()):
            if g.state != EMPTY or self.groups.get(g.group_id) is not g:  # gone during an earlier wait
                continue
            if g.protocol_type is not None and g.state_timestamp_ms >= 0:
                expired = list(g.offsets) if now_ms - g.state_timestamp_ms >= retention else []
            else:
                expired = [tp for tp, v in g.offsets.items() if now_ms - v.commit_timestamp >= retention]
            dead = len(expired) == len(g.offsets) and not g.pending
            if not expired and not dead:
                continue
            tombstones: list[tuple[bytes, bytes | None]] = [
                (rec.offset_key(g.group_id, t, p), None) for t, p in expired
            ]
            if dead:
                tombstones.append((rec.group_key(g.group_id), None))
            seen = {tp: g.offsets[tp] for tp in expired}
            try:
                await self._append(g.group_id, tombstones)
            except Exception:
                log.exception("group %s: cannot write offset tombstones", g.group_id)
                continue
            # While the tombstones waited for the ISR, requests ran: an offset committed again (its
            # record follows the tombstone in the log) stays, and so does a group that came back to
            # life or went away (partition unloaded, group deleted).
            for tp, value in seen.items():
                if g.offsets.get(tp) is value:
                    del g.offsets[tp]
            removed += len(expired)
            still_empty = g.state == EMPTY and not (g.offsets or g.members or g.pending)
            if dead and still_empty and self.groups.get(g.group_id) is g:
                self._set_state(g, DEAD)
                del self.groups[g.group_id]
            log.info("group %s: expired %d committed offsets%s", g.group_id, len(expired), ", removed" * dead)
        return removed

    # -- admin --------------------------------------------------------------------------------
    def list_groups(self, states_filter: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) for every group; state names compared case-insensitively."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [
            (g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if wanted is None or g.state.lower() in wanted
        ]

    def describe_groups(self, group_ids: list[str]) -> list[dict[str, Any]]:
        """One dict per group with DescribeGroups' field names. Like Kafka, the protocol name and the
        members' metadata and assignment are shown only while Stable; an unknown group is "Dead"."""
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if unavailable := self._unavailable(gid):
                err, state = unavailable, DEAD
            else:
                err, state = Err.NONE, g.state if g is not None else DEAD
            stable = g is not None and g.state == STABLE
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(g.protocol_name) if stable else b"",
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

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete (KIP-496): (group error, error per partition). Kafka's rules: a group that does not
        exist is GROUP_ID_NOT_FOUND; a group with members that does not use the consumer protocol is
        NON_EMPTY_GROUP (its subscriptions cannot be known); in a consumer group with members, partitions
        of a topic it subscribes to answer GROUP_SUBSCRIBED_TO_TOPIC and keep their offsets; every other
        partition's offset is deleted by a tombstone in __consumer_offsets (none needed if it had none)."""
        if err := self._unavailable(group_id):
            return err, {}
        if not group_id:
            return Err.INVALID_GROUP_ID, {}
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            return Err.GROUP_ID_NOT_FOUND, {}
        result: dict[tuple[str, int], int] = {}
        eligible: list[tuple[str, int]] = []
        if g.state == EMPTY:
            eligible = list(dict.fromkeys(partitions))
        elif g.protocol_type != CONSUMER_PROTOCOL:
            return Err.NON_EMPTY_GROUP, {}
        else:
            for tp in partitions:
                if g.is_subscribed_to(tp[0]):
                    result[tp] = Err.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        seen = {tp: g.offsets[tp] for tp in eligible if tp in g.offsets}
        if seen:
            tombstones: list[tuple[bytes, bytes | None]] = [(rec.offset_key(group_id, t, p), None) for t, p in seen]
            try:
                await self._append(group_id, tombstones)
            except Exception:
                log.exception("group %s: cannot write offset tombstones", group_id)
                return Err.COORDINATOR_NOT_AVAILABLE, {}
            if err := self._unavailable(group_id):  # the partition moved to another broker meanwhile
                return err, {}
            # An offset committed again while the tombstones waited for the ISR follows them in the log,
            # so it stays.
            for tp, value in seen.items():
                if g.offsets.get(tp) is value:
                    del g.offsets[tp]
            log.info("group %s: deleted the committed offsets of %d partitions", group_id, len(seen))
        return Err.NONE, result | {tp: Err.NONE for tp in eligible}

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]:
        """Kafka's rule: only a group with no members can be deleted; its offsets go with it."""
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if unavailable := self._unavailable(gid):
                out.append((gid, unavailable))
            elif not gid:
                out.append((gid, Err.INVALID_GROUP_ID))
            elif g is None or g.state == DEAD:
                out.append((gid, Err.GROUP_ID_NOT_FOUND))
            elif g.state != EMPTY or g.members:
                out.append((gid, Err.NON_EMPTY_GROUP))
            else:
                tombstones: list[tuple[bytes, bytes | None]] = [(rec.offset_key(gid, t, p), None) for t, p in g.offsets]
                tombstones.append((rec.group_key(gid), None))
                # Dead before the wait for the ISR, as in Kafka: a JoinGroup or commit arriving meanwhile
                # starts a new group, whose records follow the tombstones in the log.
                self._set_state(g, DEAD)
                self.groups.pop(gid, None)
                try:
                    await self._append(gid, tombstones)
                except Exception:
                    log.exception("group %s: cannot write deletion tombstones", gid)
                    if gid not in self.groups and not self._unavailable(gid):
                        self._set_state(g, EMPTY)
                        self.groups[gid] = g
                    out.append((gid, Err.COORDINATOR_NOT_AVAILABLE))
                    continue
                log.info("group %s deleted with %d committed offsets", gid, len(g.offsets))
                out.append((gid, Err.NONE))
        return out
