"""The classic consumer-group coordinator: join/sync barriers, heartbeats, offsets.

Runs on the broker's event loop. Join and sync wait on asyncio futures; the decisions are
plain methods over the Group objects, with an injectable clock for tests. Committed offsets
and group metadata are records in ``__consumer_offsets`` (see records.py), replayed at start.

States and errors follow Kafka's GroupCoordinator: Empty -> PreparingRebalance ->
CompletingRebalance -> Stable; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED for JoinGroup v4+.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from epochlog.protocol.errors import Err
from epochlog.protocol.records import Record, build_batch, iter_records
from epochlog.server.groups import records as rec

log = logging.getLogger("epochlog.groups")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
OFFSET_METADATA_MAX_BYTES = 4096


class OffsetsStore(Protocol):
    num_partitions: int

    async def append(self, partition: int, batch: bytes) -> None: ...

    def read_batches(self, partition: int) -> Iterable[bytes]: ...


@dataclass
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: int = 0


@dataclass
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = 0.0
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None

    def metadata_for(self, protocol: str | None) -> bytes:
        return next((m for n, m in self.protocols if n == protocol), b"")


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], rec.OffsetValue] = field(default_factory=dict)
    rebalance_deadline: float = 0.0
    initial_delay: bool = False


def java_string_hash(s: str) -> int:
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


class GroupCoordinator:
    def __init__(self, store: OffsetsStore, config: GroupConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self._background: set[asyncio.Future[None]] = set()
        self.store = store
        self.config = config
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        for p in range(self.store.num_partitions):
            for batch in self.store.read_batches(p):
                for r in iter_records(batch):
                    self._replay(r)
        n_offsets = sum(len(g.offsets) for g in self.groups.values())
        log.info("group coordinator loaded %d groups and %d committed offsets", len(self.groups), n_offsets)
        self._task = asyncio.create_task(self._expiry_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for g in self.groups.values():
            for m in g.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.cancel()

    def _replay(self, r: Record) -> None:
        if r.key is None:
            return
        key = rec.decode_key(r.key)
        if isinstance(key, rec.OffsetKey):
            g = self.groups.get(key.group)
            if r.value is None:
                if g is not None:
                    g.offsets.pop((key.topic, key.partition), None)
                return
            if g is None:
                g = self.groups[key.group] = Group(key.group)
            g.offsets[(key.topic, key.partition)] = rec.decode_offset_value(r.value)
        elif isinstance(key, rec.GroupKey):
            if r.value is None:
                g = self.groups.get(key.group)
                if g is not None and not g.offsets:
                    del self.groups[key.group]
                return
            v = rec.decode_group_value(r.value)
            g = self.groups.setdefault(key.group, Group(key.group))
            # Members are not restored: after a restart they get UNKNOWN_MEMBER_ID and rejoin.
            g.generation, g.protocol_type, g.protocol_name = v.generation, v.protocol_type or None, v.protocol

    def _spawn(self, coro: Any) -> None:
        fut = asyncio.ensure_future(coro)
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def partition_for(self, group_id: str) -> int:
        return abs(java_string_hash(group_id)) % self.config.offsets_topic_num_partitions

    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        await self.store.append(self.partition_for(group_id), build_batch(records))

    async def _persist_group(self, g: Group) -> None:
        value = rec.GroupValue(
            g.protocol_type or "",
            g.generation,
            g.protocol_name,
            g.leader,
            int(time.time() * 1000),
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
        try:
            await self._append(g.group_id, [(rec.group_key(g.group_id), rec.group_value(value))])
        except Exception:
            log.exception("group %s: cannot persist group metadata", g.group_id)

    # -- join / sync -------------------------------------------------------------------------
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
        if not group_id:
            return JoinResult(Err.INVALID_GROUP_ID, member_id=member_id)
        if not (
            self.config.group_min_session_timeout_ms <= session_timeout_ms <= self.config.group_max_session_timeout_ms
        ):
            return JoinResult(Err.INVALID_SESSION_TIMEOUT, member_id=member_id)
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                return JoinResult(Err.UNKNOWN_MEMBER_ID, member_id=member_id)
            g = self.groups[group_id] = Group(group_id)
        if g.state == DEAD:
            return JoinResult(Err.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if g.members and (protocol_type != g.protocol_type or not self._common_protocols(g, protocols)):
            return JoinResult(Err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not protocols:
            return JoinResult(Err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id:
            if group_instance_id is not None:
                old = next((m for m in g.members.values() if m.group_instance_id == group_instance_id), None)
                if old is not None:
                    self._remove_member(g, old, Err.UNKNOWN_MEMBER_ID, rebalance=False)
            new_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id and group_instance_id is None:
                g.pending.add(new_id)
                return JoinResult(Err.MEMBER_ID_REQUIRED, member_id=new_id)
            member_id = new_id
        elif member_id in g.pending:
            g.pending.discard(member_id)
        elif member_id not in g.members:
            return JoinResult(Err.UNKNOWN_MEMBER_ID, member_id=member_id)

        m = g.members.get(member_id)
        now = self.clock()
        if m is None:
            m = Member(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                list(protocols),
                last_heartbeat=now,
            )
            g.members[member_id] = m
            if g.protocol_type is None or len(g.members) == 1:
                g.protocol_type = protocol_type
        else:
            m.protocols = list(protocols)
            m.session_timeout_ms, m.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
            m.last_heartbeat = now
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinResult(Err.REBALANCE_IN_PROGRESS, member_id=member_id))
        m.join_future = asyncio.get_running_loop().create_future()
        fut = m.join_future
        if g.state != PREPARING:
            self._prepare_rebalance(g, f"member {member_id} joined")
        self._maybe_complete_join(g)
        return await fut

    def _common_protocols(self, g: Group, protocols: list[tuple[str, bytes]]) -> bool:
        names = {n for n, _ in protocols}
        return all(names & {n for n, _ in m.protocols} for m in g.members.values())

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        was_empty = g.state == EMPTY
        if g.state == COMPLETING:
            for m in g.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncResult(Err.REBALANCE_IN_PROGRESS))
        g.state = PREPARING
        now = self.clock()
        if was_empty and self.config.group_initial_rebalance_delay_ms > 0:
            g.initial_delay = True
            g.rebalance_deadline = now + self.config.group_initial_rebalance_delay_ms / 1000
        else:
            g.initial_delay = False
            timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
            g.rebalance_deadline = now + timeout / 1000
        log.info("group %s preparing rebalance at generation %d: %s", g.group_id, g.generation, reason)
        asyncio.get_running_loop().call_later(
            max(g.rebalance_deadline - now, 0) + 0.01, self._on_rebalance_deadline, g.group_id, g.rebalance_deadline
        )

    def _on_rebalance_deadline(self, group_id: str, deadline: float) -> None:
        g = self.groups.get(group_id)
        if g is None or g.state != PREPARING or g.rebalance_deadline != deadline:
            return
        for m in list(g.members.values()):
            if m.join_future is None or m.join_future.done():
                self._remove_member(g, m, Err.UNKNOWN_MEMBER_ID, rebalance=False)
        self._complete_join(g)

    def _maybe_complete_join(self, g: Group) -> None:
        if g.state != PREPARING or g.initial_delay:
            return
        if g.pending:
            return
        if all(m.join_future is not None and not m.join_future.done() for m in g.members.values()):
            self._complete_join(g)

    def _select_protocol(self, g: Group) -> str | None:
        members = list(g.members.values())
        candidates = set.intersection(*({n for n, _ in m.protocols} for m in members))
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in members:
            choice = next(n for n, _ in m.protocols if n in candidates)  # each member's most preferred
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda n: votes[n])

    def _complete_join(self, g: Group) -> None:
        g.generation += 1
        g.initial_delay = False
        if not g.members:
            g.state, g.leader, g.protocol_name = EMPTY, None, None
            self._spawn(self._persist_group(g))
            return
        g.protocol_name = self._select_protocol(g)
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING
        now = self.clock()
        all_members = [(m.member_id, m.group_instance_id, m.metadata_for(g.protocol_name)) for m in g.members.values()]
        log.info(
            "group %s generation %d: %d members, protocol %s, leader %s",
            g.group_id,
            g.generation,
            len(g.members),
            g.protocol_name,
            g.leader,
        )
        for m in g.members.values():
            m.last_heartbeat = now
            m.assignment = b""
            res = JoinResult(
                Err.NONE,
                g.generation,
                g.protocol_type,
                g.protocol_name,
                g.leader or "",
                m.member_id,
                all_members if m.member_id == g.leader else [],
            )
            if m.join_future is not None and not m.join_future.done():
                m.join_future.set_result(res)
            m.join_future = None

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
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return SyncResult(Err.UNKNOWN_MEMBER_ID)
        if generation_id != g.generation:
            return SyncResult(Err.ILLEGAL_GENERATION)
        if (protocol_type and protocol_type != g.protocol_type) or (protocol_name and protocol_name != g.protocol_name):
            return SyncResult(Err.INCONSISTENT_GROUP_PROTOCOL)
        m = g.members[member_id]
        m.last_heartbeat = self.clock()
        if g.state == PREPARING:
            return SyncResult(Err.REBALANCE_IN_PROGRESS)
        if g.state == STABLE:
            return SyncResult(Err.NONE, g.protocol_type, g.protocol_name, m.assignment)
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        if member_id == g.leader:
            for mid, member in g.members.items():
                member.assignment = assignments.get(mid, b"")
            g.state = STABLE
            await self._persist_group(g)
            if g.state == STABLE:
                for member in g.members.values():
                    if member.sync_future is not None and not member.sync_future.done():
                        member.sync_future.set_result(
                            SyncResult(Err.NONE, g.protocol_type, g.protocol_name, member.assignment)
                        )
                    member.sync_future = None
        return await fut

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return Err.UNKNOWN_MEMBER_ID
        m = g.members[member_id]
        m.last_heartbeat = self.clock()
        if generation_id != g.generation:
            return Err.ILLEGAL_GENERATION
        if g.state == PREPARING:
            return Err.REBALANCE_IN_PROGRESS
        return Err.NONE

    async def leave_group(self, group_id: str, members: list[tuple[str | None, str | None]]) -> tuple[int, list[int]]:
        g = self.groups.get(group_id)
        if g is None:
            return Err.NONE, [Err.UNKNOWN_MEMBER_ID] * len(members)
        codes = []
        for member_id, instance_id in members:
            m = g.members.get(member_id or "")
            if m is None and instance_id is not None:
                m = next((x for x in g.members.values() if x.group_instance_id == instance_id), None)
            if m is None:
                codes.append(Err.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s leaves", group_id, m.member_id)
            self._remove_member(g, m, Err.UNKNOWN_MEMBER_ID)
            codes.append(Err.NONE)
        return Err.NONE, codes

    def _remove_member(self, g: Group, m: Member, code: int, rebalance: bool = True) -> None:
        g.members.pop(m.member_id, None)
        for fut, res in ((m.join_future, JoinResult(code, member_id=m.member_id)), (m.sync_future, SyncResult(code))):
            if fut is not None and not fut.done():
                fut.set_result(res)  # type: ignore[arg-type]
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)
        if not rebalance:
            return
        if g.members:
            if g.state == PREPARING:
                self._maybe_complete_join(g)
            else:
                self._prepare_rebalance(g, f"member {m.member_id} left")
        elif g.state != PREPARING:
            g.generation += 1
            g.state, g.protocol_name, g.leader = EMPTY, None, None
            self._spawn(self._persist_group(g))
        else:
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
        def all_(code: int) -> dict[tuple[str, int], int]:
            return {(o.topic, o.partition): code for o in offsets}

        if not group_id:
            return all_(Err.INVALID_GROUP_ID)
        g = self.groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return all_(Err.ILLEGAL_GENERATION)
            g = self.groups[group_id] = Group(group_id)
        if g.members or generation_id >= 0:
            if member_id not in g.members:
                return all_(Err.UNKNOWN_MEMBER_ID)
            if generation_id != g.generation:
                return all_(Err.ILLEGAL_GENERATION)
            if g.state == PREPARING:
                return all_(Err.REBALANCE_IN_PROGRESS)
            g.members[member_id].last_heartbeat = self.clock()
        result: dict[tuple[str, int], int] = {}
        now_ms = int(time.time() * 1000)
        batch: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[tuple[str, int], rec.OffsetValue]] = []
        for o in offsets:
            meta = o.metadata or ""
            if len(meta.encode()) > OFFSET_METADATA_MAX_BYTES:
                result[(o.topic, o.partition)] = 12  # OFFSET_METADATA_TOO_LARGE
                continue
            v = rec.OffsetValue(o.offset, o.leader_epoch, meta, now_ms)
            batch.append((rec.offset_key(group_id, o.topic, o.partition), rec.offset_value(v)))
            accepted.append(((o.topic, o.partition), v))
        if batch:
            try:
                await self._append(group_id, batch)
            except Exception:
                log.exception("group %s: cannot write committed offsets", group_id)
                for k, _ in accepted:
                    result[k] = Err.COORDINATOR_NOT_AVAILABLE
                return result
        for k, v in accepted:
            g.offsets[k] = v
            result[k] = Err.NONE
        return result

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[int, list[CommittedOffset]]:
        g = self.groups.get(group_id)
        offsets = g.offsets if g else {}
        if partitions is None:
            return Err.NONE, [
                CommittedOffset(t, p, v.offset, v.leader_epoch, v.metadata) for (t, p), v in sorted(offsets.items())
            ]
        out = []
        for t, p in partitions:
            v = offsets.get((t, p))
            out.append(
                CommittedOffset(t, p, v.offset, v.leader_epoch, v.metadata) if v else CommittedOffset(t, p, -1, -1, "")
            )
        return Err.NONE, out

    # -- listing ------------------------------------------------------------------------------
    def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str, str]]:
        wanted = {s.lower() for s in states} if states else None
        return [
            (g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if wanted is None or g.state.lower() in wanted
        ]

    def describe_groups(self, group_ids: list[str]) -> list[dict[str, Any]]:
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if g is None:
                out.append(
                    {
                        "error_code": Err.NONE,
                        "group_id": gid,
                        "group_state": DEAD,
                        "protocol_type": "",
                        "protocol_data": "",
                        "members": [],
                        "authorized_operations": -2147483648,
                    }
                )
                continue
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(g.protocol_name),
                    "member_assignment": m.assignment,
                }
                for m in g.members.values()
            ]
            out.append(
                {
                    "error_code": Err.NONE,
                    "group_id": gid,
                    "group_state": g.state,
                    "protocol_type": g.protocol_type or "",
                    "protocol_data": g.protocol_name or "",
                    "members": members,
                    "authorized_operations": -2147483648,
                }
            )
        return out

    async def delete_groups(self, group_ids: list[str]) -> list[tuple[str, int]]:
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if g is None:
                out.append((gid, Err.GROUP_ID_NOT_FOUND))
            elif g.members:
                out.append((gid, Err.NON_EMPTY_GROUP))
            else:
                tombstones = [(rec.offset_key(gid, t, p), None) for t, p in g.offsets]
                tombstones.append((rec.group_key(gid), None))
                await self._append(gid, tombstones)
                del self.groups[gid]
                out.append((gid, Err.NONE))
        return out

    # -- expiry -------------------------------------------------------------------------------
    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            try:
                self.expire(self.clock())
                await self._expire_offsets(int(time.time() * 1000))
            except Exception:
                log.exception("group expiry failed")

    def expire(self, now: float) -> None:
        for g in list(self.groups.values()):
            for m in list(g.members.values()):
                waiting_join = m.join_future is not None and not m.join_future.done()
                if not waiting_join and now - m.last_heartbeat > m.session_timeout_ms / 1000:
                    log.info("group %s: member %s session expired", g.group_id, m.member_id)
                    self._remove_member(g, m, Err.UNKNOWN_MEMBER_ID)

    async def _expire_offsets(self, now_ms: int) -> None:
        for g in list(self.groups.values()):
            if g.state != EMPTY or not g.offsets:
                continue
            old = [k for k, v in g.offsets.items() if now_ms - v.commit_timestamp > self.config.offsets_retention_ms]
            if old:
                await self._append(g.group_id, [(rec.offset_key(g.group_id, t, p), None) for t, p in old])
                for k in old:
                    g.offsets.pop(k, None)
