"""Loading groups from __consumer_offsets: the replay of a partition's records (group metadata, offsets,
transactional offsets and their markers, the KIP-848 and KIP-932 groups' records) when this broker starts or becomes the
partition's leader, and the dropping of its groups when it stops being the leader."""

from __future__ import annotations

import logging

from epochlog.groups.consumer.records import Record as ConsumerRecord
from epochlog.groups.effects import GroupSnapshot, MemberSnapshot
from epochlog.groups.share.group_records import GroupRecord as ShareRecord
from epochlog.protocol.control_records import ControlType, read_marker
from epochlog.protocol.record_batch import read_header
from epochlog.protocol.records import Record, iter_records
from epochlog.server.groups import records as rec
from epochlog.server.groups.consumer_records import is_consumer_key
from epochlog.server.groups.model import EMPTY, Group
from epochlog.server.groups.share_groups import ShareGroups
from epochlog.server.groups.share_records import is_share_key

log = logging.getLogger("epochlog.groups")


class Loading(ShareGroups):
    def _read_partition(self, p: int) -> None:
        consumer: dict[str, list[ConsumerRecord]] = {}
        share: dict[str, list[ShareRecord]] = {}
        topic_names = self._topic_names()
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
                    elif r.key is not None and is_consumer_key(r.key):
                        self._replay_consumer_record(r.key, r.value, consumer, topic_names)
                    elif r.key is not None and is_share_key(r.key):
                        self._replay_share_record(r.key, r.value, share, topic_names)
                    else:
                        self._replay(r)
            except ValueError as e:  # CorruptBatchError included: skip what we cannot read
                log.error("__consumer_offsets-%d: skipping unreadable batch: %s", p, e)
        self._build_consumer_groups(consumer)
        self._build_share_groups(share)

    def load_partition(self, p: int) -> None:
        """This broker now leads __consumer_offsets-p: take over its groups from the replicated log."""
        if p in self.owned:
            return
        self._drop_groups(p)  # anything left from an earlier term here is stale
        self._read_partition(p)
        self.owned.add(p)
        log.info("__consumer_offsets-%d: loaded, coordinating its groups", p)

    def unload_partition(self, p: int) -> None:
        """Leadership of __consumer_offsets-p moved away: its groups are no longer ours."""
        if p not in self.owned:
            return
        self.owned.discard(p)
        self._drop_groups(p)
        log.info("__consumer_offsets-%d: unloaded", p)

    def _drop_groups(self, p: int) -> None:
        self.txn_offsets.drop_groups({gid for gid in self.txn_offsets.groups() if self.partition_for(gid) == p})
        self._apply(self.core.drop({gid for gid in self.groups if self.partition_for(gid) == p}))
        self._drop_consumer_groups(p)
        self._drop_share_groups(p)

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
            members = tuple(
                MemberSnapshot(mid, iid, cid, host, rto, sto, sub, asg)
                for mid, iid, cid, host, rto, sto, sub, asg in v.members
            )
            snap = GroupSnapshot(key.group, v.protocol_type, v.generation, v.protocol, v.leader, members)
            self.core.restore(snap, self._mono_ms()).state_timestamp_ms = v.state_timestamp

    def _replay_txn_offset(self, producer_id: int, r: Record) -> None:
        key = rec.decode_key(r.key) if r.key is not None else None
        if isinstance(key, rec.OffsetKey) and r.value is not None:
            self.txn_offsets.add(producer_id, key.group, (key.topic, key.partition), rec.decode_offset_value(r.value))

    def complete_txn(self, p: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker is durable on __consumer_offsets-p: its offsets become visible or go."""
        if p not in self.owned:
            return
        self._complete_txn(p, producer_id, commit)

    def _complete_txn(self, p: int, producer_id: int, commit: bool) -> None:
        groups = {gid for gid in self.txn_offsets.groups() if self.partition_for(gid) == p}
        for gid, offsets in self.txn_offsets.take(producer_id, groups).items():
            if not commit:
                continue
            g = self.groups.get(gid)
            if g is None:
                self._apply(self.core.create_group(gid))
                g = self.groups[gid]
            g.offsets.update(offsets)
            # A plain commit whose write began before this marker landed must not overwrite it.
            self._write_seq += 1
            for tp in offsets:
                g.offset_write_seq[tp] = self._write_seq
