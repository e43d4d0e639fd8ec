"""The share coordinator: share-partition state kept in the compacted ``__share_group_state``.

A share-partition's state lives in the partition of ``__share_group_state`` that Kafka's hash picks: Java's
``String.hashCode`` of ``"<group>:<topic id>:<partition>"`` modulo ``share.coordinator.state.topic.num.partitions``.
The broker that leads that partition is its share coordinator. Here the coordinator's shard is the sans-IO
``ShareStateStore`` (epochlog.groups.share.records), rebuilt by reading the state partition from its start
whenever this broker finds itself leading it at a leader epoch it has not loaded; its records are written
durably (acks=all, as Kafka's coordinator runtime) before a write is answered.

This is the coordinator side only: the share-state RPCs (handlers/share_state.py) answer from it, and a
share-partition's leader reaches it through the persister (persister.py), in process when this broker leads
the state partition and over an inter-broker connection otherwise. Answers use Kafka's codes: NOT_COORDINATOR
when another broker leads the state partition, COORDINATOR_NOT_AVAILABLE while none does (or an append
failed), FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH as the store fences. A shard is loaded synchronously, in
one turn of the event loop, so no request sees a half-loaded one; COORDINATOR_LOAD_IN_PROGRESS is the
answer while the metadata already names this broker but its replica has not taken the leadership yet.

Records: key int16 version (1000 ShareSnapshot, 1001 ShareUpdate: Kafka's 0 and 1 plus 1000, since the values
are ours), then the group id, topic id and partition as int16-length strings; value int16 0 and UTF-8 JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.groups.share.messages import StateWrite
from epochlog.groups.share.records import (
    PartitionState,
    Record,
    SharePartitionKey,
    ShareSnapshot,
    ShareStateStore,
    ShareUpdate,
    StateBatch,
    apply,
)
from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import build_batch, iter_records
from epochlog.server import internal_log
from epochlog.server.groups.hashing import partition_for
from epochlog.server.internal_topics import SHARE_STATE_TOPIC

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.share.config import ShareConfig

log = logging.getLogger("epochlog.share")

SNAPSHOT_KEY = 1000
UPDATE_KEY = 1001


def _key(version: int, key: SharePartitionKey) -> bytes:
    out = bytearray(struct.pack(">h", version))
    for s in (key[0], key[1], str(key[2])):
        b = s.encode()
        out += struct.pack(">h", len(b)) + b
    return bytes(out)


def _batches(bs: tuple[StateBatch, ...]) -> list[list[int]]:
    return [[b.first_offset, b.last_offset, b.delivery_state, b.delivery_count] for b in bs]


def encode(r: Record) -> tuple[bytes, bytes]:
    fields: dict[str, Any] = {
        "snapshot_epoch": r.snapshot_epoch,
        "leader_epoch": r.leader_epoch,
        "start_offset": r.start_offset,
        "batches": _batches(r.state_batches),
    }
    if isinstance(r, ShareSnapshot):
        fields["state_epoch"] = r.state_epoch
    value = struct.pack(">h", 0) + json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()
    return _key(SNAPSHOT_KEY if isinstance(r, ShareSnapshot) else UPDATE_KEY, r.key), value


def decode_key(key: bytes) -> tuple[int, SharePartitionKey] | None:
    """The record kind and share-partition of a key, or None for another kind. Raises ValueError on bytes
    that do not parse."""
    try:
        (version,) = struct.unpack_from(">h", key, 0)
        if version not in (SNAPSHOT_KEY, UPDATE_KEY):
            return None
        pos, parts = 2, []
        while pos < len(key):
            (n,) = struct.unpack_from(">h", key, pos)
            parts.append(key[pos + 2 : pos + 2 + n].decode())
            pos += 2 + n
        return version, (parts[0], parts[1], int(parts[2]))
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"unreadable share state key: {e}") from e


def decode(key: bytes, value: bytes | None) -> Record | None:
    """The record, or None for another kind or a tombstone. Raises ValueError on bytes that do not parse."""
    kind = decode_key(key)
    if kind is None or value is None:
        return None
    version, (group, topic, partition) = kind
    try:
        f = json.loads(value[2:])
        batches = tuple(StateBatch(*map(int, b)) for b in f["batches"])
        if version == SNAPSHOT_KEY:
            return ShareSnapshot(
                group, topic, partition, f["snapshot_epoch"], f["state_epoch"], f["leader_epoch"],
                f["start_offset"], batches,
            )  # fmt: skip
        return ShareUpdate(group, topic, partition, f["snapshot_epoch"], f["leader_epoch"], f["start_offset"], batches)
    except (struct.error, KeyError, TypeError, ValueError, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"unreadable share state record: {e}") from e


def load(store: ShareStateStore, kvs: Iterable[tuple[bytes | None, bytes | None]]) -> None:
    """Records of the state partition, in log order, into the store: a tombstone (DeleteShareGroupState)
    forgets the share-partition. Raises ValueError on a record that does not parse."""
    for key, value in kvs:
        if key is None:
            continue
        if value is None:
            if (kind := decode_key(key)) is not None:
                store.states.pop(kind[1], None)
        elif (rec := decode(key, value)) is not None:
            apply(store.states, rec)


def tombstones(key: SharePartitionKey) -> list[tuple[bytes, bytes | None]]:
    return [(_key(SNAPSHOT_KEY, key), None), (_key(UPDATE_KEY, key), None)]


@dataclass
class _Shard:
    leader_epoch: int
    store: ShareStateStore


class ShareStateLog:
    def __init__(self, broker: Broker, config: ShareConfig) -> None:
        self.broker = broker
        self.config = config
        self._shards: dict[int, _Shard] = {}

    def state_partition(self, key: SharePartitionKey) -> int:
        return partition_for(self.coordinator_key(key), self.config.state_topic_num_partitions)

    def _shard(self, p: int) -> _Shard | None:
        """The store of __share_group_state-p while this broker leads it, (re)read when its epoch is new."""
        part = self.broker.partition(SHARE_STATE_TOPIC, p)
        if part is None or not part.is_leader or part.offline:
            self._shards.pop(p, None)
            return None
        shard = self._shards.get(p)
        if shard is not None and shard.leader_epoch == part.leader_epoch:
            return shard
        store = ShareStateStore()
        for batch in internal_log.read_batches(part):
            try:
                h = read_header(batch)
                if h.is_control:
                    continue
                load(store, ((r.key, r.value) for r in iter_records(batch)))
            except ValueError as e:
                log.error("%s-%d: skipping an unreadable batch: %s", SHARE_STATE_TOPIC, p, e)
        shard = self._shards[p] = _Shard(part.leader_epoch, store)
        log.info("%s-%d: loaded %d share-partition states at epoch %d", SHARE_STATE_TOPIC, p,
                 len(shard.store.states), part.leader_epoch)  # fmt: skip
        return shard

    @staticmethod
    def coordinator_key(key: SharePartitionKey) -> str:
        return f"{key[0]}:{key[1]}:{key[2]}"

    def locate(self, key: SharePartitionKey) -> tuple[int, int, _Shard | None]:
        """The state partition, and its shard when this broker coordinates the key, or why not:
        COORDINATOR_NOT_AVAILABLE while the partition has no leader, NOT_COORDINATOR when another broker
        leads it, COORDINATOR_LOAD_IN_PROGRESS when the metadata names this broker but its replica has not
        become the leader yet (the shard is loaded as it does)."""
        leader = self.broker.share_coordinator_for(self.coordinator_key(key))
        p = self.state_partition(key)
        if leader < 0:
            return Err.COORDINATOR_NOT_AVAILABLE, p, None
        if leader != self.broker.config.node_id:
            return Err.NOT_COORDINATOR, p, None
        shard = self._shard(p)
        return (Err.NONE if shard is not None else Err.COORDINATOR_LOAD_IN_PROGRESS), p, shard

    def is_local(self, key: SharePartitionKey) -> bool:
        return self.broker.share_coordinator_for(self.coordinator_key(key)) == self.broker.config.node_id

    def read(self, key: SharePartitionKey, leader_epoch: int) -> tuple[int, PartitionState | None]:
        """ReadShareGroupState: the state (None: never initialized), fencing older leaders from here on."""
        code, _p, shard = self.locate(key)
        if shard is None:
            return code, None
        return shard.store.read(key, leader_epoch)

    def summary(self, key: SharePartitionKey) -> tuple[int, PartitionState | None]:
        """ReadShareGroupStateSummary: the state as it is, fencing no one."""
        code, _p, shard = self.locate(key)
        if shard is None:
            return code, None
        return Err.NONE, shard.store.states.get(key)

    def write(self, key: SharePartitionKey, w: StateWrite) -> Awaitable[int]:
        """WriteShareGroupState: applied and appended before this returns (so writes reach the log in the
        order they are made), durable once the awaitable answers NONE."""
        code, p, shard = self.locate(key)
        if shard is None:
            return _answer(code)
        code, records = shard.store.write(key, w.leader_epoch, w.state_epoch, w.start_offset, w.batches)
        if code or not records:
            return _answer(code)
        return self._append(p, key, [encode(r) for r in records])

    def group_states(self, group: str) -> tuple[dict[tuple[str, int], PartitionState], bool]:
        """Every share-partition state of ``group`` by (topic id, partition) in the state partitions this
        broker leads, and whether that is all of them (False: another broker leads some)."""
        out: dict[tuple[str, int], PartitionState] = {}
        if SHARE_STATE_TOPIC not in self.broker.image.topics:
            return out, True  # no share group ever fetched: no state anywhere
        complete = True
        for p in range(self.config.state_topic_num_partitions):
            shard = self._shard(p)
            if shard is None:
                complete = False
                continue
            for (g, topic_id, partition), state in shard.store.states.items():
                if g == group:
                    out[(topic_id, partition)] = state
        return out, complete

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Awaitable[int]:
        """InitializeShareGroupState: the share-partition starts again at ``start_offset`` (-1: as never
        consumed, at share.auto.offset.reset) with no state batches, under ``state_epoch``, which must be newer
        than the current one (FENCED_STATE_EPOCH otherwise) and fences a leader still writing under the old
        one. Durable once the awaitable answers NONE."""
        code, p, shard = self.locate(key)
        if shard is None:
            return _answer(code)
        code, records = shard.store.initialize(key, state_epoch, start_offset)
        if code or not records:
            return _answer(code)
        return self._append(p, key, [encode(r) for r in records])

    def delete(self, key: SharePartitionKey) -> Awaitable[int]:
        """DeleteShareGroupState: tombstones for the key's records, so compaction drops them."""
        code, p, shard = self.locate(key)
        if shard is None:
            return _answer(code)
        if not shard.store.delete(key):
            return _answer(Err.NONE)
        return self._append(p, key, tombstones(key))

    def _append(self, p: int, key: SharePartitionKey, kvs: list[tuple[bytes, bytes | None]]) -> Awaitable[int]:
        part = self.broker.partition(SHARE_STATE_TOPIC, p)
        assert part is not None  # _shard found it leading
        batch = build_batch(kvs, base_timestamp=now_ms())
        try:
            result = part.append(batch, now_ms(), acks=-1)
        except Exception as e:  # a storage refusal
            result = None
            log.warning("%s-%d: cannot append the state of %s: %s", SHARE_STATE_TOPIC, p, key, e)
        if result is None or result.error:
            self._shards.pop(p, None)  # the store is ahead of the log: read it again before answering
            return _answer(Err.COORDINATOR_NOT_AVAILABLE)
        return self._committed(p, key, part.wait_committed(result.wait_offset))

    async def _committed(self, p: int, key: SharePartitionKey, fut: asyncio.Future[int]) -> int:
        try:
            code = await asyncio.wait_for(fut, self.config.write_timeout_ms / 1000)
        except TimeoutError:
            code = Err.REQUEST_TIMED_OUT
        if code:
            log.warning("%s-%d: the state of %s was not committed: %s", SHARE_STATE_TOPIC, p, key, Err(code).name)
            self._shards.pop(p, None)
            return Err.COORDINATOR_NOT_AVAILABLE
        return Err.NONE


async def _answer(code: int) -> int:
    return code
