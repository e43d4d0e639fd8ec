"""The driver of KIP-848 consumer groups (``group.protocol=consumer``): one ``ConsumerGroupCoordinator`` (the
sans-IO core, epochlog.groups.consumer) per group this broker coordinates.

What the driver adds to the core: the clock (the coordinator's ``clock``, as the classic groups' timers), the
writes (every record an event returns is durable in ``__consumer_offsets`` before the heartbeat is
answered), the timers (``WakeAt`` arms a ``tick``; the background tick every 100 ms checks too), the
cluster's topics (``consumer_topics_changed``, called by the broker when the metadata changes), and the
group's type against the classic groups of the same id.

Writes of one group go out in the order the core made them: an event's records join the group's queue at
once (synchronously, in the order of events), and one task per group writes the queue as one batch. A
write that fails leaves the core ahead of the log: the group is rebuilt from the log (``replay``), the
records queued behind it are dropped, and the members waiting on them hear COORDINATOR_NOT_AVAILABLE; their
next heartbeat finds the group as the log has it.

A group id belongs to one protocol: a consumer-protocol heartbeat for a classic group with members answers
GROUP_ID_NOT_FOUND ("not a consumer group"), as Kafka does; an Empty classic group becomes a consumer group
(its GroupMetadata is deleted by a tombstone, its committed offsets stay), as Kafka does. Committed offsets
of a consumer group are kept where the classic groups keep them (an offsets-only classic ``Group`` under the
same id), so OffsetFetch, OffsetDelete and retention work unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from epochlog.groups.consumer.coordinator import ConsumerGroupCoordinator, validate_offset_commit
from epochlog.groups.consumer.messages import Effect, GroupDescription, HeartbeatRequest, HeartbeatResponse, Note
from epochlog.groups.consumer.messages import WakeAt as ConsumerWakeAt
from epochlog.groups.consumer.records import RECORD_TYPES, Record
from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import iter_records
from epochlog.server.groups import consumer_records as crec
from epochlog.server.groups import records as rec
from epochlog.server.groups.model import DEAD, EMPTY, Group
from epochlog.server.groups.state import CoordinatorState

log = logging.getLogger("epochlog.groups")

_KeyValue = tuple[bytes, bytes | None]


@dataclass
class _Queue:
    """One group's records waiting to be written, and who waits on them."""

    records: list[_KeyValue] = field(default_factory=list)
    waiters: list[asyncio.Future[bool]] = field(default_factory=list)
    running: bool = False


