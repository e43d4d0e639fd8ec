"""Committed offsets: OffsetCommit and TxnOffsetCommit, OffsetFetch, OffsetDelete, and their expiry after
offsets.retention.minutes."""

from __future__ import annotations

import logging

from epochlog.codes import Err
from epochlog.groups.consumer.coordinator import validate_offset_commit
from epochlog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL
from epochlog.protocol.records import build_batch
from epochlog.server.groups import records as rec
from epochlog.server.groups.model import COMPLETING_REBALANCE, DEAD, EMPTY, is_subscribed_to
from epochlog.server.groups.results import CommittedOffset, OffsetCommit
from epochlog.server.groups.state import CoordinatorState
from epochlog.server.groups.txn_offsets import TopicPartition

log = logging.getLogger("epochlog.groups")

# What an offset commit writes: the errors of the offsets refused, the records, and the offsets they hold.
_Records = list[tuple[bytes, bytes | None]]
_OffsetWrite = tuple[dict[TopicPartition, int], _Records, list[tuple[TopicPartition, "rec.OffsetValue"]]]


def _every(offsets: list[OffsetCommit], code: int) -> dict[TopicPartition, int]:
    return {(o.topic, o.partition): code for o in offsets}


class Offsets(CoordinatorState):
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
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            # A KIP-848 group: the member epoch (OffsetCommit v9's generation field) decides, by the core's rule;
            # its offsets are kept in an offsets-only group under the same id.
            if err := validate_offset_commit(consumer.group, member_id, generation_id):
                return _every(offsets, err)
            if g is None:
                self._apply(self.core.create_group(group_id))
                g = self.groups[group_id]
        elif g is None:
            if generation_id >= 0:
                return _every(offsets, Err.ILLEGAL_GENERATION)  # a member of a generation that no longer exists
            self._apply(self.core.create_group(group_id))
            g = self.groups[group_id]
        elif g.state == DEAD:
            return _every(offsets, Err.COORDINATOR_NOT_AVAILABLE)
        elif member_id and member_id in g.pending:
            return _every(offsets, Err.UNKNOWN_MEMBER_ID)
        elif generation_id < 0 and g.state == EMPTY:
            pass  # a group that only stores offsets (assign() consumers, admin tools): Kafka's rule
        else:
            err = self.core.validate_member(g, member_id, group_instance_id, generation_id)
            if err:
                return _every(offsets, err)
            if g.state == COMPLETING_REBALANCE:
                return _every(offsets, Err.REBALANCE_IN_PROGRESS)
            # Stable, and PreparingRebalance too: consumers commit from their revocation callback
            # while the group prepares, and Kafka lets them.
            self.core.touch(group_id, member_id, self._mono_ms())

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
            err = self.core.validate_member(g, member_id, group_instance_id, generation_id)
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

    def _offset_records(self, group_id: str, offsets: list[OffsetCommit], now_ms: int) -> _OffsetWrite:
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
                if is_subscribed_to(g, tp[0]):
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
            consumer = self.consumer_groups.get(g.group_id)
            if consumer is not None and consumer.group.members:
                continue  # a KIP-848 group keeps its offsets while it has members, as a classic one
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
                self._apply(self.core.set_state(g, DEAD))
                del self.groups[g.group_id]
            log.info("group %s: expired %d committed offsets%s", g.group_id, len(expired), ", removed" * dead)
        return removed
