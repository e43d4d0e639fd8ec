"""Share-partitions at their leader (KIP-932): the driver of the sans-IO ``SharePartition`` core, one per
(share group, topic-partition) this broker leads, as Kafka's SharePartitionManager keeps them.

- A core is made on first use at the partition's current leader epoch (so also after a leader failover
  moved the partition here): the share coordinator's state is read (ReadShareGroupState, which fences older
  leaders) and the core rebuilt from it, or started at the group's ``share.auto.offset.reset`` (group config;
  default ``latest``: the high watermark), with the group's ``share.record.lock.duration.ms``; a group config
  changed later binds the cores made after it. A leader epoch that moved, or a partition no longer led here,
  drops the core.
- ``acquire`` reads the log from the core's next fetch offset up to the high watermark, or the last stable
  offset when the group's ``share.isolation.level`` is read_committed (reads.py), gives the core the data
  batches' offset ranges (control batches are left out: the core treats their offsets as ones the log does not
  have) and, under read_committed, the aborted transactions' ranges to archive, and returns the batches that
  hold acquired records.
- Every ``StateWrite`` the core returns is issued to the share coordinator through the persister
  (persister.py: in process or to the broker leading the state partition) at once, in the order made, and
  awaited before the request is answered; one that fails drops the core, so the next request rebuilds it
  from what is durable and the answer carries the error.
- ``WakeAt`` arms a timer that ``tick``s the core (acquisition locks running out); ``RecordsAvailable`` and
  appends to the partition wake ShareFetches waiting for records (``wait``).
- ``member_left`` (the group coordinator removed a member) releases what the member holds here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.clock import now_ms
from epochlog.config_defs import SHARE_AUTO_OFFSET_RESET, SHARE_RECORD_LOCK_DURATION, share_auto_offset_reset
from epochlog.groups.share.messages import AckBatch, Acquired, PartitionEffect, RecordsAvailable, StateWrite, WakeAt
from epochlog.groups.share.model import AUTO_OFFSET_RESETS, SharePartitionConfig
from epochlog.groups.share.partition import SharePartition
from epochlog.groups.share.records import SharePartitionKey
from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import BatchHeader, iter_batches
from epochlog.server.share.persister import SharePersister
from epochlog.server.share.reads import isolation_level, read_bound, split_read
from epochlog.server.share.sessions import ShareSessions
from epochlog.server.share.state_log import ShareStateLog
from epochlog.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition
    from epochlog.server.share.config import ShareConfig

log = logging.getLogger("epochlog.share")

CoreKey = tuple[str, str, int]  # group id, topic, partition


def _overlaps(h: BatchHeader, acquired: list[Acquired]) -> bool:
    return any(a.first_offset <= h.last_offset and h.base_offset <= a.last_offset for a in acquired)


def mono_ms() -> int:
    return round(time.monotonic() * 1000)


@dataclass
class _Entry:
    core: SharePartition
    leader_epoch: int
    state_key: SharePartitionKey  # (group, topic id, partition): the share coordinator's key
    timer: asyncio.TimerHandle | None = None
    timer_at: int = 0


@dataclass(frozen=True)
class Fetched:
    acquired: list[Acquired]
    records: bytes


class SharePartitions:
    def __init__(self, broker: Broker, config: ShareConfig) -> None:
        self.broker = broker
        self.config = config
        self.state = ShareStateLog(broker, config)  # the share coordinator, for the state partitions led here
        self.persister = SharePersister(broker, self.state)  # this leader's way to any share coordinator
        self.sessions = ShareSessions(config.max_share_sessions)
        self.entries: dict[CoreKey, _Entry] = {}
        self._locks: dict[CoreKey, asyncio.Lock] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._background: set[asyncio.Future[int]] = set()

    # -- the cores ----------------------------------------------------------------------------
    def _leader(self, topic: str, p: int) -> tuple[int, Partition | None]:
        part = self.broker.partition(topic, p)
        if part is None:
            exists = (topic, p) in self.broker.image.states
            return (Err.NOT_LEADER_OR_FOLLOWER if exists else Err.UNKNOWN_TOPIC_OR_PARTITION), None
        if part.offline:
            return Err.KAFKA_STORAGE_ERROR, None
        if not part.is_leader:
            return Err.NOT_LEADER_OR_FOLLOWER, None
        return Err.NONE, part

    async def entry(self, group: str, topic: str, p: int) -> tuple[int, _Entry | None, Partition | None]:
        key = (group, topic, p)
        code, part = self._leader(topic, p)
        if part is None:
            self._drop(key)
            return code, None, None
        e = self.entries.get(key)
        if e is not None and e.leader_epoch == part.leader_epoch:
            return Err.NONE, e, part
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            e = self.entries.get(key)
            if e is not None and e.leader_epoch == part.leader_epoch:
                return Err.NONE, e, part
            self._drop(key)
            skey = (group, str(part.topic_id), p)
            code, state = await self.persister.read(skey, part.leader_epoch)
            if code:
                return code, None, None
            pcfg, start_from = self._group_settings(group, part)
            core, effects = SharePartition.create(pcfg, start_from, part.high_watermark, state, part.leader_epoch)
            e = _Entry(core, part.leader_epoch, skey)
            self.entries[key] = e
            log.info("share group %s: %s-%d at epoch %d starts at offset %d", group, topic, p,
                     part.leader_epoch, core.start_offset)  # fmt: skip
            code = await self._carry_out(key, e, effects)
            if code:
                return code, None, None
            return Err.NONE, e, part

    def _group_settings(self, group: str, part: Partition) -> tuple[SharePartitionConfig, int]:
        """The core's settings with the group's own configs (share.record.lock.duration.ms and
        share.auto.offset.reset, as the metadata log has them now), and the offset "earliest" starts at:
        by_duration is the first record at most that old (none: the high watermark, as "latest")."""
        own = self.broker.image.cluster.group_configs.get(group, {})
        pcfg = self.config.partition_config()
        lock_ms = own.get(SHARE_RECORD_LOCK_DURATION)
        if lock_ms is not None and lock_ms.strip().isdigit():
            pcfg = dataclasses.replace(pcfg, record_lock_duration_ms=int(lock_ms))
        reset, back_ms = share_auto_offset_reset(own.get(SHARE_AUTO_OFFSET_RESET, "latest"))
        start_from = part.log.log_start_offset
        if reset == "by_duration":
            found = part.log.offset_for_timestamp(now_ms() - back_ms)
            start_from = part.high_watermark if found is None else min(max(found[0], start_from), part.high_watermark)
            reset = "earliest"
        if reset in AUTO_OFFSET_RESETS:
            pcfg = dataclasses.replace(pcfg, auto_offset_reset=reset)
        return pcfg, start_from

    def forget(self, group: str, topic: str, p: int) -> None:
        """The share coordinator's state was changed from outside (AlterShareGroupOffsets and
        DeleteShareGroupOffsets, on an empty group): the next request rebuilds the core from it."""
        self._drop((group, topic, p))

    async def delete_group(self, group: str) -> int:
        """The share group was deleted: every share-partition state it has becomes one never consumed (the
        next group of that name starts at share.auto.offset.reset), and the cores here go."""
        code, states = await self.persister.group_states(group)
        keys = [(group, tid, p) for (tid, p) in states]
        codes = await asyncio.gather(*(self.persister.reset(k, -1) for k in keys))
        for key in [k for k in self.entries if k[0] == group]:
            self._drop(key)
        if code or any(codes):
            # The group is gone already (its tombstone is written): a share coordinator that could not be
            # reached within the persister's retries is not a reason to fail the deletion.
            log.warning("share group %s: deleted, but not all of its share-partition states could be reset", group)
        return Err.NONE

    def _drop(self, key: CoreKey) -> None:
        e = self.entries.pop(key, None)
        if e is not None and e.timer is not None:
            e.timer.cancel()

    # -- effects ------------------------------------------------------------------------------
    def _issue(self, key: CoreKey, e: _Entry, effects: Iterable[PartitionEffect]) -> list[Awaitable[int]]:
        """Issue the writes (in order, before any other request can change the core), arm the timer, wake
        the waiting fetches; the writes' answers are the caller's to await."""
        writes: list[Awaitable[int]] = []
        for eff in effects:
            if isinstance(eff, StateWrite):
                writes.append(self.persister.write(e.state_key, eff))
            elif isinstance(eff, WakeAt):
                self._arm(key, e, eff.at_ms)
            elif isinstance(eff, RecordsAvailable):
                self.wake()
        return writes

    async def _carry_out(self, key: CoreKey, e: _Entry, effects: Iterable[PartitionEffect]) -> int:
        writes = self._issue(key, e, effects)
        codes = await asyncio.gather(*writes) if writes else []
        failed = next((c for c in codes if c), Err.NONE)
        if failed and self.entries.get(key) is e:
            log.warning("share group %s: %s-%d: state write failed (%s); rebuilding from the coordinator's state",
                        key[0], key[1], key[2], Err(failed).name)  # fmt: skip
            self._drop(key)
        return failed

    def _carry_out_later(self, key: CoreKey, e: _Entry, effects: Iterable[PartitionEffect]) -> None:
        fut = asyncio.ensure_future(self._carry_out(key, e, effects))
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def _arm(self, key: CoreKey, e: _Entry, at_ms: int) -> None:
        if e.timer is not None and e.timer_at <= at_ms and not e.timer.cancelled():
            return
        if e.timer is not None:
            e.timer.cancel()
        e.timer_at = at_ms
        delay = max(at_ms - mono_ms(), 0) / 1000 + 0.001
        e.timer = asyncio.get_running_loop().call_later(delay, self._tick, key, e)

    def _tick(self, key: CoreKey, e: _Entry) -> None:
        e.timer = None
        if self.entries.get(key) is not e:
            return
        self._carry_out_later(key, e, e.core.tick(mono_ms()))

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait(self, parts: Sequence[Partition], timeout_s: float) -> None:
        """Until records may be there: an append to one of ``parts``, released records, or the timeout."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        for part in parts:
            part.waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
        finally:
            for part in parts:
                if fut in part.waiters:
                    part.waiters.remove(fut)
            if fut in self._waiters:
                self._waiters.remove(fut)

    # -- what requests do ---------------------------------------------------------------------
    async def acknowledge(self, group: str, topic: str, p: int, member: str, acks: Sequence[AckBatch]) -> int:
        code, e, _part = await self.entry(group, topic, p)
        if e is None:
            return code
        key = (group, topic, p)
        code, effects = e.core.acknowledge(mono_ms(), member, acks)
        written = await self._carry_out(key, e, effects)
        return code or written

    async def acquire(
        self, group: str, topic: str, p: int, member: str, max_records: int, max_bytes: int
    ) -> tuple[int, Fetched | None]:
        code, e, part = await self.entry(group, topic, p)
        if e is None or part is None:
            return code, None
        key = (group, topic, p)
        core = e.core
        level = isolation_level(self.broker, group)
        start, hw = core.next_fetch_offset(), read_bound(part, level)
        read_from = max(start, part.log.log_start_offset)
        data = b""
        headers: list[tuple[int, BatchHeader]] = []
        if start < hw and not (core.in_flight_limit_reached() and start >= core.end_offset):
            try:
                result = part.log.read(read_from, max(max_bytes, 1), max_offset=hw)
            except KafkaStorageError:
                return Err.KAFKA_STORAGE_ERROR, None
            data = b"".join(bytes(c) for c in result.chunks)
            headers = [(pos, h) for pos, h in iter_batches(data, validate_crc=False) if h.base_offset < hw]
        ranges, aborted = split_read(part, level, read_from, hw, [h for _pos, h in headers])
        fetched_end = headers[-1][1].next_offset if headers else None
        acquired, effects = core.acquire(mono_ms(), member, ranges, max(max_records, 1), fetched_end, aborted)
        written = await self._carry_out(key, e, effects)
        if written:
            return written, None
        records = b"".join(
            data[pos : pos + h.size]
            for pos, h in headers
            if not h.is_control
            and any(a.first_offset <= h.last_offset and a.last_offset >= h.base_offset for a in acquired)
        )
        return Err.NONE, Fetched(acquired, records)

    def release(self, group: str, member: str, keys: Iterable[CoreKey] | None = None) -> None:
        """The member's session closed or the member left: its records here are available again."""
        for key in list(self.entries) if keys is None else list(keys):
            e = self.entries.get(key)
            if e is None or key[0] != group:
                continue
            effects = e.core.member_left(mono_ms(), member)
            if effects:
                self._carry_out_later(key, e, effects)

    def member_left(self, group: str, member: str) -> None:
        """The group coordinator removed the member. Its share session stays until the member closes it or it
        is evicted, as Kafka keeps it: a leaving consumer closes its session after its leave heartbeat."""
        self.release(group, member)

    async def stop(self) -> None:
        for e in self.entries.values():
            if e.timer is not None:
                e.timer.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        self.persister.close()