class ConsumerGroups(CoordinatorState):
    def consumer_group(self, group_id: str) -> ConsumerGroupCoordinator | None:
        return self.consumer_groups.get(group_id)

    def _is_classic(self, group_id: str) -> bool:
        """A classic group in use: members, or a rebalance under way."""
        g = self.groups.get(group_id)
        return g is not None and (bool(g.members) or bool(g.pending) or g.state not in (EMPTY, DEAD))

    def _new_core(self, group_id: str) -> ConsumerGroupCoordinator:
        return ConsumerGroupCoordinator(group_id, self.consumer_config, self.topic_counts())

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------
    async def consumer_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        gid = req.group_id
        if err := self._unavailable(gid):
            return HeartbeatResponse(err, None, req.member_id)
        if not gid:
            return HeartbeatResponse(Err.INVALID_REQUEST, "GroupId can't be empty.", req.member_id)
        core = self.consumer_groups.get(gid)
        before: list[_KeyValue] = []
        created = core is None
        if core is None:
            if self._is_classic(gid):
                return HeartbeatResponse(Err.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.", req.member_id)
            if req.member_epoch != 0:
                return HeartbeatResponse(Err.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.", req.member_id)
            core = self._new_core(gid)
        resp, effects = core.heartbeat(self._mono_ms(), req)
        records = self._records(effects)
        if created:
            if not records:
                return resp  # refused before anything happened: no group comes of it
            before = self._take_over_classic(gid)
            self.consumer_groups[gid] = core
        self._carry_out(effects)
        if records or before or (resp.assignment is not None and gid in self._consumer_queues):
            # An answer that wrote nothing may still tell an assignment that records queued before it
            # decided: it goes out once they are written, and not at all if they fail. (One without an
            # assignment does not wait: at worst it tells an epoch a failed write takes back, and the
            # member is fenced, which hands nothing over.)
            ok = await self._write(gid, before + records)
            if err := self._unavailable(gid):  # the partition moved to another broker meanwhile
                return HeartbeatResponse(err, None, req.member_id)
            if not ok:
                return HeartbeatResponse(Err.COORDINATOR_NOT_AVAILABLE, "the group's records were not written")
        return resp

    def _take_over_classic(self, gid: str) -> list[_KeyValue]:
        """An Empty classic group becomes a consumer group: its GroupMetadata goes, its offsets stay."""
        g = self.groups.get(gid)
        if g is None or g.protocol_type is None:
            return []
        log.info("group %s: the empty classic group becomes a consumer group", gid)
        self.groups[gid] = Group(gid, offsets=g.offsets, offset_write_seq=g.offset_write_seq)
        return [(rec.group_key(gid), None)]

    # -- effects, writes, timers --------------------------------------------------------------
    def _records(self, effects: Iterable[Effect]) -> list[_KeyValue]:
        out: list[_KeyValue] = []
        topic_ids: Mapping[str, uuid.UUID] | None = None
        for e in effects:
            if isinstance(e, RECORD_TYPES):
                if topic_ids is None:
                    topic_ids = self.topic_ids()
                kv = crec.encode(e, topic_ids)  # type: ignore[arg-type]  # RECORD_TYPES are the Record union's members
                if kv is not None:
                    out.append(kv)
        return out

    def _carry_out(self, effects: Iterable[Effect]) -> None:
        """Log the notes, arm the timers; the records are the caller's to write (``_write``)."""
        for e in effects:
            if isinstance(e, Note):
                log.info("consumer group %s: %s", e.group_id, e.text)
            elif isinstance(e, ConsumerWakeAt):
                self._arm_consumer_wake(e.at_ms)

    def _arm_consumer_wake(self, at_ms: int) -> None:
        now = self._mono_ms()
        armed = self._consumer_wake_ms
        if armed is not None and now <= armed <= at_ms:
            return  # a tick comes sooner anyway; it re-arms for what is due after it
        self._consumer_wake_ms = at_ms
        self._arm_timer((at_ms - now) / 1000)

    def _write(self, gid: str, records: list[_KeyValue]) -> asyncio.Future[bool]:
        """Queue ``records`` behind the group's earlier ones; the future says whether they were written (with
        no records: whether the earlier ones were)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if not records and gid not in self._consumer_queues:
            fut.set_result(True)
            return fut
        q = self._consumer_queues.setdefault(gid, _Queue())
        q.records += records
        q.waiters.append(fut)
        if not q.running:
            q.running = True
            self._spawn(self._flush(gid, q))
        return fut

    async def _flush(self, gid: str, q: _Queue) -> None:
        try:
            while q.records or q.waiters:
                records, waiters = q.records, q.waiters
                q.records, q.waiters = [], []
                try:
                    if records:
                        await self._append(gid, records)
                    ok = True
                except Exception as e:
                    log.warning("consumer group %s: cannot write %d records: %s", gid, len(records), e)
                    ok = False
                    # Whatever was queued behind was decided on the state that was not written.
                    waiters += q.waiters
                    q.records, q.waiters = [], []
                    self._reload_consumer_group(gid)
                for w in waiters:
                    if not w.done():
                        w.set_result(ok)
        finally:
            q.running = False
            if self._consumer_queues.get(gid) is q and not q.records and not q.waiters:
                del self._consumer_queues[gid]

    def tick(self, now: float | None = None) -> None:
        super().tick(now)
        now_ms = self._mono_ms() if now is None else round(now * 1000)
        if self._consumer_wake_ms is not None and self._consumer_wake_ms <= now_ms:
            self._consumer_wake_ms = None
        for gid, core in list(self.consumer_groups.items()):
            due = core.next_deadline()
            if due is None or due > now_ms:
                continue
            effects = core.tick(now_ms)
            self._carry_out(effects)
            records = self._records(effects)
            if records:
                self._write(gid, records)

    def consumer_topics_changed(self) -> None:
        """The cluster's topics changed: each group whose subscribed topics look different moves to a new epoch."""
        if not self.consumer_groups:
            return
        topics = dict(self.topic_counts())
        for gid, core in list(self.consumer_groups.items()):
            if core.topics == topics:
                continue
            effects = core.topics_changed(self._mono_ms(), topics)
            self._carry_out(effects)
            records = self._records(effects)
            if records:
                self._write(gid, records)

    # -- offsets ------------------------------------------------------------------------------
    def validate_consumer_commit(self, group_id: str, member_id: str, member_epoch: int) -> int | None:
        """OffsetCommit to a consumer group, by Kafka's rule (the core's); None when not a consumer group."""
        core = self.consumer_groups.get(group_id)
        return None if core is None else validate_offset_commit(core.group, member_id, member_epoch)

    def validate_consumer_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ from a member of a consumer group: Kafka's rule (an admin asks with no member id
        and epoch -1; a member must be known and at its current epoch)."""
        core = self.consumer_groups.get(group_id)
        if core is None or (not member_id and member_epoch < 0):
            return Err.NONE
        m = core.group.members.get(member_id or "")
        if m is None:
            return Err.UNKNOWN_MEMBER_ID
        return Err.NONE if m.member_epoch == member_epoch else Err.STALE_MEMBER_EPOCH

    def consumer_group_active(self, group_id: str) -> bool:
        core = self.consumer_groups.get(group_id)
        return core is not None and bool(core.group.members)

    # -- admin --------------------------------------------------------------------------------
    def consumer_describe(self, group_id: str) -> tuple[int, str | None, GroupDescription | None]:
        if err := self._unavailable(group_id):
            return err, None, None
        core = self.consumer_groups.get(group_id)
        if core is None:
            if group_id in self.groups:
                return Err.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
            return Err.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return Err.NONE, None, core.describe()

    def list_consumer_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every consumer group."""
        return [(gid, core.group.state) for gid, core in self.consumer_groups.items()]

    async def delete_consumer_group(self, gid: str) -> int:
        """DeleteGroups of a consumer group: only an empty one; its records and offsets go by tombstones."""
        core = self.consumer_groups[gid]
        if core.group.members:
            return Err.NON_EMPTY_GROUP
        shell = self.groups.get(gid)
        offsets = list(shell.offsets) if shell is not None else []
        tombstones: list[_KeyValue] = [(rec.offset_key(gid, t, p), None) for t, p in offsets]
        tombstones += crec.group_tombstones(gid)
        del self.consumer_groups[gid]
        self.groups.pop(gid, None)
        if not await self._write(gid, tombstones):
            return Err.COORDINATOR_NOT_AVAILABLE
        log.info("consumer group %s deleted with %d committed offsets", gid, len(offsets))
        return Err.NONE

    # -- loading ------------------------------------------------------------------------------
    def _topic_names(self) -> dict[uuid.UUID, str]:
        """Topic names by id, for reading the KIP-848 records (which name topics by id)."""
        return {tid: name for name, tid in self.topic_ids().items()}

    def _replay_consumer_record(
        self, key: bytes, value: bytes | None, into: dict[str, list[Record]], topic_names: Mapping[uuid.UUID, str]
    ) -> None:
        r = crec.decode(key, value, topic_names)
        if isinstance(r, crec.GroupDeleted):
            into.pop(r.group_id, None)
        elif r is not None:
            into.setdefault(r.group_id, []).append(r)

    def _build_consumer_groups(self, loaded: dict[str, list[Record]]) -> None:
        now = self._mono_ms()
        for gid, records in loaded.items():
            core = ConsumerGroupCoordinator.from_records(gid, records, now, self.consumer_config, self.topic_counts())
            self.consumer_groups[gid] = core
            deadline = core.next_deadline()
            if deadline is not None:
                self._arm_consumer_wake(deadline)

    def _drop_consumer_groups(self, p: int) -> None:
        for gid in [g for g in self.consumer_groups if self.partition_for(g) == p]:
            del self.consumer_groups[gid]

    def _partition_records(self, p: int) -> Iterator[_KeyValue]:
        """(key, value) of every plain record of __consumer_offsets-p (offsets in transactions are not ours)."""
        for batch in self.store.read_batches(p):
            h = read_header(batch)
            if h.is_control or h.is_transactional:
                continue
            for r in iter_records(batch):
                if r.key is not None:
                    yield r.key, r.value

    def _reload_consumer_group(self, gid: str) -> None:
        """Rebuild the group from the log after a write that failed (if the partition is still ours)."""
        p = self.partition_for(gid)
        previous = self.consumer_groups.pop(gid, None)
        if p not in self.owned:
            return
        loaded: dict[str, list[Record]] = {}
        topic_names = self._topic_names()
        try:
            for key, value in self._partition_records(p):
                if crec.is_consumer_key(key):
                    self._replay_consumer_record(key, value, loaded, topic_names)
        except Exception:
            log.exception("consumer group %s: cannot reread __consumer_offsets-%d", gid, p)
            return
        if gid in loaded:
            self._build_consumer_groups({gid: loaded[gid]})
            rebuilt = self.consumer_groups.get(gid)
            if rebuilt is not None and previous is not None:
                # The members are connected as before and will not all send a full request.
                rebuilt.keep_confirmations(previous)
